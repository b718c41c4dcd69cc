//! The cluster link's handshake: a supervisor says Hello, gets a
//! challenge, and joins with a proof of the shared secret (see
//! `link::cluster_auth`); only then is its connection trusted (it may
//! send large messages: `link::socket`) and welcomed, and only with its
//! first sealed message, what it holds, does it join the crawl.

use std::time::Instant;

use bytes::Bytes;
use link::cluster_auth::{Evicted, Nonce, Proof, Refusal, SealError, Session};
use link::envelope::{self, FrameToSupervisor, OpenError, Sealed};
use link::protocol::{self, Intro, ProcessInfo, ToDispatcher, WorkItem, PROTOCOL_VERSION};

use crate::cluster::SupervisorView;
use crate::frontier::SupId;
use crate::refusals::Reason;
use crate::state::Leaving;

use super::{now_ms, short_id, Conn, Dispatcher, CHALLENGE_TTL, MAX_PENDING_CHALLENGES};

/// A connection whose Join proved the secret and that was welcomed, until
/// its first sealed message, `Holding`, says what it holds: with that it
/// joins the crawl ([`Dispatcher::on_holding`]). Only peers that proved the
/// secret get here; one that never says what it holds is dropped after
/// [`CHALLENGE_TTL`].
pub(super) struct Joining {
    session: Session,
    id: String,
    capacity: u32,
    process: ProcessInfo,
    at: Instant,
}

