//! What the dispatcher refuses on its cluster link, counted and logged.
//!
//! A peer without the cluster secret can send as many messages as it
//! likes; each is dropped, but a log line per message would let it fill
//! the disk and bury everything else. So each reason is counted in
//! `/metrics` (`crawler_cluster_refusals_total{reason}`, every one) and
//! logged at most once per [`LOG_EVERY`], with how many were not logged.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// At most one log line per reason this often.
const LOG_EVERY: Duration = Duration::from_secs(10);

/// Why something from the cluster link was refused. A closed set: the
/// metric's label values stay bounded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Reason {
    /// A message other than Hello or Join from a peer not (or no longer) admitted.
    Unauthenticated,
    /// A Join whose proof does not match.
    BadProof,
    /// A sealed message whose tag does not match its connection's key.
    BadSeal,
    /// A sealed message whose counter was used already.
    Replayed,
    /// A Join with no challenge pending for its peer.
    NoChallenge,
    /// A Join whose introduction did not decode, though its proof matched.
    MalformedJoin,
    /// A message from an unadmitted peer larger than any introduction.
    Oversized,
    /// Bytes that are no message.
    Undecodable,
    /// A Hello of another protocol version.
    Version,
    /// A result for a lease this dispatcher does not have out.
    UnknownLease,
    /// A result for a lease out at another supervisor.
    ForeignLease,
    /// A result about another URL than its lease's.
    LeaseUrlMismatch,
    /// A URL a (re)joining supervisor holds that is not adopted.
    UnadoptableLease,
    /// A pending challenge dropped because too many Hellos were pending
    /// (from its address, or from the busiest one when all were full).
    ChallengeEvicted,
    /// A message from a peer not admitted left unanswered: over the
    /// answer budget (`crawl::answers`).
    AnswerRate,
    /// A message that its connection may not send now (a crawl message
    /// before `Holding`, a second `Holding`).
    OutOfTurn,
}

impl Reason {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Reason::Unauthenticated => "unauthenticated",
            Reason::BadProof => "bad_proof",
            Reason::BadSeal => "bad_seal",
            Reason::Replayed => "replayed",
            Reason::NoChallenge => "no_challenge",
            Reason::MalformedJoin => "malformed_join",
            Reason::Oversized => "oversized",
            Reason::Undecodable => "undecodable",
            Reason::Version => "version",
            Reason::UnknownLease => "unknown_lease",
            Reason::ForeignLease => "foreign_lease",
            Reason::LeaseUrlMismatch => "lease_url_mismatch",
            Reason::UnadoptableLease => "unadoptable_lease",
            Reason::ChallengeEvicted => "challenge_evicted",
            Reason::AnswerRate => "answer_rate",
            Reason::OutOfTurn => "out_of_turn",
        }
    }
}

impl From<link::cluster_auth::Refusal> for Reason {
    fn from(r: link::cluster_auth::Refusal) -> Reason {
        use link::cluster_auth::Refusal;
        match r {
            Refusal::BadProof => Reason::BadProof,
            Refusal::NoChallenge => Reason::NoChallenge,
            Refusal::Malformed => Reason::MalformedJoin,
        }
    }
}

/// Per reason: when it was last logged, and how many went unlogged since.
#[derive(Default)]
pub(crate) struct Refusals {
    logged: HashMap<Reason, (Instant, u64)>,
}

impl Refusals {
    /// Counts `n` refusals for `why` and logs `detail` unless this reason
    /// was logged less than [`LOG_EVERY`] ago. `detail` must hold no secret.
    pub(crate) fn refuse(&mut self, why: Reason, n: u64, detail: impl FnOnce() -> String) {
        link::metric::CLUSTER_REFUSALS.at([why.as_str()]).increment(n);
        if let Some(line) = self.line(why, n, Instant::now(), detail) {
            tracing::warn!(reason = why.as_str(), "{line}");
        }
    }

    /// The log line for `n` refusals at `now`, if one is due.
    fn line(&mut self, why: Reason, n: u64, now: Instant, detail: impl FnOnce() -> String) -> Option<String> {
        let suppressed = match self.logged.get_mut(&why) {
            Some((at, unlogged)) if now.saturating_duration_since(*at) < LOG_EVERY => {
                *unlogged = unlogged.saturating_add(n);
                return None;
            }
            Some((_, unlogged)) => *unlogged,
            None => 0,
        };
        self.logged.insert(why, (now, 0));
        let more = if suppressed > 0 {
            format!(
                " ({suppressed} more like it in the last {}s, not logged)",
                LOG_EVERY.as_secs()
            )
        } else {
            String::new()
        };
        Some(format!("refused: {}{more}", detail()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flood_is_logged_once_per_period_and_counted_in_the_next_line() {
        let mut r = Refusals::default();
        let t0 = Instant::now() + Duration::from_secs(100);
        assert!(r.line(Reason::BadProof, 1, t0, || "first".into()).is_some());
        for i in 1..1000u64 {
            let at = t0 + Duration::from_millis(i);
            assert!(r.line(Reason::BadProof, 1, at, || "again".into()).is_none());
        }
        // Another reason has its own budget.
        assert!(r.line(Reason::ForeignLease, 1, t0, || "x".into()).is_some());
        let line = r
            .line(Reason::BadProof, 1, t0 + LOG_EVERY, || "later".into())
            .unwrap();
        assert!(line.contains("later") && line.contains("999 more"), "{line}");
    }
}
