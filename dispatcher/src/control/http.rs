//! The control endpoints, served next to the debug endpoints (same
//! address, same bearer token): each request becomes one [`Command`] for
//! the event loop, which answers it. `crawlctl` is their client.
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

use super::{Command, MAX_SEEDS_PER_CALL};

/// A command and where its answer goes: a JSON value, or why it was refused.
pub(crate) struct Request {
    pub(crate) command: Command,
    pub(crate) answer: oneshot::Sender<Result<serde_json::Value, String>>,
}

/// Longest a request waits for the event loop's answer.
const ANSWER_WAIT: Duration = Duration::from_secs(30);
/// Largest body `/control/seeds` reads.
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
async fn ask(tx: mpsc::Sender<Request>, command: Command) -> Reply {
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

/// The command a request asks for, or why it is malformed.
pub(crate) fn parse(
    path: &str,
    q: &HashMap<String, String>,
    body: &str,
    now_ms: u64,
) -> Result<Command, String> {
    let domain = || {
        q.get("domain")
            .filter(|d| !d.is_empty())
            .cloned()
            .ok_or_else(|| "missing ?domain=".to_string())
    };
    let number = |key: &str| -> Result<Option<u64>, String> {
        q.get(key)
            .map(|v| {
                v.parse::<u64>()
                    .map_err(|_| format!("{key}={v:?} is not a whole number"))
            })
            .transpose()
    };
    Ok(match path {
        "status" => Command::Status,
        "pause" => Command::Pause,
        "resume" => Command::Resume,
        "stop" => Command::Stop,
        "block" => {
            let until_ms = match (number("for_s")?, number("until_ms")?) {
                (Some(_), Some(_)) => return Err("give for_s or until_ms, not both".into()),
                (Some(s), None) => Some(now_ms.saturating_add(s.saturating_mul(1000))),
                (None, until) => until,
            };
            let reason = q.get("reason").cloned().unwrap_or_default();
            Command::Block {
                domain: domain()?,
                until_ms,
                reason,
            }
        }
        "unblock" | "unhalt" => Command::Unblock { domain: domain()? },
        "delay" => {
            let ms = match q.get("ms").map(String::as_str) {
                None => return Err("missing ?ms= (a number of milliseconds, or default)".into()),
                Some("default") => None,
                Some(_) => number("ms")?,
            };
            Command::Delay {
                domain: domain()?,
                ms,
            }
        }
        "seeds" => {
            let seeds: Vec<String> = body
                .lines()
                .map(|l| l.split('#').next().unwrap_or_default().trim())
                .filter(|l| !l.is_empty())
                .map(str::to_string)
                .collect();
            if seeds.len() > MAX_SEEDS_PER_CALL {
                return Err(super::Refused::TooManySeeds.to_string());
            }
            Command::AddSeeds(seeds)
        }
        other => return Err(format!("no control command {other:?}")),
    })
}

pub(crate) fn route(tx: mpsc::Sender<Request>) -> Router {
    let handle = move |path: &'static str| {
        let tx = tx.clone();
        move |Query(q): Query<HashMap<String, String>>, body: String| {
            let tx = tx.clone();
            async move {
                match parse(path, &q, &body, link::protocol::now_ms()) {
                    Ok(command) => ask(tx, command).await,
                    Err(why) => reply(StatusCode::BAD_REQUEST, why),
                }
            }
        }
    };
    let seeds = handle("seeds");
    Router::new()
        .route("/control/status", get(handle("status")))
        .route("/control/pause", post(handle("pause")))
        .route("/control/resume", post(handle("resume")))
        .route("/control/stop", post(handle("stop")))
        .route("/control/block", post(handle("block")))
        .route("/control/unblock", post(handle("unblock")))
        .route("/control/delay", post(handle("delay")))
        .route(
            "/control/seeds",
            post(seeds).layer(profiling::axum::extract::DefaultBodyLimit::max(MAX_SEEDS_BODY)),
        )
        .route("/domains/unhalt", post(handle("unhalt")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn requests_become_commands_and_malformed_ones_say_why() {
        let now = 1_000_000;
        assert_eq!(
            parse(
                "block",
                &q(&[("domain", "a.test"), ("for_s", "60"), ("reason", "asked")]),
                "",
                now
            ),
            Ok(Command::Block {
                domain: "a.test".into(),
                until_ms: Some(now + 60_000),
                reason: "asked".into()
            })
        );
        assert!(parse(
            "block",
            &q(&[("domain", "a.test"), ("for_s", "1"), ("until_ms", "5")]),
            "",
            now
        )
        .is_err());
        assert!(parse("block", &q(&[("for_s", "1")]), "", now)
            .unwrap_err()
            .contains("domain"));
        assert!(parse("delay", &q(&[("domain", "a.test"), ("ms", "-3")]), "", now)
            .unwrap_err()
            .contains("whole number"));
        assert_eq!(
            parse("delay", &q(&[("domain", "a.test"), ("ms", "default")]), "", now),
            Ok(Command::Delay {
                domain: "a.test".into(),
                ms: None
            })
        );
        assert_eq!(
            parse(
                "seeds",
                &q(&[]),
                "# new hosts\nhttp://a.test/\n\n  http://b.test/x # why\n",
                now
            ),
            Ok(Command::AddSeeds(vec![
                "http://a.test/".into(),
                "http://b.test/x".into()
            ]))
        );
        assert_eq!(
            parse("unhalt", &q(&[("domain", "a.test")]), "", now),
            Ok(Command::Unblock {
                domain: "a.test".into()
            })
        );
    }
}
