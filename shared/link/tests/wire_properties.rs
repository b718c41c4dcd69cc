//! Property tests of the wire: the decoder and the frame reader take
//! whatever a peer sends and return a message or an error, never panic,
//! and never allocate more than the message cap.
//!
//! They stand in for `cargo fuzz`, which needs a nightly toolchain.

use link::envelope::{FrameToDispatcher, FrameToSupervisor};
use link::protocol::{self, CrawlResult, Outcome, ToChild, ToDispatcher, ToSupervisor, WorkItem};
use proptest::prelude::*;

/// Cases per property: `PROPTEST_CASES`, or 512.
fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(512)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    /// The wire decoder refuses garbage with an error (no panic, no
    /// allocation the bytes do not pay for: the limit is the message cap).
    #[test]
    fn the_wire_decoder_takes_any_bytes(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let _ = protocol::decode::<ToDispatcher>(&bytes);
        let _ = protocol::decode::<ToSupervisor>(&bytes);
        let _ = protocol::decode::<ToChild>(&bytes);
        let _ = protocol::decode::<protocol::FromChild>(&bytes);
        // What a peer sends, and is sent, before it is admitted.
        let _ = protocol::decode::<FrameToDispatcher>(&bytes);
        let _ = protocol::decode::<FrameToSupervisor>(&bytes);
        let _ = protocol::decode::<protocol::Intro>(&bytes);
    }

    /// The frames of the handshake, each cut anywhere or with a byte
    /// changed: an error or a frame, never a panic.
    #[test]
    fn handshake_frames_survive_cuts_and_flips(nonce: [u8; 32], intro in prop::collection::vec(any::<u8>(), 0..256),
                                               cut: usize, flip: usize, bit in 0u8..8) {
        let frames = [
            protocol::encode(&FrameToDispatcher::Hello { version: protocol::PROTOCOL_VERSION, nonce }),
            protocol::encode(&FrameToDispatcher::Join { proof: nonce, intro: &intro }),
            protocol::encode(&FrameToSupervisor::Challenge { nonce }),
        ];
        for bytes in frames {
            let _ = protocol::decode::<FrameToDispatcher>(&bytes[..cut % (bytes.len() + 1)]);
            let mut flipped = bytes.clone();
            let i = flip % flipped.len();
            flipped[i] ^= 1 << bit;
            let _ = protocol::decode::<FrameToDispatcher>(&flipped);
            let _ = protocol::decode::<FrameToSupervisor>(&flipped);
        }
    }

    /// What is encoded decodes to the same message, and any cut of it is
    /// an error or a message, never a panic.
    #[test]
    fn messages_round_trip(url in "\\PC{0,64}", domain in "[a-z.]{0,16}", depth: u16, lease: u64, cut: usize,
                           links in prop::collection::vec("\\PC{0,32}", 0..8)) {
        let item = WorkItem { lease, lease_expires_ms: lease / 2, leased_ms: 1, url: url.clone(), domain: domain.clone(), depth, min_delay_ms: None, server: None, revisit: None };
        let result = CrawlResult {
            server: None,
            lease,
            url,
            domain,
            depth,
            outcome: Outcome::failed(protocol::FailureKind::Timeout, "x".repeat(depth as usize % 2000)),
            outlinks: links,
            sent_ms: 7,
        };
        let work = ToChild::Work(vec![item]);
        let bytes = protocol::encode(&work);
        prop_assert_eq!(protocol::decode::<ToChild>(&bytes).ok(), Some(work));
        let from = protocol::FromChild::Result(result);
        let bytes = protocol::encode(&from);
        prop_assert_eq!(protocol::decode::<protocol::FromChild>(&bytes).ok(), Some(from));
        let _ = protocol::decode::<protocol::FromChild>(&bytes[..cut % (bytes.len() + 1)]);
    }

    /// The frame reader takes any byte stream: a frame, an error, or the
    /// end, and never reads past a length over the cap.
    #[test]
    fn the_frame_reader_takes_any_stream(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        let runtime = tokio::runtime::Builder::new_current_thread().build().expect("a runtime");
        runtime.block_on(async {
            let mut r = &bytes[..];
            // At most one frame per four bytes read; stop at the first error.
            for _ in 0..=bytes.len() / 4 {
                match link::framing::read_frame::<_, protocol::FromChild>(&mut r).await {
                    Ok(Some(_)) => continue,
                    Ok(None) | Err(_) => break,
                }
            }
        });
    }
}
