//! The supervisor's ZeroMQ DEALER connection to the dispatcher's ROUTER,
//! kept alive across dispatcher restarts.
//!
//! The `zeromq` crate's DEALER does not reconnect by itself, and a
//! restarted dispatcher would not know us anyway. So the link watches the
//! dispatcher's heartbeats; when they stop (or a send fails) it drops the
//! socket, reconnects with a new one and introduces itself again with a
//! Hello that lists the URLs still held, which the dispatcher adopts.
//! Meanwhile the children keep crawling and results wait in the outbox.

use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use shared::protocol::{self, CrawlPolicy, ToDispatcher, ToSupervisor};
use zeromq::{DealerSocket, Socket, SocketRecv, SocketSend, ZmqMessage};

/// One connection attempt may take this long (a dead remote host would
/// otherwise hold us for the kernel's TCP timeout).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// A Hello not answered within this long may be sent again.
const HELLO_PATIENCE: Duration = Duration::from_secs(2);
/// Longest a message to the dispatcher may take to leave.
const SEND_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// No socket: the next [`DispatcherLink::maintain`] reconnects.
    Down,
    /// Connected and said Hello at this instant; no Welcome yet.
    Introduced(Instant),
    /// Welcomed: results and heartbeats flow.
    Up,
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
}

impl DispatcherLink {
    /// Connects (retrying while the dispatcher is not up yet, for up to
    /// `patience`) and introduces itself with `hello`.
    pub async fn connect(
        endpoint: &str,
        hello: ToDispatcher,
        patience: Duration,
        silence_limit: Duration,
    ) -> anyhow::Result<DispatcherLink> {
        let deadline = Instant::now() + patience;
        let mut pause = Duration::from_millis(100);
        let socket = loop {
            match open(endpoint).await {
                Ok(socket) => break socket,
                Err(e) if Instant::now() < deadline => {
                    eprintln!("supervisor: {e:#}; retrying in {pause:?}");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_secs(5));
                }
                Err(e) => return Err(e),
            }
        };
        let mut link = DispatcherLink {
            endpoint: endpoint.to_string(),
            socket: Some(socket),
            state: State::Introduced(Instant::now()),
            last_heard: Instant::now(),
            down_since: None,
            silence_limit,
            patience,
        };
        if !link.send(&hello).await {
            bail!("could not send Hello to the dispatcher at {endpoint}");
        }
        Ok(link)
    }

    /// Waits for the dispatcher's Welcome, which carries the crawl policy.
    /// A dispatcher that dies between our Hello and its Welcome must not
    /// leave us waiting forever: after the silence limit this fails (and
    /// the service manager restarts us).
    pub async fn welcome(&mut self) -> anyhow::Result<CrawlPolicy> {
        let limit = self.silence_limit;
        let wait = async {
            loop {
                match self.recv().await {
                    Some(ToSupervisor::Welcome { policy }) => return Ok(policy),
                    Some(ToSupervisor::Stop) => bail!("dispatcher said stop before welcome"),
                    Some(_) => {}
                    None => bail!("lost the dispatcher before its welcome"),
                }
            }
        };
        tokio::time::timeout(limit, wait)
            .await
            .map_err(|_| anyhow::anyhow!("no Welcome from the dispatcher within {limit:?}"))?
    }

    /// How long [`DispatcherLink::maintain`] keeps reconnecting before it gives up.
    pub fn set_patience(&mut self, patience: Duration) {
        self.patience = patience;
    }

    pub fn is_up(&self) -> bool {
        self.state == State::Up
    }

    /// Called about once a second: declares a silent dispatcher gone and
    /// reconnects a link that is down, introducing itself with `hello()`.
    /// Fails once the dispatcher has been unreachable for `patience`.
    pub async fn maintain(&mut self, hello: impl FnOnce() -> ToDispatcher) -> anyhow::Result<()> {
        if self.state != State::Down && self.last_heard.elapsed() > self.silence_limit {
            eprintln!(
                "supervisor: dispatcher silent for {:?}; reconnecting (children keep crawling)",
                self.silence_limit
            );
            self.go_down();
        }
        if self.state != State::Down {
            return Ok(());
        }
        let down_for = self.down_since.map_or(Duration::ZERO, |t| t.elapsed());
        if down_for > self.patience {
            bail!(
                "dispatcher at {} unreachable for {down_for:?}; giving up",
                self.endpoint
            );
        }
        match open(&self.endpoint).await {
            Ok(socket) => {
                self.socket = Some(socket);
                self.last_heard = Instant::now();
                self.state = State::Introduced(Instant::now());
                metrics::counter!("crawler_dispatcher_reconnects_total").increment(1);
                self.send(&hello()).await;
            }
            Err(e) if down_for.as_secs().is_multiple_of(10) => eprintln!("supervisor: {e:#}; still trying"),
            Err(_) => {}
        }
        Ok(())
    }

    /// The dispatcher asked us to introduce ourselves again (it restarted,
    /// or had given us up for dead). Ignored while a Hello is fresh.
    pub async fn reintroduce(&mut self, hello: impl FnOnce() -> ToDispatcher) {
        if let State::Introduced(at) = self.state {
            if at.elapsed() < HELLO_PATIENCE {
                return;
            }
        }
        if self.socket.is_some() {
            eprintln!("supervisor: the dispatcher does not know us; saying hello again");
            self.state = State::Introduced(Instant::now());
            self.send(&hello()).await;
        }
    }

    /// Waits (a bounded time) for the dispatcher to confirm our Bye.
    pub async fn await_farewell(&mut self, patience: Duration) {
        let wait = async {
            while let Some(msg) = self.recv().await {
                if msg == ToSupervisor::Farewell {
                    return;
                }
            }
        };
        if tokio::time::timeout(patience, wait).await.is_err() {
            eprintln!("supervisor: dispatcher did not confirm our stop; exiting anyway");
        }
    }

    /// Sends `msg`; false (and the link goes down) when it could not be sent.
    pub async fn send(&mut self, msg: &ToDispatcher) -> bool {
        let Some(socket) = self.socket.as_mut() else {
            return false;
        };
        let bytes = protocol::encode(msg);
        // A dispatcher that stops reading (frozen, or its host gone) must
        // not hold this supervisor: past the deadline the link goes down
        // and is re-established like any other broken link.
        match tokio::time::timeout(SEND_TIMEOUT, socket.send(ZmqMessage::from(bytes))).await {
            Ok(Ok(())) => {
                metrics::counter!("crawler_zmq_messages_sent_total").increment(1);
                true
            }
            Ok(Err(e)) => {
                eprintln!("supervisor: sending to the dispatcher failed ({e}); reconnecting");
                self.go_down();
                false
            }
            Err(_) => {
                eprintln!(
                    "supervisor: sending to the dispatcher timed out after {SEND_TIMEOUT:?}; reconnecting"
                );
                self.go_down();
                false
            }
        }
    }

    /// Receives the next message; `None` when the link broke (it is then
    /// down, and this pends until [`DispatcherLink::maintain`] reconnects).
    /// Cancel-safe: zeromq queues whole messages.
    pub async fn recv(&mut self) -> Option<ToSupervisor> {
        loop {
            let Some(socket) = self.socket.as_mut() else {
                return std::future::pending().await;
            };
            let msg = match socket.recv().await {
                Ok(m) => m,
                Err(e) => {
                    eprintln!("supervisor: receiving from the dispatcher failed ({e}); reconnecting");
                    self.go_down();
                    return None;
                }
            };
            metrics::counter!("crawler_zmq_messages_received_total").increment(1);
            let Some(frame) = msg.iter().last() else { continue };
            match protocol::decode(frame) {
                Ok(m) => {
                    self.last_heard = Instant::now();
                    if matches!(m, ToSupervisor::Welcome { .. }) {
                        if self.down_since.take().is_some() {
                            eprintln!("supervisor: rejoined the dispatcher at {}", self.endpoint);
                        }
                        self.state = State::Up;
                    }
                    return Some(m);
                }
                Err(e) => eprintln!("supervisor: ignoring undecodable message: {e}"),
            }
        }
    }

    fn go_down(&mut self) {
        self.socket = None;
        self.state = State::Down;
        self.down_since.get_or_insert_with(Instant::now);
    }
}

/// A new DEALER socket connected to `endpoint`.
async fn open(endpoint: &str) -> anyhow::Result<DealerSocket> {
    let mut socket = DealerSocket::new();
    match tokio::time::timeout(CONNECT_TIMEOUT, socket.connect(endpoint)).await {
        Ok(Ok(())) => Ok(socket),
        Ok(Err(e)) => Err(e).with_context(|| format!("dispatcher at {endpoint} not reachable")),
        Err(_) => bail!("dispatcher at {endpoint} not reachable (connect timed out)"),
    }
}
