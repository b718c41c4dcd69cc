//! The supervisor's ZeroMQ DEALER connection to the dispatcher's ROUTER.

use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use shared::protocol::{self, CrawlPolicy, ToDispatcher, ToSupervisor};
use zeromq::{DealerSocket, Socket, SocketRecv, SocketSend, ZmqMessage};

pub struct DispatcherLink {
    socket: DealerSocket,
}

impl DispatcherLink {
    /// Connects (retrying while the dispatcher is not up yet, for up to
    /// `patience`) and introduces itself with `hello`.
    pub async fn connect(
        endpoint: &str,
        hello: ToDispatcher,
        patience: Duration,
    ) -> anyhow::Result<DispatcherLink> {
        let deadline = Instant::now() + patience;
        let mut pause = Duration::from_millis(100);
        let socket = loop {
            let mut socket = DealerSocket::new();
            match socket.connect(endpoint).await {
                Ok(()) => break socket,
                Err(e) if Instant::now() < deadline => {
                    eprintln!(
                        "supervisor: dispatcher at {endpoint} not reachable ({e}); retrying in {pause:?}"
                    );
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_secs(5));
                }
                Err(e) => return Err(e).with_context(|| format!("connecting to dispatcher at {endpoint}")),
            }
        };
        let mut link = DispatcherLink { socket };
        link.send(&hello).await?;
        Ok(link)
    }

    /// Waits for the dispatcher's Welcome, which carries the crawl policy.
    pub async fn welcome(&mut self) -> anyhow::Result<CrawlPolicy> {
        loop {
            match self.recv().await? {
                ToSupervisor::Welcome { policy } => return Ok(policy),
                ToSupervisor::Stop => bail!("dispatcher said stop before welcome"),
                _ => {}
            }
        }
    }

    /// Waits (a bounded time) for the dispatcher to confirm our Bye.
    pub async fn await_farewell(&mut self, patience: Duration) {
        let wait = async {
            while let Ok(msg) = self.recv().await {
                if msg == ToSupervisor::Farewell {
                    return;
                }
            }
        };
        if tokio::time::timeout(patience, wait).await.is_err() {
            eprintln!("supervisor: dispatcher did not confirm our stop; exiting anyway");
        }
    }

    pub async fn send(&mut self, msg: &ToDispatcher) -> anyhow::Result<()> {
        let bytes = protocol::encode(msg);
        metrics::counter!("crawler_zmq_messages_sent_total").increment(1);
        self.socket
            .send(ZmqMessage::from(bytes))
            .await
            .context("sending to dispatcher")
    }

    /// Receives the next message (cancel-safe: zeromq queues whole messages).
    pub async fn recv(&mut self) -> anyhow::Result<ToSupervisor> {
        loop {
            let msg = self.socket.recv().await.context("receiving from dispatcher")?;
            metrics::counter!("crawler_zmq_messages_received_total").increment(1);
            let Some(frame) = msg.iter().last() else { continue };
            match protocol::decode(frame) {
                Ok(m) => return Ok(m),
                Err(e) => eprintln!("supervisor: ignoring undecodable message: {e}"),
            }
        }
    }
}
