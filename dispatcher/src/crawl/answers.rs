//! How often the dispatcher answers peers it has not admitted.
//!
//! Every Hello gets a Challenge and every bad Join a refusal, so without a
//! bound a peer sending Hellos as fast as it can (and never reading the
//! answers) would make the dispatcher write as fast as it reads. So
//! answers to peers not admitted come from two token buckets: one per
//! connection (a supervisor needs two answers to join: a Challenge and,
//! rarely, a refusal) and one for all of them together. A message over
//! either budget is dropped unanswered (and counted); a supervisor whose
//! Hello went unanswered introduces itself again
//! (`link::dispatcher_link`). Welcomes are not answers of this kind: they
//! go to peers that just proved the secret.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use bytes::Bytes;

/// Answers one connection may get at once, and how fast its budget refills.
const PER_PEER_BURST: f64 = 4.0;
const PER_PEER_PER_SEC: f64 = 1.0;
/// Answers all unadmitted peers together may get at once, and per second.
const ALL_BURST: f64 = 1000.0;
const ALL_PER_SEC: f64 = 1000.0;
/// Connections whose budget is remembered; past it, the idlest are
/// forgotten (the crate keeps at most 4,096 untrusted connections anyway).
const MAX_PEERS: usize = 8192;

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Bucket {
    fn full(burst: f64, at: Instant) -> Bucket {
        Bucket { tokens: burst, at }
    }

    /// Takes a token if there is one, after refilling for the time passed.
    fn take(&mut self, burst: f64, per_sec: f64, now: Instant) -> bool {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + elapsed * per_sec).min(burst);
        self.at = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// The answer budgets (see the module's documentation).
pub(super) struct Answers {
    all: Bucket,
    peers: HashMap<Bytes, Bucket>,
}

impl Answers {
    pub(super) fn new(now: Instant) -> Answers {
        Answers {
            all: Bucket::full(ALL_BURST, now),
            peers: HashMap::new(),
        }
    }

    /// Whether the peer `identity` may be answered now (a token is taken
    /// from both budgets only when both have one).
    pub(super) fn allow(&mut self, identity: &Bytes, now: Instant) -> bool {
        if self.peers.len() >= MAX_PEERS && !self.peers.contains_key(identity) {
            self.forget_idle(now);
        }
        let peer = self
            .peers
            .entry(identity.clone())
            .or_insert_with(|| Bucket::full(PER_PEER_BURST, now));
        let mut trial = *peer;
        if !trial.take(PER_PEER_BURST, PER_PEER_PER_SEC, now) {
            *peer = trial;
            return false;
        }
        if !self.all.take(ALL_BURST, ALL_PER_SEC, now) {
            return false;
        }
        *peer = trial;
        true
    }

    /// Forgets the connections whose budget is full again (they have been
    /// quiet long enough that remembering them changes nothing), or all
    /// of them if that frees nothing.
    pub(super) fn forget_idle(&mut self, now: Instant) {
        let refill = Duration::from_secs_f64(PER_PEER_BURST / PER_PEER_PER_SEC);
        self.peers
            .retain(|_, b| now.saturating_duration_since(b.at) < refill);
        if self.peers.len() >= MAX_PEERS {
            self.peers.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peer_gets_its_burst_then_one_answer_a_second_and_all_share_a_budget() {
        let t0 = Instant::now();
        let mut a = Answers::new(t0);
        let peer = Bytes::from_static(b"p");
        let answered = (0..10).filter(|_| a.allow(&peer, t0)).count();
        assert_eq!(answered, PER_PEER_BURST as usize);
        assert!(a.allow(&peer, t0 + Duration::from_secs(1)));
        assert!(!a.allow(&peer, t0 + Duration::from_secs(1)));
        // Idle peers are forgotten.
        a.forget_idle(t0 + Duration::from_secs(60));
        assert!(a.peers.is_empty());
        // Thousands of connections, one Hello each: the shared budget's
        // burst, then its rate.
        let mut a = Answers::new(t0);
        let hello = |a: &mut Answers, i: u32, at| a.allow(&Bytes::from(i.to_be_bytes().to_vec()), at);
        let many = (0..5000u32).filter(|&i| hello(&mut a, i, t0)).count();
        assert_eq!(many, ALL_BURST as usize);
        let later = t0 + Duration::from_millis(100);
        let more = (5000..10_000u32).filter(|&i| hello(&mut a, i, later)).count();
        assert_eq!(more, (ALL_PER_SEC / 10.0) as usize);
    }
}
