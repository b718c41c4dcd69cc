//! Operator commands served next to the debug endpoints.
//!
//! `POST /domains/unhalt?domain=D` lets a halted domain crawl again; the
//! event loop applies it and answers. (Same address and token as
//! `/debug/pprof`.) `scripts/unhalt.sh` wraps it.

use std::collections::HashMap;

use profiling::axum::extract::Query;
use profiling::axum::http::{header, StatusCode};
use profiling::axum::routing::post;
use profiling::axum::Router;
use tokio::sync::{mpsc, oneshot};

pub(crate) enum AdminCmd {
    Unhalt {
        domain: String,
        done: oneshot::Sender<bool>,
    },
}

pub(crate) fn route(tx: mpsc::Sender<AdminCmd>) -> Router {
    Router::new().route(
        "/domains/unhalt",
        post(move |Query(q): Query<HashMap<String, String>>| {
            let tx = tx.clone();
            async move {
                let Some(domain) = q.get("domain").filter(|d| !d.is_empty()).cloned() else {
                    return (
                        StatusCode::BAD_REQUEST,
                        [(header::CONTENT_TYPE, "text/plain")],
                        "missing ?domain=\n".to_string(),
                    );
                };
                let (done, answer) = oneshot::channel();
                if tx
                    .send(AdminCmd::Unhalt {
                        domain: domain.clone(),
                        done,
                    })
                    .await
                    .is_err()
                {
                    return (
                        StatusCode::SERVICE_UNAVAILABLE,
                        [(header::CONTENT_TYPE, "text/plain")],
                        "dispatcher is stopping\n".into(),
                    );
                }
                let unhalted = answer.await.unwrap_or(false);
                let body = serde_json::json!({"domain": domain, "unhalted": unhalted}).to_string() + "\n";
                (StatusCode::OK, [(header::CONTENT_TYPE, "application/json")], body)
            }
        }),
    )
}
