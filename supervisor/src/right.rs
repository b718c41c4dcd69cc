//! This node's right to crawl its domains, renewed by the dispatcher's
//! acknowledgements (the rule and its margin: `link::fence`).
//!
//! State only: the supervisor's loop tells it what was sent and what was
//! acknowledged, and passes the end of the right on to its children,
//! which check it before every request.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use link::fence;

/// The children are told again when the right has moved this much (it
/// moves with every acknowledgement, many a second).
const TELL_EVERY: Duration = Duration::from_millis(100);

pub(crate) struct Right {
    grant: Duration,
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
        while self.sent.len() > 1 && self.sent.front().is_some_and(|(_, t)| t.elapsed() > self.grant) {
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

    /// Whether requests may start now.
    pub(crate) fn is_fresh(&self) -> bool {
        self.until.is_some_and(|u| Instant::now() < u)
    }

    /// How long the right still runs (zero once lapsed).
    pub(crate) fn left(&self) -> Duration {
        self.until
            .map_or(Duration::ZERO, |u| u.saturating_duration_since(Instant::now()))
    }

    /// The end of the right on the host's monotonic clock (what children
    /// are told); 0 when there never was one.
    pub(crate) fn until_mono_ms(&self) -> u64 {
        match self.until {
            Some(u) => {
                let now = Instant::now();
                let mono = fence::mono_ms();
                if u >= now {
                    mono.saturating_add(u.duration_since(now).as_millis() as u64)
                } else {
                    mono.saturating_sub(now.duration_since(u).as_millis() as u64)
                }
            }
            None => 0,
        }
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
    pub(crate) fn just_lapsed(&mut self) -> bool {
        if self.is_fresh() {
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
        let mut r = Right::new(t);
        assert!(!r.is_fresh());
        assert_eq!(r.until_mono_ms(), 0);
        // Welcomed on a Join sent 8 s ago: a grant of 7.5 s has run out.
        r.welcomed(Some(Instant::now() - Duration::from_secs(8)));
        assert!(!r.is_fresh());
        assert!(r.just_lapsed());
        assert!(!r.just_lapsed(), "logged once per lapse");
        let old = Instant::now() - Duration::from_secs(5);
        r.sent(1, old);
        r.sent(2, Instant::now());
        // The first message's ack: fresh for what is left of its grant.
        r.acked(1);
        assert!(r.is_fresh());
        assert!(r.left() <= Duration::from_millis(2_500));
        // The second's: fresh for the grant from its sending.
        r.acked(2);
        let left = r.left();
        assert!(left <= fence::grant(t) && left > fence::grant(t) - Duration::from_secs(1));
        // An old ack never shortens it.
        r.acked(1);
        assert!(r.left() > fence::grant(t) - Duration::from_secs(1));
        // Children are told once per move.
        assert!(r.news_for_children().is_some());
        assert!(r.news_for_children().is_none());
        // A message older than a grant is forgotten: its ack could renew nothing.
        r.sent(3, Instant::now() - Duration::from_secs(9));
        r.sent(4, Instant::now());
        assert_eq!(r.sent.front().map(|(s, _)| *s), Some(4));
    }

    #[test]
    fn a_welcome_renews_from_the_join() {
        let mut r = Right::new(Duration::from_secs(3));
        r.welcomed(Some(Instant::now()));
        assert!(r.is_fresh());
        let told = r.news_for_children().unwrap();
        assert!(told > fence::mono_ms() + 1_500 && told <= fence::mono_ms() + 2_000);
    }
}
