//! Results: what supervisors report of their leases, and what comes of
//! it: links offered, retries and failures ([`Retries`]), the circuit
//! breaker's pauses and halts, and the stored frontier's outcomes. Also
//! the links of stored pages read again after a restart.
//!
//! [`Retries`]: super::retries::Retries

use std::collections::HashMap;
use std::time::Duration;

use link::protocol::{CrawlResult, Outcome};
use shared::timing::Op;
use store::docs::UrlState;

use super::{CrawlState, Effect};
use crate::breaker::{self, Trip};
use crate::frontier::{LeaseRefusal, Relink, SupId};
use crate::refusals::Reason;

impl<C> CrawlState<C> {
    /// Records results from supervisor `s`: only those for leases issued
    /// to `s`; what a result is about (URL, domain, depth) comes from the
    /// lease record, not from the message. The rest is dropped and counted.
    pub(crate) fn results<S: AsRef<str>>(&mut self, s: SupId, results: Vec<CrawlResult<S>>, now_ms: u64) {
        if !self.is_live(s) {
            return;
        }
        let (effects_before, mut accepted) = (self.effects.len(), 0);
        for r in results {
            if r.sent_ms != 0 {
                let wait = Duration::from_millis(now_ms.saturating_sub(r.sent_ms));
                self.timing.record(Op::ResultWait, wait, "ok", None, None);
            }
            let handed_back = matches!(r.outcome, Outcome::Failed { kind, .. } if kind.is_handed_back());
            // Ends the lease (and frees its credit) if it is `s`'s.
            let leased = match self.frontier.complete_for(s, r.lease, r.url.as_ref()) {
                Ok(leased) => leased,
                // Handed back after the lease had ended anyway (given up,
                // re-queued): nothing to do, and no lie.
                Err(LeaseRefusal::Unknown) if handed_back => continue,
                // Sent again after a reconnect, for a URL finished or handed
                // out elsewhere while it was away: a duplicate.
                Err(LeaseRefusal::Unknown) if self.members[s].rejoined => {
                    self.stats.counts.stale_results += 1;
                    continue;
                }
                Err(why) => {
                    let (reason, what) = match why {
                        LeaseRefusal::Unknown => (Reason::UnknownLease, "a lease not out"),
                        LeaseRefusal::Foreign => (Reason::ForeignLease, "a lease out at another supervisor"),
                        LeaseRefusal::OtherUrl => (Reason::LeaseUrlMismatch, "another URL than its lease's"),
                    };
                    let (who, lease) = (self.members[s].id.clone(), r.lease);
                    self.refusals.refuse(reason, 1, || {
                        format!("supervisor {who} reported on {what} (lease {lease}); dropped")
                    });
                    continue;
                }
            };
            accepted += 1;
            if handed_back {
                // Not fetched, not a failure of the URL: queued again, first.
                self.stats.counts.handed_back += 1;
                if let Some(addr) = r.server {
                    // `Regrouped`: the domain's server, from the child that
                    // resolved it (see `frontier::servers`).
                    self.frontier.learn_server(&leased.domain, addr);
                }
                self.frontier
                    .push_front(leased.url, &leased.domain, leased.depth, leased.seq);
                continue;
            }
            self.members[s].results += 1;
            self.stats.record(&r.outcome);
            if breaker::is_error(&r.outcome).is_some() {
                self.stats.counts.error_outcomes += 1;
            }
            if let Some(trip) = self.retries.outcome(&leased.domain, &r.outcome, now_ms) {
                self.trip(&leased.domain, trip, now_ms);
            }
            // Links first: the writer stores in order, so a URL's outcome
            // (and its domain's progress past it) is written only after its
            // links are in the stored frontier, and a dispatcher killed in
            // between re-crawls it rather than losing its links. A fetched
            // URL is not recorded at all: its stored page says it is
            // finished, and carries its links for a dispatcher killed
            // before they were written (`crate::finished`).
            for link in &r.outlinks {
                self.offer(link.as_ref(), leased.depth.saturating_add(1), now_ms);
            }
            let (state, failure) = match &r.outcome {
                Outcome::Fetched { .. } => {
                    self.retries.forget(&leased.url);
                    (None, None)
                }
                Outcome::Disallowed => (Some(UrlState::Disallowed), None),
                Outcome::Failed { kind, .. } => (
                    self.retries.failed(&leased, *kind, now_ms, &mut self.stats),
                    Some(*kind),
                ),
            };
            let over = state.is_some() || matches!(r.outcome, Outcome::Fetched { .. });
            // A revisit is not in the stored frontier: the page's due time
            // says what comes of it.
            let revisit = over && self.revisit_over(&leased.url);
            if let Some(state) = state {
                self.retries.forget(&leased.url);
                if !revisit && leased.seq > 0 {
                    self.effects.push(Effect::Ended {
                        url: leased.url,
                        seq: leased.seq,
                        state,
                        failure,
                    });
                }
            }
        }
        let writes = self.effects[effects_before..]
            .iter()
            .filter(|e| {
                matches!(
                    e,
                    Effect::Insert { .. } | Effect::Ended { .. } | Effect::Defer { .. }
                )
            })
            .count();
        self.flow.results_wrote(accepted, writes);
    }

