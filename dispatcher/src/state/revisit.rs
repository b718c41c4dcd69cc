//! The state machine's side of revisits (`crate::revisits`): asking for
//! what is due, queueing it, giving its leases what they carry, and
//! hearing that a revisit is over.

use link::protocol::WorkItem;

use super::{CrawlState, Effect};
use crate::revisits::{Due, DueRead};

impl<C> CrawlState<C> {
    /// Asks for a read of what is due, when one is wanted (every tick).
    pub(super) fn want_due(&mut self, now_ms: u64) {
        if let Some(read) = self.revisits.as_mut().and_then(|r| r.want_read(now_ms)) {
            self.effects.push(Effect::ReadDue(read));
        }
    }

    /// Queues the due pages a read found, each at the back of its domain's
    /// window in memory (the frontier's politeness, ownership and leases
    /// apply as to any URL; nothing is written for it).
    pub(super) fn due_answered(&mut self, asked: &DueRead, found: Result<Vec<Due>, String>, now_ms: u64) {
        let Some(revisits) = self.revisits.as_mut() else {
            return;
        };
        for due in revisits.answered(asked, found, now_ms) {
            self.frontier.push_at(due.url, &due.domain, due.depth, 0, now_ms);
        }
    }

    /// Gives the leases of revisits their validators.
    pub(super) fn lease_revisits(&self, items: &mut [WorkItem]) {
        let Some(revisits) = &self.revisits else {
            return;
        };
        for item in items {
            item.revisit = revisits.lease_of(&item.url);
        }
    }

    /// `url`'s crawl is over (answered, or given up on): whether it was a
    /// revisit, which is then forgotten (the child moved its due time).
    pub(super) fn revisit_over(&mut self, url: &str) -> bool {
        self.revisits.as_mut().is_some_and(|r| r.finished(url))
    }

    /// Revisits queued or out, and started since the dispatcher started.
    pub(crate) fn revisit_counts(&self) -> Option<(usize, u64)> {
        self.revisits.as_ref().map(|r| (r.queued(), r.started))
    }
}
