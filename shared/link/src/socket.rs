//! The cluster link's ZeroMQ sockets: what a peer can make either end hold.
//!
//! The dispatcher's port is reachable by whoever reaches the machine, and
//! a peer proves it knows the cluster secret only in its Join (see
//! [`crate::cluster_auth`]). Until then it is a stranger, and a stranger
//! must cost the dispatcher a small, fixed amount: so the dispatcher's
//! ROUTER takes messages of at most [`UNTRUSTED_MESSAGE_BYTES`] from a
//! connection it has not trusted (a Hello is 45 bytes, a Join well under a
//! kilobyte), closes one that is not trusted within [`UNTRUSTED_DEADLINE`]
//! or whose ZMTP handshake takes longer than [`HANDSHAKE_TIMEOUT`], and
//! keeps at most [`UNTRUSTED_PER_ADDRESS`] of them per source address and
//! [`UNTRUSTED_TOTAL`] in all. A Join whose proof checks out makes the
//! dispatcher trust the connection ([`TRUSTED`]: the protocol's own message
//! bound), and only then does the supervisor send what it holds
//! ([`crate::protocol::ToDispatcher::Holding`]), which may be large.
//!
//! These limits are enforced by the `zeromq` crate's codec at each frame
//! header, before anything is reserved for the frame (the crate as
//! published reserved whatever length a header declared: `vendor/zeromq/`
//! holds the patched copy and `PATCH.md` there says what changed).
//!
//! A peer that does not read what it is sent must not hold anyone either:
//! each peer has a queue of at most [`SEND_QUEUE_MESSAGES`] messages, and
//! the dispatcher queues with `try_send`, never waiting (a full queue
//! drops the peer).

use std::time::Duration;

use zeromq::{PeerLimits, SocketOptions};

use crate::protocol::MAX_MESSAGE_BYTES;

/// Largest message a connection sends before it is trusted. A Join holds a
/// proof and an introduction (a supervisor id, a capacity, a node name, a
/// debug address): under 1 KiB in practice, 16 KiB allows long names.
pub const UNTRUSTED_MESSAGE_BYTES: usize = 16 * 1024;
/// Frames per message: a DEALER sends one; the ROUTER adds none on the
/// way in. A few more cost nothing.
pub const MAX_FRAMES: usize = 4;
/// What a trusted connection may send: the protocol's bound on a message.
pub const TRUSTED: PeerLimits = PeerLimits {
    max_message_size: MAX_MESSAGE_BYTES as usize,
    max_frames: MAX_FRAMES,
};
/// Longest a ZMTP greeting and READY exchange may take.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest a connection may stay untrusted: a supervisor joins within
/// milliseconds of connecting, or a few seconds while the dispatcher is busy.
pub const UNTRUSTED_DEADLINE: Duration = Duration::from_secs(20);
/// Untrusted connections per source address (an IPv6 /64 counts as one).
/// Above the few supervisors one host runs, and the 50 that the
/// dispatcher's load generator starts at once.
pub const UNTRUSTED_PER_ADDRESS: usize = 64;
/// Untrusted connections from all addresses.
pub const UNTRUSTED_TOTAL: usize = 4096;
/// Messages queued for one peer. The kernel's socket buffers (4 MiB each
/// way) come first, so a supervisor that reads at all never fills it; a
/// supervisor's leases are bounded by its credit, so this bounds what a
/// frozen one holds in the dispatcher until it is dropped.
pub const SEND_QUEUE_MESSAGES: usize = 1024;

/// The dispatcher's ROUTER socket options.
pub fn dispatcher_options() -> SocketOptions {
    let mut options = SocketOptions::default();
    options
        .max_message_size(UNTRUSTED_MESSAGE_BYTES)
        .max_message_frames(MAX_FRAMES)
        .handshake_timeout(HANDSHAKE_TIMEOUT)
        .untrusted_deadline(UNTRUSTED_DEADLINE)
        .max_untrusted_per_address(UNTRUSTED_PER_ADDRESS)
        .max_untrusted(UNTRUSTED_TOTAL)
        .send_queue_capacity(SEND_QUEUE_MESSAGES);
    options
}

/// A supervisor's DEALER socket options: what it takes from the other
/// end, which is not proven to be the dispatcher until its Welcome, is
/// bounded by the protocol's message bound.
pub fn supervisor_options() -> SocketOptions {
    let mut options = SocketOptions::default();
    options
        .max_message_size(TRUSTED.max_message_size)
        .max_message_frames(MAX_FRAMES);
    options
}

/// A peer's source as quotas count it: an IPv4 address, or an IPv6
/// address's /64 (a host commonly holds a whole /64), IPv4-mapped IPv6
/// as IPv4 (as the socket counts connections).
pub fn source(ip: std::net::IpAddr) -> std::net::IpAddr {
    use std::net::{IpAddr, Ipv6Addr};
    match ip.to_canonical() {
        IpAddr::V6(v6) => IpAddr::V6(Ipv6Addr::from(u128::from(v6) & !u128::from(u64::MAX))),
        v4 => v4,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_are_ipv4_addresses_and_ipv6_slash_64s() {
        let s = |a: &str| source(a.parse().unwrap()).to_string();
        assert_eq!(s("10.1.2.3"), "10.1.2.3");
        assert_eq!(s("::ffff:10.1.2.3"), "10.1.2.3");
        assert_eq!(s("2001:db8:1:2:3:4:5:6"), "2001:db8:1:2::");
    }
}
