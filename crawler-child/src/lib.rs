//! crawler-child: crawls the URLs its supervisor sends on stdin and writes
//! results to stdout (length-prefixed bincode frames, see
//! `link::framing`). Started by `supervisor`, not by hand.
//!
//! Per URL: robots check → politeness → fetch → parse → store → report.
//!
//! A library, so that a test can run a child in-process: [`run`] with a
//! [`Config`] and a [`Shutdown`]. The binary (`main.rs`) only parses the
//! command line and calls it.

#![warn(unreachable_pub)]

mod address_policy;
mod body_dict;
mod config;
mod dns;
mod dns_cache;
mod dns_upstream;
pub mod extract;
#[cfg(feature = "fault-injection")]
mod fault;
mod handshakes;
mod http;
mod metric;
mod open_files;
mod page_writer;
mod pipeline;
mod politeness;
mod prune;
mod recall;
mod resolve;
mod revisit;
mod robots;
mod robots_meta;
mod robots_records;
mod server_pace;
mod sitemap;
mod sitemap_due;
mod tls_client;
mod worker;

use std::sync::{Arc, Weak};
use std::time::Duration;

use anyhow::{bail, Context};
use link::framing::{read_frame, write_frame};
use link::protocol::{now_ms, CrawlResult, FromChild, ProcessInfo, ToChild};
use shared::metric::GaugeLine;
use shared::timing::TimingLog;
use store::Stores;
use tokio::io::AsyncWriteExt;
use tokio::sync::{mpsc, Semaphore};

pub use config::Config;
pub use resolve::HostOverrides;
pub use shared::shutdown::Shutdown;

const ROLE: &str = "crawler-child";

/// How long a stopping child works on the URLs it holds before it leaves
/// the rest to be handed out again (they are leased, nothing is lost).
/// A domain with a long Crawl-delay could otherwise keep it for minutes;
/// the supervisor kills a child still there after 15 s.
const DRAIN: Duration = Duration::from_secs(10);

/// Runs a crawler child on this process's stdin and stdout until the
/// supervisor says Stop, goes away (stdin closes) or `shutdown` asks it to
/// stop; then finishes the URLs in hand (within `DRAIN`), stores and
/// reports them.
/// Boxed: see [`shared::RoleFuture`].
pub fn run(config: Config, shutdown: Shutdown) -> shared::RoleFuture {
    run_on(config, shutdown, tokio::io::stdin(), tokio::io::stdout())
}

/// [`run`] over any pipe pair: `from_supervisor` carries [`ToChild`]
/// frames, `to_supervisor` gets [`FromChild`] frames. The binary passes
/// its stdin and stdout; a test can run a child as a task of its own
/// process over `tokio::io::duplex` (tests/tests/child_in_process.rs).
/// The pipes are boxed, so the child is compiled once for all of them.
pub fn run_on<R, W>(
    config: Config,
    shutdown: Shutdown,
    from_supervisor: R,
    to_supervisor: W,
) -> shared::RoleFuture
where
    R: tokio::io::AsyncRead + Unpin + Send + 'static,
    W: tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    Box::pin(serve(
        config,
        shutdown,
        Box::new(from_supervisor),
        Box::new(to_supervisor),
    ))
}

type FromSupervisor = Box<dyn tokio::io::AsyncRead + Unpin + Send>;
type ToSupervisor = Box<dyn tokio::io::AsyncWrite + Unpin + Send>;

