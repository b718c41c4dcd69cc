//! A ZeroMQ peer made of raw bytes (ZMTP 3.0, NULL mechanism), to say
//! what no ZeroMQ library would: frame headers declaring terabytes,
//! messages of a thousand empty frames, handshakes left half done, and
//! connections that never read. The hostile-peer tests point it at the
//! dispatcher's port.

use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

/// The greeting: signature, version 3.0, the NULL mechanism, as client.
pub fn greeting() -> [u8; 64] {
    let mut g = [0u8; 64];
    g[0] = 0xff;
    g[9] = 0x7f;
    g[10] = 3;
    g[11] = 0;
    g[12..16].copy_from_slice(b"NULL");
    g
}

/// The READY command of a socket of type `socket_type` (e.g. `DEALER`).
pub fn ready(socket_type: &str) -> Vec<u8> {
    let mut body = vec![5u8];
    body.extend_from_slice(b"READY");
    let name = b"Socket-Type";
    body.push(name.len() as u8);
    body.extend_from_slice(name);
    body.extend_from_slice(&(socket_type.len() as u32).to_be_bytes());
    body.extend_from_slice(socket_type.as_bytes());
    let mut out = vec![0x04, body.len() as u8];
    out.extend_from_slice(&body);
    out
}

/// A frame header declaring `len` bytes (long form), more frames to come
/// or not; nothing of its body.
pub fn frame_header(len: u64, more: bool) -> Vec<u8> {
    let mut out = vec![0x02 | u8::from(more)];
    out.extend_from_slice(&len.to_be_bytes());
    out
}

/// A whole frame carrying `body`.
pub fn frame(body: &[u8], more: bool) -> Vec<u8> {
    let mut out = frame_header(body.len() as u64, more);
    out.extend_from_slice(body);
    out
}

/// The greeting and a DEALER's READY: what a peer sends before its first
/// message.
pub fn handshake() -> Vec<u8> {
    let mut out = greeting().to_vec();
    out.extend_from_slice(&ready("DEALER"));
    out
}

/// A TCP connection to `to` from the address `from` (any port): on
/// 127.0.0.0/8 every address is this machine's, so one test can be many
/// sources.
pub async fn connect_from(from: IpAddr, to: SocketAddr) -> std::io::Result<TcpStream> {
    let socket = match from {
        IpAddr::V4(_) => TcpSocket::new_v4()?,
        IpAddr::V6(_) => TcpSocket::new_v6()?,
    };
    socket.bind(SocketAddr::new(from, 0))?;
    tokio::time::timeout(Duration::from_secs(5), socket.connect(to))
        .await
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "connect"))?
}

/// Whether the other end closed `stream` (or reset it) within `within`,
/// reading and discarding whatever it sends meanwhile.
pub async fn closed_within(stream: &mut TcpStream, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    let mut buf = vec![0u8; 4096];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, stream.read(&mut buf)).await {
            Err(_) => return false,
            Ok(Ok(0)) | Ok(Err(_)) => return true,
            Ok(Ok(_)) => continue,
        }
    }
}

/// Writes `bytes`; false when the other end is gone (or the write did not
/// finish within 5 s: it stopped reading).
pub async fn send(stream: &mut TcpStream, bytes: &[u8]) -> bool {
    matches!(
        tokio::time::timeout(Duration::from_secs(5), stream.write_all(bytes)).await,
        Ok(Ok(()))
    )
}

/// A process's virtual and resident size in bytes (`/proc/PID/status`).
pub fn memory_of(pid: u32) -> Option<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| -> Option<u64> {
        let line = status.lines().find(|l| l.starts_with(name))?;
        let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
        kib.checked_mul(1024)
    };
    Some((field("VmSize:")?, field("VmRSS:")?))
}

#[cfg(test)]
mod tests {
    //! The dispatcher's socket options against raw peers, in this process:
    //! quick, and independent of a crawl (`hostile_peers_e2e` is the same
    //! beside a running crawl).
    use super::*;
    use zeromq::{RouterSocket, Socket, SocketRecv};

    const GIB: u64 = 1 << 30;

    async fn router() -> (RouterSocket, SocketAddr) {
        let mut socket = RouterSocket::with_options(link::socket::dispatcher_options());
        let endpoint = socket.bind("tcp://127.0.0.1:0").await.expect("bind");
        let addr = endpoint
            .to_string()
            .trim_start_matches("tcp://")
            .parse()
            .expect("a TCP endpoint");
        (socket, addr)
    }

