//! Per-domain circuit breaker, as in the CommonCrawl crawler.
//!
//! The dispatcher sees every result of a domain, so it judges the domain's
//! health: in a sliding window (60 s by default, counted in slices of a
//! twelfth of it), if more than 10% of the
//! outcomes are errors (5xx, 429, 403, timeouts, connection errors), the
//! domain is paused for a minute; after 50 failures in a row it is halted
//! until an operator un-halts it. A paused or halted domain's URLs stay in
//! the frontier; nothing is lost.
//!
//! A domain's counts are kept only while they can still matter: once its
//! window holds no outcome, it has no failures in a row and no pause, it
//! is forgotten (see [`Breakers::forget_idle`]), so the breaker holds the
//! domains crawled in the last window rather than every domain ever met.

use std::collections::HashMap;
use std::time::Duration;

use link::protocol::Outcome;

#[derive(Debug, Clone, Copy)]
pub(crate) struct BreakerConfig {
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
pub(crate) enum Trip {
    Pause {
        until_ms: u64,
        errors: usize,
        outcomes: usize,
    },
    Halt {
        reason: String,
    },
}

/// Slices of the window. Outcomes are counted per slice rather than kept
/// one by one, so a domain's counts take 96 bytes whatever its rate: a
/// record per outcome held a whole window of results, 16 bytes each (at
/// 8,000 results a second in `scripts/bench-dispatcher.sh`, 8% of the
/// memory the dispatcher first touched; about 1 KB for a domain crawled
/// once a second). An outcome counts for between 11/12 of the window and
/// the whole of it.
const SLICES: usize = 12;

/// The outcomes of one slice of time.
#[derive(Debug, Default, Clone, Copy)]
struct Slice {
    /// Which slice (time ms / slice length, wrapping) these counts are of.
    at: u32,
    /// Saturating: at 65,535 a slice the share of errors is still told.
    outcomes: u16,
    errors: u16,
}

#[derive(Default)]
struct Health {
    /// A ring: slice `k` is at `k % SLICES`.
    slices: [Slice; SLICES],
    in_a_row: u32,
    paused_until_ms: u64,
}

impl Health {
    /// Whether this domain's state is the same as a domain never met: no
    /// outcome that could still count (one ahead of `now`, from a clock
    /// set back, may count later), no failures in a row, no pause.
    fn is_idle(&self, now: u32, now_ms: u64) -> bool {
        self.in_a_row == 0
            && self.paused_until_ms <= now_ms
            && self
                .slices
                .iter()
                .all(|s| s.outcomes == 0 || now.saturating_sub(s.at) >= SLICES as u32)
    }

    fn add(&mut self, slice: u32, error: bool) {
        let s = &mut self.slices[slice as usize % SLICES];
        if s.at != slice {
            *s = Slice {
                at: slice,
                ..Slice::default()
            };
        }
        s.outcomes = s.outcomes.saturating_add(1);
        s.errors = s.errors.saturating_add(u16::from(error));
    }

    /// (outcomes, errors) in the window that ends with slice `now` (a
    /// slice ahead of it, from a clock set back, does not count).
    fn in_window(&self, now: u32) -> (usize, usize) {
        self.slices
            .iter()
            .filter(|s| now.wrapping_sub(s.at) < SLICES as u32)
            .fold((0, 0), |(n, e), s| {
                (n + s.outcomes as usize, e + s.errors as usize)
            })
    }
}

pub(crate) struct Breakers {
    cfg: BreakerConfig,
    domains: HashMap<String, Health>,
    /// When [`Breakers::forget_idle`] next looks (Unix ms).
    next_sweep_ms: u64,
}

/// Whether an outcome counts against the domain's health, and as what.
pub(crate) fn is_error(outcome: &Outcome) -> Option<&'static str> {
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
    pub(crate) fn new(cfg: BreakerConfig) -> Self {
        Breakers {
            cfg,
            domains: HashMap::new(),
            next_sweep_ms: 0,
        }
    }

    /// The length of a slice, in ms.
    fn slice_ms(&self) -> u64 {
        (self.cfg.window.as_millis() as u64 / SLICES as u64).max(1)
    }

    /// Records one outcome; returns a trip when the domain must pause or halt.
    pub(crate) fn record(&mut self, domain: &str, outcome: &Outcome, now_ms: u64) -> Option<Trip> {
        let error = is_error(outcome);
        // Wraps after 2^32 slices: 11 years at a window of 1 s.
        let now = (now_ms / self.slice_ms()) as u32;
        // The name is copied only for a domain met for the first time, not
        // on every result (`entry` takes an owned key).
        if !self.domains.contains_key(domain) {
            self.domains.insert(domain.to_string(), Health::default());
        }
        let h = self.domains.get_mut(domain)?;
        h.add(now, error.is_some());
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
        let (n, errors) = h.in_window(now);
        let too_many = n >= self.cfg.min_outcomes && errors as f64 > self.cfg.error_share * n as f64;
        if too_many && h.paused_until_ms <= now_ms {
            h.paused_until_ms = now_ms.saturating_add(self.cfg.pause.as_millis() as u64);
            // A fresh window after the pause: old errors must not re-trip it.
            h.slices = Default::default();
            return Some(Trip::Pause {
                until_ms: h.paused_until_ms,
                errors,
                outcomes: n,
            });
        }
        None
    }

