//! When a slot's child is started again, and when the slot is given up.
//!
//! A child that dies is replaced after a backoff that doubles with each
//! crash in a row, so a child that dies at once does not spin the CPU;
//! one that lived [`HEALTHY_AFTER`] starts the count again. A slot whose
//! children keep dying is given up: that is a broken node, not a bad URL
//! (a URL that kills its child is failed on its own, see
//! [`super::MAX_CHILD_ATTEMPTS`]).

use std::time::Duration;

/// The longest backoff between two children of a slot. Also how long a
/// slot waits for the supervisor's word before it starts a child anyway.
pub(crate) const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// A child that lived this long counts as healthy again.
const HEALTHY_AFTER: Duration = Duration::from_secs(30);
/// Crashes in a row from which a slot is reported as crash-looping.
const LOOPING_AFTER: u32 = 3;

/// What to do about a slot whose child died.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Start a new child after `after`; `crashes` in a row so far.
    Restart { after: Duration, crashes: u32 },
    /// Stop restarting: `crashes` in a row reached the limit.
    GiveUp { crashes: u32 },
}

impl Verdict {
    /// Whether the slot is crash-looping (worth an error line, not a warning).
    pub(crate) fn is_looping(self) -> bool {
        matches!(self, Verdict::Restart { crashes, .. } if crashes >= LOOPING_AFTER)
    }
}

/// Crashes in a row, per slot.
#[derive(Debug)]
pub(crate) struct Restarts {
    crashes: Vec<u32>,
    /// Crashes in a row after which a slot is given up (at least 1).
    max_crashes: u32,
}

impl Restarts {
    pub(crate) fn new(slots: usize, max_crashes: u32) -> Restarts {
        Restarts {
            crashes: vec![0; slots],
            max_crashes: max_crashes.max(1),
        }
    }

    /// `slot`'s child died after living `lived`.
    pub(crate) fn lost(&mut self, slot: usize, lived: Duration) -> Verdict {
        let Some(crashes) = self.crashes.get_mut(slot) else {
            // No such slot: nothing runs there to restart.
            return Verdict::GiveUp { crashes: 0 };
        };
        if lived > HEALTHY_AFTER {
            *crashes = 0;
        }
        *crashes += 1;
        if *crashes >= self.max_crashes {
            return Verdict::GiveUp { crashes: *crashes };
        }
        Verdict::Restart {
            after: backoff(*crashes),
            crashes: *crashes,
        }
    }
}

/// 100 ms times 2 to the number of crashes in a row, at most [`MAX_BACKOFF`].
fn backoff(crashes: u32) -> Duration {
    Duration::from_millis(100 * 2u64.saturating_pow(crashes.min(10))).min(MAX_BACKOFF)
}

#[cfg(test)]
mod tests {
    use super::*;

    const QUICK: Duration = Duration::from_secs(1);

    #[test]
    fn the_backoff_doubles_with_each_crash_up_to_its_cap() {
        let mut r = Restarts::new(2, 100);
        let afters: Vec<u64> = (0..12)
            .map(|_| match r.lost(1, QUICK) {
                Verdict::Restart { after, .. } => after.as_millis() as u64,
                Verdict::GiveUp { .. } => 0,
            })
            .collect();
        assert_eq!(
            afters,
            [200, 400, 800, 1_600, 3_200, 6_400, 12_800, 25_600, 30_000, 30_000, 30_000, 30_000]
        );
        // The other slot counts on its own.
        assert_eq!(
            r.lost(0, QUICK),
            Verdict::Restart {
                after: Duration::from_millis(200),
                crashes: 1
            }
        );
    }

    #[test]
    fn a_healthy_run_starts_the_count_again() {
        let mut r = Restarts::new(1, 3);
        assert!(!r.lost(0, QUICK).is_looping());
        assert!(matches!(r.lost(0, QUICK), Verdict::Restart { crashes: 2, .. }));
        let after_a_long_life = r.lost(0, HEALTHY_AFTER + QUICK);
        assert_eq!(
            after_a_long_life,
            Verdict::Restart {
                after: Duration::from_millis(200),
                crashes: 1
            }
        );
    }

    #[test]
    fn a_slot_is_given_up_at_the_limit_and_said_to_loop_before() {
        let mut r = Restarts::new(1, 4);
        let verdicts: Vec<Verdict> = (0..4).map(|_| r.lost(0, QUICK)).collect();
        assert!(!verdicts[1].is_looping());
        assert!(verdicts[2].is_looping());
        assert_eq!(verdicts[3], Verdict::GiveUp { crashes: 4 });
        // A limit of 0 means 1: the first crash gives the slot up.
        let mut once = Restarts::new(1, 0);
        assert_eq!(once.lost(0, QUICK), Verdict::GiveUp { crashes: 1 });
    }
}
