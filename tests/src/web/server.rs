//! One HTTP/1.1 server on one 127.0.0.1 port that serves every host of a
//! [`SyntheticWeb`], routed by the `Host` header, and logs each request.
//!
//! A single axum fallback handler (no routing table) keeps per-request
//! overhead to parsing the host/path and rendering the body.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::serve::ListenerExt;
use axum::Router;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::{SyntheticWeb, WebSpec};

/// One answered request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestRecord {
    /// Host header, lower-cased, without the port.
    pub host: String,
    /// Request target as sent (path and query).
    pub path: String,
    pub status: u16,
    pub at: SystemTime,
}

type Log = Arc<Mutex<Vec<RequestRecord>>>;

struct AppState {
    web: Arc<SyntheticWeb>,
    log: Log,
}

/// A running synthetic-web server. Dropping it stops it (gracefully).
pub struct WebServer {
    addr: SocketAddr,
    web: Arc<SyntheticWeb>,
    log: Log,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

fn lock(log: &Log) -> MutexGuard<'_, Vec<RequestRecord>> {
    // A panic while pushing cannot leave the Vec inconsistent; ignore poisoning.
    log.lock().unwrap_or_else(|e| e.into_inner())
}

impl WebServer {
    /// Binds `bind` (port 0 = any), then builds the web with the real port and serves it.
    pub async fn start(spec: WebSpec, bind: SocketAddr) -> anyhow::Result<WebServer> {
        let listener = TcpListener::bind(bind).await?;
        let addr = listener.local_addr()?;
        let web = Arc::new(SyntheticWeb::new(spec, addr.port()));
        let log: Log = Arc::new(Mutex::new(Vec::new()));
        let state = Arc::new(AppState {
            web: web.clone(),
            log: log.clone(),
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