    /// A frame header declaring 2^41 bytes, from a peer that never proved
    /// anything: the connection is closed, and nothing near that size was
    /// reserved (the crate as published reserved it all at once).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_huge_frame_header_reserves_nothing_and_closes_the_connection() {
        let (mut socket, addr) = router().await;
        // The socket reads only while someone receives.
        let reader = tokio::spawn(async move { while socket.recv().await.is_ok() {} });
        let me = std::process::id();
        let (vm_before, _) = memory_of(me).expect("/proc/self/status");
        let mut peer = connect_from("127.0.0.1".parse().unwrap(), addr).await.unwrap();
        let mut bytes = handshake();
        bytes.extend_from_slice(&frame_header(1 << 41, false));
        assert!(send(&mut peer, &bytes).await);
        let closed = closed_within(&mut peer, Duration::from_secs(10)).await;
        let (vm_after, _) = memory_of(me).unwrap();
        let grew = vm_after.saturating_sub(vm_before);
        assert!(grew < GIB, "virtual size grew by {grew} bytes");
        assert!(closed, "a connection declaring a 2 TiB frame was kept open");
        reader.abort();
    }

    /// A thousand empty frames in one message: closed at the fifth.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_message_of_a_thousand_frames_closes_the_connection() {
        let (mut socket, addr) = router().await;
        let reader = tokio::spawn(async move { while socket.recv().await.is_ok() {} });
        let mut peer = connect_from("127.0.0.1".parse().unwrap(), addr).await.unwrap();
        let mut bytes = handshake();
        for _ in 0..1000 {
            bytes.extend_from_slice(&frame(&[], true));
        }
        // The peer may find the connection closed before it has written all.
        let _ = send(&mut peer, &bytes).await;
        assert!(
            closed_within(&mut peer, Duration::from_secs(10)).await,
            "a message of a thousand frames was taken"
        );
        reader.abort();
    }

    /// Connections that never finish the handshake, or never prove
    /// anything, are closed: past the per-address cap at once.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn untrusted_connections_are_capped_per_address() {
        let (mut socket, addr) = router().await;
        let reader = tokio::spawn(async move { while socket.recv().await.is_ok() {} });
        let from: IpAddr = "127.0.0.7".parse().unwrap();
        let mut kept = Vec::new();
        for _ in 0..link::socket::UNTRUSTED_PER_ADDRESS {
            let mut peer = connect_from(from, addr).await.unwrap();
            assert!(send(&mut peer, &handshake()).await);
            kept.push(peer);
        }
        // The accept loop counts them as it accepts: give it a moment.
        tokio::time::sleep(Duration::from_millis(500)).await;
        let mut over = connect_from(from, addr).await.unwrap();
        assert!(
            closed_within(&mut over, Duration::from_secs(5)).await,
            "connection {} from one address was kept",
            link::socket::UNTRUSTED_PER_ADDRESS + 1
        );
        // Another address is not held up by this one.
        let mut other = connect_from("127.0.0.8".parse().unwrap(), addr).await.unwrap();
        assert!(send(&mut other, &handshake()).await);
        assert!(!closed_within(&mut other, Duration::from_millis(500)).await);
        // Those kept are still open (their deadline is far).
        assert!(!closed_within(&mut kept[0], Duration::from_millis(100)).await);
        reader.abort();
    }

    /// A peer that stops half-way through its greeting is closed at the
    /// handshake deadline (`link::socket::HANDSHAKE_TIMEOUT`).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_handshake_left_half_done_is_closed() {
        let (mut socket, addr) = router().await;
        let reader = tokio::spawn(async move { while socket.recv().await.is_ok() {} });
        let mut peer = connect_from("127.0.0.1".parse().unwrap(), addr).await.unwrap();
        assert!(send(&mut peer, &greeting()[..20]).await);
        let within = link::socket::HANDSHAKE_TIMEOUT * 4;
        assert!(
            closed_within(&mut peer, within).await,
            "a half-done handshake was kept open over {within:?}"
        );
        reader.abort();
    }

    /// A peer that never reads: `try_send` fills its queue and then says
    /// so at once (`BufferFull`) instead of waiting, and the connection
    /// can be closed, its writer with it (the dispatcher's send path:
    /// `dispatcher/src/crawl.rs`, `send_frame`).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_peer_that_never_reads_fills_its_queue_and_is_dropped() {
        use zeromq::{ZmqError, ZmqMessage};
        let (mut socket, addr) = router().await;
        let mut peer = connect_from("127.0.0.1".parse().unwrap(), addr).await.unwrap();
        let mut bytes = handshake();
        bytes.extend_from_slice(&frame(b"hello", false));
        assert!(send(&mut peer, &bytes).await);
        let first = tokio::time::timeout(Duration::from_secs(10), socket.recv())
            .await
            .expect("the peer's message within 10 s")
            .unwrap();
        let identity = first.get(0).expect("an identity frame").clone();
        let peer_id = zeromq::util::PeerIdentity::try_from(identity.clone()).unwrap();
        let (send_half, mut recv_half) = socket.split();
        let reader = tokio::spawn(async move { while recv_half.recv().await.is_ok() {} });
        // 64 KiB messages: the kernel's buffers (a few MiB) and then the
        // queue fill up. Each try_send returns at once; count them.
        let body = vec![0u8; 64 * 1024];
        let mut queued = 0usize;
        let full = loop {
            let mut m = ZmqMessage::from(body.clone());
            m.push_front(identity.clone());
            match send_half.try_send(m) {
                Ok(()) => queued += 1,
                Err(ZmqError::BufferFull(_)) => break true,
                Err(e) => panic!("try_send: {e:?}"),
            }
            if queued > 100_000 {
                break false;
            }
            if queued.is_multiple_of(256) {
                // Let the writer move what the kernel takes.
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        };
        assert!(full, "{queued} messages queued for a peer that never reads");
        assert!(send_half.disconnect_peer(&peer_id));
        assert!(!send_half.disconnect_peer(&peer_id), "disconnected twice");
        assert!(
            closed_within(&mut peer, Duration::from_secs(10)).await,
            "the connection of a dropped peer stayed open"
        );
        reader.abort();
    }
}
