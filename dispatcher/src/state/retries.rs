//! Retries and halts: what comes of a URL's failures, and of a domain's.
//!
//! A retryable failure puts the URL back after a pause that grows with
//! each attempt, until its kind's attempts are used up; the circuit
//! breaker watches each domain's outcomes and pauses or halts a domain
//! that keeps failing (`crate::breaker`). The state carries out a trip on
//! the frontier (`CrawlState::trip`).
//!
//! Invariants:
//! - `attempts` holds a URL only between a failure that leaves it retries
//!   and the end of its crawl ([`Retries::forget`]): its count is the
//!   failures so far, below its kind's `max_attempts`.
//! - Each URL in `delayed` is due `RETRY_AFTER` times its attempts after
//!   its failure, and is neither queued nor out meanwhile: it was leased,
//!   failed, and waits here alone until [`Retries::due`] hands it back.

use std::collections::HashMap;
use std::time::Duration;

use link::protocol::{FailureKind, Outcome};
use store::docs::UrlState;

use crate::breaker::{BreakerConfig, Breakers, Trip};
use crate::frontier::Leased;
use crate::stats::Stats;

/// Pause before a retry, times the attempt number.
pub(crate) const RETRY_AFTER: Duration = Duration::from_secs(5);

/// A URL waiting for a retry.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Retry {
    pub(crate) due_ms: u64,
    pub(crate) url: String,
    pub(crate) domain: String,
    pub(crate) depth: u16,
    pub(crate) seq: i64,
}

pub(crate) struct Retries {
    /// Failed attempts so far, by URL, while retries are left.
    attempts: HashMap<String, u32>,
    /// URLs waiting for a retry.
    delayed: Vec<Retry>,
    breakers: Breakers,
}

impl Retries {
    pub(crate) fn new(breaker: BreakerConfig) -> Retries {
        Retries {
            attempts: HashMap::new(),
            delayed: Vec::new(),
            breakers: Breakers::new(breaker),
        }
    }

    /// A leased URL failed: with retries left it waits for one (`None`),
    /// else it failed for good.
    pub(crate) fn failed(
        &mut self,
        r: &Leased,
        kind: FailureKind,
        now_ms: u64,
        stats: &mut Stats,
    ) -> Option<UrlState> {
        let attempts = self.attempts.entry(r.url.clone()).or_insert(0);
        *attempts = attempts.saturating_add(1);
        if *attempts < kind.max_attempts() {
            stats.counts.retried += 1;
            let pause = (RETRY_AFTER.as_millis() as u64).saturating_mul(u64::from(*attempts));
            self.delayed.push(Retry {
                due_ms: now_ms.saturating_add(pause),
                url: r.url.clone(),
                domain: r.domain.clone(),
                depth: r.depth,
                seq: r.seq,
            });
            None
        } else {
            stats.failed_for_good(kind);
            Some(UrlState::Failed)
        }
    }

    /// `url`'s crawl is over (fetched, or ended for good): its failures
    /// are forgotten.
    pub(crate) fn forget(&mut self, url: &str) {
        self.attempts.remove(url);
    }

    /// The retries due by `now_ms`, oldest first; the others wait on.
    pub(crate) fn due(&mut self, now_ms: u64) -> Vec<Retry> {
        if self.delayed.is_empty() {
            return Vec::new();
        }
        let (due, later): (Vec<_>, Vec<_>) = std::mem::take(&mut self.delayed)
            .into_iter()
            .partition(|r| r.due_ms <= now_ms);
        self.delayed = later;
        due
    }

    /// URLs waiting for a retry.
    pub(crate) fn waiting(&self) -> usize {
        self.delayed.len()
    }

    /// The lowest `seq` of each domain's URLs waiting for a retry, by name
    /// (they are not finished: the domain's progress stays below them).
    pub(crate) fn lowest_open(&self, open: &mut HashMap<String, i64>) {
        for r in self.delayed.iter().filter(|r| r.seq > 0) {
            let low = open.entry(r.domain.clone()).or_insert(r.seq);
            *low = (*low).min(r.seq);
        }
    }

    /// The circuit breaker's word on a domain's outcome.
    pub(crate) fn outcome(&mut self, domain: &str, outcome: &Outcome, now_ms: u64) -> Option<Trip> {
        self.breakers.record(domain, outcome, now_ms)
    }

    /// The domain starts afresh (un-halted or unblocked by an operator).
    pub(crate) fn reset(&mut self, domain: &str) {
        self.breakers.reset(domain);
    }

    /// Domains without outcomes for a while are forgotten.
    pub(crate) fn forget_idle(&mut self, now_ms: u64) {
        self.breakers.forget_idle(now_ms);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leased(seq: i64) -> Leased {
        Leased {
            url: format!("http://a.test/{seq}"),
            domain: "a.test".into(),
            depth: 1,
            seq,
        }
    }

    #[test]
    fn pauses_grow_with_each_attempt_until_the_url_fails_for_good() {
        let mut retries = Retries::new(BreakerConfig::default());
        let mut stats = Stats::new();
        let kind = FailureKind::Timeout;
        let (url, mut now) = (leased(7), 1_000u64);
        let step = RETRY_AFTER.as_millis() as u64;
        for attempt in 1..kind.max_attempts() {
            assert_eq!(retries.failed(&url, kind, now, &mut stats), None);
            assert_eq!(retries.waiting(), 1);
            let due_at = now + step * u64::from(attempt);
            assert!(retries.due(due_at - 1).is_empty());
            let due = retries.due(due_at);
            assert_eq!(due.len(), 1);
            assert_eq!((due[0].url.as_str(), due[0].seq), (url.url.as_str(), 7));
            now = due_at;
        }
        assert_eq!(
            retries.failed(&url, kind, now, &mut stats),
            Some(UrlState::Failed)
        );
        assert_eq!(retries.waiting(), 0);
        assert_eq!(stats.counts.retried, u64::from(kind.max_attempts() - 1));
        retries.forget(&url.url);
        // Forgotten: a new failure starts counting again.
        assert_eq!(retries.failed(&url, kind, now, &mut stats), None);
    }

    #[test]
    fn waiting_urls_keep_their_domains_progress_below_them() {
        let mut retries = Retries::new(BreakerConfig::default());
        let mut stats = Stats::new();
        for seq in [9, 4, 0] {
            retries.failed(&leased(seq), FailureKind::Timeout, 0, &mut stats);
        }
        let mut open = HashMap::new();
        retries.lowest_open(&mut open);
        // A revisit (`seq` 0) is not in the stored frontier.
        assert_eq!(open.get("a.test"), Some(&4));
        assert_eq!(retries.due(u64::MAX).len(), 3);
        let mut open = HashMap::new();
        retries.lowest_open(&mut open);
        assert!(open.is_empty());
    }
}
