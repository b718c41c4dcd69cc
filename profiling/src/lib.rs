//! Per-process debug HTTP endpoint for the crawler.
//!
//! Every process (dispatcher, supervisors, crawler children) serves the same small set of
//! routes, following Go's `net/http/pprof` conventions so that stock tooling works unchanged
//! (`go tool pprof http://HOST:PORT/debug/pprof/profile?seconds=30`, Prometheus scrapers):
//!
//! | route                                  | what                                          |
//! |----------------------------------------|-----------------------------------------------|
//! | `GET /debug/pprof/profile?seconds=N`   | CPU profile, gzipped pprof protobuf           |
//! | `GET /debug/pprof/flamegraph?seconds=N`| the same profile rendered as an SVG flamegraph|
//! | `GET /debug/pprof/folded?seconds=N`    | the same profile as collapsed stacks (text)   |
//! | `GET /metrics`                         | Prometheus text, with the `process_*` families|
//! | `GET /healthz`                         | `ok`                                          |
//!
//! Callers may merge extra routes (the dispatcher adds `/debug/cluster` and `/debug/targets`). Requests a
//! browser was made to send from another site are refused (`origin.rs`).
//!
//! Only one capture runs per process at a time (the profiler is process-wide); a concurrent
//! request to any of the three capture routes gets `409 Conflict`. The collapsed stacks of
//! `/debug/pprof/folded` (see [`folded::Stacks`]) merge across processes by adding counts;
//! the `cluster-profile` binary of this crate uses that to profile a whole crawl at once.
//!
//! Typical use in a binary:
//!
//! ```no_run
//! # async fn run() -> anyhow::Result<()> {
//! let metrics = profiling::install_metrics()?;
//! let server = profiling::start_debug_server(
//!     profiling::DebugServerConfig::default(),
//!     metrics,
//!     profiling::axum::Router::new(),
//! )
//! .await?;
//! println!("debug endpoint on http://{}", server.addr);
//! # Ok(()) }
//! ```

#![warn(unreachable_pub)]

mod cpu;
pub mod folded;
mod metrics;
mod origin;
mod process;
mod reach;
mod server;

use std::net::{Ipv4Addr, SocketAddr};

use anyhow::Context as _;
use metrics_exporter_prometheus::PrometheusHandle;
use tokio::task::JoinHandle;

/// Re-exported so binaries can build extra routes without depending on axum themselves
/// (and without risking a second, incompatible axum version in the tree).
pub use axum;

pub use crate::folded::Stacks;
pub use crate::metrics::{install_metrics, spawn_upkeep};
pub use crate::process::{
    cpu_seconds_of, gauge_values, machine_cpu, process_sample, MachineCpu, ProcessSample,
};
pub use crate::reach::reachable_addr;

/// Where and how the debug server listens.
#[derive(Debug, Clone)]
pub struct DebugServerConfig {
    /// Address to bind. The default `127.0.0.1:0` lets the OS pick a free port, which matters
    /// because many crawler children run on one host; the bound port is reported back in
    /// [`DebugServer::addr`].
    pub addr: SocketAddr,
    /// Bearer token. Required when `addr` is not loopback, because profiles and metrics
    /// leak internals and a 300 s CPU profile is a cheap way to slow a process down.
    /// When set, it is enforced on loopback too.
    pub token: Option<String>,
    /// What the token guards.
    pub guards: Guards,
}

/// The routes a token guards.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Guards {
    /// All of them (a token the operator gave).
    #[default]
    Everything,
    /// All but the read-only `/metrics`, `/healthz` and `/debug/cluster`
    /// (the run's own token, see `shared::debug_token`): control
    /// (`/control/*`, `/domains/unhalt`) and profiles are guarded. Allowed
    /// on loopback only.
    ControlAndProfiles,
}

impl Default for DebugServerConfig {
    fn default() -> Self {
        Self {
            addr: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
            token: None,
            guards: Guards::Everything,
        }
    }
}

/// A running debug server. Dropping this value does NOT stop the server (the task is
/// detached); call [`DebugServer::abort`] to stop it explicitly.
#[derive(Debug)]
pub struct DebugServer {
    /// The address actually bound (with the OS-chosen port when the config asked for port 0).
    pub addr: SocketAddr,
    task: JoinHandle<()>,
}

impl DebugServer {
    /// Stops serving. In-flight requests are dropped.
    pub fn abort(&self) {
        self.task.abort();
    }
}

/// Binds `config.addr` and serves the debug routes (plus `extra`) in a spawned tokio task.
///
/// Also makes sure the metrics upkeep thread is running (see [`spawn_upkeep`]).
///
/// What every crawler process does at start: install the Prometheus
/// recorder and serve the debug endpoints (plus `extra` routes) on `addr`.
pub async fn serve(
    addr: SocketAddr,
    token: shared::debug_token::DebugToken,
    extra: axum::Router,
) -> anyhow::Result<DebugServer> {
    use shared::debug_token::DebugToken;
    let metrics = install_metrics()?;
    let (token, guards) = match token {
        DebugToken::Given(t) => (t, Guards::Everything),
        DebugToken::Run(t) => (t, Guards::ControlAndProfiles),
    };
    let config = DebugServerConfig {
        addr,
        token: Some(token),
        guards,
    };
    start_debug_server(config, metrics, extra).await
}

