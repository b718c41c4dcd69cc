//! A userspace TCP relay that adds a fixed one-way delay: the stand-in for
//! netem, which this kernel lacks.
//!
//! Every chunk read from one side is written to the other side
//! `one_way_delay` after it was read, in order. Reading never waits for
//! the delay: each chunk goes into a queue with its due time and a writer
//! sleeps until that time, so a link with delay D still carries as much
//! as the sender sends (a bandwidth-delay product of data in flight, as
//! on a real long link) instead of one chunk per D.
//!
//! The relay runs on a thread and runtime of its own: its timing does not
//! depend on how busy the test's runtime is, and it can be started and
//! dropped from sync and async code alike. It listens in the namespace of
//! the thread that starts it (normally the root one: on the bridge's
//! address of a [`crate::netns::Net`], where nodes reach it) and dials the
//! target from there (a node's address is reachable through the bridge).

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context;
use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

/// Bytes asked of one read (a chunk is at most this big).
const READ_BYTES: usize = 64 * 1024;
/// Chunks queued per direction before reading waits for the writer: far
/// more than a test's bandwidth-delay product, but a bound (a receiver
/// that stops reading makes the sender wait, as TCP would).
const QUEUE_CHUNKS: usize = 4096;
/// How long dialling the target may take before the client is dropped.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// A running relay; dropping it closes the listener and every connection.
pub struct Relay {
    addr: SocketAddr,
    target: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Relay {
    /// Listens on `listen` (port 0: any) and relays each connection to
    /// `target`, delaying each direction by `one_way_delay` (zero: a plain
    /// relay, e.g. to expose a loopback-only server on another address).
    pub fn start(listen: SocketAddr, target: SocketAddr, one_way_delay: Duration) -> anyhow::Result<Relay> {
        let listener =
            std::net::TcpListener::bind(listen).with_context(|| format!("relay: binding {listen}"))?;
        let addr = listener.local_addr().context("relay: local address")?;
        listener
            .set_nonblocking(true)
            .context("relay: non-blocking listener")?;
        let (stop, stopped) = oneshot::channel();
        let (ready, is_ready) = std::sync::mpsc::channel::<anyhow::Result<()>>();
        let thread = std::thread::Builder::new()
            .name(format!("relay-{addr}"))
            .spawn(move || {
                // Built (and dropped) on this thread: a runtime may be
                // neither blocked on nor dropped inside another one.
                let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = ready.send(Err(e).context("relay: building its runtime"));
                        return;
                    }
                };
                rt.block_on(async move {
                    let listener = match TcpListener::from_std(listener) {
                        Ok(l) => l,
                        Err(e) => {
                            let _ = ready.send(Err(e).context("relay: registering the listener"));
                            return;
                        }
                    };
                    let _ = ready.send(Ok(()));
                    serve(listener, target, one_way_delay, stopped).await;
                });
                // Dropping `rt` here cancels every connection task, which
                // closes their sockets.
            })
            .context("relay: spawning its thread")?;
        is_ready
            .recv()
            .context("relay: its thread ended before starting")??;
        Ok(Relay {
            addr,
            target,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// Where clients connect.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Where the relay dials for each client.
    pub fn target(&self) -> SocketAddr {
        self.target
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            // Quick: the accept loop ends at once, and the runtime's
            // shutdown only drops the connection tasks.
            let _ = thread.join();
        }
    }
}

/// Accepts until `stopped`; each connection runs as a task of its own.
async fn serve(
    listener: TcpListener,
    target: SocketAddr,
    delay: Duration,
    mut stopped: oneshot::Receiver<()>,
) {
    loop {
        tokio::select! {
            _ = &mut stopped => return,
            accepted = listener.accept() => match accepted {
                Ok((client, _)) => {
                    tokio::spawn(relay_connection(client, target, delay));
                }
                // Out of descriptors or an aborted handshake: go on, but
                // do not spin.
                Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            },
        }
    }
}

/// Relays one client to a new connection to `target`, both ways. A
/// direction that ends (EOF) half-closes the other side once its queue is
/// delivered, as TCP does; an error in either direction closes both.
async fn relay_connection(client: TcpStream, target: SocketAddr, delay: Duration) {
    let server = match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(target)).await {
        Ok(Ok(s)) => s,
        // Dropping the client closes it: it sees the target as unreachable.
        _ => return,
    };
    // Chunks go out as they fall due, not when Nagle lets them.
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    let _ = tokio::try_join!(
        pipe(client_read, server_write, delay),
        pipe(server_read, client_write, delay)
    );
}

