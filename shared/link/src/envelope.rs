//! What one ZeroMQ frame between a supervisor and the dispatcher holds:
//! a step of the handshake, bare, or a crawl message sealed with its
//! connection's keys.
//!
//! The crawl's messages ([`ToDispatcher`], [`ToSupervisor`]) travel only
//! inside a [`Sealed`] envelope, and [`open`] is the one way to get one
//! out: the tag and counter are checked before a byte of the payload is
//! decoded. So no code of the dispatcher or the supervisor sees a crawl
//! message that its connection's peer did not seal, and neither matches on
//! an envelope inside an envelope.

use serde::{Deserialize, Serialize};

use crate::cluster_auth::{Nonce, Proof, Refusal, SealError, Session};
use crate::protocol::{self, CrawlPolicy, ToDispatcher, ToSupervisor};

/// A crawl message sealed under one connection's keys (see [`Session`]).
/// The payload is borrowed from the frame it came in, and read as one
/// byte string (`serde_bytes`): the same bytes on the wire as a sequence
/// of `u8`s, read about 80 times faster.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Sealed<'a> {
    pub counter: u64,
    pub tag: Proof,
    #[serde(borrow, with = "serde_bytes")]
    pub payload: &'a [u8],
}

/// A frame from a supervisor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum FrameToDispatcher<'a> {
    /// First frame, and again after a reconnect: opens an introduction.
    /// `version` stays the first field of the first variant, so a peer of
    /// any protocol version is still recognised and told to stop.
    Hello { version: u32, nonce: Nonce },
    /// Answer to [`FrameToSupervisor::Challenge`]: `intro` is an encoded
    /// [`crate::protocol::Intro`], `proof` the HMAC over it and both nonces.
    Join {
        proof: Proof,
        #[serde(borrow, with = "serde_bytes")]
        intro: &'a [u8],
    },
    /// Every message of an admitted connection after the Welcome.
    #[serde(borrow)]
    Sealed(Sealed<'a>),
}

/// A frame from the dispatcher.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum FrameToSupervisor<'a> {
    /// The peer proved it knows the cluster secret; `proof` proves the
    /// dispatcher does too, over this policy (see [`crate::cluster_auth`]).
    Welcome { policy: CrawlPolicy, proof: Proof },
    /// Answer to a Hello: the dispatcher's nonce, to prove knowledge of the
    /// secret over.
    Challenge { nonce: Nonce },
    /// The Join was refused: nothing else is said to this peer.
    Refused(Refusal),
    /// The peer speaks another protocol version: stop. Variant 3, as the
    /// Stop of every earlier version was, so a supervisor of any version
    /// reads it as one.
    OtherVersion,
    /// "I do not know you (any more)": sent to a peer that was declared
    /// dead or that the dispatcher never met (it restarted), and the
    /// answer to any frame (but a Hello or a Join) from a peer that has not
    /// proved it knows the secret. The supervisor answers with a fresh
    /// Hello. Bare, because the dispatcher may have lost the keys.
    Reintroduce,
    /// Every message to an admitted connection after the Welcome.
    #[serde(borrow)]
    Sealed(Sealed<'a>),
}

/// Why a sealed message was not opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenError {
    /// The seal does not hold (see [`SealError`]).
    Seal(SealError),
    /// The seal holds but the payload is no message.
    Undecodable,
}

/// `msg` sealed under `session` as a frame to the dispatcher, and the
/// counter it was sealed with (what the dispatcher's Ack will name).
pub fn seal_to_dispatcher(session: &mut Session, msg: &ToDispatcher) -> (u64, Vec<u8>) {
    let payload = protocol::encode(msg);
    let (counter, tag) = session.seal(&payload);
    let frame = FrameToDispatcher::Sealed(Sealed {
        counter,
        tag,
        payload: &payload,
    });
    (counter, protocol::encode(&frame))
}

/// `msg` sealed under `session` as a frame to a supervisor.
pub fn seal_to_supervisor(session: &mut Session, msg: &ToSupervisor) -> Vec<u8> {
    let payload = protocol::encode(msg);
    let (counter, tag) = session.seal(&payload);
    protocol::encode(&FrameToSupervisor::Sealed(Sealed {
        counter,
        tag,
        payload: &payload,
    }))
}

