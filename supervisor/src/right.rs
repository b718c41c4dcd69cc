//! This node's right to crawl its domains, renewed by the dispatcher's
//! acknowledgements (the rule and its margin: `link::fence`).
//!
//! State only, with the time passed in: the supervisor's core tells it
//! what was sent and what was acknowledged, and passes the end of the
//! right on to its children, which check it before every request.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use link::fence;

/// The children are told again when the right has moved this much (it
/// moves with every acknowledgement, many a second).
const TELL_EVERY: Duration = Duration::from_millis(100);

/// Maps this process's [`Instant`]s to the host's monotonic milliseconds
/// (what children are told), read once so that the right's end is a
/// function of its instants alone. On Linux both are `CLOCK_MONOTONIC`.
#[derive(Debug, Clone, Copy)]
struct MonoClock {
    at: Instant,
    /// [`fence::mono_ms`] read just before `at`: never later than `at`, so
    /// the children's copy of the right can only lag.
    mono_ms: u64,
}

impl MonoClock {
    fn now() -> MonoClock {
        let mono_ms = fence::mono_ms();
        MonoClock {
            at: Instant::now(),
            mono_ms,
        }
    }

    fn mono_ms_of(&self, t: Instant) -> u64 {
        if t >= self.at {
            // Whole milliseconds after `at`, rounded down (earlier).
            self.mono_ms
                .saturating_add(t.duration_since(self.at).as_millis() as u64)
        } else {
            // Whole milliseconds before `at`, rounded up (earlier too).
            self.mono_ms
                .saturating_sub(self.at.duration_since(t).as_nanos().div_ceil(1_000_000) as u64)
        }
    }
}

pub(crate) struct Right {
    grant: Duration,
    clock: MonoClock,
    /// Messages sent on this connection that an `Ack` may name: (seal
    /// counter, when sent). Oldest first; at most a few seconds' worth.
    sent: VecDeque<(u64, Instant)>,
    /// The right runs out at this instant (None: never had one).
    until: Option<Instant>,
    /// What the children were last told (on the monotonic clock, ms).
    told_ms: u64,
    /// Whether the right has lapsed since it was last fresh (logged once).
    lapsed: bool,
}

impl Right {
    /// `timeout`: the dispatcher's heartbeat timeout.
    pub(crate) fn new(timeout: Duration) -> Right {
        Right {
            grant: fence::grant(timeout),
            clock: MonoClock::now(),
            sent: VecDeque::new(),
            until: None,
            told_ms: 0,
            lapsed: false,
        }
    }

    /// A Welcome answered our Join, sent at `joined_at`: the dispatcher
    /// heard us then or later. Counters start again on the new connection.
    pub(crate) fn welcomed(&mut self, joined_at: Option<Instant>) {
        self.sent.clear();
        if let Some(at) = joined_at {
            self.renew(at);
        }
    }

    /// A message sealed with `seq` went out at `at`.
    pub(crate) fn sent(&mut self, seq: u64, at: Instant) {
        self.sent.push_back((seq, at));
        // Acks come back in a round trip; whatever is older than a grant
        // could not renew anything any more.
        while self.sent.len() > 1
            && self
                .sent
                .front()
                .is_some_and(|(_, t)| at.saturating_duration_since(*t) > self.grant)
        {
            self.sent.pop_front();
        }
    }

    /// The dispatcher has read our messages up to `seq`.
    pub(crate) fn acked(&mut self, seq: u64) {
        let mut newest = None;
        while let Some(&(s, at)) = self.sent.front() {
            if s > seq {
                break;
            }
            newest = Some(at);
            self.sent.pop_front();
        }
        if let Some(at) = newest {
            self.renew(at);
        }
    }

    fn renew(&mut self, sent_at: Instant) {
        let until = sent_at + self.grant;
        if self.until.is_none_or(|u| until > u) {
            self.until = Some(until);
        }
    }

