//! The stop: the summary, the supervisors' Byes (each waited for at most
//! [`STOP_WAIT`]), and the last writes of the frontier (every domain's
//! progress among them) while heartbeats go on.

use std::time::Duration;

use anyhow::Context;
use bytes::Bytes;
use tokio::sync::mpsc;

use crate::config::Flags;
use crate::frontier::SupId;
use crate::persist::FrontierWriter;
use crate::stats::{self, Summary};

use super::Dispatcher;

/// How long a stopping dispatcher waits for its supervisors' Byes. A
/// supervisor gives its children at most 15 s and then kills them, so a
/// live one answers well within this; a stuck or gone one is not waited
/// for longer (what it held stays `queued` in the store).
const STOP_WAIT: Duration = Duration::from_secs(25);
/// How often a stop waiting on the store says so.
const SAY_WAIT_EVERY: Duration = Duration::from_secs(3);

/// What the dispatcher says when a second signal ends it before its last
/// writes: how many frontier writes were not made, and how the next run
/// on the same store recovers them.
pub(super) fn on_abandon(writer: FrontierWriter) {
    shared::shutdown::on_abandon(move || {
        tracing::error!(
            frontier_writes = writer.backlog(),
            "NOT WRITTEN: frontier_writes writes (new URLs from stored pages' links, URLs' outcomes, \
             domains' progress). The next run on this store recovers them: a page stored past its \
             domain's recorded progress finishes its URL and its links are offered again, and every URL \
             leased and not finished is still queued. Not recovered: a link whose page was not stored \
             either (that URL is crawled again, so its links come again), and an outcome without a page \
             (the URL is tried again)."
        );
    });
}

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
        // The supervisors first: they stop starting requests now, while
        // the frontier's writes, however slow the store, go on below.
        let live = self.state.stop();
        self.apply().await?;
        self.flush_beating().await;
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
        self.flush_beating().await;
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
    /// Every [`SAY_WAIT_EVERY`] it says what it waits for, and that a
    /// second signal ends the wait (a store that went away keeps it
    /// waiting as long as it stays away).
    async fn flush_beating(&mut self) {
        let writer = self.writer.clone();
        let flush = writer.flush();
        tokio::pin!(flush);
        let mut beat = tokio::time::interval(Duration::from_secs(1));
        let started = tokio::time::Instant::now();
        let mut say = tokio::time::interval_at(started + SAY_WAIT_EVERY, SAY_WAIT_EVERY);
        loop {
            tokio::select! {
                _ = &mut flush => return,
                _ = beat.tick() => self.beat_to_live().await,
                _ = say.tick() => {
                    let waited = started.elapsed().as_secs();
                    let writes = self.writer.backlog();
                    tracing::warn!(
                        frontier_writes = writes,
                        waited_s = waited,
                        "stopping: waiting for the store to take the frontier's last writes; \
                         a second SIGTERM (or Ctrl-C) exits now, and the next run recovers them (docs/running.md)"
                    );
                    shared::live_line::line(&format!(
                        "STOPPING: waiting {waited}s for the store: {writes} frontier writes unwritten \
                         (SIGTERM/Ctrl-C again exits now)"
                    ));
                }
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
