use crate::backend::GenericSocketBackend;
use crate::codec::*;
use crate::endpoint::Endpoint;
use crate::error::{ZmqError, ZmqResult};
use crate::fair_queue::FairQueue;
use crate::message::*;
use crate::transport::AcceptStopHandle;
use crate::util::PeerIdentity;
#[allow(unused_imports)] // SocketOptions: named in the docs of `peer_control!`.
use crate::{MultiPeerBackend, SocketEvent, SocketOptions, SocketRecv, SocketSend, SocketType};
use crate::{Socket, SocketBackend};

use async_trait::async_trait;
use futures::channel::mpsc;
use futures::StreamExt;

use std::collections::HashMap;
use std::convert::TryInto;
use std::sync::Arc;

pub struct RouterSocket {
    backend: Arc<GenericSocketBackend>,
    binds: HashMap<Endpoint, AcceptStopHandle>,
    fair_queue: FairQueue<ZmqFramedRead, PeerIdentity>,
}

impl Drop for RouterSocket {
    fn drop(&mut self) {
        self.backend.shutdown();
    }
}

#[async_trait]
impl Socket for RouterSocket {
    fn with_options(options: SocketOptions) -> Self {
        let mut fair_queue = FairQueue::new(true);
        let backend = Arc::new(GenericSocketBackend::with_options(
            Some(fair_queue.inner()),
            SocketType::ROUTER,
            options,
        ));

        let backend_weak = Arc::downgrade(&backend);
        fair_queue.set_on_disconnect(move |peer_id: PeerIdentity| {
            if let Some(backend) = backend_weak.upgrade() {
                backend.peer_disconnected(&peer_id);
            }
        });

        Self {
            backend,
            binds: HashMap::new(),
            fair_queue,
        }
    }

    fn backend(&self) -> Arc<dyn MultiPeerBackend> {
        self.backend.clone()
    }

    fn binds(&mut self) -> &mut HashMap<Endpoint, AcceptStopHandle> {
        &mut self.binds
    }

    fn monitor(&mut self) -> mpsc::Receiver<SocketEvent> {
        let (sender, receiver) = mpsc::channel(1024);
        self.backend.socket_monitor.lock().replace(sender);
        receiver
    }
}

#[async_trait]
impl SocketRecv for RouterSocket {
    async fn recv(&mut self) -> ZmqResult<ZmqMessage> {
        loop {
            match self.fair_queue.next().await {
                Some((peer_id, Ok(Message::Message(mut message)))) => {
                    message.push_front(peer_id.into());
                    return Ok(message);
                }
                Some((_peer_id, Ok(_msg))) => {
                    // todo: Log or handle other message types if needed
                    // We could take an approach of using `tracing` and have that be an optional feature
                    // tracing::warn!("Received unimplemented message type: {:?}", msg);
                }
                Some((peer_id, Err(_e))) => {
                    self.backend.peer_disconnected(&peer_id);
                    // We could take an approach of using `tracing` and have that be an optional feature
                    // tracing::error!("Error receiving message from peer {}: {:?}", peer_id, e);
                }
                None => {
                    // The fair queue is empty, which shouldn't happen in normal operation
                    return Err(ZmqError::NoMessage);
                }
            };
        }
    }
}

#[async_trait]
impl SocketSend for RouterSocket {
    async fn send(&mut self, mut message: ZmqMessage) -> ZmqResult<()> {
        if message.len() <= 1 {
            return Err(ZmqError::Socket(
                "ROUTER send requires at least 2 frames: identity frame + message",
            ));
        }
        let peer_id: PeerIdentity = message.pop_front().unwrap().try_into()?;
        self.backend
            .send_to_peer(&peer_id, Message::Message(message))
            .await
    }
}

/// Routing without waiting, and the application's say over each
/// connection (patch: see `PATCH.md`). Shared by [`RouterSocket`] and
/// [`RouterSendHalf`].
fn try_route(backend: &GenericSocketBackend, mut message: ZmqMessage) -> ZmqResult<()> {
    if message.len() <= 1 {
        return Err(ZmqError::Socket(
            "ROUTER send requires at least 2 frames: identity frame + message",
        ));
    }
    let peer_id: PeerIdentity = message
        .pop_front()
        .ok_or(ZmqError::Socket("ROUTER send requires an identity frame"))?
        .try_into()?;
    backend.try_send_to_peer(&peer_id, Message::Message(message))
}

