//! supervisor: one per node. Connects to the dispatcher over ZeroMQ,
//! starts and watches `crawler-child` processes, hands them URLs (each
//! domain always to the same child, so that child alone paces it) and
//! relays their results.
//!
//! A library, so that a test can run a supervisor in-process: [`run`] with
//! a [`Config`] and a [`Shutdown`]. The binary (`main.rs`) only parses the
//! command line and the cluster secret and calls it. Inside, the decisions
//! (restarts, drain, reconnects, results kept until acknowledged, the right
//! to crawl) are made by an I/O-free core (`core.rs`), which the loop in
//! `shell.rs` feeds with events.

#![warn(unreachable_pub)]

mod child;
mod config;
mod core;
mod lane;
pub mod launch;
mod metric;
mod outbox;
mod right;
mod shell;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use link::dispatcher_link::DispatcherLink;
use link::fence::Fence;
use link::protocol::ProcessInfo;
use shared::timing::TimingLog;
use tokio::sync::mpsc;

pub use config::Config;
pub use shared::shutdown::Shutdown;

use crate::child::ChildSpec;
use crate::core::{Core, Event, Identity, Settings};
use crate::launch::{Launch, Processes};
use crate::shell::Shell;

const ROLE: &str = "supervisor";

/// Runs a supervisor until the dispatcher ends the crawl, `shutdown` asks
/// it to stop, or it has to leave (a slot that keeps crashing, a
/// dispatcher unreachable for too long: then with that error). Either way
/// it drains its children and hands in their results first.
/// Boxed: see [`shared::RoleFuture`].
pub fn run(config: Config, shutdown: Shutdown) -> shared::RoleFuture {
    run_with(config, shutdown, Arc::new(Processes))
}

/// [`run`] with children started by `launcher` (the binary's are
/// processes; a test's may be tasks of its own process, see [`launch`]).
pub fn run_with(config: Config, shutdown: Shutdown, launcher: Arc<dyn Launch>) -> shared::RoleFuture {
    Box::pin(serve(config, shutdown, launcher))
}

async fn serve(config: Config, shutdown: Shutdown, launcher: Arc<dyn Launch>) -> anyhow::Result<()> {
    if config.children == 0 {
        bail!("--children must be at least 1");
    }
    let debug = profiling::serve(
        config.debug_addr,
        config.debug_token.clone(),
        profiling::axum::Router::new(),
    )
    .await?;
    metric::describe();
    let timing = TimingLog::open(&config.timing)?;
    timing.spawn_flusher();
    let gauges = tokio::spawn(write_gauges(timing));
    let outcome = supervise(config, debug.addr, shutdown, launcher).await;
    gauges.abort();
    debug.abort();
    outcome
}

/// Once a second, this process's and this machine's CPU use as a gauge
/// line in the timing log: one supervisor runs per node, so the bottleneck
/// report gets every node's CPU from them.
async fn write_gauges(timing: TimingLog) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        tick.tick().await;
        timing.gauges(&profiling::gauge_values(true));
    }
}

/// Joins the dispatcher, starts the child slots and serves until the end.
async fn supervise(
    config: Config,
    debug_addr: SocketAddr,
    mut shutdown: Shutdown,
    launcher: Arc<dyn Launch>,
) -> anyhow::Result<()> {
    let Config {
        dispatcher,
        id,
        node,
        connect_timeout,
        dispatcher_silence,
        reconnect_patience,
        children,
        child_capacity,
        child_bin,
        child,
        hang_timeout,
        max_child_crashes,
        key,
        debug_addr: _,
        debug_token: _,
        timing: _,
    } = config;
    let id = id.unwrap_or_else(|| format!("{node}-{}", std::process::id()));
    let me = Identity {
        id: id.clone(),
        capacity: child_capacity * children as u32,
        process: ProcessInfo {
            role: ROLE.into(),
            node,
            pid: std::process::id(),
            debug_addr: Some(debug_addr.to_string()),
        },
    };
    if key.is_insecure() {
        tracing::warn!(supervisor = %id, "--insecure-cluster: no cluster secret is proven either way");
    }
    // Nothing runs yet: a stop asked for while joining ends the run at once.
    let join = async {
        let mut link = DispatcherLink::connect(
            &dispatcher,
            key,
            connect_timeout,
            dispatcher_silence.max(Duration::from_secs(2)),
        )
        .await?;
        link.set_patience(reconnect_patience);
        tracing::info!(
            supervisor = %id,
            "connected to {dispatcher}, debug on http://{debug_addr}"
        );
        let policy = link.welcome(&me.intro()).await?;
        anyhow::Ok((link, policy))
    };
    let (link, policy) = tokio::select! {
        joined = join => joined?,
        () = shutdown.requested() => {
            tracing::info!(supervisor = %id, "signalled before joining the dispatcher; stopped");
            return Ok(());
        }
    };

    let program = match child_bin {
        Some(p) => p,
        None => std::env::current_exe()?
            .parent()
            .context("executable has no directory")?
            .join("crawler-child"),
    };
    let heartbeat_timeout = Duration::from_millis(policy.heartbeat_timeout_ms);
    let spec = ChildSpec {
        program,
        args: child.args,
        env: child.env,
        policy,
        hang_timeout,
    };
    let fence = Fence::default();
    let (ev_tx, events) = mpsc::channel(4096);
    let slots = (0..children)
        .map(|slot| {
            let (lanes, inbox) = lane::lanes();
            tokio::spawn(child::run_slot(
                slot,
                spec.clone(),
                launcher.clone(),
                fence.clone(),
                inbox,
                ev_tx.clone(),
            ));
            lanes
        })
        .collect();
    // The slots hold the only senders: when all have ended, `events` closes.
    drop(ev_tx);
    let core = Core::new(Settings {
        slots: children,
        me,
        heartbeat_timeout,
        max_crashes: max_child_crashes,
    });
    let mut shell = Shell {
        core,
        link,
        slots,
        events,
        fence,
    };
    // Our right to crawl runs from the Join the Welcome answered.
    let joined_at = shell.link.answered_at();
    if let Some(outcome) = shell.feed(Event::LinkUp { joined_at }).await {
        return outcome;
    }
    shell.serve(shutdown).await?;
    tracing::info!(supervisor = %id, "stopped");
    Ok(())
}
