//! Plays many supervisors against a running dispatcher, over real ZeroMQ
//! sockets and the cluster-secret handshake (`link::dispatcher_link`,
//! the supervisors' own link), so that the dispatcher alone is measured:
//! every leased URL is answered at once as fetched (status 200, a fake
//! size and content type), with `--links` links, `--dup-share` of them to
//! URLs linked before and the rest new URLs `http://d<n % domains>.test/p<n>`.
//! No HTTP, no children, no pages.
//!
//! The cluster secret comes as a supervisor's does: `CRAWLER_CLUSTER_SECRET`
//! or `--cluster-secret-file` (never the secret itself on the command line).
//!
//! Start the dispatcher with the domains as seeds (or `--scope any`) and
//! `--max-pages N`, so the crawl ends by itself after N URLs: each fake
//! supervisor stops when the dispatcher says Stop, or (with `--urls N`)
//! once N results have been sent, whichever comes first. The last line on
//! stdout is one JSON object: leases received, results sent, seconds, and
//! `urls_per_s` (leases out plus results in, per second); and the same
//! from the first lease to the last result (`active_seconds`,
//! `active_urls_per_s`), without the joining and leaving around them,
//! which weigh in a short run (the first results after a restart). Used
//! by `scripts/bench-dispatcher.sh`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Parser;
use link::args::ClusterArgs;
use link::cluster_auth::SECRET_ENV;
use link::dispatcher_link::{DispatcherLink, Heard};
use link::protocol::{
    split_results, CrawlResult, Intro, Outcome, ProcessInfo, ToDispatcher, ToSupervisor, WorkItem,
};

#[derive(Parser, Debug)]
#[command(about = "Plays many supervisors against a dispatcher (see scripts/bench-dispatcher.sh)")]
struct Args {
    /// The dispatcher's ZeroMQ endpoint.
    #[arg(long, default_value = "tcp://127.0.0.1:5555")]
    dispatcher: String,
    #[command(flatten)]
    cluster: ClusterArgs,
    /// Fake supervisors, each on its own connection.
    #[arg(long, default_value_t = 50)]
    supervisors: usize,
    /// URLs each may hold (its announced capacity).
    #[arg(long, default_value_t = 256)]
    capacity: u32,
    /// Links in each result.
    #[arg(long, default_value_t = 20)]
    links: usize,
    /// Share of the links that point to URLs linked before.
    #[arg(long, default_value_t = 0.5)]
    dup_share: f64,
    /// Domains the new URLs are spread over: `http://d<i>.test/`.
    #[arg(long, default_value_t = 10_000)]
    domains: u64,
    /// With K > 0, new URL n goes to domain `d<n / K>` instead: a stream
    /// of domains, each linked K times and then never again, like the
    /// long tail of domains a real crawl meets. The dispatcher then needs
    /// `--scope any`.
    #[arg(long, default_value_t = 0)]
    urls_per_domain: u64,
    /// Leave (Bye) once this many results are sent over all fake
    /// supervisors, the dispatcher's `--max-pages` (0: only on its Stop).
    #[arg(long, default_value_t = 0)]
    urls: u64,
    /// Give up after this long (the dispatcher should have said Stop).
    #[arg(long, default_value_t = 3600)]
    max_secs: u64,
}

/// Counters over all fake supervisors.
#[derive(Default)]
struct Totals {
    leases: AtomicU64,
    results: AtomicU64,
    /// New URLs invented so far: the next one is `http://d<n % domains>.test/p<n>`.
    next_url: AtomicU64,
    /// Microseconds from the start to the first lease (`u64::MAX`: none
    /// yet) and to the last result sent.
    first_lease_us: AtomicU64,
    last_result_us: AtomicU64,
}

impl Totals {
    fn new() -> Totals {
        Totals {
            first_lease_us: AtomicU64::new(u64::MAX),
            ..Totals::default()
        }
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Arc::new(Args::parse());
    let totals = Arc::new(Totals::new());
    let start = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..args.supervisors {
        let (args, totals) = (args.clone(), totals.clone());
        tasks.spawn(async move { play(i, &args, &totals, start).await });
    }
    let deadline = Duration::from_secs(args.max_secs);
    let mut failed = 0;
    let all = async {
        while let Some(done) = tasks.join_next().await {
            match done {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    failed += 1;
                    eprintln!("a fake supervisor failed: {e:#}");
                }
                Err(e) => {
                    failed += 1;
                    eprintln!("a fake supervisor panicked: {e}");
                }
            }
        }
    };
    if tokio::time::timeout(deadline, all).await.is_err() {
        eprintln!("gave up after {deadline:?}");
        failed += 1;
    }
    let secs = start.elapsed().as_secs_f64();
    let (leases, results) = (
        totals.leases.load(Ordering::Relaxed),
        totals.results.load(Ordering::Relaxed),
    );
    let (first, last) = (
        totals.first_lease_us.load(Ordering::Relaxed),
        totals.last_result_us.load(Ordering::Relaxed),
    );
    let active = (last > first).then(|| (last - first) as f64 / 1e6);
    let line = serde_json::json!({
        "supervisors": args.supervisors,
        "leases_received": leases,
        "results_sent": results,
        "seconds": (secs * 100.0).round() / 100.0,
        "urls_per_s": ((leases + results) as f64 / secs.max(1e-9)).round(),
        "active_seconds": active.map(|a| (a * 100.0).round() / 100.0),
        "active_urls_per_s": active.map(|a| ((leases + results) as f64 / a.max(1e-9)).round()),
        "failed_supervisors": failed,
    });
    println!("{line}");
    if failed > 0 {
        anyhow::bail!("{failed} fake supervisors failed");
    }
    Ok(())
}

