//! What one connection may make a socket hold, and how many connections the
//! application has not vouched for yet may be open at once.
//!
//! (Added by the patch in `PATCH.md`.) A socket bound on a network accepts
//! anyone. Before the application has authenticated a peer (ZeroMQ's NULL
//! mechanism authenticates nothing, so that is the application's business),
//! the peer must not be able to make the socket reserve or buffer more than
//! a little memory, hold a connection open forever, or open connections
//! without bound. Every connection therefore starts *untrusted*: its
//! messages are bounded by [`SocketOptions::max_message_size`] and
//! [`SocketOptions::max_message_frames`], it counts against
//! [`SocketOptions::max_untrusted_per_address`] and
//! [`SocketOptions::max_untrusted`], and it is closed
//! [`SocketOptions::untrusted_deadline`] after it was accepted, until the
//! application calls `trust_peer` (e.g. [`crate::RouterSendHalf::trust_peer`]),
//! which gives the connection its own limits and frees its place. The
//! defaults keep the crate's behaviour: no limit, no deadline.
//!
//! [`SocketOptions::max_message_size`]: crate::SocketOptions::max_message_size
//! [`SocketOptions::max_message_frames`]: crate::SocketOptions::max_message_frames
//! [`SocketOptions::max_untrusted_per_address`]: crate::SocketOptions::max_untrusted_per_address
//! [`SocketOptions::max_untrusted`]: crate::SocketOptions::max_untrusted
//! [`SocketOptions::untrusted_deadline`]: crate::SocketOptions::untrusted_deadline

use futures::task::AtomicWaker;
use parking_lot::Mutex;

use std::collections::HashMap;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::Poll;

/// The largest message (all its frames together, in bytes) and the most
/// frames per message a connection may send; ZMTP commands count as one
/// frame of their own. A frame header that declares more is refused before
/// a byte of it is buffered, and the connection is closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerLimits {
    pub max_message_size: usize,
    pub max_frames: usize,
}

impl PeerLimits {
    /// No limit: the crate's behaviour before the patch.
    pub const UNLIMITED: PeerLimits = PeerLimits {
        max_message_size: usize::MAX,
        max_frames: usize::MAX,
    };
}

impl Default for PeerLimits {
    fn default() -> Self {
        Self::UNLIMITED
    }
}

/// One connection's limits and standing, shared by its reader (which
/// enforces them) and the socket's table of peers (through which the
/// application changes them).
#[derive(Debug)]
pub(crate) struct ConnState {
    max_message_size: AtomicUsize,
    max_frames: AtomicUsize,
    trusted: AtomicBool,
    /// Its place among the untrusted connections, given back when it is
    /// trusted or closed.
    slot: Mutex<Option<UntrustedSlot>>,
    remote: Option<SocketAddr>,
    /// Set when the socket drops the connection; wakes its writer.
    closed: AtomicBool,
    close_waker: AtomicWaker,
}

impl ConnState {
    pub(crate) fn new(
        limits: PeerLimits,
        remote: Option<SocketAddr>,
        slot: Option<UntrustedSlot>,
    ) -> Arc<ConnState> {
        Arc::new(ConnState {
            max_message_size: AtomicUsize::new(limits.max_message_size),
            max_frames: AtomicUsize::new(limits.max_frames),
            trusted: AtomicBool::new(false),
            slot: Mutex::new(slot),
            remote,
            closed: AtomicBool::new(false),
            close_waker: AtomicWaker::new(),
        })
    }

    /// The socket dropped this connection.
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.close_waker.wake();
    }

    /// Whether [`ConnState::close`] was called.
    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Resolves once [`ConnState::close`] was called.
    pub(crate) fn closed(&self) -> impl Future<Output = ()> + '_ {
        futures::future::poll_fn(move |cx| {
            if self.is_closed() {
                return Poll::Ready(());
            }
            self.close_waker.register(cx.waker());
            if self.is_closed() {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        })
    }

    pub(crate) fn limits(&self) -> PeerLimits {
        PeerLimits {
            max_message_size: self.max_message_size.load(Ordering::Acquire),
            max_frames: self.max_frames.load(Ordering::Acquire),
        }
    }

    pub(crate) fn is_trusted(&self) -> bool {
        self.trusted.load(Ordering::Acquire)
    }

    /// The application vouches for this connection: `limits` from now on,
    /// no deadline, and its untrusted place is given back.
    pub(crate) fn trust(&self, limits: PeerLimits) {
        self.max_message_size
            .store(limits.max_message_size, Ordering::Release);
        self.max_frames.store(limits.max_frames, Ordering::Release);
        self.trusted.store(true, Ordering::Release);
        self.slot.lock().take();
    }

    pub(crate) fn remote(&self) -> Option<SocketAddr> {
        self.remote
    }
}

