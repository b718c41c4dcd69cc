//! Writes a crawl's stored frontier straight into the store, as a crawl
//! that admitted `--urls` URLs and was stopped midway would leave it, so
//! that the dispatcher's start-up can be timed on 10 million stored URLs
//! without first crawling them (`scripts/bench-dispatcher.sh
//! --stored-urls N`).
//!
//! URLs are `http://d<n % domains>.test/<path>/p<n>`, about as long as a
//! real page's URL (the dispatcher_load crawl's are shorter), except that
//! the first of each domain is its seed, `http://d<n>.test/` (the seeds
//! the benchmark gives the dispatcher), also stored in the crawl's seeds
//! collection, as a crawl leaves them. They are admitted in order (`seq`
//! = n + 1), each domain's in segments of up to 256, and crawled in that
//! order: the first `1 - queued_share` of them are finished (one in fifty
//! failed, one in a hundred disallowed, recorded as outcomes), the rest
//! queued; each domain's progress is recorded where its queued URLs start,
//! as a stopped crawl records it. The frontier's indexes are made as the
//! dispatcher makes them.

use std::time::Instant;

use anyhow::Context;
use clap::Parser;
use futures::stream::{self, StreamExt};
use shared::failure::FailureKind;
use store::docs::{Outcome, OutcomeDoc, SeedDoc, SegmentDoc, SegmentEntry, SegmentState, UrlState};
use store::StoreArgs;
use store::{CrawlId, Stores};

#[derive(Parser, Debug)]
#[command(about = "Writes a stored frontier of N URLs (see scripts/bench-dispatcher.sh --stored-urls)")]
struct Args {
    #[command(flatten)]
    store: StoreArgs,
    #[arg(long)]
    crawl_id: CrawlId,
    /// URLs to store.
    #[arg(long)]
    urls: u64,
    /// Domains they are spread over.
    #[arg(long, default_value_t = 10_000)]
    domains: u64,
    /// Share of the URLs still queued (the newest ones).
    #[arg(long, default_value_t = 0.5)]
    queued_share: f64,
    /// URLs a segment holds at most (the dispatcher's: 256).
    #[arg(long, default_value_t = 256)]
    segment_urls: u64,
    /// Segments an insert.
    #[arg(long, default_value_t = 200)]
    batch: u64,
    /// Inserts under way at once.
    #[arg(long, default_value_t = 4)]
    concurrent: usize,
}

fn url_of(n: u64, domains: u64) -> String {
    let d = n % domains;
    if n < domains {
        format!("http://d{d}.test/")
    } else {
        format!("http://d{d}.test/section-{}/articles/2026/p{n}.html", n % 37)
    }
}

/// How URL `n` ended, if it did.
fn ended(n: u64, done_below: u64) -> Option<(UrlState, Option<FailureKind>)> {
    if n >= done_below {
        None
    } else if n % 100 == 7 {
        Some((UrlState::Disallowed, None))
    } else if n % 50 == 3 {
        Some((UrlState::Failed, Some(FailureKind::Timeout)))
    } else {
        None
    }
}

fn seq_of(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX).saturating_add(1)
}

