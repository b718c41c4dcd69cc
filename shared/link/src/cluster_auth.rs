//! Who may join the cluster: a challenge–response on a shared secret.
//!
//! The dispatcher's ZeroMQ port is reachable by whoever can reach the
//! machine, and the `zeromq` crate has no CURVE. Without this, any peer
//! could say Hello, be handed domains and URLs, report results (marking
//! URLs done, injecting links) and announce a debug address that
//! `cluster-profile` would then send the debug token to. So every
//! supervisor proves, before it is welcomed, that it knows the cluster
//! secret, and the dispatcher proves the same back in its Welcome.
//!
//! The introduction, four messages (the supervisor speaks first):
//!
//! ```text
//! supervisor                                          dispatcher
//!   Hello { version, nonce: Ns }              ──▶   remembers (Ns, Nd) for this peer
//!                                             ◀──   Challenge { nonce: Nd }
//!   Join { proof: Ps, intro: bytes }          ──▶   verifies Ps, only then decodes intro
//!   verifies Pd                               ◀──   Welcome { policy, proof: Pd }
//!
//! Ps = HMAC-SHA256(secret, "…supervisor proof" ‖ version ‖ Ns ‖ Nd ‖ intro)
//! Pd = HMAC-SHA256(secret, "…dispatcher proof" ‖ version ‖ Ns ‖ Nd ‖ SHA-256(intro) ‖ policy)
//! ```
//!
//! Why this shape: the dispatcher's nonce makes every proof fresh (a
//! recorded Join cannot be replayed, Nd differs every time), the
//! supervisor's nonce does the same for the Welcome; the proof covers the
//! whole introduction (supervisor id, capacity, debug address, the leases
//! it holds) so a proof cannot be moved to another Hello or another peer;
//! the labels differ by direction, so one side's proof is never valid as
//! the other's (no reflection). A peer without the secret gets a random
//! nonce and a refusal, nothing computed from the secret. The dispatcher
//! keeps only two nonces per pending peer (not the introduction), bounded
//! in number and age, so unauthenticated peers cannot make it hold much.
//!
//! After the Welcome, both sides seal every message with a key derived for
//! that connection (a [`Session`]): a counter and a keyed BLAKE3 tag per
//! message, so that the handshake's guarantee lasts for the whole
//! connection.
//!
//! Everything here is pure (no sockets, no clocks of its own), so the
//! handshake is tested without a network. The dispatcher's table of
//! challenges sent is `challenges`; a connection's seal, `session`.

use hmac::{Hmac, KeyInit, Mac};
use rand::RngCore;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

mod challenges;
mod session;

pub use challenges::{Admitted, Challenges, Evicted};
use session::Side;
pub use session::{SealError, Session};

/// The environment variable that may carry the secret (never argv: `ps`
/// shows a command line to every user of the machine).
pub const SECRET_ENV: &str = "CRAWLER_CLUSTER_SECRET";
/// The environment variable that may name the secret's file: children
/// must not inherit it either (they run as the user that can read it).
pub const SECRET_FILE_ENV: &str = "CRAWLER_CLUSTER_SECRET_FILE";
/// Shortest secret accepted: 32 bytes (256 bits when they are random);
/// a secret written in hex must have twice as many digits, so that it
/// encodes that many bytes. `openssl rand -hex 32` gives 64 digits.
pub const MIN_SECRET_BYTES: usize = 32;
/// [`MIN_SECRET_BYTES`] written in hex.
const HEX_DIGITS: usize = 2 * MIN_SECRET_BYTES;
/// Longest secret accepted (a file that big is the wrong file).
pub const MAX_SECRET_BYTES: usize = 4096;

/// A random number used once per introduction.
pub type Nonce = [u8; 32];
/// An HMAC-SHA256 tag.
pub type Proof = [u8; 32];

const SUPERVISOR_LABEL: &[u8] = b"synthcrawler cluster link: supervisor proof\0";
const DISPATCHER_LABEL: &[u8] = b"synthcrawler cluster link: dispatcher proof\0";
const SESSION_LABEL: &[u8] = b"synthcrawler cluster link: session key\0";
const TO_DISPATCHER_LABEL: &[u8] = b"synthcrawler cluster link: to dispatcher\0";
const TO_SUPERVISOR_LABEL: &[u8] = b"synthcrawler cluster link: to supervisor\0";
/// The key every `--insecure-cluster` process shares: public, so it
/// authenticates nothing, but the handshake stays one code path and an
/// insecure process cannot join a cluster that has a secret.
const INSECURE_KEY: &[u8] = b"synthcrawler --insecure-cluster: no secret";