/// # Errors
/// Fails when binding to a non-loopback address without a (non-empty) token, or when the
/// address cannot be bound.
pub async fn start_debug_server(
    config: DebugServerConfig,
    metrics: PrometheusHandle,
    extra: axum::Router,
) -> anyhow::Result<DebugServer> {
    let token = config.token.filter(|t| !t.is_empty());
    let guards_all = token.is_some() && config.guards == Guards::Everything;
    if !guards_all && !is_loopback(&config.addr) {
        anyhow::bail!(
            "debug server on non-loopback address {} requires a bearer token (--debug-token)",
            config.addr
        );
    }

    let listener = tokio::net::TcpListener::bind(config.addr)
        .await
        .with_context(|| format!("binding debug server to {}", config.addr))?;
    let addr = listener.local_addr().context("debug server local_addr")?;

    spawn_upkeep(metrics.clone());
    let router = server::router(metrics, token, config.guards, extra);

    let task = tokio::spawn(async move {
        if let Err(err) = axum::serve(listener, router).await {
            tracing::error!(addr = %addr, error = %err, "debug server stopped");
        }
    });

    Ok(DebugServer { addr, task })
}

/// Loopback check that also treats IPv4-mapped IPv6 (`::ffff:127.0.0.1`) as loopback.
fn is_loopback(addr: &SocketAddr) -> bool {
    addr.ip().to_canonical().is_loopback()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A control POST as a tool sends it is taken; without the token, with
    /// a wrong one, from a page of another origin, or for a rebound name:
    /// refused, and the route never runs.
    #[tokio::test]
    async fn control_posts_need_the_token_and_our_own_origin() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use std::sync::Arc;
        let stops = Arc::new(AtomicUsize::new(0));
        let route = {
            let stops = stops.clone();
            axum::Router::new().route(
                "/control/stop",
                axum::routing::post(move || {
                    stops.fetch_add(1, Ordering::SeqCst);
                    async { "stopping" }
                }),
            )
        };
        let metrics = install_metrics().unwrap();
        let http = shared::http_client::builder().no_proxy().build().unwrap();
        for (token, guards) in [
            (Some("s3cret"), Guards::Everything),
            (Some("s3cret"), Guards::ControlAndProfiles),
            (None, Guards::Everything),
        ] {
            let config = DebugServerConfig {
                token: token.map(String::from),
                guards,
                ..DebugServerConfig::default()
            };
            let server = start_debug_server(config, metrics.clone(), route.clone())
                .await
                .unwrap();
            let url = format!("http://{}/control/stop", server.addr);
            let post = |bearer: Option<&str>, headers: &[(&str, String)]| {
                let mut req = http.post(&url);
                if let Some(b) = bearer {
                    req = req.bearer_auth(b);
                }
                for (k, v) in headers {
                    req = req.header(*k, v);
                }
                async move { req.send().await.unwrap().status().as_u16() }
            };
            let before = stops.load(Ordering::SeqCst);
            let origin = [("origin", "https://evil.example".to_string())];
            let rebound = [("host", format!("evil.example:{}", server.addr.port()))];
            if let Some(t) = token {
                assert_eq!(post(None, &[]).await, 401, "no token");
                assert_eq!(post(Some("wrong"), &[]).await, 401, "a wrong token");
                assert_eq!(post(Some(t), &origin).await, 403, "a foreign Origin");
                assert_eq!(stops.load(Ordering::SeqCst), before);
                assert_eq!(post(Some(t), &[]).await, 200);
                // Any other route is guarded too (e.g. the dispatcher's /domains/unhalt).
                let other = format!("http://{}/domains/unhalt", server.addr);
                let status = http.post(&other).send().await.unwrap().status().as_u16();
                assert_eq!(status, 401, "{guards:?}: an unnamed route without the token");
                // /metrics: guarded by a token the operator gave, not by the run's.
                let metrics_url = format!("http://{}/metrics", server.addr);
                let status = http.get(&metrics_url).send().await.unwrap().status().as_u16();
                let open = guards == Guards::ControlAndProfiles;
                assert_eq!(status, if open { 200 } else { 401 }, "{guards:?}");
            } else {
                assert_eq!(post(None, &origin).await, 403, "a foreign Origin");
                assert_eq!(post(None, &rebound).await, 403, "a rebound name");
                let img = [("sec-fetch-site", "cross-site".to_string())];
                assert_eq!(post(None, &img).await, 403, "a browser, cross-site");
                assert_eq!(stops.load(Ordering::SeqCst), before);
                assert_eq!(post(None, &[]).await, 200);
            }
            assert_eq!(stops.load(Ordering::SeqCst), before + 1);
            server.abort();
        }
    }

    #[test]
    fn loopback_detection() {
        assert!(is_loopback(&"127.0.0.1:0".parse().unwrap()));
        assert!(is_loopback(&"[::1]:0".parse().unwrap()));
        assert!(is_loopback(&"[::ffff:127.0.0.1]:0".parse().unwrap()));
        assert!(!is_loopback(&"0.0.0.0:0".parse().unwrap()));
        assert!(!is_loopback(&"[::]:0".parse().unwrap()));
        assert!(!is_loopback(&"10.1.2.3:9000".parse().unwrap()));
    }
}
