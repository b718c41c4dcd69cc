//! Per-domain circuit breaker, as in the CommonCrawl crawler.
//!
//! The dispatcher sees every result of a domain, so it judges the domain's
//! health: in a sliding window (60 s by default), if more than 10% of the
//! outcomes are errors (5xx, 429, 403, timeouts, connection errors), the
//! domain is paused for a minute; after 50 failures in a row it is halted
//! until an operator un-halts it. A paused or halted domain's URLs stay in
//! the frontier; nothing is lost.

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use shared::protocol::Outcome;

#[derive(Debug, Clone, Copy)]
pub struct BreakerConfig {
    pub window: Duration,
    /// Error share above which the domain pauses.
    pub error_share: f64,
    /// Fewer outcomes than this in the window never pause (one early error
    /// out of two says little).
    pub min_outcomes: usize,
    pub pause: Duration,
    /// Failures in a row that halt the domain (0 = never).
    pub halt_after: u32,
}

impl Default for BreakerConfig {
    fn default() -> Self {
        BreakerConfig {
            window: Duration::from_secs(60),
            error_share: 0.10,
            min_outcomes: 10,
            pause: Duration::from_secs(60),
            halt_after: 50,
        }
    }
}

/// What a new outcome changed.
#[derive(Debug, Clone, PartialEq)]
pub enum Trip {
    Pause {
        until_ms: u64,
        errors: usize,
        outcomes: usize,
    },
    Halt {
        reason: String,
    },
}

#[derive(Default)]
struct Health {
    /// (time ms, was an error), oldest first, within the window.
    outcomes: VecDeque<(u64, bool)>,
    errors: usize,
    in_a_row: u32,
    paused_until_ms: u64,
}

pub struct Breakers {
    cfg: BreakerConfig,
    domains: HashMap<String, Health>,
}

/// Whether an outcome counts against the domain's health, and as what.
pub fn is_error(outcome: &Outcome) -> Option<&'static str> {
    match outcome {
        Outcome::Fetched { status, .. } => match status {
            403 => Some("http_403"),
            429 => Some("http_429"),
            500..=599 => Some("http_5xx"),
            _ => None,
        },
        Outcome::Disallowed => None,
        Outcome::Failed { kind, .. } => kind.counts_against_domain().then(|| kind.as_str()),
    }
}

impl Breakers {
    pub fn new(cfg: BreakerConfig) -> Self {
        Breakers {
            cfg,
            domains: HashMap::new(),
        }
    }

    /// Records one outcome; returns a trip when the domain must pause or halt.
    pub fn record(&mut self, domain: &str, outcome: &Outcome, now_ms: u64) -> Option<Trip> {
        let error = is_error(outcome);
        let h = self.domains.entry(domain.to_string()).or_default();
        h.outcomes.push_back((now_ms, error.is_some()));
        h.errors += error.is_some() as usize;
        let window_ms = self.cfg.window.as_millis() as u64;
        while h.outcomes.front().is_some_and(|(t, _)| t + window_ms < now_ms) {
            if let Some((_, e)) = h.outcomes.pop_front() {
                h.errors -= e as usize;
            }
        }
        let Some(kind) = error else {
            h.in_a_row = 0;
            return None;
        };
        h.in_a_row += 1;
        if self.cfg.halt_after > 0 && h.in_a_row >= self.cfg.halt_after {
            h.in_a_row = 0;
            return Some(Trip::Halt {
                reason: format!("{} failures in a row, the last: {kind}", self.cfg.halt_after),
            });
        }
        let n = h.outcomes.len();
        let too_many = n >= self.cfg.min_outcomes && h.errors as f64 > self.cfg.error_share * n as f64;
        if too_many && h.paused_until_ms <= now_ms {
            h.paused_until_ms = now_ms + self.cfg.pause.as_millis() as u64;
            let trip = Trip::Pause {
                until_ms: h.paused_until_ms,
                errors: h.errors,
                outcomes: n,
            };
            // A fresh window after the pause: old errors must not re-trip it.
            h.outcomes.clear();
            h.errors = 0;
            return Some(trip);
        }
        None
    }

    /// Forgets a domain's history (after an operator un-halts it).
    pub fn reset(&mut self, domain: &str) {
        self.domains.remove(domain);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok() -> Outcome {
        Outcome::Fetched {
            status: 200,
            final_url: None,
            content_type: None,
            bytes: 0,
        }
    }

    fn err() -> Outcome {
        Outcome::Fetched {
            status: 503,
            final_url: None,
            content_type: None,
            bytes: 0,
        }
    }

    #[test]
    fn pauses_above_ten_percent_errors_in_the_window() {
        let mut b = Breakers::new(BreakerConfig::default());
        for i in 0..18 {
            assert_eq!(b.record("a", &ok(), i), None);
        }
        assert_eq!(b.record("a", &err(), 20), None); // 1 of 19
        assert_eq!(b.record("a", &err(), 21), None); // 2 of 20: exactly 10%
        let trip = b.record("a", &err(), 22);
        assert_eq!(
            trip,
            Some(Trip::Pause {
                until_ms: 60_022,
                errors: 3,
                outcomes: 21
            })
        );
        // Other domains are unaffected; 404s are not errors.
        let not_found = Outcome::Fetched {
            status: 404,
            final_url: None,
            content_type: None,
            bytes: 0,
        };
        for i in 0..30 {
            assert_eq!(b.record("b", &not_found, i), None);
        }
    }

    #[test]
    fn old_outcomes_leave_the_window() {
        let mut b = Breakers::new(BreakerConfig::default());
        for i in 0..5 {
            b.record("a", &err(), i);
        }
        // A minute later those errors no longer count.
        for i in 0..20 {
            assert_eq!(b.record("a", &ok(), 70_000 + i), None);
        }
        assert_eq!(b.record("a", &err(), 70_100), None);
    }

    #[test]
    fn halts_after_failures_in_a_row() {
        let cfg = BreakerConfig {
            halt_after: 5,
            min_outcomes: 1000,
            ..BreakerConfig::default()
        };
        let mut b = Breakers::new(cfg);
        let timeout = Outcome::failed(shared::protocol::FailureKind::Timeout, "");
        for i in 0..4 {
            assert_eq!(b.record("a", &timeout, i), None);
        }
        assert!(matches!(b.record("a", &timeout, 5), Some(Trip::Halt { .. })));
        // A success resets the count.
        for i in 0..4 {
            b.record("c", &timeout, i);
        }
        b.record("c", &ok(), 5);
        assert_eq!(b.record("c", &timeout, 6), None);
    }
}