/// The cluster secret. Never printed: `Debug` shows no bytes, there is no
/// `Display`, and the bytes are zeroed when dropped.
pub struct ClusterKey {
    bytes: Box<[u8]>,
    insecure: bool,
}

/// Why a secret was not accepted (says nothing about its bytes).
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum SecretError {
    #[error("the cluster secret is {0} bytes; it must be at least {MIN_SECRET_BYTES} random bytes (in hex, {HEX_DIGITS} digits): make one with `openssl rand -hex 32`")]
    TooShort(usize),
    #[error("the cluster secret is {0} hex digits, which encode half as many bytes; it must be at least {MIN_SECRET_BYTES} random bytes ({HEX_DIGITS} hex digits): make one with `openssl rand -hex 32`")]
    TooFewHexDigits(usize),
    #[error("the cluster secret is over {MAX_SECRET_BYTES} bytes; is that the right file?")]
    TooLong(usize),
}

impl ClusterKey {
    /// A key from secret bytes, as read from a file or the environment;
    /// surrounding whitespace (a trailing newline) is not part of it.
    pub fn from_secret(raw: &[u8]) -> Result<ClusterKey, SecretError> {
        let secret = raw.trim_ascii();
        if secret.len() < MIN_SECRET_BYTES {
            return Err(SecretError::TooShort(secret.len()));
        }
        // Hex digits carry half a byte each: what `openssl rand -hex N`
        // writes is N random bytes.
        if secret.iter().all(u8::is_ascii_hexdigit) && secret.len() < HEX_DIGITS {
            return Err(SecretError::TooFewHexDigits(secret.len()));
        }
        if secret.len() > MAX_SECRET_BYTES {
            return Err(SecretError::TooLong(secret.len()));
        }
        Ok(ClusterKey {
            bytes: secret.into(),
            insecure: false,
        })
    }

    /// The public key of `--insecure-cluster`.
    pub fn insecure() -> ClusterKey {
        ClusterKey {
            bytes: INSECURE_KEY.into(),
            insecure: true,
        }
    }

    /// Whether this is the public `--insecure-cluster` key.
    pub fn is_insecure(&self) -> bool {
        self.insecure
    }

    fn mac(&self, label: &[u8], version: u32, s_nonce: &Nonce, d_nonce: &Nonce) -> Hmac<Sha256> {
        // HMAC takes keys of any length.
        let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(&self.bytes)
            .unwrap_or_else(|_| unreachable!("HMAC accepts any key length"));
        mac.update(label);
        mac.update(&version.to_le_bytes());
        mac.update(s_nonce);
        mac.update(d_nonce);
        mac
    }

    fn supervisor_mac(&self, version: u32, s_nonce: &Nonce, d_nonce: &Nonce, intro: &[u8]) -> Hmac<Sha256> {
        let mut mac = self.mac(SUPERVISOR_LABEL, version, s_nonce, d_nonce);
        mac.update(intro);
        mac
    }

    fn dispatcher_mac(
        &self,
        version: u32,
        s_nonce: &Nonce,
        d_nonce: &Nonce,
        intro_digest: &[u8; 32],
        policy: &[u8],
    ) -> Hmac<Sha256> {
        let mut mac = self.mac(DISPATCHER_LABEL, version, s_nonce, d_nonce);
        mac.update(intro_digest);
        mac.update(policy);
        mac
    }
}

impl ClusterKey {
    /// The key that seals every message of one admitted connection: derived
    /// from the secret and that introduction, so it is new every time.
    fn session_key(
        &self,
        version: u32,
        s_nonce: &Nonce,
        d_nonce: &Nonce,
        intro_digest: &[u8; 32],
    ) -> [u8; 32] {
        let mut mac = self.mac(SESSION_LABEL, version, s_nonce, d_nonce);
        mac.update(intro_digest);
        tag(mac)
    }
}

impl std::fmt::Debug for ClusterKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.insecure {
            f.write_str("ClusterKey(insecure)")
        } else {
            f.write_str("ClusterKey(redacted)")
        }
    }
}

