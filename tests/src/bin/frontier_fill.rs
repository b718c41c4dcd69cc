//! Writes a crawl's stored frontier straight into the store, as a crawl
//! that admitted `--urls` URLs would leave it, so that the dispatcher's
//! start-up can be timed on 10 million stored URLs without first crawling
//! them (`scripts/bench-dispatcher.sh --stored-urls N`).
//!
//! URLs are `http://d<n % domains>.test/<path>/p<n>`, about as long as a
//! real page's URL (the dispatcher_load crawl's are shorter), except that
//! the first of each domain is its seed, `http://d<n>.test/` (the seeds
//! the benchmark gives the dispatcher), also stored in the crawl's seeds
//! collection, as a crawl leaves them. They are
//! admitted in order (`seq` = n + 1) and crawled in that order: the first
//! `1 - queued_share` of them are done (one in fifty failed, one in a
//! hundred disallowed), the rest queued, as in a crawl stopped midway.
//! The frontier's indexes are made as the dispatcher makes them.

use std::time::Instant;

use anyhow::Context;
use clap::Parser;
use futures::stream::{self, StreamExt};
use link::failure::FailureKind;
use store::docs::{FrontierDoc, SeedDoc, UrlState};
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
    /// Documents an insert.
    #[arg(long, default_value_t = 10_000)]
    batch: u64,
    /// Inserts under way at once.
    #[arg(long, default_value_t = 4)]
    concurrent: usize,
}

fn doc_of(n: u64, domains: u64, done_below: u64) -> FrontierDoc {
    let d = n % domains.max(1);
    let state = if n >= done_below {
        UrlState::Queued
    } else if n % 100 == 7 {
        UrlState::Disallowed
    } else if n % 50 == 3 {
        UrlState::Failed
    } else {
        UrlState::Done
    };
    let url = if n < domains {
        format!("http://d{d}.test/")
    } else {
        format!("http://d{d}.test/section-{}/articles/2026/p{n}.html", n % 37)
    };
    FrontierDoc {
        url,
        domain: format!("d{d}.test"),
        depth: (n % 7) as i32,
        failure: (state == UrlState::Failed).then_some(FailureKind::Timeout),
        deferred: None,
        state,
        seq: i64::try_from(n).unwrap_or(i64::MAX).saturating_add(1),
    }
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
    let seeds: Vec<SeedDoc> = (0..args.domains.min(args.urls))
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
    let frontier = stores.frontier();
    let done_below = ((args.urls as f64) * (1.0 - args.queued_share)) as u64;
    let batch = args.batch.max(1);
    let start = Instant::now();
    let batches = stream::iter((0..args.urls).step_by(batch as usize))
        .map(|first| {
            let frontier = frontier.clone();
            let last = first.saturating_add(batch).min(args.urls);
            let docs: Vec<FrontierDoc> = (first..last)
                .map(|n| doc_of(n, args.domains, done_below))
                .collect();
            async move {
                frontier
                    .insert_many(docs)
                    .ordered(false)
                    .await
                    .with_context(|| format!("inserting URLs {first}..{last}"))
                    .map(|r| r.inserted_ids.len() as u64)
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