/// One fake supervisor: joins, answers every lease at once, leaves on
/// Stop (or past `--urls` results). Any trouble with the link (a refusal,
/// a failed send, a lost connection) fails it: a benchmark must not hide
/// reconnections, which a real supervisor would make.
async fn play(i: usize, args: &Args, totals: &Totals, start: Instant) -> anyhow::Result<()> {
    let since = || u64::try_from(start.elapsed().as_micros()).unwrap_or(u64::MAX);
    let key = args.cluster.key(std::env::var_os(SECRET_ENV))?;
    let silence = Duration::from_secs(30);
    let mut link = DispatcherLink::connect(&args.dispatcher, key, Duration::from_secs(60), silence).await?;
    let intro = Intro {
        supervisor_id: format!("load{i}"),
        capacity: args.capacity,
        process: ProcessInfo {
            role: "supervisor".into(),
            node: "load".into(),
            pid: std::process::id(),
            debug_addr: None,
        },
    };
    link.welcome(&intro).await.context("joining")?;
    // The first message of a connection: what we hold (nothing).
    if !link.send(&ToDispatcher::Holding(Vec::new())).await {
        anyhow::bail!("could not tell the dispatcher what we hold");
    }
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ (i as u64 + 1));
    let mut beat = tokio::time::interval(Duration::from_secs(1));
    let enough = || args.urls > 0 && totals.results.load(Ordering::Relaxed) >= args.urls;
    loop {
        tokio::select! {
            msg = link.recv() => match msg {
                Some(Heard::Message(ToSupervisor::Work(items))) => {
                    totals.leases.fetch_add(items.len() as u64, Ordering::Relaxed);
                    totals.first_lease_us.fetch_min(since(), Ordering::Relaxed);
                    let results: Vec<CrawlResult> = items.into_iter().map(|w| answer(w, args, totals, &mut rng)).collect();
                    // In messages of bounded size, as a supervisor sends them.
                    for batch in split_results(results) {
                        let n = batch.len() as u64;
                        if !link.send(&ToDispatcher::Results(batch)).await {
                            anyhow::bail!("could not send results to the dispatcher");
                        }
                        totals.results.fetch_add(n, Ordering::Relaxed);
                    }
                    totals.last_result_us.fetch_max(since(), Ordering::Relaxed);
                }
                Some(Heard::Message(ToSupervisor::Stop)) => return leave(&mut link).await,
                Some(Heard::Reintroduce) => link.reintroduce().await,
                Some(Heard::Challenge(nonce)) => link.answer(nonce, &intro).await,
                Some(Heard::Welcome(_)) => {
                    if !link.send(&ToDispatcher::Holding(Vec::new())).await {
                        anyhow::bail!("could not tell the dispatcher what we hold");
                    }
                }
                Some(Heard::Refused(why)) => anyhow::bail!("the dispatcher refused us: {}", why.as_str()),
                Some(_) => {}
                None => anyhow::bail!("lost the dispatcher"),
            },
            // Only a welcomed link carries heartbeats (not while introducing again).
            _ = beat.tick(), if link.is_up() => {
                if !link.send(&ToDispatcher::Heartbeat { holding: Vec::new() }).await {
                    anyhow::bail!("could not send a heartbeat to the dispatcher");
                }
            }
        }
        if enough() {
            return leave(&mut link).await;
        }
    }
}

/// Says Bye and waits (a bounded time) for the dispatcher's Farewell.
async fn leave(link: &mut DispatcherLink) -> anyhow::Result<()> {
    if link.send(&ToDispatcher::Bye).await {
        link.await_farewell(Duration::from_secs(5)).await;
    }
    Ok(())
}

/// A result for `w`: fetched, with new and repeated links.
fn answer(w: WorkItem, args: &Args, totals: &Totals, rng: &mut Rng) -> CrawlResult {
    let domains = args.domains.max(1);
    let outlinks = (0..args.links)
        .map(|_| {
            let made = totals.next_url.load(Ordering::Relaxed);
            let n = if made > 0 && rng.unit() < args.dup_share {
                rng.below(made)
            } else {
                totals.next_url.fetch_add(1, Ordering::Relaxed)
            };
            let domain = match args.urls_per_domain {
                0 => n % domains,
                k => n / k,
            };
            format!("http://d{domain}.test/p{n}")
        })
        .collect();
    CrawlResult {
        server: None,
        lease: w.lease,
        url: w.url,
        domain: w.domain,
        depth: w.depth,
        outcome: Outcome::Fetched {
            status: 200,
            final_url: None,
            content_type: Some("text/html".into()),
            bytes: 20_000,
        },
        outlinks,
        sent_ms: 0,
    }
}

/// xorshift64*: enough to pick links, and no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}