async fn serve(
    config: Config,
    mut shutdown: Shutdown,
    mut from_supervisor: FromSupervisor,
    to_supervisor: ToSupervisor,
) -> anyhow::Result<()> {
    let Config {
        store,
        obs,
        hosts,
        dns_server,
        extra_roots,
    } = config;
    // A stop asked before the supervisor configured this child leaves
    // nothing to finish.
    let first = tokio::select! {
        first = read_frame::<_, ToChild>(&mut from_supervisor) => first?,
        _ = shutdown.requested() => return Ok(()),
    };
    let policy = match first {
        Some(ToChild::Configure(p)) => Arc::new(p),
        Some(other) => bail!("expected Configure as the first message, got {other:?}"),
        None => return Ok(()),
    };
    let debug = profiling::serve(obs.debug_addr, obs.debug_token(), profiling::axum::Router::new()).await?;
    metric::describe();
    let timing = TimingLog::open(&obs.timing_config(ROLE))?;
    timing.spawn_flusher();
    // The name comes from the dispatcher: checked before it names collections.
    let crawl = store::CrawlId::parse(&policy.crawl_id)?;
    let stores = Stores::connect(&store, ROLE, crawl)
        .await?
        .with_bulk_client(&store, ROLE)
        .await?;

    // Closed until the supervisor opens it (its first `Fence` comes right
    // after `Configure`, before any work).
    let fence = link::fence::Fence::default();
    let (report_tx, report_rx) = mpsc::unbounded_channel();
    let (pages, writer_done) =
        page_writer::PageWriter::spawn(stores.clone(), report_tx.clone(), timing.clone());
    let times = politeness::DomainTimes::new(stores.clone());
    times.spawn_flusher(timing.clone());
    let robots_records = robots_records::RobotsRecords::new(stores.clone());
    robots_records.spawn_flusher(timing.clone());
    let fetch_slot_count = open_files::slots(policy.child_concurrency.max(1) as usize);
    let ctx = Arc::new(pipeline::Ctx {
        http: http::Http::new(
            &policy,
            hosts,
            dns::Names::new(dns_upstream::Upstream::new(dns_server)?, timing.clone()),
            extra_roots,
        )?,
        canonical: pipeline::canonicalizer(&policy),
        robots: robots::RobotsSource {
            records: robots_records.clone(),
            policy: policy.clone(),
            timing: timing.clone(),
        },
        times: times.clone(),
        pages,
        body_dict: Arc::new(body_dict::BodyDictLearner::new(
            stores.clone(),
            policy.crawl_id.clone(),
        )),
        report: report_tx,
        timing: timing.clone(),
        fetch_slots: Semaphore::new(fetch_slot_count),
        fetch_slot_count,
        fence: fence.clone(),
        servers: server_pace::ServerPaces::default(),
        stopping: recall::Recalls::default(),
        policy,
    });
    let worker = worker::Worker::new(ctx.clone());
    tokio::spawn(write_gauges(
        Arc::downgrade(&worker),
        Arc::downgrade(&ctx),
        timing.clone(),
    ));

    let info = ProcessInfo {
        role: ROLE.into(),
        node: obs.node_name(),
        pid: std::process::id(),
        debug_addr: Some(debug.addr.to_string()),
    };
    let writer = tokio::spawn(write_results(to_supervisor, report_rx, info));

    // Read work until Stop, a shutdown (a signal), or the supervisor going
    // away (stdin closes). Frames are read in their own task: reading is not cancel-safe.
    let (work_tx, mut work_rx) = mpsc::channel(64);
    tokio::spawn(async move {
        loop {
            let msg = read_frame::<_, ToChild>(&mut from_supervisor).await;
            let end = !matches!(
                msg,
                Ok(Some(
                    ToChild::Work(_) | ToChild::Configure(_) | ToChild::Fence { .. } | ToChild::Recall { .. }
                ))
            );
            if work_tx.send(msg).await.is_err() || end {
                break;
            }
        }
    });
    loop {
        tokio::select! {
            msg = work_rx.recv() => match msg {
                Some(Ok(Some(ToChild::Work(items)))) => {
                    for item in items {
                        worker.enqueue(item);
                    }
                }
                Some(Ok(Some(ToChild::Configure(_)))) => {}
                Some(Ok(Some(ToChild::Fence { until_mono_ms }))) => fence.set(until_mono_ms),
                Some(Ok(Some(ToChild::Recall { domains }))) => worker.recall(&domains),
                Some(Ok(Some(ToChild::Stop)) | Ok(None)) | None => {
                    tracing::info!(held = worker.pending(), "stopping: handing back the URLs not started, finishing the requests under way");
                    worker.stop();
                    break;
                }
                Some(Err(e)) => {
                    tracing::error!(error = %e, "bad message from the supervisor; stopping");
                    break;
                }
            },
            _ = shutdown.requested() => {
                tracing::info!(held = worker.pending(), "signalled: handing back the URLs not started, finishing the requests under way");
                worker.stop();
                break;
            }
        }
    }
    // Drain: finish what we hold, store it, report it, within DRAIN.
    let deadline = tokio::time::Instant::now() + DRAIN;
    if tokio::time::timeout_at(deadline, worker.wait_idle())
        .await
        .is_err()
    {
        tracing::warn!(
            unfinished = worker.pending(),
            drain = ?DRAIN,
            "URLs unfinished at the drain deadline; leaving them to be crawled again"
        );
    }
    // A last line: what the final second did (handshakes, for one), for
    // whoever reads the log after the crawl.
    gauge_line(&worker, &ctx).write(&timing);
    drop(worker);
    drop(ctx); // drops the last PageWriter (unless a URL is stuck), so the writer flushes and ends
    let grace = Duration::from_secs(2);
    match tokio::time::timeout_at(deadline + grace, writer_done).await {
        Ok(res) => res.context("page writer")?,
        Err(_) => {
            tracing::warn!("pages still unwritten at the stop deadline; their URLs will be crawled again")
        }
    }
    let _ = tokio::time::timeout(grace, times.flush(&timing)).await;
    let _ = tokio::time::timeout(grace, robots_records.flush(&timing)).await;
    timing.flush();
    let _ = tokio::time::timeout(grace, writer).await;
    stores.shutdown().await;
    store::work::log_totals("crawler-child");
    Ok(())
}