/// Opens `sealed`: its seal is checked (and its counter used up) first,
/// and only then is the payload decoded. `M` may borrow from the frame.
pub fn open<'a, M: Deserialize<'a>>(session: &mut Session, sealed: &Sealed<'a>) -> Result<M, OpenError> {
    session
        .open(sealed.counter, &sealed.tag, sealed.payload)
        .map_err(OpenError::Seal)?;
    protocol::decode(sealed.payload).map_err(|_| OpenError::Undecodable)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster_auth::{ClusterKey, Introduction};
    use crate::protocol::{decode, encode, PROTOCOL_VERSION};

    #[test]
    fn a_hello_of_an_older_version_is_still_read_as_one() {
        // Protocol 5's Hello: variant 0, version 5, then its supervisor id
        // and more; the version is where later protocols read it, so the
        // dispatcher can tell an old supervisor to stop.
        let mut old = Vec::new();
        old.extend_from_slice(&0u32.to_le_bytes());
        old.extend_from_slice(&5u32.to_le_bytes());
        old.extend_from_slice(&4u64.to_le_bytes());
        old.extend_from_slice(b"sup0");
        old.extend_from_slice(&[0; 64]);
        assert!(matches!(
            decode::<FrameToDispatcher>(&old),
            Ok(FrameToDispatcher::Hello { version: 5, .. })
        ));
    }

    #[test]
    fn other_version_is_the_stop_every_version_reads() {
        // Up to protocol 10, `ToSupervisor::Stop` was variant 3 with no fields.
        assert_eq!(encode(&FrameToSupervisor::OtherVersion), 3u32.to_le_bytes());
    }

    #[test]
    fn a_sealed_payload_is_its_length_then_its_bytes() {
        // Variant, counter, tag, then the payload as a u64 length and the
        // raw bytes, read as one byte string (a 66 KB message took 142 µs
        // to open byte by byte, twice the cost of the 60 results inside).
        let sealed = FrameToDispatcher::Sealed(Sealed {
            counter: 9,
            tag: [3; 32],
            payload: b"abc",
        });
        let mut wire = Vec::new();
        wire.extend_from_slice(&2u32.to_le_bytes());
        wire.extend_from_slice(&9u64.to_le_bytes());
        wire.extend_from_slice(&[3; 32]);
        wire.extend_from_slice(&3u64.to_le_bytes());
        wire.extend_from_slice(b"abc");
        assert_eq!(encode(&sealed), wire);
        assert_eq!(decode::<FrameToDispatcher>(&wire).ok(), Some(sealed));
        // A payload claiming more bytes than any message may hold is an
        // error before anything is allocated.
        wire.truncate(4 + 8 + 32);
        wire.extend_from_slice(&(1u64 << 60).to_le_bytes());
        assert!(decode::<FrameToDispatcher>(&wire).is_err());
    }

    /// A supervisor's and a dispatcher's session of one admitted connection.
    fn sessions() -> (Session, Session) {
        let key = ClusterKey::from_secret(&[7; 32]).expect("a 32-byte secret");
        let mut challenges =
            crate::cluster_auth::Challenges::new(PROTOCOL_VERSION, std::time::Duration::from_secs(10), 4, 4);
        let mut intro = Introduction::new(PROTOCOL_VERSION);
        let now = std::time::Instant::now();
        let (d_nonce, _) = challenges.challenge(1u8, (), intro.nonce(), now);
        let proof = intro.answer(&key, d_nonce, b"intro");
        let admitted = challenges
            .verify(&key, &1u8, &proof, b"intro", now)
            .expect("the proof holds");
        let supervisor = intro.session(&key).expect("a session");
        (supervisor, admitted.session(&key))
    }

    #[test]
    fn a_sealed_message_opens_once_and_only_unaltered() {
        let (mut sup, mut disp) = sessions();
        let (counter, frame) = seal_to_dispatcher(&mut sup, &ToDispatcher::Bye);
        assert_eq!(counter, 0);
        let Ok(FrameToDispatcher::Sealed(sealed)) = decode::<FrameToDispatcher>(&frame) else {
            panic!("not a sealed frame");
        };
        let mut altered = sealed;
        let mut bytes = sealed.payload.to_vec();
        bytes[0] ^= 1;
        altered.payload = &bytes;
        assert_eq!(
            open::<ToDispatcher>(&mut disp, &altered),
            Err(OpenError::Seal(SealError::BadTag))
        );
        assert_eq!(open::<ToDispatcher>(&mut disp, &sealed), Ok(ToDispatcher::Bye));
        assert_eq!(
            open::<ToDispatcher>(&mut disp, &sealed),
            Err(OpenError::Seal(SealError::Replayed))
        );
        // A payload that is sealed but holds no message.
        let payload = [0xff; 3];
        let (counter, tag) = sup.seal(&payload);
        let garbage = Sealed {
            counter,
            tag,
            payload: &payload,
        };
        assert_eq!(
            open::<ToDispatcher>(&mut disp, &garbage),
            Err(OpenError::Undecodable)
        );
        // The other direction's seal does not open here.
        let frame = seal_to_supervisor(&mut disp, &ToSupervisor::Farewell);
        let Ok(FrameToSupervisor::Sealed(back)) = decode::<FrameToSupervisor>(&frame) else {
            panic!("not a sealed frame");
        };
        assert_eq!(open::<ToSupervisor>(&mut sup, &back), Ok(ToSupervisor::Farewell));
        assert!(open::<ToDispatcher>(&mut disp, &back).is_err());
    }
}
