//! The dispatcher's side of introductions: the challenges it has sent and
//! not yet seen answered, bounded so that a flood of Hellos costs a fixed
//! amount of memory, and the check of a Join against its challenge.

use std::collections::HashMap;
use std::hash::Hash;
use std::time::{Duration, Instant};

use hmac::Mac;
use sha2::{Digest, Sha256};

use super::{fresh_nonce, tag, ClusterKey, Nonce, Proof, Refusal, Session, Side};

/// A challenge sent and not answered yet, to a peer at `source`.
#[derive(Debug, Clone)]
struct Pending<S> {
    source: S,
    s_nonce: Nonce,
    d_nonce: Nonce,
    at: Instant,
}

/// The dispatcher's side: the challenges it has sent, by peer (a
/// connection), each with its source (the address it connects from).
/// Bounded in age (`ttl`), in number per source (`per_source`) and in all
/// (`max`), so a flood of Hellos costs a fixed amount of memory. Making
/// room never costs a source with few challenges pending: a source at its
/// quota loses its own oldest, and when all are full, the source with the
/// most pending loses its oldest. So a peer flooding from a few addresses
/// cannot push out a real supervisor's challenge (it answers within
/// milliseconds, and is alone at its address or nearly).
#[derive(Debug)]
pub struct Challenges<P, S> {
    version: u32,
    pending: HashMap<P, Pending<S>>,
    /// Challenges pending per source.
    sources: HashMap<S, usize>,
    ttl: Duration,
    max: usize,
    per_source: usize,
}

/// Whose challenge was dropped to make room for a new one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Evicted {
    /// One of the same source (it was at its quota).
    SameSource,
    /// One of the source with the most challenges pending (all were full).
    Busiest,
}

/// A supervisor whose Join proved it knows the secret; it can prove the
/// dispatcher's side in return.
#[derive(Debug)]
pub struct Admitted {
    version: u32,
    s_nonce: Nonce,
    d_nonce: Nonce,
    intro_digest: [u8; 32],
}

impl Admitted {
    /// The proof the Welcome carries, over the encoded `policy` it sends.
    pub fn welcome_proof(&self, key: &ClusterKey, policy: &[u8]) -> Proof {
        tag(key.dispatcher_mac(
            self.version,
            &self.s_nonce,
            &self.d_nonce,
            &self.intro_digest,
            policy,
        ))
    }

    /// The keys of the connection this admission opened.
    pub fn session(&self, key: &ClusterKey) -> Session {
        Session::new(
            key.session_key(self.version, &self.s_nonce, &self.d_nonce, &self.intro_digest),
            Side::Dispatcher,
        )
    }
}

impl<P: Hash + Eq + Clone, S: Hash + Eq + Clone> Challenges<P, S> {
    pub fn new(version: u32, ttl: Duration, max: usize, per_source: usize) -> Challenges<P, S> {
        Challenges {
            version,
            pending: HashMap::new(),
            sources: HashMap::new(),
            ttl,
            max: max.max(1),
            per_source: per_source.max(1),
        }
    }

    /// A Hello from `peer` at `source` with nonce `s_nonce`: returns the
    /// nonce for the Challenge, and whose pending challenge, if anyone's,
    /// was dropped to make room. A repeated Hello replaces the peer's
    /// pending challenge.
    pub fn challenge(
        &mut self,
        peer: P,
        source: S,
        s_nonce: Nonce,
        now: Instant,
    ) -> (Nonce, Option<Evicted>) {
        self.remove(&peer);
        let mut evicted = None;
        if self.sources.get(&source).copied().unwrap_or(0) >= self.per_source {
            self.expire(now);
            if self.sources.get(&source).copied().unwrap_or(0) >= self.per_source {
                self.drop_oldest_of(&source);
                evicted = Some(Evicted::SameSource);
            }
        }
        if evicted.is_none() && self.pending.len() >= self.max {
            self.expire(now);
            if self.pending.len() >= self.max {
                let busiest = self
                    .sources
                    .iter()
                    .max_by_key(|(_, n)| **n)
                    .map(|(s, _)| s.clone());
                if let Some(busiest) = busiest {
                    self.drop_oldest_of(&busiest);
                    evicted = Some(Evicted::Busiest);
                }
            }
        }
        let d_nonce = fresh_nonce();
        *self.sources.entry(source.clone()).or_insert(0) += 1;
        self.pending.insert(
            peer,
            Pending {
                source,
                s_nonce,
                d_nonce,
                at: now,
            },
        );
        (d_nonce, evicted)
    }

    /// Drops `peer`'s pending challenge, if any.
    fn remove(&mut self, peer: &P) -> Option<Pending<S>> {
        let p = self.pending.remove(peer)?;
        self.forget_one_of(&p.source);
        Some(p)
    }

    fn forget_one_of(&mut self, source: &S) {
        if let Some(n) = self.sources.get_mut(source) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.sources.remove(source);
            }
        }
    }

    /// Drops the oldest challenge pending for `source`.
    fn drop_oldest_of(&mut self, source: &S) {
        let oldest = self
            .pending
            .iter()
            .filter(|(_, p)| p.source == *source)
            .min_by_key(|(_, p)| p.at)
            .map(|(k, _)| k.clone());
        if let Some(oldest) = oldest {
            self.remove(&oldest);
        }
    }

    /// A Join from `peer`: checks `proof` over `intro` (the bytes as
    /// received) in constant time. The challenge is used up either way, so
    /// each challenge allows one guess.
    pub fn verify(
        &mut self,
        key: &ClusterKey,
        peer: &P,
        proof: &Proof,
        intro: &[u8],
        now: Instant,
    ) -> Result<Admitted, Refusal> {
        let p = self.remove(peer).ok_or(Refusal::NoChallenge)?;
        if now.saturating_duration_since(p.at) > self.ttl {
            return Err(Refusal::NoChallenge);
        }
        key.supervisor_mac(self.version, &p.s_nonce, &p.d_nonce, intro)
            .verify_slice(proof)
            .map_err(|_| Refusal::BadProof)?;
        Ok(Admitted {
            version: self.version,
            s_nonce: p.s_nonce,
            d_nonce: p.d_nonce,
            intro_digest: Sha256::digest(intro).into(),
        })
    }

    /// Challenges pending now.
    pub fn len(&self) -> usize {
        self.pending.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    /// Challenges pending now for `source`.
    pub fn pending_for(&self, source: &S) -> usize {
        self.sources.get(source).copied().unwrap_or(0)
    }

    /// Drops challenges older than the ttl; returns how many.
    pub fn expire(&mut self, now: Instant) -> usize {
        let before = self.pending.len();
        let ttl = self.ttl;
        let sources = &mut self.sources;
        self.pending.retain(|_, p| {
            let keep = now.saturating_duration_since(p.at) <= ttl;
            if !keep {
                if let Some(n) = sources.get_mut(&p.source) {
                    *n = n.saturating_sub(1);
                    if *n == 0 {
                        sources.remove(&p.source);
                    }
                }
            }
            keep
        });
        before - self.pending.len()
    }
}
