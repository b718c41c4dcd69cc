//! One HTTP/1.1 server on one 127.0.0.1 port that serves every host of a
//! [`SyntheticWeb`], routed by the `Host` header, and logs each request
//! (with `extras.internal`, also on 127.0.0.2 and [::1], same port) with
//! the address it came from, so a multi-node test can tell which node
//! fetched what.
//!
//! A single axum fallback handler (no routing table) keeps per-request
//! overhead to parsing the host/path and rendering the body.
//!
//! With [`WebExtras`] the same handler also serves the hostile hosts
//! (streamed, dripping and never-answered bodies) and slow hosts, and with
//! [`WebExtras::tls`] it serves HTTPS (HTTP/2 and HTTP/1.1 by ALPN) with a
//! certificate of the run's own CA ([`crate::tls`]), counting handshakes.

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use std::convert::Infallible;

use axum::body::Body;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::serve::ListenerExt;
use axum::Router;
use bytes::Bytes;
use futures::future::BoxFuture;
use tokio::net::TcpListener;
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;

use super::hostile::{self, HostileState, Reply, ReplyBody};
use super::{Conditions, SyntheticWeb, WebExtras, WebSpec};
use crate::tls::TestCa;

/// One answered request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestRecord {
    /// Host header, lower-cased, without the port.
    pub host: String,
    /// Request target as sent (path and query).
    pub path: String,
    /// 0: the request is never answered (`hostile.test/hang`). 304: a
    /// conditional revisit of an unchanged page ([`WebExtras::changing`]).
    pub status: u16,
    /// When the response head was ready (after a slow host's sleep); for a
    /// never-answered request, when it arrived.
    pub at: SystemTime,
    /// When the request arrived (its head was parsed), before any sleep.
    pub arrived: SystemTime,
    /// When the server had handed the last byte of the response to the
    /// connection (the client cannot have seen the end earlier), or the
    /// response was dropped unfinished. `None` while it is still being sent
    /// and for a never-answered request.
    pub done: Option<SystemTime>,
    /// The address the request came from (the peer of its connection):
    /// which node fetched it, when the crawlers run in network namespaces
    /// (`crate::netns`). `None` only if the connection's address was unknown.
    pub client: Option<IpAddr>,
}

impl RequestRecord {
    /// How long the server took from arrival to the end of the response.
    pub fn served_in(&self) -> Option<Duration> {
        self.done?.duration_since(self.arrived).ok()
    }
}

type Log = Arc<Mutex<Vec<RequestRecord>>>;

struct AppState {
    web: Arc<SyntheticWeb>,
    log: Log,
    hostile: HostileState,
    /// Becomes true when the server stops: ends held and dripping requests.
    closing: watch::Receiver<bool>,
}

/// A running synthetic-web server. Dropping it stops it (gracefully).
pub struct WebServer {
    addr: SocketAddr,
    web: Arc<SyntheticWeb>,
    log: Log,
    /// Connections accepted on the main address: with the request
    /// count, how well clients reuse them (`scripts/bench.py`).
    accepted: Arc<AtomicU64>,
    /// With [`WebExtras::tls`]: the CA that signed the server's certificate.
    ca: Option<Arc<TestCa>>,
    /// TLS handshakes completed: full, resumed (by session ticket or id).
    handshakes: Arc<Handshakes>,
    stop: Option<oneshot::Sender<()>>,
    closing: watch::Sender<bool>,
    task: Option<JoinHandle<()>>,
}

/// TLS handshakes the HTTPS server completed, by kind.
#[derive(Debug, Default)]
pub struct Handshakes {
    pub full: AtomicU64,
    pub resumed: AtomicU64,
    /// Connections closed before their handshake completed.
    pub failed: AtomicU64,
}

fn lock(log: &Log) -> MutexGuard<'_, Vec<RequestRecord>> {
    // A panic while pushing cannot leave the Vec inconsistent; ignore poisoning.
    log.lock().unwrap_or_else(|e| e.into_inner())
}