    /// Whether requests may start at `now`.
    pub(crate) fn is_fresh(&self, now: Instant) -> bool {
        self.until.is_some_and(|u| now < u)
    }

    /// How long the right still runs at `now` (zero once lapsed).
    pub(crate) fn left(&self, now: Instant) -> Duration {
        self.until
            .map_or(Duration::ZERO, |u| u.saturating_duration_since(now))
    }

    /// The end of the right on the host's monotonic clock (what children
    /// are told); 0 when there never was one.
    pub(crate) fn until_mono_ms(&self) -> u64 {
        self.until.map_or(0, |u| self.clock.mono_ms_of(u))
    }

    /// The end to tell the children, when it has moved enough since they
    /// were last told.
    pub(crate) fn news_for_children(&mut self) -> Option<u64> {
        let until = self.until_mono_ms();
        if until.abs_diff(self.told_ms) < TELL_EVERY.as_millis() as u64 {
            return None;
        }
        self.told_ms = until;
        Some(until)
    }

    /// True once per lapse: the right has just been found run out.
    pub(crate) fn just_lapsed(&mut self, now: Instant) -> bool {
        if self.is_fresh(now) {
            self.lapsed = false;
            return false;
        }
        let first = !self.lapsed && self.until.is_some();
        self.lapsed = true;
        first
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ack_renews_from_when_its_message_was_sent() {
        let t = Duration::from_secs(10);
        let now = Instant::now();
        let mut r = Right::new(t);
        assert!(!r.is_fresh(now));
        assert_eq!(r.until_mono_ms(), 0);
        // Welcomed on a Join sent 8 s ago: a grant of 7.5 s has run out.
        r.welcomed(Some(now - Duration::from_secs(8)));
        assert!(!r.is_fresh(now));
        assert!(r.just_lapsed(now));
        assert!(!r.just_lapsed(now), "logged once per lapse");
        r.sent(1, now - Duration::from_secs(5));
        r.sent(2, now);
        // The first message's ack: fresh for what is left of its grant.
        r.acked(1);
        assert!(r.is_fresh(now));
        assert_eq!(r.left(now), Duration::from_millis(2_500));
        // The second's: fresh for the grant from its sending.
        r.acked(2);
        assert_eq!(r.left(now), fence::grant(t));
        assert!(!r.just_lapsed(now));
        // An old ack never shortens it.
        r.acked(1);
        assert_eq!(r.left(now), fence::grant(t));
        // Children are told once per move.
        assert!(r.news_for_children().is_some());
        assert!(r.news_for_children().is_none());
        // A message older than a grant is forgotten: its ack could renew nothing.
        r.sent(3, now - Duration::from_secs(9));
        r.sent(4, now);
        assert_eq!(r.sent.front().map(|(s, _)| *s), Some(4));
        // Lapsed again once the grant has passed, and said once.
        let later = now + fence::grant(t);
        assert!(!r.is_fresh(later));
        assert!(r.just_lapsed(later));
        assert!(!r.just_lapsed(later));
    }

    #[test]
    fn a_welcome_renews_from_the_join() {
        let mut r = Right::new(Duration::from_secs(3));
        r.welcomed(Some(Instant::now()));
        assert!(r.is_fresh(Instant::now()));
        let told = r.news_for_children().unwrap();
        assert!(told > fence::mono_ms() + 1_500 && told <= fence::mono_ms() + 2_000);
    }

    #[test]
    fn the_childrens_end_is_never_later_than_the_right() {
        let r = Right::new(Duration::from_secs(3));
        let base = r.clock.at;
        let later = base + Duration::from_micros(2_999_999);
        let earlier = base - Duration::from_micros(1_001);
        assert_eq!(r.clock.mono_ms_of(later), r.clock.mono_ms + 2_999);
        assert_eq!(r.clock.mono_ms_of(earlier), r.clock.mono_ms - 2);
    }
}
