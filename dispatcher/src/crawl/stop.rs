//! The stop: the summary, the supervisors' Byes (each waited for at most
//! [`STOP_WAIT`]), and the last writes of the frontier (every domain's
//! progress among them) while heartbeats go on.

use std::time::Duration;

use anyhow::Context;
use bytes::Bytes;
use tokio::sync::mpsc;

use crate::config::Flags;
use crate::frontier::SupId;
use crate::stats::{self, Summary};

use super::Dispatcher;

/// How long a stopping dispatcher waits for its supervisors' Byes. A
/// supervisor gives its children at most 15 s and then kills them, so a
/// live one answers well within this; a stuck or gone one is not waited
/// for longer (what it held stays `queued` in the store).
const STOP_WAIT: Duration = Duration::from_secs(25);

impl Dispatcher {
    /// Flushes the frontier, stops the supervisors, prints the summary.
    pub(super) async fn finish(
        mut self,
        args: &Flags,
        settings: &serde_json::Value,
        signalled: bool,
        inbox: &mut mpsc::Receiver<(Bytes, Bytes)>,
    ) -> anyhow::Result<()> {
        // The summary and the last log lines start below the progress line.
        shared::live_line::finish();
        let finish_reason = self.state.finish_reason(signalled);
        self.flush_beating().await;
        let live = self.state.stop();
        self.apply().await?;
        tracing::info!(
            supervisors = live.len(),
            "crawl finished; waiting for the supervisors to stop"
        );
        self.await_byes(&live, inbox).await;
        // Every domain's progress, so that the next run reads each queue
        // from where this one left it.
        self.state.record_progress(true);
        if let Err(e) = self.apply().await {
            tracing::warn!(error = %e, "while stopping");
        }
        // Results that arrived while supervisors drained are in the store too.
        self.writer.flush().await;
        self.control_writer.settle(Duration::from_secs(10)).await;
        // Its cursor would hold the client's shutdown up.
        self.seen_scan = None;
        self.stores.shutdown().await;
        // The zeromq crate has no linger: give the last Farewells a moment
        // to leave before the socket is dropped with the process.
        tokio::time::sleep(Duration::from_millis(300)).await;
        self.timing.flush();
        store::work::log_totals("dispatcher");
        let stats = self.state.stats();
        let elapsed = stats.started.elapsed().as_secs_f64();
        let f = self.state.frontier();
        let summary = Summary {
            crawl_id: &self.policy.crawl_id,
            started_at: stats::rfc3339(stats.started_at),
            finished_at: stats::rfc3339(std::time::SystemTime::now()),
            finish_reason,
            settings,
            elapsed_secs: elapsed,
            pages_per_sec: stats.counts.fetched as f64 / elapsed.max(1e-3),
            frontier_left: self.state.left(),
            seen_urls: self.state.seen_count(),
            domains: f.domain_count(),
            domains_forgotten: f.forgotten(),
            domains_moved: f.domains_moved(),
            supervisors: self.state.members().len(),
            store_work: store::work::totals_json(),
            counts: &stats.counts,
        };
        let json = serde_json::to_string(&summary)?;
        println!("{json}");
        if let Some(path) = &args.summary_file {
            std::fs::write(path, format!("{json}\n"))
                .with_context(|| format!("writing {}", path.display()))?;
        }
        Ok(())
    }

    /// Keeps handling messages (last results, Byes) until every live
    /// supervisor has said Bye, or [`STOP_WAIT`] passes. Heartbeats go on
    /// meanwhile: a supervisor that heard nothing for its silence limit
    /// would take us for dead and reconnect as a new peer, and its Bye
    /// would then come from a stranger.
    async fn await_byes(&mut self, live: &[SupId], inbox: &mut mpsc::Receiver<(Bytes, Bytes)>) {
        let deadline = tokio::time::Instant::now() + STOP_WAIT;
        let mut beat = tokio::time::interval(Duration::from_secs(1));
        while live.iter().any(|s| !self.state.said_bye(*s)) {
            tokio::select! {
                msg = tokio::time::timeout_at(deadline, inbox.recv()) => match msg {
                    Ok(Some((identity, payload))) => {
                        if let Err(e) = self.on_message(identity, &payload).await {
                            tracing::warn!(error = %e, "while stopping");
                        }
                    }
                    _ => {
                        tracing::warn!("some supervisors did not confirm the stop");
                        return;
                    }
                },
                _ = beat.tick() => self.beat_to_live().await,
            }
        }
    }

    /// Writes what the frontier writer holds, heartbeating meanwhile: with
    /// a slow store this can take longer than a supervisor's silence limit,
    /// and a supervisor that hears nothing takes us for dead and reconnects.
    async fn flush_beating(&mut self) {
        let writer = self.writer.clone();
        let flush = writer.flush();
        tokio::pin!(flush);
        let mut beat = tokio::time::interval(Duration::from_secs(1));
        loop {
            tokio::select! {
                _ = &mut flush => return,
                _ = beat.tick() => self.beat_to_live().await,
            }
        }
    }

    async fn beat_to_live(&mut self) {
        self.state.beat_to_live();
        if let Err(e) = self.apply().await {
            tracing::warn!(error = %e, "while stopping");
        }
    }
}