/// Once a second, the child's queues and slots (in `/metrics` and the
/// timing log), for the bottleneck report: URLs held, fetches under way,
/// pages waiting to be stored. Holds the worker and the context weakly:
/// at the stop, dropping them must drop the last page writer, so the store
/// writer flushes and ends (a strong hold would keep it waiting for the
/// deadline).
async fn write_gauges(worker: Weak<worker::Worker>, ctx: Weak<pipeline::Ctx>, timing: TimingLog) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        tick.tick().await;
        let (Some(worker), Some(ctx)) = (worker.upgrade(), ctx.upgrade()) else {
            return;
        };
        gauge_line(&worker, &ctx).write(&timing);
    }
}

/// The child's gauges now (see [`write_gauges`]).
fn gauge_line(worker: &worker::Worker, ctx: &pipeline::Ctx) -> GaugeLine {
    let slots = ctx.fetch_slot_count;
    let pending = worker.pending() as f64;
    let active = slots.saturating_sub(ctx.fetch_slots.available_permits()) as f64;
    let store_queue = ctx.pages.queued() as f64;
    let mut line = GaugeLine::new();
    line.set(&metric::CHILD_PENDING, pending);
    line.set(&metric::FETCHES_ACTIVE, active);
    line.set(&metric::FETCH_SLOTS, slots as f64);
    line.set(&metric::STORE_QUEUE, store_queue);
    line.set(&metric::SERVERS_PACED, ctx.servers.len() as f64);
    line.set(&metric::DOMAINS_HELD, worker.domains() as f64);
    let names = ctx.http.dns_names();
    line.set(&metric::DNS_CACHED, names.cached() as f64);
    line.set(&metric::DNS_LOOKUPS_ACTIVE, names.active() as f64);
    // Running totals (the counters are in /metrics): a window's
    // difference over its fetches is handshakes per page (oprates).
    let tls = ctx.http.handshakes();
    let (full, resumed) = tls.totals();
    line.log_only([
        ("tls_handshakes.full", full as f64),
        ("tls_handshakes.resumed", resumed as f64),
    ]);
    line.log_only(
        tls.failures()
            .into_iter()
            .map(|(why, n)| (format!("tls_failures.{why}"), n as f64)),
    );
    line.log_only(profiling::gauge_values(false));
    line.log_only(store::work::gauge_values());
    line
}

/// Sends Ready, then results as they come, and a heartbeat every second so
/// the supervisor can tell a hung child from an idle one.
async fn write_results(
    to_supervisor: impl tokio::io::AsyncWrite + Unpin,
    mut results: mpsc::UnboundedReceiver<CrawlResult>,
    info: ProcessInfo,
) -> std::io::Result<()> {
    let mut out = tokio::io::BufWriter::with_capacity(64 * 1024, to_supervisor);
    write_frame(&mut out, &FromChild::Ready(info)).await?;
    out.flush().await?;
    let mut beat = tokio::time::interval(Duration::from_secs(1));
    loop {
        tokio::select! {
            r = results.recv() => {
                let Some(mut r) = r else { break };
                r.sent_ms = now_ms();
                write_frame(&mut out, &FromChild::Result(r)).await?;
                while let Ok(mut r) = results.try_recv() {
                    r.sent_ms = now_ms();
                    write_frame(&mut out, &FromChild::Result(r)).await?;
                }
                out.flush().await?;
            }
            _ = beat.tick() => {
                write_frame(&mut out, &FromChild::Heartbeat).await?;
                out.flush().await?;
            }
        }
    }
    out.flush().await
}
