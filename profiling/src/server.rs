//! Router and bearer-token auth for the debug server.

use std::sync::Arc;

use axum::extract::{Query, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use metrics_exporter_prometheus::PrometheusHandle;
use serde::Deserialize;

use crate::cpu::{self, CaptureError};
use crate::origin::{refuse_foreign, HostChecked};
use crate::Guards;

/// Content type Prometheus expects for the text exposition format.
const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4";

/// Builds the full router: built-in routes, merged `extra` routes, the refusal of
/// requests a browser was made to send (`origin`), and (if a token is set)
/// the auth layer over all of them — including `extra`, so caller routes such as
/// `/debug/cluster` cannot accidentally be left open.
pub(crate) fn router(
    metrics: PrometheusHandle,
    token: Option<String>,
    guards: Guards,
    extra: Router,
) -> Router {
    let builtin = Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/metrics", get(metrics_handler))
        .route("/debug/pprof/", get(index))
        .route("/debug/pprof/profile", get(profile_handler))
        .route("/debug/pprof/flamegraph", get(flamegraph_handler))
        .route("/debug/pprof/folded", get(folded_handler))
        .with_state(metrics);

    let router = builtin.merge(extra);
    // Outermost: what a browser was made to send is refused, token or not.
    // Names in Host are let through only behind a token that guards all.
    let host_checked = HostChecked(token.is_none() || guards != Guards::Everything);
    let router = match token {
        Some(token) => router.layer(middleware::from_fn_with_state(
            (Arc::<str>::from(token), guards),
            require_bearer,
        )),
        None => router,
    };
    router.layer(middleware::from_fn_with_state(host_checked, refuse_foreign))
}

/// Rejects a request for a route `guards` covers without `Authorization:
/// Bearer <token>` with 401.
async fn require_bearer(
    State((token, guards)): State<(Arc<str>, Guards)>,
    req: Request,
    next: Next,
) -> Response {
    if !guarded(guards, req.uri().path()) || bearer_matches(req.headers(), &token) {
        next.run(req).await
    } else {
        (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Bearer")],
            "unauthorized\n",
        )
            .into_response()
    }
}

fn guarded(guards: Guards, path: &str) -> bool {
    match guards {
        Guards::Everything => true,
        // An allow-list: a route added later (as `/domains/unhalt` was,
        // beside `/control/*`) is guarded unless it is named here.
        Guards::ControlAndProfiles => !matches!(path, "/metrics" | "/healthz" | "/debug/cluster"),
    }
}

fn bearer_matches(headers: &HeaderMap, token: &str) -> bool {
    let Some(value) = headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let Some((scheme, presented)) = value.split_once(' ') else {
        return false;
    };
    scheme.eq_ignore_ascii_case("bearer") && constant_time_eq(presented.trim(), token)
}

/// Length-revealing but otherwise constant-time comparison, so response timing does not
/// leak how many leading token bytes were right.
fn constant_time_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

async fn metrics_handler(State(metrics): State<PrometheusHandle>) -> Response {
    (
        [(header::CONTENT_TYPE, HeaderValue::from_static(PROMETHEUS_TEXT))],
        crate::metrics::render(&metrics),
    )
        .into_response()
}

async fn index() -> &'static str {
    "debug endpoints:\n\
     /debug/pprof/profile?seconds=N     CPU profile (gzipped pprof protobuf)\n\
     /debug/pprof/flamegraph?seconds=N  CPU profile as SVG flamegraph\n\
     /debug/pprof/folded?seconds=N      CPU profile as collapsed stacks (text)\n\
     /metrics                           Prometheus metrics\n\
     /healthz                           liveness\n"
}

#[derive(Debug, Deserialize)]
struct ProfileParams {
    seconds: Option<u64>,
}

async fn profile_handler(Query(params): Query<ProfileParams>) -> Response {
    let duration = cpu::duration_from_query(params.seconds);
    match cpu::profile_pprof_gz(duration).await {
        Ok(body) => (
            [
                (header::CONTENT_TYPE, "application/octet-stream"),
                // Same as Go's net/http/pprof, so browsers/curl -OJ save it as a file.
                (header::CONTENT_DISPOSITION, "attachment; filename=\"profile\""),
                (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            ],
            body,
        )
            .into_response(),
        Err(err) => capture_error(err),
    }
}

async fn flamegraph_handler(Query(params): Query<ProfileParams>) -> Response {
    let duration = cpu::duration_from_query(params.seconds);
    match cpu::profile_flamegraph_svg(duration).await {
        Ok(body) => ([(header::CONTENT_TYPE, "image/svg+xml")], body).into_response(),
        Err(err) => capture_error(err),
    }
}

async fn folded_handler(Query(params): Query<ProfileParams>) -> Response {
    let duration = cpu::duration_from_query(params.seconds);
    match cpu::profile_folded(duration).await {
        Ok(body) => ([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], body).into_response(),
        Err(err) => capture_error(err),
    }
}

fn capture_error(err: CaptureError) -> Response {
    match err {
        CaptureError::Busy => (
            StatusCode::CONFLICT,
            "a CPU profile is already being captured in this process\n",
        )
            .into_response(),
        CaptureError::Failed(err) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("profiling failed: {err:#}\n"),
        )
            .into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(auth: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::AUTHORIZATION, HeaderValue::from_str(auth).unwrap());
        h
    }

    #[test]
    fn bearer_parsing() {
        assert!(bearer_matches(&headers("Bearer s3cret"), "s3cret"));
        assert!(bearer_matches(&headers("bearer s3cret"), "s3cret"));
        assert!(!bearer_matches(&headers("Bearer s3cre"), "s3cret"));
        assert!(!bearer_matches(&headers("Bearer s3cretX"), "s3cret"));
        assert!(!bearer_matches(&headers("Basic s3cret"), "s3cret"));
        assert!(!bearer_matches(&headers("s3cret"), "s3cret"));
        assert!(!bearer_matches(&HeaderMap::new(), "s3cret"));
    }
}