/// Addresses are counted per IPv4 address and per IPv6 /64 (one host
/// commonly holds a whole /64; counting single IPv6 addresses would cap
/// nothing).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum AddressKey {
    V4(u32),
    V6Prefix(u64),
}

impl From<IpAddr> for AddressKey {
    fn from(ip: IpAddr) -> Self {
        match ip.to_canonical() {
            IpAddr::V4(v4) => AddressKey::V4(u32::from(v4)),
            IpAddr::V6(v6) => AddressKey::V6Prefix((u128::from(v6) >> 64) as u64),
        }
    }
}

/// The untrusted connections of one bound endpoint, by source address.
#[derive(Debug)]
pub(crate) struct UntrustedTable {
    per_address: usize,
    total: usize,
    counts: Mutex<(usize, HashMap<AddressKey, usize>)>,
}

impl UntrustedTable {
    pub(crate) fn new(per_address: usize, total: usize) -> Arc<UntrustedTable> {
        Arc::new(UntrustedTable {
            per_address,
            total,
            counts: Mutex::new((0, HashMap::new())),
        })
    }

    /// A place for a new connection from `ip`, or `None` when that address
    /// (or the endpoint) has as many untrusted connections as it may.
    pub(crate) fn take(self: &Arc<Self>, ip: IpAddr) -> Option<UntrustedSlot> {
        let key = AddressKey::from(ip);
        let mut guard = self.counts.lock();
        let (total, counts) = &mut *guard;
        let n = counts.entry(key).or_insert(0);
        if *n >= self.per_address || *total >= self.total {
            if *n == 0 {
                counts.remove(&key);
            }
            return None;
        }
        *n += 1;
        *total += 1;
        Some(UntrustedSlot {
            table: Arc::clone(self),
            key,
        })
    }

    fn give_back(&self, key: AddressKey) {
        let mut guard = self.counts.lock();
        let (total, counts) = &mut *guard;
        *total = total.saturating_sub(1);
        if let Some(n) = counts.get_mut(&key) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                counts.remove(&key);
            }
        }
    }
}

/// One untrusted connection's place; given back when dropped.
#[derive(Debug)]
pub(crate) struct UntrustedSlot {
    table: Arc<UntrustedTable>,
    key: AddressKey,
}

impl Drop for UntrustedSlot {
    fn drop(&mut self) {
        self.table.give_back(self.key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn places_are_counted_per_address_and_in_total_and_given_back() {
        let table = UntrustedTable::new(2, 3);
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let a1 = table.take(a).expect("first");
        let _a2 = table.take(a).expect("second");
        assert!(table.take(a).is_none(), "a third from one address");
        let b1 = table.take(b).expect("another address");
        assert!(table.take("10.0.0.3".parse().unwrap()).is_none(), "total");
        drop(b1);
        let conn = ConnState::new(PeerLimits::UNLIMITED, None, Some(a1));
        conn.trust(PeerLimits::UNLIMITED);
        assert!(table.take(a).is_some(), "trusting gives the place back");
        // One IPv6 /64 counts as one address; IPv4-mapped as IPv4.
        let t6 = UntrustedTable::new(1, 10);
        let _x = t6.take("2001:db8::1".parse().unwrap()).unwrap();
        assert!(t6.take("2001:db8::2".parse().unwrap()).is_none());
        assert!(t6.take("2001:db8:0:1::1".parse().unwrap()).is_some());
        let _m = t6.take("::ffff:10.0.0.9".parse().unwrap()).unwrap();
        assert!(t6.take("10.0.0.9".parse().unwrap()).is_none());
    }
}
