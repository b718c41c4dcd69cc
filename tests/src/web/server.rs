//! One HTTP/1.1 server on one 127.0.0.1 port that serves every host of a
//! [`SyntheticWeb`], routed by the `Host` header, and logs each request.
//!
//! A single axum fallback handler (no routing table) keeps per-request
//! overhead to parsing the host/path and rendering the body.
//!
//! With [`WebExtras`] the same handler also serves the hostile hosts
//! (streamed, dripping and never-answered bodies) and slow hosts.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use std::convert::Infallible;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::serve::ListenerExt;
use axum::Router;
use bytes::Bytes;
use tokio::net::TcpListener;
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;

use super::hostile::{self, HostileState, Reply, ReplyBody};
use super::{SyntheticWeb, WebExtras, WebSpec};

/// One answered request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestRecord {
    /// Host header, lower-cased, without the port.
    pub host: String,
    /// Request target as sent (path and query).
    pub path: String,
    /// 0: the request is never answered (`hostile.test/hang`).
    pub status: u16,
    /// When the response head was ready (after a slow host's sleep); for a
    /// never-answered request, when it arrived.
    pub at: SystemTime,
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
    stop: Option<oneshot::Sender<()>>,
    closing: watch::Sender<bool>,
    task: Option<JoinHandle<()>>,
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

    /// [`WebServer::start`] with opt-in additions (hostile hosts, slow hosts).
    pub async fn start_with(spec: WebSpec, extras: WebExtras, bind: SocketAddr) -> anyhow::Result<WebServer> {
        let listener = TcpListener::bind(bind).await?;
        let addr = listener.local_addr()?;
        let web = Arc::new(SyntheticWeb::with_extras(spec, extras, addr.port()));
        let log: Log = Arc::new(Mutex::new(Vec::new()));
        let (closing, closing_rx) = watch::channel(false);
        let state = Arc::new(AppState {
            web: web.clone(),
            log: log.clone(),
            hostile: HostileState::default(),
            closing: closing_rx,
        });
        let app = Router::new().fallback(handle).with_state(state);
        let listener = listener.tap_io(|tcp| {
            let _ = tcp.set_nodelay(true);
        });
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _ = stopped.await;
                })
                .await;
        });
        Ok(WebServer {
            addr,
            web,
            log,
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

/// Host header value without port, lower-cased (for the log).
fn host_for_log(raw: &str) -> String {
    let name = match raw.rsplit_once(':') {
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => raw,
    };
    name.to_ascii_lowercase()
}

async fn handle(State(st): State<Arc<AppState>>, req: Request) -> axum::response::Response {
    let host = req
        .headers()
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .or_else(|| req.uri().host())
        .unwrap_or("");
    let path = req.uri().path_and_query().map(|pq| pq.as_str()).unwrap_or("/");
    if let Some(delay) = st.web.slow_delay(host) {
        tokio::time::sleep(delay).await;
    }
    if let Some(special) = st.web.special_host(host) {
        let reply = st.hostile.respond(special, path);
        lock(&st.log).push(RequestRecord {
            host: host_for_log(host),
            path: path.to_string(),
            status: reply.status,
            at: SystemTime::now(),
        });
        return hostile_response(reply, st.closing.clone()).await;
    }
    let resp = st.web.respond(host, path);
    lock(&st.log).push(RequestRecord {
        host: host_for_log(host),
        path: path.to_string(),
        status: resp.status,
        at: SystemTime::now(),
    });

    let mut out = axum::response::Response::new(Body::from(resp.body));
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
async fn hostile_response(reply: Reply, closing: watch::Receiver<bool>) -> axum::response::Response {
    let body = match reply.body {
        ReplyBody::Full(bytes) => Body::from(bytes),
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
            Body::from_stream(futures::StreamExt::chain(head, filler))
        }
        ReplyBody::Drip => Body::from_stream(futures::stream::unfold(
            (closing, true),
            |(closing, first)| async move {
                if !first {
                    tokio::select! {
                        _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                        _ = closed(closing.clone()) => return None,
                    }
                }
                Some((Ok::<_, Infallible>(Bytes::from_static(b" ")), (closing, false)))
            },
        )),
        ReplyBody::Hang => {
            tokio::select! {
                _ = tokio::time::sleep(hostile::HANG) => {}
                _ = closed(closing) => {}
            }
            let mut out = axum::response::Response::new(Body::empty());
            *out.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
            return out;
        }
    };
    let mut out = axum::response::Response::new(body);
    *out.status_mut() = StatusCode::from_u16(reply.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let headers = out.headers_mut();
    for (name, value) in reply.headers {
        if let Ok(value) = HeaderValue::try_from(value) {
            headers.insert(name, value);
        }
    }
    out
}