macro_rules! peer_control {
    ($backend:ident) => {
        /// Queues a message (identity frame first) for its peer without
        /// waiting: `Err(ZmqError::BufferFull(_))` when that peer's send
        /// queue ([`SocketOptions::send_queue_capacity`]) is full, which
        /// leaves the peer connected for the caller to judge.
        pub fn try_send(&self, message: ZmqMessage) -> ZmqResult<()> {
            try_route(&self.$backend(), message)
        }

        /// Vouches for a peer: its connection takes `limits` instead of the
        /// socket's untrusted ones, has no deadline any more and stops
        /// counting among the untrusted connections of its address. False
        /// when no such peer is connected.
        pub fn trust_peer(&self, peer_id: &PeerIdentity, limits: crate::PeerLimits) -> bool {
            self.$backend().trust_peer(peer_id, limits)
        }

        /// Whether the peer is connected and was trusted.
        pub fn is_peer_trusted(&self, peer_id: &PeerIdentity) -> bool {
            self.$backend().is_trusted(peer_id)
        }

        /// Closes a peer's connection (its queued messages are dropped);
        /// false when it was not connected.
        pub fn disconnect_peer(&self, peer_id: &PeerIdentity) -> bool {
            self.$backend().disconnect_peer(peer_id)
        }

        /// The address a TCP peer connected from.
        pub fn peer_address(&self, peer_id: &PeerIdentity) -> Option<std::net::SocketAddr> {
            self.$backend().peer_address(peer_id)
        }
    };
}

impl RouterSocket {
    fn generic_backend(&self) -> &GenericSocketBackend {
        &self.backend
    }

    peer_control!(generic_backend);

    /// Splits the socket into separate send and recv halves, allowing concurrent
    /// sending and receiving from independent async tasks.
    ///
    /// The underlying socket stays alive until both halves are dropped.
    pub fn split(mut self) -> (RouterSendHalf, RouterRecvHalf) {
        let backend = std::mem::replace(
            &mut self.backend,
            Arc::new(GenericSocketBackend::with_options(
                None,
                SocketType::ROUTER,
                SocketOptions::default(),
            )),
        );
        let fair_queue = std::mem::replace(&mut self.fair_queue, FairQueue::new(true));
        let binds = std::mem::take(&mut self.binds);

        let inner = Arc::new(RouterSocketInner {
            backend,
            _binds: binds,
        });

        (
            RouterSendHalf {
                inner: inner.clone(),
            },
            RouterRecvHalf { inner, fair_queue },
        )
    }
}

struct RouterSocketInner {
    backend: Arc<GenericSocketBackend>,
    _binds: HashMap<Endpoint, AcceptStopHandle>,
}

impl Drop for RouterSocketInner {
    fn drop(&mut self) {
        self.backend.shutdown();
    }
}

/// The send half of a [`RouterSocket`] produced by [`RouterSocket::split`].
///
/// This half can be cloned to send from multiple async tasks concurrently.
#[derive(Clone)]
pub struct RouterSendHalf {
    inner: Arc<RouterSocketInner>,
}

impl RouterSendHalf {
    fn generic_backend(&self) -> &GenericSocketBackend {
        &self.inner.backend
    }

    peer_control!(generic_backend);
}

/// The recv half of a [`RouterSocket`] produced by [`RouterSocket::split`].
pub struct RouterRecvHalf {
    inner: Arc<RouterSocketInner>,
    fair_queue: FairQueue<ZmqFramedRead, PeerIdentity>,
}

#[async_trait]
impl SocketSend for RouterSendHalf {
    async fn send(&mut self, mut message: ZmqMessage) -> ZmqResult<()> {
        if message.len() <= 1 {
            return Err(ZmqError::Socket(
                "ROUTER send requires at least 2 frames: identity frame + message",
            ));
        }
        let peer_id: PeerIdentity = message.pop_front().unwrap().try_into()?;
        self.inner
            .backend
            .send_to_peer(&peer_id, Message::Message(message))
            .await
    }
}

#[async_trait]
impl SocketRecv for RouterRecvHalf {
    async fn recv(&mut self) -> ZmqResult<ZmqMessage> {
        loop {
            match self.fair_queue.next().await {
                Some((peer_id, Ok(Message::Message(mut message)))) => {
                    message.push_front(peer_id.into());
                    return Ok(message);
                }
                Some((_peer_id, Ok(_))) => {}
                Some((peer_id, Err(_e))) => {
                    self.inner.backend.peer_disconnected(&peer_id);
                }
                None => {
                    return Err(ZmqError::NoMessage);
                }
            };
        }
    }
}