/// One direction: reads as fast as the sender sends, stamping each chunk
/// with its due time, while a writer delivers each chunk at that time.
async fn pipe(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, delay: Duration) -> std::io::Result<()> {
    let (queue, mut due) = mpsc::channel::<(Instant, Bytes)>(QUEUE_CHUNKS);
    let read = async move {
        let mut buf = BytesMut::new();
        loop {
            buf.reserve(READ_BYTES);
            if from.read_buf(&mut buf).await? == 0 {
                // EOF: dropping the queue lets the writer finish.
                return Ok(());
            }
            let at = Instant::now() + delay;
            if queue.send((at, buf.split().freeze())).await.is_err() {
                return Ok(());
            }
        }
    };
    let write = async move {
        while let Some((at, chunk)) = due.recv().await {
            // A chunk already due goes at once (a timer would round up to
            // the next millisecond tick).
            if at > Instant::now() {
                tokio::time::sleep_until(at).await;
            }
            to.write_all(&chunk).await?;
        }
        to.shutdown().await
    };
    tokio::try_join!(read, write).map(drop)
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    use super::*;

    /// An echo server on 127.0.0.1; returns its address.
    async fn echo_server() -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let (mut r, mut w) = s.split();
                    let _ = tokio::io::copy(&mut r, &mut w).await;
                });
            }
        });
        addr
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn relay_round_trip_takes_twice_the_delay() {
        let delay = Duration::from_millis(50);
        let target = echo_server().await;
        let relay = Relay::start("127.0.0.1:0".parse().expect("literal"), target, delay).expect("relay");
        let mut s = TcpStream::connect(relay.addr()).await.expect("connect");
        s.set_nodelay(true).expect("nodelay");
        let mut buf = [0u8; 4];
        for _ in 0..3 {
            let t = Instant::now();
            s.write_all(b"ping").await.expect("write");
            s.read_exact(&mut buf).await.expect("read");
            let rtt = t.elapsed();
            assert_eq!(&buf, b"ping");
            eprintln!("round trip through the relay: {rtt:?}");
            assert!(rtt >= 2 * delay, "round trip {rtt:?} < 2 × {delay:?}");
            assert!(rtt < 2 * delay + Duration::from_millis(500), "round trip {rtt:?}");
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn relay_throughput_is_not_one_chunk_per_delay() {
        const BYTES: usize = 10 * 1024 * 1024;
        let delay = Duration::from_millis(100);
        // A sink that counts what arrives, and says when all of it has.
        let sink = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let target = sink.local_addr().expect("addr");
        let received = tokio::spawn(async move {
            let (mut s, _) = sink.accept().await.expect("accept");
            let mut n = 0;
            let mut buf = vec![0u8; 256 * 1024];
            loop {
                let k = s.read(&mut buf).await.expect("read");
                if k == 0 {
                    return (n, Instant::now());
                }
                n += k;
            }
        });
        let relay = Relay::start("127.0.0.1:0".parse().expect("literal"), target, delay).expect("relay");
        let mut s = TcpStream::connect(relay.addr()).await.expect("connect");
        let started = Instant::now();
        s.write_all(&vec![7u8; BYTES]).await.expect("write");
        s.shutdown().await.expect("shutdown");
        let (n, done) = received.await.expect("sink");
        let took = done - started;
        eprintln!("10 MiB through a relay with {delay:?} one way: {took:?}");
        assert_eq!(n, BYTES, "bytes delivered");
        assert!(took >= delay, "{took:?} < the delay");
        // One 64 KiB chunk per delay would take 160 × the delay.
        assert!(took < 10 * delay, "{took:?}: the relay caps throughput");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn relay_closes_the_other_side_after_delivering_the_queue() {
        let delay = Duration::from_millis(30);
        let server = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let target = server.local_addr().expect("addr");
        let relay = Relay::start("127.0.0.1:0".parse().expect("literal"), target, delay).expect("relay");
        let mut client = TcpStream::connect(relay.addr()).await.expect("connect");
        let (mut upstream, _) = server.accept().await.expect("accept");
        client.write_all(b"last words").await.expect("write");
        drop(client);
        let mut got = Vec::new();
        tokio::time::timeout(Duration::from_secs(5), upstream.read_to_end(&mut got))
            .await
            .expect("the relay closed the target side")
            .expect("read");
        assert_eq!(got, b"last words");

        // The target refusing: the client is closed, not left hanging.
        drop(server);
        let mut client = TcpStream::connect(relay.addr()).await.expect("connect");
        let mut buf = Vec::new();
        let n = tokio::time::timeout(Duration::from_secs(5), client.read_to_end(&mut buf))
            .await
            .expect("the relay closed the client");
        assert!(matches!(n, Ok(0) | Err(_)), "{n:?}");

        // Dropping the relay closes its connections.
        let server = TcpListener::bind(target).await.expect("rebind");
        let mut client = TcpStream::connect(relay.addr()).await.expect("connect");
        let (_upstream, _) = server.accept().await.expect("accept");
        drop(relay);
        let mut buf = Vec::new();
        let n = tokio::time::timeout(Duration::from_secs(5), client.read_to_end(&mut buf))
            .await
            .expect("dropping the relay closed the client");
        assert!(matches!(n, Ok(0) | Err(_)), "{n:?}");
    }
}
