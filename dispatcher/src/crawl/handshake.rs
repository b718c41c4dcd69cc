//! The cluster link's handshake: a supervisor says Hello, gets a
//! challenge, and joins with a proof of the shared secret (see
//! `link::cluster_auth`); only then is a connection admitted.

use std::time::Instant;

use bytes::Bytes;
use link::cluster_auth::{Nonce, Proof, Refusal, SealError};
use link::envelope::{self, FrameToSupervisor, OpenError, Sealed};
use link::protocol::{self, Intro, ToDispatcher, PROTOCOL_VERSION};

use crate::cluster::SupervisorView;
use crate::frontier::SupId;
use crate::refusals::Reason;
use crate::state::Leaving;

use super::{now_ms, short_id, Conn, Dispatcher, MAX_PENDING_CHALLENGES};

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
    /// another protocol version.
    pub(super) async fn on_hello(
        &mut self,
        identity: Bytes,
        version: u32,
        nonce: Nonce,
    ) -> anyhow::Result<()> {
        if version != PROTOCOL_VERSION {
            let who = short_id(&identity);
            self.refusals.refuse(Reason::Version, 1, || {
                format!("peer {who} speaks protocol {version}, we speak {PROTOCOL_VERSION}; told to stop")
            });
            return self.send_bare(&identity, &FrameToSupervisor::OtherVersion).await;
        }
        let (d_nonce, evicted) = self.challenges.challenge(identity.clone(), nonce, Instant::now());
        if evicted {
            self.refusals.refuse(Reason::ChallengeEvicted, 1, || {
                format!("over {MAX_PENDING_CHALLENGES} introductions pending; the oldest dropped")
            });
        }
        self.send_bare(&identity, &FrameToSupervisor::Challenge { nonce: d_nonce })
            .await
    }

    /// A Join: the proof is checked before anything in it is believed (or
    /// even decoded); a peer that fails gets Refused and nothing else. One
    /// that passes joins the crawl on a new connection and gets its
    /// Welcome before anything the crawl has for it (see `apply`).
    pub(super) async fn on_join(
        &mut self,
        identity: Bytes,
        proof: Proof,
        intro: &[u8],
    ) -> anyhow::Result<()> {
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
                return self.send_bare(&identity, &FrameToSupervisor::Refused(why)).await;
            }
        };
        let Intro {
            supervisor_id: id,
            capacity,
            process,
            holding,
        } = intro;
        // A supervisor reintroducing itself on the same socket starts over.
        if let Some(old) = self.connection(&identity) {
            self.state.leave(old, Leaving::SaidHelloAgain);
        }
        tracing::info!(
            supervisor = %id,
            pid = process.pid,
            node = %process.node,
            capacity,
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
            identity: identity.clone(),
            session: admitted.session(&self.key),
            results: crate::metric::SUPERVISOR_RESULTS.at([id.clone()]),
        };
        self.state.join(conn, id, capacity, holding, now_ms());
        let policy = self.policy.clone();
        let proof = admitted.welcome_proof(&self.key, &protocol::encode(&policy));
        self.send_bare(&identity, &FrameToSupervisor::Welcome { policy, proof })
            .await
    }
}
