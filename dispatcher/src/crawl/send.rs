//! What goes out on the socket: sealed messages to admitted supervisors,
//! bare answers to peers not admitted (within the answer budget,
//! `answers`), and a peer's connection trusted or closed. Nothing here
//! waits for a peer: each peer's messages go through its own queue.

use std::net::IpAddr;
use std::time::Instant;

use bytes::Bytes;
use link::envelope::{self, FrameToSupervisor};
use link::protocol::{self, ToSupervisor};
use zeromq::util::PeerIdentity;
use zeromq::{ZmqError, ZmqMessage};

use super::Dispatcher;
use crate::frontier::SupId;
use crate::metric;
use crate::refusals::Reason;

impl Dispatcher {
    /// Queues `msg` for admitted supervisor `s`, sealed with its
    /// connection's key.
    pub(super) fn send_sealed(&mut self, s: SupId, msg: &ToSupervisor) {
        let Some(m) = self.state.member_mut(s) else {
            return;
        };
        let frame = envelope::seal_to_supervisor(&mut m.conn.session, msg);
        let identity = m.conn.identity.clone();
        self.send_frame(&identity, frame, Some(s));
    }

    /// Answers a peer not admitted (a Challenge, a refusal, Reintroduce,
    /// OtherVersion), bare, within the answer budget (`answers`).
    pub(super) fn answer(&mut self, identity: &Bytes, frame: &FrameToSupervisor<'_>) {
        if self.may_answer(identity) {
            self.send_frame(identity, protocol::encode(frame), None);
        }
    }

    /// Whether a peer not admitted may be answered now; counts it if not.
    pub(super) fn may_answer(&mut self, identity: &Bytes) -> bool {
        if self.answers.allow(identity, Instant::now()) {
            return true;
        }
        let who = short_id(identity);
        self.refusals.refuse(Reason::AnswerRate, 1, || {
            format!("peer {who}, not admitted, is sending faster than it is answered; left unanswered")
        });
        false
    }

    /// Queues `frame` for the peer `identity` (the connection of member
    /// `s`, if it is one) without waiting: each peer's messages go out
    /// through its own queue and writer in the socket
    /// ([`link::socket::SEND_QUEUE_MESSAGES`]). A peer whose queue is full
    /// has stopped reading: its connection is closed, and a member is
    /// given up (its URLs go back to the queue) rather than let it hold
    /// the crawl or our memory; a supervisor that is merely slow
    /// reconnects and introduces itself again.
    pub(super) fn send_frame(&mut self, identity: &Bytes, frame: Vec<u8>, s: Option<SupId>) {
        let Some(send) = self.send.as_ref() else {
            return;
        };
        let mut m = ZmqMessage::from(frame);
        m.push_front(identity.clone());
        match send.try_send(m) {
            Ok(()) => link::metric::ZMQ_MESSAGES_SENT.get().increment(1),
            Err(ZmqError::BufferFull(_)) => {
                metric::ZMQ_PEERS_DROPPED.at(["send_queue_full"]).increment(1);
                let who = short_id(identity);
                if let Some(s) = s.filter(|s| self.state.is_live(*s)) {
                    let id = self.state.member(s).map(|m| m.id.clone()).unwrap_or_default();
                    tracing::warn!(supervisor = %id, peer = %who, "a supervisor stopped reading (its send queue is full); disconnected");
                    self.state.leave(s, crate::state::Leaving::NotReading);
                }
                self.disconnect(identity);
            }
            // Gone already: heartbeats notice a member, and a stranger is
            // forgotten with its challenge.
            Err(_) => {}
        }
    }

    /// Lets a peer that proved the secret send messages of the protocol's
    /// size, with no deadline (see `link::socket`).
    pub(super) fn trust(&self, identity: &Bytes) {
        if let (Some(send), Some(peer)) = (self.send.as_ref(), peer_identity(identity)) {
            send.trust_peer(&peer, link::socket::TRUSTED);
        }
    }

    /// Closes a peer's connection and forgets its introduction.
    pub(super) fn disconnect(&mut self, identity: &Bytes) {
        self.joining.remove(identity);
        if let (Some(send), Some(peer)) = (self.send.as_ref(), peer_identity(identity)) {
            send.disconnect_peer(&peer);
        }
    }

    /// The address a peer connected from (an IPv6 address by its /64, as
    /// the socket counts them), for the challenges' quota per source.
    pub(super) fn source_of(&self, identity: &Bytes) -> Option<IpAddr> {
        let send = self.send.as_ref()?;
        let addr = send.peer_address(&peer_identity(identity)?)?;
        Some(link::socket::source(addr.ip()))
    }
}

/// The socket's name for the peer `identity` (never empty: the ROUTER
/// names every peer).
fn peer_identity(identity: &Bytes) -> Option<PeerIdentity> {
    (!identity.is_empty())
        .then(|| PeerIdentity::try_from(identity.clone()).ok())
        .flatten()
}

/// A short, loggable name for a ZeroMQ identity (its first bytes in hex):
/// enough to tell peers apart in a log, not enough to speak as one.
pub(super) fn short_id(identity: &Bytes) -> String {
    identity.iter().take(4).map(|b| format!("{b:02x}")).collect()
}
