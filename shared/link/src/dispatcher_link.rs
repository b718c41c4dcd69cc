//! The supervisor's ZeroMQ DEALER connection to the dispatcher's ROUTER,
//! kept alive across dispatcher restarts. (A library, so that the
//! dispatcher's load generator, `tests/src/bin/dispatcher_load.rs`, joins
//! exactly as a supervisor does.)
//!
//! The `zeromq` crate's DEALER does not reconnect by itself, and a
//! restarted dispatcher would not know us anyway. So the link watches the
//! dispatcher's heartbeats; when they stop (or a send fails) it drops the
//! socket, reconnects with a new one and introduces itself again with a
//! Hello that lists the URLs still held, which the dispatcher adopts.
//! Meanwhile the children crawl on while the node's right to crawl lasts
//! ([`crate::fence`]), and results wait, unacknowledged, in the outbox.
//!
//! Every introduction is a challenge–response on the cluster secret
//! ([`crate::cluster_auth`]): Hello (our nonce), the dispatcher's
//! Challenge, our Join (the proof, over our introduction), its Welcome
//! (its proof). Until a Welcome proves the dispatcher knows the secret,
//! nothing it sends but the handshake is acted on.

use std::time::{Duration, Instant};

use crate::cluster_auth::{ClusterKey, Introduction, Nonce, Refusal, Session};
use crate::envelope::{self, FrameToDispatcher, FrameToSupervisor, OpenError};
use crate::protocol::{self, CrawlPolicy, Intro, ToDispatcher, ToSupervisor, PROTOCOL_VERSION};
use anyhow::{bail, Context};
use zeromq::{DealerSocket, Socket, SocketRecv, SocketSend, ZmqMessage};

/// One connection attempt may take this long (a dead remote host would
/// otherwise hold us for the kernel's TCP timeout).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// A Hello not answered within this long may be sent again.
const HELLO_PATIENCE: Duration = Duration::from_secs(2);
/// Longest a message to the dispatcher may take to leave. Short: results
/// are kept until acknowledged (the supervisor sends only a bounded window
/// of them unacknowledged), so a link given up for a slow send loses
/// nothing, while a long send would hold up the supervisor's loop.
const SEND_TIMEOUT: Duration = Duration::from_secs(3);

#[derive(Debug)]
enum State {
    /// No socket: the next [`DispatcherLink::maintain`] reconnects.
    Down,
    /// Connected and said Hello at this instant; no (proven) Welcome yet.
    Introduced(Instant, Introduction),
    /// Welcomed: results and heartbeats flow, sealed with this
    /// connection's keys.
    Up(Session),
}

pub struct DispatcherLink {
    endpoint: String,
    socket: Option<DealerSocket>,
    state: State,
    last_heard: Instant,
    /// When the link last went down (None while up).
    down_since: Option<Instant>,
    /// The dispatcher counts as gone after this long without a message.
    silence_limit: Duration,
    /// How long to keep reconnecting before giving up.
    patience: Duration,
    /// The cluster secret we prove, and expect the dispatcher to prove.
    key: ClusterKey,
    /// When a message whose seal did not hold was last logged (at most one
    /// line per [`SEAL_LOG_EVERY`]; every one is counted).
    seal_logged: Option<Instant>,
    /// A connection attempt under way, in its own task: a dispatcher whose
    /// host does not answer takes [`CONNECT_TIMEOUT`] to give up on, and
    /// the caller's loop must not wait for it.
    connecting: Option<tokio::task::JoinHandle<anyhow::Result<DealerSocket>>>,
    /// When our last Join was sent: a Welcome answering it proves the
    /// dispatcher heard us no earlier (see [`crate::fence`]).
    answered_at: Option<Instant>,
    /// The counter of the last sealed message sent on this connection: the
    /// dispatcher's `Ack` names it.
    last_seq: u64,
}