impl Drop for ClusterKey {
    fn drop(&mut self) {
        for b in self.bytes.iter_mut() {
            // SAFETY: `b` is a valid, aligned &mut u8. Volatile, so the
            // zeroing of memory about to be freed is not optimised away.
            unsafe { std::ptr::write_volatile(b, 0) };
        }
    }
}

/// Why the other side of an introduction was refused. Travels in
/// `ToSupervisor::Refused`; `as_str` is the metric label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Refusal {
    /// The proof does not match: the peer does not know the secret (or
    /// the introduction was altered on the way).
    BadProof,
    /// A Join with no challenge outstanding for this peer (never sent,
    /// already used, or expired).
    NoChallenge,
    /// The introduction could not be decoded after its proof checked out.
    Malformed,
}

impl Refusal {
    pub fn as_str(self) -> &'static str {
        match self {
            Refusal::BadProof => "bad_proof",
            Refusal::NoChallenge => "no_challenge",
            Refusal::Malformed => "malformed_join",
        }
    }
}

/// A fresh random nonce (ThreadRng: a CSPRNG seeded from the OS).
pub fn fresh_nonce() -> Nonce {
    let mut n = [0u8; 32];
    rand::rng().fill_bytes(&mut n);
    n
}

fn tag(mac: Hmac<Sha256>) -> Proof {
    let mut out = [0u8; 32];
    out.copy_from_slice(&mac.finalize().into_bytes());
    out
}

/// The supervisor's side of one introduction: created for each Hello.
#[derive(Debug, Clone)]
pub struct Introduction {
    version: u32,
    nonce: Nonce,
    /// Set once the Challenge is answered: the dispatcher's nonce and the
    /// digest of the introduction sent, which the Welcome must prove.
    answered: Option<(Nonce, [u8; 32])>,
}

impl Introduction {
    pub fn new(version: u32) -> Introduction {
        Introduction {
            version,
            nonce: fresh_nonce(),
            answered: None,
        }
    }

    /// The nonce the Hello carries.
    pub fn nonce(&self) -> Nonce {
        self.nonce
    }

    /// Answers the dispatcher's Challenge: the proof for a Join carrying
    /// exactly the bytes `intro`. A second Challenge replaces the first.
    pub fn answer(&mut self, key: &ClusterKey, d_nonce: Nonce, intro: &[u8]) -> Proof {
        self.answered = Some((d_nonce, Sha256::digest(intro).into()));
        tag(key.supervisor_mac(self.version, &self.nonce, &d_nonce, intro))
    }

    /// Checks the dispatcher's proof in its Welcome (over the encoded
    /// policy it carries), in constant time.
    pub fn check_welcome(&self, key: &ClusterKey, proof: &Proof, policy: &[u8]) -> Result<(), Refusal> {
        let Some((d_nonce, digest)) = &self.answered else {
            return Err(Refusal::NoChallenge);
        };
        key.dispatcher_mac(self.version, &self.nonce, d_nonce, digest, policy)
            .verify_slice(proof)
            .map_err(|_| Refusal::BadProof)
    }