    /// The links of stored pages found finished after a restart: offered
    /// again (nearly all are known, and dropped in memory); their URLs'
    /// domains may then record progress past them.
    pub(super) fn links_read(
        &mut self,
        asked: Vec<Relink>,
        found: Result<Vec<(String, Vec<String>)>, String>,
        now_ms: u64,
    ) {
        let found = match found {
            Ok(found) => found,
            Err(e) => {
                tracing::warn!(urls = asked.len(), error = %e, "reading the links of finished pages failed; will retry");
                self.resumption.answered(&asked, true);
                return;
            }
        };
        self.resumption.answered(&asked, false);
        let depths: HashMap<&str, u16> = asked.iter().map(|r| (r.url.as_str(), r.depth)).collect();
        for (url, links) in found {
            let Some(&depth) = depths.get(url.as_str()) else {
                continue;
            };
            for link in &links {
                self.offer(link, depth.saturating_add(1), now_ms);
            }
            self.stats.counts.relinked += 1;
        }
    }

    /// Pauses or halts a domain the circuit breaker gave up on.
    fn trip(&mut self, domain: &str, trip: Trip, now_ms: u64) {
        match trip {
            Trip::Pause {
                until_ms,
                errors,
                outcomes,
            } => {
                tracing::warn!(
                    domain = %domain,
                    pause_secs = until_ms.saturating_sub(now_ms) / 1000,
                    errors,
                    outcomes,
                    "pausing domain: too many errors in its last outcomes"
                );
                crate::metric::DOMAIN_PAUSES.get().increment(1);
                self.frontier.pause(domain, until_ms);
            }
            Trip::Halt { reason } => {
                tracing::error!(
                    domain = %domain,
                    reason = %reason,
                    "HALTING DOMAIN; its URLs stay queued; un-halt with scripts/unhalt.sh"
                );
                crate::metric::DOMAIN_HALTS.get().increment(1);
                self.frontier.halt(domain);
                self.effects.push(Effect::RecordHalt {
                    domain: domain.to_string(),
                    reason: Some(reason),
                });
            }
        }
    }

    /// An operator un-halts a domain: whether it was halted.
    pub(crate) fn unhalt(&mut self, domain: &str) -> bool {
        let unhalted = self.frontier.unhalt(domain);
        if unhalted {
            tracing::info!(domain = %domain, "domain un-halted by an operator");
            self.retries.reset(domain);
            self.effects.push(Effect::RecordHalt {
                domain: domain.to_string(),
                reason: None,
            });
        }
        unhalted
    }
}