/// What the dispatcher said, as far as the link lets it through: a crawl
/// message only once opened under the connection's keys, the handshake's
/// steps only while an introduction is open (but Reintroduce, which may
/// come at any time).
#[derive(Debug, Clone, PartialEq)]
pub enum Heard {
    /// A crawl message, sealed by the dispatcher that welcomed us.
    Message(ToSupervisor),
    /// The dispatcher's nonce: answer with a Join ([`DispatcherLink::answer`]).
    Challenge(Nonce),
    /// The dispatcher proved it knows the secret; the crawl's policy.
    Welcome(CrawlPolicy),
    /// Our Join was refused.
    Refused(Refusal),
    /// The dispatcher does not know us (any more): introduce again.
    Reintroduce,
    /// The dispatcher speaks another protocol version: stop.
    OtherVersion,
}

impl From<ToSupervisor> for Heard {
    fn from(msg: ToSupervisor) -> Heard {
        Heard::Message(msg)
    }
}

/// At most one log line per this long about messages refused for their seal.
const SEAL_LOG_EVERY: Duration = Duration::from_secs(10);

impl DispatcherLink {
    /// Connects (retrying while the dispatcher is not up yet, for up to
    /// `patience`) and opens an introduction with a Hello.
    pub async fn connect(
        endpoint: &str,
        key: ClusterKey,
        patience: Duration,
        silence_limit: Duration,
    ) -> anyhow::Result<DispatcherLink> {
        let deadline = Instant::now() + patience;
        let mut pause = Duration::from_millis(100);
        let socket = loop {
            match open(endpoint).await {
                Ok(socket) => break socket,
                Err(e) if Instant::now() < deadline => {
                    tracing::warn!(retry_in = ?pause, "{e:#}; retrying");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_secs(5));
                }
                Err(e) => return Err(e),
            }
        };
        let mut link = DispatcherLink {
            endpoint: endpoint.to_string(),
            socket: Some(socket),
            state: State::Down,
            last_heard: Instant::now(),
            down_since: None,
            silence_limit,
            patience,
            key,
            seal_logged: None,
            connecting: None,
            answered_at: None,
            last_seq: 0,
        };
        if !link.say_hello().await {
            bail!("could not send Hello to the dispatcher at {endpoint}");
        }
        Ok(link)
    }

    /// Runs the introduction to its end: answers the Challenge with
    /// `intro` and waits for a Welcome that proves the dispatcher knows the
    /// secret; returns the crawl policy the Welcome carries. The caller's
    /// first message must then be [`ToDispatcher::Holding`]: the
    /// connection joins the crawl with it. A dispatcher that dies meanwhile must not leave us
    /// waiting forever: after the silence limit (or the patience, if
    /// longer) this fails, and the service manager restarts us.
    ///
    /// A busy or flooded dispatcher may leave a Hello unanswered (it
    /// answers peers not yet admitted at a bounded rate) or drop our
    /// challenge before our Join comes (`NoChallenge`): then we introduce
    /// ourselves again on a new connection, after [`HELLO_PATIENCE`]. A
    /// wrong proof is final: at start-up it means a different secret.
    pub async fn welcome(&mut self, intro: &Intro) -> anyhow::Result<CrawlPolicy> {
        let limit = self.silence_limit.max(self.patience);
        let wait = async {
            loop {
                let attempt = async {
                    loop {
                        match self.recv().await {
                            Some(Heard::Welcome(policy)) => return Ok(Some(policy)),
                            Some(Heard::Challenge(nonce)) => self.answer(nonce, intro).await,
                            Some(Heard::Refused(Refusal::NoChallenge)) => return Ok(None),
                            Some(Heard::Refused(why)) => bail!(
                                "the dispatcher refused our introduction ({}): is the cluster secret the same on both sides?",
                                why.as_str()
                            ),
                            Some(Heard::OtherVersion) => bail!(
                                "the dispatcher speaks another protocol version (ours is {PROTOCOL_VERSION}): run the same release on every node"
                            ),
                            Some(_) => {}
                            None => return Ok(None),
                        }
                    }
                };
                let answered = tokio::time::timeout(2 * HELLO_PATIENCE, attempt).await;
                if let Ok(Ok(Some(policy))) = answered {
                    return Ok(policy);
                }
                if let Ok(Err(e)) = answered {
                    return Err(e);
                }
                tracing::info!(
                    dispatcher = %self.endpoint,
                    "no welcome yet (the dispatcher is busy or did not keep our challenge); introducing ourselves again"
                );
                tokio::time::sleep(HELLO_PATIENCE).await;
                self.go_down();
                match open(&self.endpoint).await {
                    Ok(socket) => {
                        self.socket = Some(socket);
                        self.say_hello().await;
                    }
                    Err(e) => tracing::warn!("{e:#}; retrying"),
                }
            }
        };
        tokio::time::timeout(limit, wait)
            .await
            .map_err(|_| anyhow::anyhow!("no Welcome from the dispatcher within {limit:?}"))?
    }

    /// Opens a new introduction: a Hello with a fresh nonce.
    async fn say_hello(&mut self) -> bool {
        let introduction = Introduction::new(PROTOCOL_VERSION);
        let hello = FrameToDispatcher::Hello {
            version: PROTOCOL_VERSION,
            nonce: introduction.nonce(),
        };
        self.state = State::Introduced(Instant::now(), introduction);
        self.send_frame(protocol::encode(&hello)).await
    }

    /// Answers the dispatcher's Challenge with a Join: `intro` (who we are
    /// and what we hold, as of now) and the proof over it. Ignored unless
    /// an introduction is open.
    pub async fn answer(&mut self, d_nonce: Nonce, intro: &Intro) {
        let State::Introduced(_, introduction) = &mut self.state else {
            return;
        };
        let bytes = protocol::encode(intro);
        let proof = introduction.answer(&self.key, d_nonce, &bytes);
        self.answered_at = Some(Instant::now());
        let join = FrameToDispatcher::Join { proof, intro: &bytes };
        self.send_frame(protocol::encode(&join)).await;
    }

    /// When the Join that the current connection was welcomed on was sent.
    pub fn answered_at(&self) -> Option<Instant> {
        self.answered_at
    }

    /// The counter of the last sealed message sent on this connection
    /// (what an `Ack` of it will name).
    pub fn last_seq(&self) -> u64 {
        self.last_seq
    }

    /// The dispatcher refused our Join (after start-up): the link goes
    /// down and is tried again, until the patience runs out.
    pub fn refused(&mut self, why: Refusal) {
        tracing::warn!(
            reason = why.as_str(),
            "the dispatcher refused our introduction: is the cluster secret the same on both sides? retrying"
        );
        self.go_down();
    }

    /// How long [`DispatcherLink::maintain`] keeps reconnecting before it gives up.
    pub fn set_patience(&mut self, patience: Duration) {
        self.patience = patience;
    }

    pub fn is_up(&self) -> bool {
        matches!(self.state, State::Up(_))
    }

    /// Called about once a second: declares a silent dispatcher gone and
    /// reconnects a link that is down, introducing itself with `hello()`.
    /// Fails once the dispatcher has been unreachable for `patience`.
    pub async fn maintain(&mut self) -> anyhow::Result<()> {
        let down = matches!(self.state, State::Down);
        if !down && self.last_heard.elapsed() > self.silence_limit {
            tracing::warn!(
                silent_for = ?self.silence_limit,
                "dispatcher silent; reconnecting (children crawl on while the right to crawl lasts)"
            );
            self.go_down();
        }
        if !matches!(self.state, State::Down) {
            return Ok(());
        }
        let down_for = self.down_since.map_or(Duration::ZERO, |t| t.elapsed());
        if down_for > self.patience {
            bail!(
                "dispatcher at {} unreachable for {down_for:?}; giving up",
                self.endpoint
            );
        }
        let attempt = match self.connecting.take() {
            Some(attempt) if attempt.is_finished() => attempt,
            Some(attempt) => {
                self.connecting = Some(attempt);
                return Ok(());
            }
            None => {
                let endpoint = self.endpoint.clone();
                self.connecting = Some(tokio::spawn(async move { open(&endpoint).await }));
                return Ok(());
            }
        };
        match attempt.await {
            Ok(Ok(socket)) => {
                self.socket = Some(socket);
                self.last_heard = Instant::now();
                crate::metric::DISPATCHER_RECONNECTS.get().increment(1);
                self.say_hello().await;
            }
            Ok(Err(e)) if down_for.as_secs().is_multiple_of(10) => tracing::warn!("{e:#}; still trying"),
            Ok(Err(_)) => {}
            Err(e) => tracing::warn!(error = %e, "a connection attempt's task failed"),
        }
        Ok(())
    }

    /// The dispatcher asked us to introduce ourselves again (it restarted,
    /// or had given us up for dead). Ignored while a Hello is fresh.
    pub async fn reintroduce(&mut self) {
        if let State::Introduced(at, _) = &self.state {
            if at.elapsed() < HELLO_PATIENCE {
                return;
            }
        }
        if self.socket.is_some() {
            tracing::info!("the dispatcher does not know us; saying hello again");
            self.say_hello().await;
        }
    }

    /// Waits (a bounded time) for the dispatcher to confirm our Bye;
    /// whether it did.
    pub async fn await_farewell(&mut self, patience: Duration) -> bool {
        let wait = async {
            while let Some(msg) = self.recv().await {
                if msg == Heard::Message(ToSupervisor::Farewell) {
                    return true;
                }
            }
            false
        };
        let confirmed = tokio::time::timeout(patience, wait).await.unwrap_or(false);
        if !confirmed {
            tracing::warn!("dispatcher did not confirm our stop; exiting anyway");
        }
        confirmed
    }

    /// Sends `msg` sealed; false when it could not be sent: the link is
    /// not up (no Welcome yet on this connection), or the send failed (the
    /// link then goes down).
    pub async fn send(&mut self, msg: &ToDispatcher) -> bool {
        let State::Up(session) = &mut self.state else {
            return false;
        };
        let (counter, frame) = envelope::seal_to_dispatcher(session, msg);
        self.last_seq = counter;
        self.send_frame(frame).await
    }

    /// Sends one frame; false (and the link goes down) when it could not be sent.
    async fn send_frame(&mut self, bytes: Vec<u8>) -> bool {
        let Some(socket) = self.socket.as_mut() else {
            return false;
        };
        // A dispatcher that stops reading (frozen, or its host gone) must
        // not hold this supervisor: past the deadline the link goes down
        // and is re-established like any other broken link.
        match tokio::time::timeout(SEND_TIMEOUT, socket.send(ZmqMessage::from(bytes))).await {
            Ok(Ok(())) => {
                crate::metric::ZMQ_MESSAGES_SENT.get().increment(1);
                true
            }
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "sending to the dispatcher failed; reconnecting");
                self.go_down();
                false
            }
            Err(_) => {
                tracing::warn!(timeout = ?SEND_TIMEOUT, "sending to the dispatcher timed out; reconnecting");
                self.go_down();
                false
            }
        }
    }

    /// Receives the next message; `None` when the link broke (it is then
    /// down, and this pends until [`DispatcherLink::maintain`] reconnects).
    /// Cancel-safe: zeromq queues whole messages.
    pub async fn recv(&mut self) -> Option<Heard> {
        loop {
            let Some(socket) = self.socket.as_mut() else {
                return std::future::pending().await;
            };
            let msg = match socket.recv().await {
                Ok(m) => m,
                Err(e) => {
                    tracing::warn!(error = %e, "receiving from the dispatcher failed; reconnecting");
                    self.go_down();
                    return None;
                }
            };
            crate::metric::ZMQ_MESSAGES_RECEIVED.get().increment(1);
            let Some(frame) = msg.iter().last() else { continue };
            let frame = match protocol::decode::<FrameToSupervisor>(frame) {
                Ok(f) => f,
                Err(e) => {
                    tracing::warn!(error = %e, "ignoring an undecodable message");
                    continue;
                }
            };
            let heard = match (frame, &mut self.state) {
                (FrameToSupervisor::Sealed(sealed), State::Up(session)) => {
                    match envelope::open::<ToSupervisor>(session, &sealed) {
                        Ok(m) => Heard::Message(m),
                        Err(OpenError::Seal(e)) => {
                            self.refused_seal(e.as_str());
                            continue;
                        }
                        Err(OpenError::Undecodable) => continue,
                    }
                }
                // "Introduce yourself again" travels bare (the dispatcher
                // may have lost our connection's keys); forged, it costs a
                // new handshake, no more.
                (FrameToSupervisor::Reintroduce, _) => Heard::Reintroduce,
                // Anything else bare on a welcomed connection is not from
                // the dispatcher that welcomed us.
                (_, State::Up(_)) => {
                    self.refused_seal("unsealed");
                    continue;
                }
                (FrameToSupervisor::Welcome { policy, proof }, State::Introduced(_, introduction)) => {
                    let policy_bytes = protocol::encode(&policy);
                    let checked = introduction
                        .check_welcome(&self.key, &proof, &policy_bytes)
                        .ok()
                        .and_then(|()| introduction.session(&self.key));
                    let Some(session) = checked else {
                        tracing::error!(
                            dispatcher = %self.endpoint,
                            "the Welcome does not prove the cluster secret; not trusting it"
                        );
                        self.go_down();
                        return None;
                    };
                    if self.down_since.take().is_some() {
                        tracing::info!(dispatcher = %self.endpoint, "rejoined the dispatcher");
                    }
                    self.state = State::Up(session);
                    self.last_seq = 0;
                    Heard::Welcome(policy)
                }
                // Until the dispatcher has proven itself, only its side of
                // the handshake is listened to.
                (FrameToSupervisor::Challenge { nonce }, State::Introduced(..)) => Heard::Challenge(nonce),
                (FrameToSupervisor::Refused(why), State::Introduced(..)) => Heard::Refused(why),
                (FrameToSupervisor::OtherVersion, State::Introduced(..)) => Heard::OtherVersion,
                _ => continue,
            };
            self.last_heard = Instant::now();
            return Some(heard);
        }
    }

    /// A message from the dispatcher's side whose seal did not hold:
    /// dropped, counted, and logged at most once per [`SEAL_LOG_EVERY`].
    fn refused_seal(&mut self, reason: &'static str) {
        crate::metric::CLUSTER_REFUSALS.at([reason]).increment(1);
        if self.seal_logged.is_none_or(|at| at.elapsed() >= SEAL_LOG_EVERY) {
            self.seal_logged = Some(Instant::now());
            tracing::warn!(
                dispatcher = %self.endpoint,
                reason = %reason,
                "dropped a message whose seal does not hold"
            );
        }
    }

    fn go_down(&mut self) {
        self.socket = None;
        self.state = State::Down;
        self.down_since.get_or_insert_with(Instant::now);
    }
}

/// A new DEALER socket connected to `endpoint`, bounding what the other
/// end may send ([`crate::socket::supervisor_options`]).
async fn open(endpoint: &str) -> anyhow::Result<DealerSocket> {
    let mut socket = DealerSocket::with_options(crate::socket::supervisor_options());
    match tokio::time::timeout(CONNECT_TIMEOUT, socket.connect(endpoint)).await {
        Ok(Ok(())) => Ok(socket),
        Ok(Err(e)) => Err(e).with_context(|| format!("dispatcher at {endpoint} not reachable")),
        Err(_) => bail!("dispatcher at {endpoint} not reachable (connect timed out)"),
    }
}