impl Dispatcher {
    /// Opens a sealed message from `identity` (admitted as `s`) with the
    /// keys of its connection: the inner message, or None (refused and
    /// counted, no answer: it may be injected) when the seal does not hold.
    /// The inner message borrows its strings from the frame.
    pub(super) fn open<'p>(
        &mut self,
        s: SupId,
        identity: &Bytes,
        sealed: &Sealed<'p>,
    ) -> Option<ToDispatcher<&'p str>> {
        let m = self.state.member_mut(s)?;
        let e = match envelope::open(&mut m.conn.session, sealed) {
            Ok(msg) => return Some(msg),
            Err(e) => e,
        };
        let (id, who) = (m.id.clone(), short_id(identity));
        match e {
            OpenError::Seal(e) => {
                let reason = match e {
                    SealError::BadTag => Reason::BadSeal,
                    SealError::Replayed => Reason::Replayed,
                };
                self.refusals.refuse(reason, 1, || {
                    format!("a message on supervisor {id}'s connection (peer {who}) whose seal does not hold ({}); dropped", e.as_str())
                });
            }
            OpenError::Undecodable => self.refusals.refuse(Reason::Undecodable, 1, || {
                format!("a sealed message from peer {who} holds no message")
            }),
        }
        None
    }

    /// A Hello opens an introduction: the peer gets a Challenge (a random
    /// nonce, nothing computed from the secret), or Stop when it speaks
    /// another protocol version. The challenge is kept under its source
    /// address's quota (see `link::cluster_auth::Challenges`).
    pub(super) fn on_hello(&mut self, identity: Bytes, version: u32, nonce: Nonce) {
        if version != PROTOCOL_VERSION {
            let who = short_id(&identity);
            self.refusals.refuse(Reason::Version, 1, || {
                format!("peer {who} speaks protocol {version}, we speak {PROTOCOL_VERSION}; told to stop")
            });
            return self.answer(&identity, &FrameToSupervisor::OtherVersion);
        }
        if !self.may_answer(&identity) {
            return;
        }
        let source = self.source_of(&identity);
        let (d_nonce, evicted) = self
            .challenges
            .challenge(identity.clone(), source, nonce, Instant::now());
        if let Some(evicted) = evicted {
            let whose = match evicted {
                Evicted::SameSource => "from the same address (its quota is full)",
                Evicted::Busiest => "from the address with the most pending",
            };
            self.refusals.refuse(Reason::ChallengeEvicted, 1, || {
                format!("introductions pending at their limit ({MAX_PENDING_CHALLENGES} in all); the oldest one {whose} dropped")
            });
        }
        self.send_frame(
            &identity,
            protocol::encode(&FrameToSupervisor::Challenge { nonce: d_nonce }),
            None,
        );
    }

    /// A Join: the proof is checked before anything in it is believed (or
    /// even decoded); a peer that fails gets Refused and nothing else. One
    /// that passes is trusted (its connection may now carry messages of
    /// the protocol's size) and welcomed; it joins the crawl with its
    /// first sealed message, `Holding` ([`Dispatcher::on_holding`]).
    pub(super) fn on_join(&mut self, identity: Bytes, proof: Proof, intro: &[u8]) {
        let checked = self
            .challenges
            .verify(&self.key, &identity, &proof, intro, Instant::now())
            .and_then(|admitted| {
                let intro = protocol::decode::<Intro>(intro).map_err(|_| Refusal::Malformed)?;
                Ok((admitted, intro))
            });
        let (admitted, intro) = match checked {
            Ok(ok) => ok,
            Err(why) => {
                let who = short_id(&identity);
                self.refusals.refuse(why.into(), 1, || {
                    format!("the introduction of peer {who} does not prove the cluster secret; refused")
                });
                return self.answer(&identity, &FrameToSupervisor::Refused(why));
            }
        };
        let Intro {
            supervisor_id: id,
            capacity,
            process,
        } = intro;
        self.trust(&identity);
        self.joining.insert(
            identity.clone(),
            Joining {
                session: admitted.session(&self.key),
                id,
                capacity,
                process,
                at: Instant::now(),
            },
        );
        let policy = self.policy.clone();
        let proof = admitted.welcome_proof(&self.key, &protocol::encode(&policy));
        let welcome = FrameToSupervisor::Welcome { policy, proof };
        self.send_frame(&identity, protocol::encode(&welcome), None);
    }

    /// The first sealed message of a welcomed connection: what the
    /// supervisor holds. With it the connection joins the crawl (the
    /// leases are adopted in the same step, before anything can be leased
    /// again: see `CrawlState::join`). Anything else first, or a seal that
    /// does not hold, ends the connection.
    pub(super) fn on_holding(&mut self, identity: Bytes, mut joining: Joining, sealed: &Sealed<'_>) {
        let who = short_id(&identity);
        let holding = match envelope::open::<ToDispatcher<&str>>(&mut joining.session, sealed) {
            Ok(ToDispatcher::Holding(holding)) => holding,
            Ok(_) => {
                self.refusals.refuse(Reason::OutOfTurn, 1, || {
                    format!("peer {who} sent a crawl message before saying what it holds; disconnected")
                });
                return self.disconnect(&identity);
            }
            Err(OpenError::Seal(e)) => {
                let reason = match e {
                    SealError::BadTag => Reason::BadSeal,
                    SealError::Replayed => Reason::Replayed,
                };
                self.refusals.refuse(reason, 1, || {
                    format!(
                        "the first message of peer {who} does not hold its seal ({}); disconnected",
                        e.as_str()
                    )
                });
                return self.disconnect(&identity);
            }
            Err(OpenError::Undecodable) => {
                self.refusals.refuse(Reason::Undecodable, 1, || {
                    format!("the first sealed message of peer {who} holds no message; disconnected")
                });
                return self.disconnect(&identity);
            }
        };
        self.join(identity, joining, holding);
    }

    /// A welcomed connection joins the crawl, holding `holding`.
    fn join(&mut self, identity: Bytes, joining: Joining, holding: Vec<WorkItem>) {
        let Joining {
            session,
            id,
            capacity,
            process,
            ..
        } = joining;
        // A supervisor reintroducing itself on the same socket starts over.
        if let Some(old) = self.connection(&identity) {
            self.state.leave(old, Leaving::SaidHelloAgain);
        }
        tracing::info!(
            supervisor = %id,
            pid = process.pid,
            node = %process.node,
            capacity,
            held = holding.len(),
            "supervisor joined"
        );
        if let Ok(mut v) = self.view.lock() {
            v.supervisors.insert(
                id.clone(),
                SupervisorView {
                    process: Some(process),
                    live: true,
                    children: Default::default(),
                },
            );
        }
        let conn = Conn {
            identity,
            session,
            results: crate::metric::SUPERVISOR_RESULTS.at([id.clone()]),
        };
        self.state.join(conn, id, capacity, holding, now_ms());
    }

    /// Drops welcomed connections that never said what they hold.
    pub(super) fn expire_joining(&mut self, now: Instant) {
        let late: Vec<Bytes> = self
            .joining
            .iter()
            .filter(|(_, j)| now.saturating_duration_since(j.at) > CHALLENGE_TTL)
            .map(|(identity, _)| identity.clone())
            .collect();
        for identity in late {
            self.joining.remove(&identity);
            crate::metric::ZMQ_PEERS_DROPPED.at(["never_joined"]).increment(1);
            tracing::warn!(
                peer = %short_id(&identity),
                "a peer that proved the cluster secret never said what it holds within {:?}; disconnected",
                CHALLENGE_TTL
            );
            self.disconnect(&identity);
        }
    }

    /// Whether connections are still between their Welcome and their
    /// `Holding` (meanwhile nothing is leased: see `Dispatcher::dispatch`).
    pub(super) fn joins_pending(&self) -> bool {
        !self.joining.is_empty()
    }
}