impl WebServer {
    /// Binds `bind` (port 0 = any), then builds the web with the real port and serves it.
    pub async fn start(spec: WebSpec, bind: SocketAddr) -> anyhow::Result<WebServer> {
        Self::start_with(spec, WebExtras::default(), bind).await
    }

    /// [`WebServer::start`] on a free port of 127.0.0.1; panics if it cannot.
    pub async fn local(spec: WebSpec) -> WebServer {
        Self::local_with(spec, WebExtras::default()).await
    }

    /// [`WebServer::start_with`] on a free port of 127.0.0.1; panics if it cannot.
    pub async fn local_with(spec: WebSpec, extras: WebExtras) -> WebServer {
        let bind = SocketAddr::from(([127, 0, 0, 1], 0));
        Self::start_with(spec, extras, bind)
            .await
            .expect("starting the synthetic web")
    }

    /// [`WebServer::start`] with opt-in additions (hostile hosts, slow hosts).
    /// Boxed: see the crate's doc.
    pub fn start_with(
        spec: WebSpec,
        extras: WebExtras,
        bind: SocketAddr,
    ) -> BoxFuture<'static, anyhow::Result<WebServer>> {
        Box::pin(Self::bind_and_serve(spec, extras, bind))
    }

    async fn bind_and_serve(spec: WebSpec, extras: WebExtras, bind: SocketAddr) -> anyhow::Result<WebServer> {
        let listener = TcpListener::bind(bind).await?;
        let addr = listener.local_addr()?;
        let extras_internal = extras.internal;
        let tls = extras.tls;
        let untrusted = extras.tls_untrusted.clone();
        let close_after = extras.tls_requests_per_connection;
        let web = Arc::new(SyntheticWeb::with_extras(spec, extras, addr.port()));
        let log: Log = Arc::new(Mutex::new(Vec::new()));
        let (closing, closing_rx) = watch::channel(false);
        let closing_rx_extra = closing_rx.clone();
        let state = Arc::new(AppState {
            web: web.clone(),
            log: log.clone(),
            hostile: HostileState::default(),
            closing: closing_rx,
        });
        let app = Router::new().fallback(handle).with_state(state);
        if extras_internal {
            // The internal addresses the internal-links host links to, on
            // the same port: something answers there, so only the crawler's
            // refusal keeps it out. Served until the server closes.
            for ip in ["127.0.0.2", "::1"] {
                let ip: std::net::IpAddr = ip.parse()?;
                let extra = TcpListener::bind(SocketAddr::new(ip, addr.port())).await?;
                let app = app.clone();
                let closing = closing_rx_extra.clone();
                tokio::spawn(async move {
                    let _ = axum::serve(extra, app.into_make_service_with_connect_info::<SocketAddr>())
                        .with_graceful_shutdown(closed(closing))
                        .await;
                });
            }
        }
        let accepted = Arc::new(AtomicU64::new(0));
        let handshakes = Arc::new(Handshakes::default());
        let (stop, stopped) = oneshot::channel::<()>();
        let (task, ca) = match tls {
            Some(offer) => {
                // The web's names get certificates as they are asked for.
                let ca = Arc::new(TestCa::new(&["localhost".to_string()])?.with_untrusted(&untrusted)?);
                let config = ca.server_config(offer)?;
                let serving = Tls {
                    acceptor: tokio_rustls::TlsAcceptor::from(config),
                    app,
                    accepted: accepted.clone(),
                    handshakes: handshakes.clone(),
                    close_after,
                };
                (tokio::spawn(serving.serve(listener, stopped)), Some(ca))
            }
            None => {
                let counter = accepted.clone();
                let listener = listener.tap_io(move |tcp| {
                    counter.fetch_add(1, Ordering::Relaxed);
                    let _ = tcp.set_nodelay(true);
                });
                let task = tokio::spawn(async move {
                    let _ = axum::serve(listener, app.into_make_service_with_connect_info::<SocketAddr>())
                        .with_graceful_shutdown(async {
                            let _ = stopped.await;
                        })
                        .await;
                });
                (task, None)
            }
        };
        Ok(WebServer {
            addr,
            web,
            log,
            accepted,
            ca,
            handshakes,
            stop: Some(stop),
            closing,
            task: Some(task),
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn web(&self) -> Arc<SyntheticWeb> {
        self.web.clone()
    }

    /// Snapshot of the request log, in answer order.
    pub fn requests(&self) -> Vec<RequestRecord> {
        lock(&self.log).clone()
    }

    /// Number of requests answered so far (cheaper than `requests().len()`).
    pub fn request_count(&self) -> usize {
        lock(&self.log).len()
    }

    /// Connections accepted so far on the main address.
    pub fn connections_accepted(&self) -> u64 {
        self.accepted.load(Ordering::Relaxed)
    }

    /// The PEM certificate of the CA behind the HTTPS server's certificate
    /// (with [`WebExtras::tls`]), for the crawler's `--ca-file`.
    pub fn ca(&self) -> Option<&TestCa> {
        self.ca.as_deref()
    }

    /// TLS handshakes so far (all zero over plain HTTP).
    pub fn handshakes(&self) -> &Handshakes {
        &self.handshakes
    }

    /// Signals shutdown without waiting (same as dropping).
    pub fn shutdown(self) {}

    /// Signals shutdown and waits (at most `timeout`) for open connections to close.
    pub async fn stop(mut self, timeout: Duration) {
        let _ = self.closing.send(true);
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            let abort = task.abort_handle();
            if tokio::time::timeout(timeout, task).await.is_err() {
                abort.abort();
            }
        }
    }
}

impl Drop for WebServer {
    fn drop(&mut self) {
        let _ = self.closing.send(true);
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// The HTTPS server: each connection's handshake (bounded), then HTTP/2 or
/// HTTP/1.1 as ALPN chose, on the same handler as plain HTTP.
struct Tls {
    acceptor: tokio_rustls::TlsAcceptor,
    app: Router,
    accepted: Arc<AtomicU64>,
    handshakes: Arc<Handshakes>,
    /// End each connection after this many requests.
    close_after: Option<u32>,
}

impl Tls {
    /// Serves until `stopped`; open connections are then dropped.
    async fn serve(self, listener: TcpListener, mut stopped: oneshot::Receiver<()>) {
        let mut connections = tokio::task::JoinSet::new();
        loop {
            let accepted = tokio::select! {
                accepted = listener.accept() => accepted,
                _ = &mut stopped => return,
            };
            let Ok((tcp, peer)) = accepted else {
                // Out of descriptors, most likely: let some close.
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            };
            self.accepted.fetch_add(1, Ordering::Relaxed);
            let _ = tcp.set_nodelay(true);
            let acceptor = self.acceptor.clone();
            let handshakes = self.handshakes.clone();
            let app = self.app.clone().layer(axum::Extension(ConnectInfo(peer)));
            // Told when the connection has had its share of requests.
            let enough = Arc::new(tokio::sync::Notify::new());
            let app = match self.close_after {
                Some(limit) => {
                    let served = Arc::new(std::sync::atomic::AtomicU32::new(0));
                    let enough = enough.clone();
                    app.layer(axum::middleware::map_request(move |req: Request| {
                        if served.fetch_add(1, Ordering::Relaxed).saturating_add(1) >= limit {
                            enough.notify_one();
                        }
                        async move { req }
                    }))
                }
                None => app,
            };
            connections.spawn(async move {
                let tls = match tokio::time::timeout(Duration::from_secs(10), acceptor.accept(tcp)).await {
                    Ok(Ok(tls)) => tls,
                    _ => {
                        handshakes.failed.fetch_add(1, Ordering::Relaxed);
                        return;
                    }
                };
                let kind = match tls.get_ref().1.handshake_kind() {
                    Some(rustls::HandshakeKind::Resumed) => &handshakes.resumed,
                    _ => &handshakes.full,
                };
                kind.fetch_add(1, Ordering::Relaxed);
                let service = hyper_util::service::TowerToHyperService::new(app);
                let builder =
                    hyper_util::server::conn::auto::Builder::new(hyper_util::rt::TokioExecutor::new());
                let conn = builder.serve_connection(hyper_util::rt::TokioIo::new(tls), service);
                tokio::pin!(conn);
                tokio::select! {
                    _ = conn.as_mut() => return,
                    _ = enough.notified() => conn.as_mut().graceful_shutdown(),
                }
                // The answers under way are finished, then it closes.
                let _ = tokio::time::timeout(Duration::from_secs(30), conn).await;
            });
            // Reap the finished ones as we go.
            while connections.try_join_next().is_some() {}
        }
    }
}

/// Host header value without port, lower-cased (for the log).
fn host_for_log(raw: &str) -> String {
    let name = match raw.rsplit_once(':') {
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => raw,
    };
    name.to_ascii_lowercase()
}

/// Appends a record to the log; returns its index (the log only grows).
fn log_request(
    log: &Log,
    host: &str,
    path: &str,
    status: u16,
    arrived: SystemTime,
    client: Option<IpAddr>,
) -> usize {
    let mut log = lock(log);
    log.push(RequestRecord {
        host: host_for_log(host),
        path: path.to_string(),
        status,
        at: SystemTime::now(),
        arrived,
        done: None,
        client,
    });
    log.len() - 1
}

/// Sets [`RequestRecord::done`] of one record when dropped. hyper drops a
/// response body as soon as it has queued its last bytes for the socket
/// (or gave up on it), so this time is never after the client could see
/// the end of the response.
struct MarkDone {
    log: Log,
    index: usize,
}

impl MarkDone {
    /// Leaves the record's `done` unset.
    fn disarm(mut self) {
        self.index = usize::MAX;
    }
}

impl Drop for MarkDone {
    fn drop(&mut self) {
        if let Some(r) = lock(&self.log).get_mut(self.index) {
            r.done = Some(SystemTime::now());
        }
    }
}

/// `stream` as a response body that marks its record done when it is dropped.
fn tracked_body<S>(stream: S, done: MarkDone) -> Body
where
    S: futures::Stream<Item = Result<Bytes, Infallible>> + Send + 'static,
{
    Body::from_stream(futures::StreamExt::map(stream, move |chunk| {
        let _keep = &done;
        chunk
    }))
}

/// A whole body, with its `Content-Length` (as `Body::from(bytes)` would
/// send it), that marks its record done when it is dropped.
fn tracked_full(bytes: Bytes, done: MarkDone, headers: &mut axum::http::HeaderMap) -> Body {
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(bytes.len()));
    tracked_body(futures::stream::iter([Ok(bytes)]), done)
}

async fn handle(State(st): State<Arc<AppState>>, req: Request) -> axum::response::Response {
    let arrived = SystemTime::now();
    // Every listener serves with connect info; read it from the extensions
    // rather than as an extractor so a missing one cannot fail the request.
    let client = req
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|ConnectInfo(peer)| peer.ip());
    let host = req
        .headers()
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .or_else(|| req.uri().host())
        .unwrap_or("");
    let path = req.uri().path_and_query().map(|pq| pq.as_str()).unwrap_or("/");
    if let Some(delay) = st.web.latency(host, path) {
        tokio::time::sleep(delay).await;
    }
    if let Some(special) = st.web.special_host(host) {
        let reply = st.hostile.respond(special, host, path);
        let index = log_request(&st.log, host, path, reply.status, arrived, client);
        let done = MarkDone {
            log: st.log.clone(),
            index,
        };
        return hostile_response(reply, st.closing.clone(), done).await;
    }
    // Conditional headers only matter to the changing web, and only on the
    // methods RFC 7232 defines them for; otherwise they are not even read.
    let conditional =
        st.web.extras().changing.is_some() && matches!(*req.method(), Method::GET | Method::HEAD);
    let resp = if conditional {
        let headers = req.headers();
        // Values that are not visible ASCII are garbage: ignored, like unparsable ones.
        let if_none_match: Vec<&str> = headers
            .get_all(header::IF_NONE_MATCH)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .collect();
        let if_modified_since = headers
            .get(header::IF_MODIFIED_SINCE)
            .and_then(|v| v.to_str().ok());
        let cond = Conditions {
            if_none_match: &if_none_match,
            if_modified_since,
        };
        st.web.respond_conditional(host, path, cond)
    } else {
        st.web.respond(host, path)
    };
    let index = log_request(&st.log, host, path, resp.status, arrived, client);
    let done = MarkDone {
        log: st.log.clone(),
        index,
    };

    let mut out = axum::response::Response::new(Body::empty());
    *out.body_mut() = if resp.status == 304 {
        // No Content-Length: in a 304 it would have to be the 200's length
        // (RFC 7230 §3.3.2), and hyper sends no body for a 304 anyway.
        tracked_body(futures::stream::empty(), done)
    } else {
        tracked_full(resp.body, done, out.headers_mut())
    };
    *out.status_mut() = StatusCode::from_u16(resp.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let headers = out.headers_mut();
    for (name, value) in resp.headers {
        if let Ok(value) = HeaderValue::try_from(value) {
            headers.insert(name, value);
        }
    }
    out
}

/// Resolves when the server starts stopping.
async fn closed(mut closing: watch::Receiver<bool>) {
    let _ = closing.wait_for(|&c| c).await;
}

/// Turns a hostile [`Reply`] into a response, streaming the bodies that
/// must not be buffered; `/hang` is held until the server stops (or [`hostile::HANG`]).
async fn hostile_response(
    reply: Reply,
    closing: watch::Receiver<bool>,
    done: MarkDone,
) -> axum::response::Response {
    let mut out = axum::response::Response::new(Body::empty());
    let body = match reply.body {
        ReplyBody::Full(bytes) => tracked_full(bytes, done, out.headers_mut()),
        ReplyBody::Huge => {
            let head =
                futures::stream::once(async { Ok::<_, Infallible>(Bytes::from_static(hostile::HUGE_HEAD)) });
            let filler = futures::stream::unfold(
                hostile::HUGE_BYTES - hostile::HUGE_HEAD.len(),
                |left| async move {
                    let chunk = hostile::huge_chunk();
                    let n = left.min(chunk.len());
                    (n > 0).then(|| (Ok::<_, Infallible>(chunk.slice(..n)), left - n))
                },
            );
            tracked_body(futures::StreamExt::chain(head, filler), done)
        }
        ReplyBody::Drip => tracked_body(
            futures::stream::unfold((closing, true), |(closing, first)| async move {
                if !first {
                    tokio::select! {
                        _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                        _ = closed(closing.clone()) => return None,
                    }
                }
                Some((Ok::<_, Infallible>(Bytes::from_static(b" ")), (closing, false)))
            }),
            done,
        ),
        ReplyBody::Hang => {
            // Never answered: `done` stays unset.
            done.disarm();
            tokio::select! {
                _ = tokio::time::sleep(hostile::HANG) => {}
                _ = closed(closing) => {}
            }
            *out.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
            return out;
        }
    };
    *out.body_mut() = body;
    *out.status_mut() = StatusCode::from_u16(reply.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let headers = out.headers_mut();
    // Appended: a hostile reply may repeat a header (`/big-head`).
    for (name, value) in reply.headers {
        if let Ok(value) = HeaderValue::try_from(value) {
            headers.append(name, value);
        }
    }
    out
}