    /// The keys of the connection this introduction opened, once the
    /// Welcome checked out ([`Introduction::check_welcome`]).
    pub fn session(&self, key: &ClusterKey) -> Option<Session> {
        let (d_nonce, digest) = self.answered.as_ref()?;
        Some(Session::new(
            key.session_key(self.version, &self.nonce, d_nonce, digest),
            Side::Supervisor,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    const V: u32 = 6;

    /// A key from `s`, made long enough (32 bytes) by a fixed tail.
    fn key(s: &str) -> ClusterKey {
        ClusterKey::from_secret(format!("{s}/long-enough-for-a-cluster-secret").as_bytes()).unwrap()
    }

    /// One whole introduction; returns what each side concluded.
    fn introduce(
        sup_key: &ClusterKey,
        disp_key: &ClusterKey,
        intro: &[u8],
    ) -> (Result<Admitted, Refusal>, Option<Result<(), Refusal>>) {
        let now = Instant::now();
        let mut challenges = Challenges::new(V, Duration::from_secs(10), 8, 8);
        let mut me = Introduction::new(V);
        let (d_nonce, _) = challenges.challenge("peer", "src", me.nonce(), now);
        let proof = me.answer(sup_key, d_nonce, intro);
        let admitted = challenges.verify(disp_key, &"peer", &proof, intro, now);
        let welcome = admitted.as_ref().ok().map(|a| {
            let pd = a.welcome_proof(disp_key, b"policy");
            me.check_welcome(sup_key, &pd, b"policy")
        });
        (admitted, welcome)
    }

    #[test]
    fn the_same_secret_admits_both_ways() {
        let k = key("0123456789abcdef-secret");
        let (admitted, welcome) = introduce(&k, &k, b"intro");
        assert!(admitted.is_ok());
        assert_eq!(welcome, Some(Ok(())));
    }

    #[test]
    fn a_wrong_secret_is_refused_and_so_is_the_insecure_key() {
        let (admitted, _) = introduce(&key("the-wrong-secret-000"), &key("the-right-secret-000"), b"i");
        assert_eq!(admitted.unwrap_err(), Refusal::BadProof);
        let (admitted, _) = introduce(&ClusterKey::insecure(), &key("the-right-secret-000"), b"i");
        assert_eq!(admitted.unwrap_err(), Refusal::BadProof);
        // Two insecure processes do agree (on a public key).
        let (admitted, _) = introduce(&ClusterKey::insecure(), &ClusterKey::insecure(), b"i");
        assert!(admitted.is_ok());
    }

    #[test]
    fn a_proof_is_bound_to_its_introduction_its_nonces_and_its_peer() {
        let k = key("0123456789abcdef-secret");
        let now = Instant::now();
        let mut challenges = Challenges::new(V, Duration::from_secs(10), 8, 8);
        let mut me = Introduction::new(V);
        let (d_nonce, _) = challenges.challenge("a", "src", me.nonce(), now);
        let proof = me.answer(&k, d_nonce, b"id=sup0 debug=127.0.0.1:1");
        // Another introduction (a changed debug address) with this proof: refused,
        // and the challenge is used up by the failed try.
        assert_eq!(
            challenges
                .verify(&k, &"a", &proof, b"id=sup0 debug=10.0.0.9:1", now)
                .unwrap_err(),
            Refusal::BadProof
        );
        assert_eq!(
            challenges
                .verify(&k, &"a", &proof, b"id=sup0 debug=127.0.0.1:1", now)
                .unwrap_err(),
            Refusal::NoChallenge
        );
        // Replayed to a new challenge (new dispatcher nonce), or by another peer: refused.
        challenges.challenge("a", "src", me.nonce(), now);
        challenges.challenge("b", "src", me.nonce(), now);
        for peer in ["a", "b"] {
            assert_eq!(
                challenges
                    .verify(&k, &peer, &proof, b"id=sup0 debug=127.0.0.1:1", now)
                    .unwrap_err(),
                Refusal::BadProof
            );
        }
    }

    #[test]
    fn the_dispatchers_proof_covers_the_policy_and_is_not_the_supervisors() {
        let k = key("0123456789abcdef-secret");
        let now = Instant::now();
        let mut challenges = Challenges::new(V, Duration::from_secs(10), 8, 8);
        let mut me = Introduction::new(V);
        // A Welcome before any Challenge proves nothing.
        assert_eq!(me.check_welcome(&k, &[0; 32], b"p"), Err(Refusal::NoChallenge));
        let (d_nonce, _) = challenges.challenge(1u8, "src", me.nonce(), now);
        let ps = me.answer(&k, d_nonce, b"intro");
        let admitted = challenges.verify(&k, &1, &ps, b"intro", now).unwrap();
        let pd = admitted.welcome_proof(&k, b"policy");
        assert_eq!(me.check_welcome(&k, &pd, b"policy"), Ok(()));
        assert_eq!(
            me.check_welcome(&k, &pd, b"policy, altered"),
            Err(Refusal::BadProof)
        );
        // Reflection: the supervisor's own proof is no Welcome proof.
        assert_eq!(me.check_welcome(&k, &ps, b"policy"), Err(Refusal::BadProof));
        // A dispatcher without the secret cannot welcome us.
        let fake = key("not-the-secret-at-all");
        let fake_pd = admitted.welcome_proof(&fake, b"policy");
        assert_eq!(me.check_welcome(&k, &fake_pd, b"policy"), Err(Refusal::BadProof));
    }

    #[test]
    fn sealed_messages_open_once_in_their_direction_only() {
        let k = key("0123456789abcdef-secret");
        let now = Instant::now();
        let mut challenges = Challenges::new(V, Duration::from_secs(10), 8, 8);
        let mut me = Introduction::new(V);
        assert!(me.session(&k).is_none(), "no session before the Challenge");
        let (d_nonce, _) = challenges.challenge(1u8, "src", me.nonce(), now);
        let ps = me.answer(&k, d_nonce, b"intro");
        let admitted = challenges.verify(&k, &1, &ps, b"intro", now).unwrap();
        let mut disp = admitted.session(&k);
        let mut sup = me.session(&k).unwrap();
        // Both ways, in order and with a gap.
        let (c0, t0) = sup.seal(b"results 1");
        let (c1, t1) = sup.seal(b"results 2");
        let (c2, t2) = sup.seal(b"results 3");
        assert_eq!((c0, c1, c2), (0, 1, 2));
        assert_eq!(disp.open(c0, &t0, b"results 1"), Ok(()));
        assert_eq!(disp.open(c2, &t2, b"results 3"), Ok(()));
        // Replayed, or older than the last opened: refused.
        assert_eq!(disp.open(c0, &t0, b"results 1"), Err(SealError::Replayed));
        assert_eq!(disp.open(c1, &t1, b"results 2"), Err(SealError::Replayed));
        let (w, tw) = disp.seal(b"work");
        assert_eq!(sup.open(w, &tw, b"work"), Ok(()));
        // Altered bytes or counter, or a message reflected back to its sender.
        let (c3, t3) = sup.seal(b"results 4");
        assert_eq!(disp.open(c3, &t3, b"results 5"), Err(SealError::BadTag));
        assert_eq!(disp.open(c3 + 1, &t3, b"results 4"), Err(SealError::BadTag));
        assert_eq!(sup.open(c3, &t3, b"results 4"), Err(SealError::BadTag));
        assert_eq!(disp.open(c3, &t3, b"results 4"), Ok(()));
        // Another connection of the same supervisor has other keys.
        let mut me2 = Introduction::new(V);
        let (d2, _) = challenges.challenge(1u8, "src", me2.nonce(), now);
        let p2 = me2.answer(&k, d2, b"intro");
        let mut disp2 = challenges.verify(&k, &1, &p2, b"intro", now).unwrap().session(&k);
        let (c, t) = sup.seal(b"hello");
        assert_eq!(disp2.open(c, &t, b"hello"), Err(SealError::BadTag));
    }

    #[test]
    fn a_seal_is_keyed_blake3_of_label_counter_and_bytes() {
        // Pins the wire format of protocol 8: peers built apart must agree.
        let key = [7u8; 32];
        let mut sup = Session::new(key, Side::Supervisor);
        let mut disp = Session::new(key, Side::Dispatcher);
        sup.seal(b"first");
        let (counter, tag) = sup.seal(b"results");
        let mut input = TO_DISPATCHER_LABEL.to_vec();
        input.extend_from_slice(&1u64.to_le_bytes());
        input.extend_from_slice(b"results");
        assert_eq!(counter, 1);
        assert_eq!(tag, *blake3::keyed_hash(&key, &input).as_bytes());
        assert_eq!(disp.open(counter, &tag, b"results"), Ok(()));
    }

    #[test]
    fn challenges_expire_and_are_bounded() {
        let k = key("0123456789abcdef-secret");
        let t0 = Instant::now();
        let mut challenges = Challenges::new(V, Duration::from_secs(10), 3, 8);
        let mut me = Introduction::new(V);
        let (d_nonce, _) = challenges.challenge(0u32, "src", me.nonce(), t0);
        let proof = me.answer(&k, d_nonce, b"i");
        // Too late: refused even with the right proof.
        let late = t0 + Duration::from_secs(11);
        assert_eq!(
            challenges.verify(&k, &0, &proof, b"i", late).unwrap_err(),
            Refusal::NoChallenge
        );
        // A flood keeps at most `max`, dropping the oldest of the busiest source.
        for peer in 1..=3u32 {
            let at = t0 + Duration::from_millis(peer as u64);
            assert_eq!(challenges.challenge(peer, "src", [0; 32], at).1, None);
        }
        let at = t0 + Duration::from_millis(4);
        assert_eq!(
            challenges.challenge(4, "src", [0; 32], at).1,
            Some(Evicted::Busiest)
        );
        assert_eq!(challenges.len(), 3);
        // Peer 1's challenge (the oldest) is the one that went.
        assert_eq!(
            challenges.verify(&k, &1, &[0; 32], b"", t0).unwrap_err(),
            Refusal::NoChallenge
        );
        assert_eq!(challenges.expire(t0 + Duration::from_secs(60)), 3);
        assert!(challenges.is_empty());
        assert_eq!(challenges.pending_for(&"src"), 0);
    }

    #[test]
    fn a_flood_from_a_few_sources_never_pushes_out_a_lone_supervisor() {
        let k = key("0123456789abcdef-secret");
        let t0 = Instant::now();
        // At most 8 in all, 3 per source.
        let mut challenges = Challenges::new(V, Duration::from_secs(10), 8, 3);
        let mut me = Introduction::new(V);
        let (d_nonce, _) = challenges.challenge(0u32, "supervisor".to_string(), me.nonce(), t0);
        // 5,000 Hellos from 4 addresses, each Hello newer than the last.
        for i in 1..=5000u32 {
            let source = format!("attacker-{}", i % 4);
            let at = t0 + Duration::from_micros(u64::from(i));
            challenges.challenge(i, source, [0; 32], at);
            assert!(challenges.len() <= 8);
            assert!(challenges.pending_for(&"attacker-1".to_string()) <= 3);
        }
        // The supervisor's challenge is the oldest of all, and still there.
        let proof = me.answer(&k, d_nonce, b"intro");
        assert!(challenges.verify(&k, &0, &proof, b"intro", t0).is_ok());
        // A source at its quota loses its own oldest, no one else's.
        let mut c = Challenges::new(V, Duration::from_secs(10), 100, 2);
        c.challenge(1u32, "a", [0; 32], t0);
        c.challenge(2, "b", [0; 32], t0 + Duration::from_millis(1));
        c.challenge(3, "a", [0; 32], t0 + Duration::from_millis(2));
        let (_, evicted) = c.challenge(4, "a", [0; 32], t0 + Duration::from_millis(3));
        assert_eq!(evicted, Some(Evicted::SameSource));
        assert_eq!((c.pending_for(&"a"), c.pending_for(&"b")), (2, 1));
        assert_eq!(
            c.verify(&k, &1, &[0; 32], b"", t0).unwrap_err(),
            Refusal::NoChallenge
        );
        // A repeated Hello of one peer replaces its challenge: no eviction.
        assert_eq!(
            c.challenge(4, "a", [0; 32], t0 + Duration::from_millis(5)).1,
            None
        );
        assert_eq!(c.pending_for(&"a"), 2);
    }

    #[test]
    fn secrets_are_trimmed_checked_and_never_shown() {
        assert_eq!(
            ClusterKey::from_secret(b"  short\n").unwrap_err(),
            SecretError::TooShort(5)
        );
        assert!(ClusterKey::from_secret(&[b'x'; MAX_SECRET_BYTES + 1]).is_err());
        // 31 bytes: refused; 32: taken.
        assert_eq!(
            ClusterKey::from_secret(&[b'x'; 31]).unwrap_err(),
            SecretError::TooShort(31)
        );
        assert!(ClusterKey::from_secret(&[b'x'; 32]).is_ok());
        // 32 hex digits are 16 bytes (`openssl rand -hex 16`): refused, and told why.
        let err = ClusterKey::from_secret(b"00112233445566778899aabbccddeeff").unwrap_err();
        assert_eq!(err, SecretError::TooFewHexDigits(32));
        assert!(err.to_string().contains("at least 32 random bytes"), "{err}");
        assert!(ClusterKey::from_secret("ab".repeat(32).as_bytes()).is_ok());
        let secret = "0123456789abcdef-very-secret/and-long-enough";
        let k = ClusterKey::from_secret(format!("{secret}\n").as_bytes()).unwrap();
        let shown = format!("{k:?}");
        assert!(!shown.contains("secret"), "{shown}");
        // Trailing newline or not, the same key.
        let same = ClusterKey::from_secret(secret.as_bytes()).unwrap();
        let (admitted, _) = introduce(&k, &same, b"i");
        assert!(admitted.is_ok());
        let err = ClusterKey::from_secret(b"hunter2").unwrap_err().to_string();
        assert!(!err.contains("hunter2"), "{err}");
        assert!(err.contains("openssl rand -hex 32"), "{err}");
    }
}