/// Segment `k` of domain `d`, of `size` URLs: its URLs `n = d + (k * size + i) * domains`.
fn segment(d: u64, k: u64, size: u64, urls: u64, domains: u64) -> Option<SegmentDoc> {
    let entries: Vec<SegmentEntry> = (0..size)
        .map(|i| d + (k * size + i) * domains)
        .take_while(|&n| n < urls)
        .map(|n| SegmentEntry {
            url: url_of(n, domains),
            seq: seq_of(n),
            depth: (n % 7) as u16,
        })
        .collect();
    SegmentDoc::new(format!("d{d}.test"), SegmentState::Queued, None, &entries)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    anyhow::ensure!(
        (0.0..=1.0).contains(&args.queued_share),
        "--queued-share must be between 0 and 1"
    );
    let stores = Stores::connect(&args.store, "frontier_fill", args.crawl_id.clone()).await?;
    stores.ping().await?;
    stores.ensure_indexes().await?;
    let seeds: Vec<SeedDoc> = (0..args.domains.max(1).min(args.urls))
        .map(|d| SeedDoc {
            url: format!("http://d{d}.test/"),
        })
        .collect();
    for chunk in seeds.chunks(10_000) {
        stores
            .seeds()
            .insert_many(chunk.to_vec())
            .await
            .context("inserting the seeds")?;
    }
    let domains = args.domains.max(1);
    let done_below = ((args.urls as f64) * (1.0 - args.queued_share)) as u64;
    let size = args.segment_urls.max(1);
    let per_domain = args.urls.div_ceil(domains).div_ceil(size);
    let segments = stores.segments();
    let batch = args.batch.max(1);
    let start = Instant::now();
    let all = (0..per_domain).flat_map(|k| (0..domains).map(move |d| (d, k)));
    let batches = stream::iter(
        all.collect::<Vec<_>>()
            .chunks(batch as usize)
            .map(<[_]>::to_vec)
            .collect::<Vec<_>>(),
    )
    .map(|chunk| {
        let segments = segments.clone();
        let docs: Vec<SegmentDoc> = chunk
            .iter()
            .filter_map(|&(d, k)| segment(d, k, size, args.urls, domains))
            .collect();
        async move {
            let urls: u64 = docs.iter().map(|d| u64::try_from(d.n).unwrap_or(0)).sum();
            if !docs.is_empty() {
                segments
                    .insert_many(docs)
                    .ordered(false)
                    .await
                    .context("inserting segments")?;
            }
            anyhow::Ok(urls)
        }
    })
    .buffer_unordered(args.concurrent.max(1));
    tokio::pin!(batches);
    let mut written = 0u64;
    let mut next_report = 1_000_000u64;
    while let Some(r) = batches.next().await {
        written += r?;
        if written >= next_report {
            eprintln!("{written} URLs written in {:.0} s", start.elapsed().as_secs_f64());
            next_report += 1_000_000;
        }
    }
    // The outcomes of the finished URLs that ended without a page.
    let outcomes: Vec<Outcome> = (0..done_below.min(args.urls))
        .filter_map(|n| {
            let (state, failure) = ended(n, done_below)?;
            Some(Outcome {
                url: url_of(n, domains),
                seq: seq_of(n),
                state,
                failure,
            })
        })
        .collect();
    for chunk in outcomes.chunks(2000) {
        stores
            .outcomes()
            .insert_one(OutcomeDoc {
                id: bson::oid::ObjectId::new(),
                at: bson::DateTime::now(),
                urls: chunk.to_vec(),
            })
            .await
            .context("inserting outcomes")?;
    }
    // Each domain's progress: its first queued URL, or past its last.
    let progress: Vec<bson::Document> = (0..domains.min(args.urls))
        .map(|d| {
            let first_queued = if done_below <= d {
                d
            } else {
                d + (done_below - d).div_ceil(domains) * domains
            };
            let below = if first_queued < args.urls {
                seq_of(first_queued)
            } else {
                seq_of(d + (args.urls - 1 - d) / domains * domains).saturating_add(1)
            };
            bson::doc! {"_id": format!("d{d}.test"), "below": below}
        })
        .collect();
    for chunk in progress.chunks(10_000) {
        stores
            .progress()
            .clone_with_type::<bson::Document>()
            .insert_many(chunk.to_vec())
            .await
            .context("inserting progress")?;
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "{}",
        serde_json::json!({
            "urls": written,
            "queued": args.urls - done_below.min(args.urls),
            "domains": args.domains,
            "seconds": (secs * 10.0).round() / 10.0,
        })
    );
    stores.shutdown().await;
    Ok(())
}