    /// Forgets a domain's history (after an operator un-halts it).
    pub(crate) fn reset(&mut self, domain: &str) {
        self.domains.remove(domain);
    }

    /// Forgets the domains whose state is that of a domain never met, once
    /// a window: a pass over every domain, so not on every tick. Without
    /// it the breaker kept about 200 bytes for every domain ever crawled.
    pub(crate) fn forget_idle(&mut self, now_ms: u64) {
        if now_ms < self.next_sweep_ms {
            return;
        }
        self.next_sweep_ms = now_ms.saturating_add(self.cfg.window.as_millis() as u64);
        let now = (now_ms / self.slice_ms()) as u32;
        self.domains.retain(|_, h| !h.is_idle(now, now_ms));
        if self.domains.capacity() > 2 * self.domains.len() + 64 {
            self.domains.shrink_to_fit();
        }
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
    fn an_outcome_counts_for_eleven_twelfths_of_the_window_to_the_whole() {
        // 5 errors at 0–4 ms; at `at`, 4 successes and an error: 6 errors of
        // 10 if the first 5 still count, or 5 outcomes (too few) if not.
        let trips_at = |at: u64| {
            let mut b = Breakers::new(BreakerConfig::default());
            for i in 0..5 {
                b.record("a", &err(), i);
            }
            for i in 0..4 {
                b.record("a", &ok(), at + i);
            }
            b.record("a", &err(), at + 10).is_some()
        };
        // Slices of 5 s: slice 0 counts until slice 12 begins, at 60 s.
        assert!(trips_at(54_000));
        assert!(trips_at(59_980));
        assert!(!trips_at(60_000));
        // Later, when slice 0's place in the ring has not been reused.
        assert!(!trips_at(65_000));
    }

    #[test]
    fn a_clock_set_back_does_not_count_outcomes_ahead_of_it() {
        let mut b = Breakers::new(BreakerConfig::default());
        for i in 0..9 {
            b.record("a", &err(), 605_000 + i);
        }
        // Ten minutes back: with the 9 errors "ahead", this 10th would pause.
        assert_eq!(b.record("a", &err(), 0), None);
    }

    #[test]
    fn halts_after_failures_in_a_row() {
        let cfg = BreakerConfig {
            halt_after: 5,
            min_outcomes: 1000,
            ..BreakerConfig::default()
        };
        let mut b = Breakers::new(cfg);
        let timeout = Outcome::failed(link::protocol::FailureKind::Timeout, "");
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

    #[test]
    fn forgets_only_domains_whose_state_is_that_of_one_never_met() {
        let cfg = BreakerConfig {
            halt_after: 3,
            ..BreakerConfig::default()
        };
        let mut b = Breakers::new(cfg);
        for d in 0..1000 {
            b.record(&format!("ok{d}"), &ok(), 1_000);
        }
        // Failures in a row (below the halt) are kept whatever their age.
        b.record("failing", &err(), 1_000);
        b.record("failing", &err(), 1_001);
        // A paused domain is kept until its pause ends.
        for i in 0..10 {
            b.record("paused", &err(), 2_000 + i);
        }
        b.record("paused", &ok(), 2_100);
        // A clock set back: outcomes "ahead" may count later.
        b.record("ahead", &err(), 500_000);
        b.record("ahead", &ok(), 500_001);
        // Outcomes still in the window are kept.
        b.record("recent", &ok(), 61_500);
        b.forget_idle(62_000);
        let mut kept: Vec<_> = b.domains.keys().map(String::as_str).collect();
        kept.sort();
        assert_eq!(kept, ["ahead", "failing", "paused", "recent"]);
        // Not again before a window has passed.
        b.forget_idle(70_000);
        assert_eq!(b.domains.len(), 4);
        // The failures in a row still count: a third halts.
        assert!(matches!(
            b.record("failing", &err(), 100_000),
            Some(Trip::Halt { .. })
        ));
        b.forget_idle(161_000);
        let mut kept: Vec<_> = b.domains.keys().map(String::as_str).collect();
        kept.sort();
        assert_eq!(kept, ["ahead"]);
    }

    #[test]
    fn a_forgotten_domain_trips_as_if_it_had_been_kept() {
        // The same outcomes, with and without a sweep between them.
        let run = |sweep: bool| {
            let mut b = Breakers::new(BreakerConfig::default());
            let mut trips = Vec::new();
            for round in 0..5u64 {
                let t = round * 61_000;
                for i in 0..9 {
                    trips.push(b.record("a", &ok(), t + i));
                }
                trips.push(b.record("a", &err(), t + 10));
                trips.push(b.record("a", &err(), t + 11));
                trips.push(b.record("a", &ok(), t + 12));
                if sweep {
                    b.forget_idle(t + 60_500);
                    assert_eq!(b.domains.len(), 0, "round {round}");
                }
            }
            trips
        };
        assert_eq!(run(true), run(false));
        assert!(run(false).iter().any(Option::is_some));
    }
}
