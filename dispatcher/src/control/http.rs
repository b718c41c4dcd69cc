//! The control endpoints, served next to the debug endpoints (same
//! address, same bearer token): each request is read as a typed
//! [`ControlRequest`] (`request.rs`, the type `crawlctl` sends) and handed
//! as it is to the event loop, which answers it.
//!
//! ```text
//! GET  /control/status
//! POST /control/pause | /control/resume | /control/stop
//! POST /control/block?domain=D[&for_s=N | &until_ms=T][&reason=R]
//! POST /control/unblock?domain=D        (also lifts a circuit breaker's halt)
//! POST /control/delay?domain=D&ms=N     (ms=default: back to --min-delay-ms)
//! POST /control/seeds                   (body: one URL per line, # comments)
//! POST /domains/unhalt?domain=D         (as unblock; kept for scripts/unhalt.sh)
//! ```

use std::collections::HashMap;
use std::time::Duration;

use profiling::axum::extract::Query;
use profiling::axum::http::{header, StatusCode};
use profiling::axum::routing::{get, post};
use profiling::axum::Router;
use tokio::sync::{mpsc, oneshot};

use super::request::{ControlRequest, Verb};

/// A command and where its answer goes: a JSON value, or why it was refused.
pub(crate) struct Request {
    pub(crate) command: ControlRequest,
    pub(crate) answer: oneshot::Sender<Result<serde_json::Value, String>>,
}

/// Longest a request waits for the event loop's answer.
const ANSWER_WAIT: Duration = Duration::from_secs(30);
/// Largest body `/control/seeds` reads (the others keep axum's 2 MB).
const MAX_SEEDS_BODY: usize = 64 * 1024 * 1024;

type Reply = (StatusCode, [(header::HeaderName, &'static str); 1], String);

fn reply(status: StatusCode, body: String) -> Reply {
    let kind = if status == StatusCode::OK {
        "application/json"
    } else {
        "text/plain"
    };
    (status, [(header::CONTENT_TYPE, kind)], body + "\n")
}

/// Hands `command` to the event loop and turns its answer into a reply.
async fn ask(tx: mpsc::Sender<Request>, command: ControlRequest) -> Reply {
    let (answer, answered) = oneshot::channel();
    if tx.send(Request { command, answer }).await.is_err() {
        return reply(
            StatusCode::SERVICE_UNAVAILABLE,
            "the dispatcher is stopping".into(),
        );
    }
    match tokio::time::timeout(ANSWER_WAIT, answered).await {
        Ok(Ok(Ok(value))) => reply(StatusCode::OK, value.to_string()),
        Ok(Ok(Err(why))) => reply(StatusCode::BAD_REQUEST, why),
        Ok(Err(_)) => reply(
            StatusCode::SERVICE_UNAVAILABLE,
            "the dispatcher is stopping".into(),
        ),
        Err(_) => reply(
            StatusCode::SERVICE_UNAVAILABLE,
            "no answer from the dispatcher in time".into(),
        ),
    }
}

pub(crate) fn route(tx: mpsc::Sender<Request>) -> Router {
    let handle = move |verb: Verb| {
        let tx = tx.clone();
        move |Query(q): Query<HashMap<String, String>>, body: String| {
            let tx = tx.clone();
            async move {
                match ControlRequest::from_http(verb, &q, &body) {
                    Ok(request) => ask(tx, request).await,
                    Err(why) => reply(StatusCode::BAD_REQUEST, why),
                }
            }
        }
    };
    let mut router = Router::new();
    for verb in Verb::ALL {
        let method = match verb {
            _ if verb.reads_only() => get(handle(verb)),
            Verb::Seeds => {
                post(handle(verb)).layer(profiling::axum::extract::DefaultBodyLimit::max(MAX_SEEDS_BODY))
            }
            _ => post(handle(verb)),
        };
        router = router.route(verb.path(), method);
    }
    // As unblock; kept for scripts/unhalt.sh.
    router.route("/domains/unhalt", post(handle(Verb::Unblock)))
}
