//! crawler-child: crawls the URLs its supervisor sends on stdin and writes
//! results to stdout (length-prefixed bincode frames, see
//! `link::framing`). Started by `supervisor`, not by hand.
//!
//! Per URL: robots check → politeness → fetch → parse → store → report.

mod body_dict;
mod dns;
mod fault;
mod http;
mod page_writer;
mod pipeline;
mod politeness;
mod robots;
mod worker;

use std::sync::{Arc, Weak};
use std::time::Duration;

use anyhow::{bail, Context};
use clap::Parser;
use link::framing::{read_frame, write_frame};
use link::protocol::{now_ms, CrawlResult, FromChild, ProcessInfo, ToChild};
use shared::cli::ObsArgs;
use shared::resolve::HostOverrides;
use shared::timing::TimingLog;
use store::StoreArgs;
use store::Stores;
use tokio::io::AsyncWriteExt;
use tokio::sync::{mpsc, Semaphore};

const ROLE: &str = "crawler-child";

/// mimalloc instead of the system allocator: link extraction, URL
/// resolution and page documents allocate many small values per page, and
/// on realistic pages mimalloc made extraction 13% cheaper (`pagebench`).
/// `shared::alloc::tune` keeps it from returning memory too eagerly.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser, Debug)]
#[command(
    version,
    about = "Crawler child process: started by a supervisor, speaks on stdin/stdout"
)]
struct Args {
    #[command(flatten)]
    store: StoreArgs,
    #[command(flatten)]
    obs: ObsArgs,
    /// Host override HOST:PORT:ADDR (like curl --resolve); `*.suffix` allowed.
    #[arg(long)]
    resolve: Vec<String>,
    /// Hosts file (`ADDR NAME...` lines) with more overrides.
    #[arg(long)]
    hosts_file: Vec<std::path::PathBuf>,
}

/// How long a stopping child works on the URLs it holds before it leaves
/// the rest to be handed out again (they are leased, nothing is lost).
/// A domain with a long Crawl-delay could otherwise keep it for minutes;
/// the supervisor kills a child still there after 15 s.
const DRAIN: Duration = Duration::from_secs(10);

fn main() -> anyhow::Result<()> {
    shared::alloc::tune();
    shared::logging::init("crawler-child");
    let args = Args::parse();
    let runtime = shared::runtime()?;
    let res = runtime.block_on(run(args));
    // A URL stuck in synchronous code must not keep the process alive.
    runtime.shutdown_timeout(Duration::from_secs(1));
    res
}

async fn run(args: Args) -> anyhow::Result<()> {
    let overrides = HostOverrides::from_args(&args.resolve, &args.hosts_file)?;
    let mut stdin = tokio::io::stdin();
    let policy = match read_frame::<_, ToChild>(&mut stdin).await? {
        Some(ToChild::Configure(p)) => Arc::new(p),
        Some(other) => bail!("expected Configure as the first message, got {other:?}"),
        None => return Ok(()),
    };
    let debug = profiling::serve(
        args.obs.debug_addr,
        args.obs.debug_token.clone(),
        profiling::axum::Router::new(),
    )
    .await?;
    shared::metric_help::describe_all();
    let timing = TimingLog::open(&args.obs.timing_config(ROLE))?;
    timing.spawn_flusher();
    // The name comes from the dispatcher: checked before it names collections.
    let crawl = store::CrawlId::parse(&policy.crawl_id)?;
    let stores = Stores::connect(&args.store, ROLE, crawl).await?;

    // Closed until the supervisor opens it (its first `Fence` comes right
    // after `Configure`, before any work).
    let fence = link::fence::Fence::default();
    let (report_tx, report_rx) = mpsc::unbounded_channel();
    let (pages, writer_done) =
        page_writer::PageWriter::spawn(stores.clone(), report_tx.clone(), timing.clone());
    let times = politeness::DomainTimes::new(stores.clone());
    times.spawn_flusher(timing.clone());
    let ctx = Arc::new(pipeline::Ctx {
        http: http::Http::new(&policy, overrides)?,
        canonical: pipeline::canonicalizer(&policy),
        robots: robots::RobotsSource {
            stores: stores.clone(),
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
        fetch_slots: Semaphore::new(policy.child_concurrency.max(1) as usize),
        fence: fence.clone(),
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
        node: args.obs.node_name(),
        pid: std::process::id(),
        debug_addr: Some(debug.addr.to_string()),
    };
    let writer = tokio::spawn(write_stdout(report_rx, info));

    // Read work until Stop, a signal, or the supervisor going away (stdin
    // closes). Frames are read in their own task: reading is not cancel-safe.
    let (work_tx, mut work_rx) = mpsc::channel(64);
    tokio::spawn(async move {
        loop {
            let msg = read_frame::<_, ToChild>(&mut stdin).await;
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
    let signalled = shared::shutdown::signalled();
    tokio::pin!(signalled);
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
                Some(Ok(Some(ToChild::Stop)) | Ok(None)) | None => break,
                Some(Err(e)) => {
                    tracing::error!(error = %e, "bad message from the supervisor; stopping");
                    break;
                }
            },
            _ = &mut signalled => {
                tracing::info!("signalled; finishing the URLs in hand");
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
/// writer flushes and ends (a strong hold kept it waiting for the deadline).
async fn write_gauges(worker: Weak<worker::Worker>, ctx: Weak<pipeline::Ctx>, timing: TimingLog) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        tick.tick().await;
        let (Some(worker), Some(ctx)) = (worker.upgrade(), ctx.upgrade()) else {
            return;
        };
        let slots = ctx.policy.child_concurrency.max(1) as usize;
        let pending = worker.pending() as f64;
        let active = slots.saturating_sub(ctx.fetch_slots.available_permits()) as f64;
        let store_queue = ctx.pages.queued() as f64;
        metrics::gauge!("crawler_child_pending").set(pending);
        metrics::gauge!("crawler_fetches_active").set(active);
        metrics::gauge!("crawler_fetch_slots").set(slots as f64);
        metrics::gauge!("crawler_store_queue").set(store_queue);
        let values = [
            ("child_pending", pending),
            ("fetches_active", active),
            ("fetch_slots", slots as f64),
            ("store_queue", store_queue),
        ];
        let mut line: Vec<(String, f64)> = values.iter().map(|(k, v)| (k.to_string(), *v)).collect();
        line.extend(
            profiling::gauge_values(false)
                .into_iter()
                .map(|(k, v)| (k.to_string(), v)),
        );
        line.extend(store::work::gauge_values());
        timing.gauges(&line);
    }
}

/// Sends Ready, then results as they come, and a heartbeat every second so
/// the supervisor can tell a hung child from an idle one.
async fn write_stdout(
    mut results: mpsc::UnboundedReceiver<CrawlResult>,
    info: ProcessInfo,
) -> std::io::Result<()> {
    let mut out = tokio::io::BufWriter::with_capacity(64 * 1024, tokio::io::stdout());
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
