//! The dispatcher alone against `dispatcher_load` (fake supervisors over
//! real ZeroMQ sockets, with the cluster secret), a real store, and a
//! memory budget so small that most of each domain's queue lives in the
//! store: every admitted URL is leased exactly once and finished, and the
//! stored frontier says so; each read of the stored queues is one domain's,
//! at most a window. (What `scripts/bench-dispatcher.sh` times.)
//! Once more with `--seen-check store`, where repeated links the dispatcher
//! cannot vouch for are inserted again and the store's unique index keeps
//! the first copy.

use std::path::{Path, PathBuf};
use std::time::Duration;

use bson::doc;
use crawl_tests::harness::{
    args, bin, flags, spawn_crawl, write_lines, ClusterSpec, CrawlRun, RunningCrawl, StoreServer,
};

const URLS: u64 = 3000;
const DOMAINS: u64 = 40;
const SUPERVISORS: usize = 5;

/// What one crawl under `dispatcher_load` left: its report, the
/// dispatcher's summary, and the stored frontier.
struct Run {
    report: serde_json::Value,
    summary: serde_json::Value,
    /// URLs in the frontier's segments.
    stored: u64,
    /// URLs with an outcome (failed, disallowed): a fetched URL has none,
    /// its page says it is finished (issue 45).
    marked: u64,
    seqs: Vec<i64>,
    /// The most URLs one read of the stored queues returned (the
    /// dispatcher's timing log): above a window (8), one query read
    /// several domains' queues, or past a domain's window.
    largest_read: u64,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_admitted_url_is_leased_once_and_finished_with_queues_in_the_store() {
    let Run {
        report,
        summary,
        stored,
        marked,
        seqs,
        largest_read,
    } = crawl(&[]).await;
    // Exactly the admitted URLs were leased, each once (no lease expired,
    // no supervisor left, so a second lease would be a doubled one), and
    // each result was taken.
    assert_eq!(report["leases_received"], URLS, "{report}");
    assert_eq!(report["results_sent"], URLS, "{report}");
    assert_eq!(summary["fetched"], URLS, "{summary}");
    assert_eq!(summary["seen_urls"], URLS, "{summary}");
    assert_eq!(summary["frontier_left"], 0, "{summary}");
    assert_eq!(summary["leases_expired"], 0, "{summary}");
    // The store holds every admitted URL once, each with its own place in
    // the queue, and no mark: fetching a URL cost the frontier no write
    // (the children would store the pages; this load generator stores none).
    assert_eq!((stored, marked), (URLS, 0));
    let distinct: std::collections::BTreeSet<i64> = seqs.iter().copied().collect();
    assert_eq!((seqs.len(), distinct.len()), (URLS as usize, URLS as usize));
    // The queues were read from the store, a window of one domain at a time.
    assert!(
        (1..=8).contains(&largest_read),
        "the largest read of the stored queues returned {largest_read} URLs"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_store_check_repeated_links_are_inserted_again_and_crawled_once() {
    let Run {
        report,
        summary,
        stored,
        marked,
        seqs,
        ..
    } = crawl(&["--seen-check", "store", "--seen-recent-urls", "50"]).await;
    let fetched = summary["fetched"].as_u64().unwrap_or(0);
    // Repeated links went to the store, which took none of them again.
    let unsure = summary["unsure_links"].as_u64().unwrap_or(0);
    let known = summary["unsure_known"].as_u64().unwrap_or(0);
    assert!(unsure > 100 && known > 100, "{summary}");
    assert_eq!(
        summary["unsure_new"], 0,
        "a 64-bit collision in 3,000 URLs? {summary}"
    );
    // Each stored URL leased once and finished; nothing left.
    assert!(fetched >= URLS * 9 / 10, "{summary}");
    assert_eq!(report["leases_received"], fetched, "{report}");
    assert_eq!(report["results_sent"], fetched, "{report}");
    assert_eq!(summary["frontier_left"], 0, "{summary}");
    assert_eq!(summary["leases_expired"], 0, "{summary}");
    assert_eq!((stored, marked), (fetched, 0));
    let distinct: std::collections::BTreeSet<i64> = seqs.iter().copied().collect();
    assert_eq!(distinct.len(), seqs.len());
}

async fn crawl(extra: &[&str]) -> Run {
    let store = StoreServer::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (mut spec, logs) = load_spec(&store, dir.path(), SUPERVISORS);
    // 3,000 URLs over 40 domains against a budget of 200 and windows of 8.
    spec.dispatcher_args = flags(&format!(
        "--max-pages {URLS} --max-depth 1000 --max-inflight-per-domain 4 --frontier-memory-urls 200 \
         --frontier-window 8 --progress-secs 0"
    ));
    spec.dispatcher_args.extend(args(extra));
    let crawl = spawn_crawl(&spec).await.unwrap();
    let load_args = format!("--supervisors {SUPERVISORS} --domains {DOMAINS} --capacity 64 --links 10");
    let (report, run) = load(crawl, &spec, &flags(&load_args)).await;
    let db = store.client().await.unwrap().database("crawler");
    let frontier = crawl_tests::verify::frontier_urls(&db, &Default::default())
        .await
        .unwrap();
    let stored = frontier.len() as u64;
    let marked = frontier
        .iter()
        .filter(|u| u.state == "failed" || u.state == "disallowed")
        .count() as u64;
    let seqs: Vec<i64> = frontier.iter().map(|u| u.seq).collect();
    Run {
        report,
        summary: run.summary,
        stored,
        marked,
        seqs,
        largest_read: largest_read(&logs),
    }
}

/// A crawl of [`DOMAINS`] seed domains whose supervisors `dispatcher_load`
/// plays (none started; `min_supervisors` awaited), logging its timing to
/// the directory returned.
fn load_spec(store: &StoreServer, dir: &Path, min_supervisors: usize) -> (ClusterSpec, PathBuf) {
    let seeds: Vec<String> = (0..DOMAINS).map(|i| format!("http://d{i}.test/")).collect();
    let seeds_file = write_lines(dir, "seeds.txt", &seeds).unwrap();
    let mut spec = ClusterSpec::new(&store.uri, &seeds_file);
    spec.supervisors = 0;
    spec.min_supervisors = Some(min_supervisors);
    let logs = dir.join("timing");
    spec.timing_dir = Some(logs.clone());
    (spec, logs)
}

/// Runs `dispatcher_load` with `load_args` against `crawl` to the crawl's
/// end: its report, and the crawl's (the dispatcher succeeded).
async fn load(
    crawl: RunningCrawl,
    spec: &ClusterSpec,
    load_args: &[String],
) -> (serde_json::Value, CrawlRun) {
    let load = tokio::process::Command::new(bin("dispatcher_load").unwrap())
        .args(["--dispatcher", crawl.endpoint()])
        .args(load_args)
        .args(["--max-secs", "300"])
        .env(link::cluster_auth::SECRET_ENV, &spec.cluster_secret)
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(320), load)
        .await
        .expect("dispatcher_load did not finish")
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "dispatcher_load: {stdout}");
    let report: serde_json::Value = stdout
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str(l).ok())
        .expect("a JSON report");
    let run = crawl.wait(Duration::from_secs(60)).await.unwrap();
    assert!(run.dispatcher.success(), "dispatcher: {:?}", run.dispatcher);
    (report, run)
}

/// The largest `n` of the `frontier_read` lines in the timing logs.
fn largest_read(logs: &Path) -> u64 {
    timed(logs, "frontier_read").into_iter().max().unwrap_or(0)
}

/// The `n` of each line of `op` in the timing logs.
fn timed(logs: &Path, op: &str) -> Vec<u64> {
    let mut ns = Vec::new();
    for entry in std::fs::read_dir(logs).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        for line in text.lines() {
            let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
                continue;
            };
            if v["op"] == op {
                ns.push(v["n"].as_u64().unwrap_or(0));
            }
        }
    }
    ns
}

/// Writes a stored frontier of `urls` URLs over [`DOMAINS`] domains, as
/// a crawl stopped midway leaves it (`frontier_fill`): `queued_share` of
/// them queued, in segments of `segment_urls`.
async fn fill(store: &StoreServer, urls: u64, queued_share: &str, segment_urls: u64) {
    let crawl_id = store::CrawlId::default().to_string();
    let fill = tokio::process::Command::new(bin("frontier_fill").unwrap())
        .args(["--mongo-uri", &store.uri, "--crawl-id", &crawl_id])
        .args(["--urls", &urls.to_string(), "--domains", &DOMAINS.to_string()])
        .args(["--queued-share", queued_share])
        .args(["--segment-urls", &segment_urls.to_string()])
        .output();
    let fill = tokio::time::timeout(Duration::from_secs(120), fill)
        .await
        .expect("frontier_fill did not finish")
        .unwrap();
    assert!(fill.status.success(), "frontier_fill: {fill:?}");
}

/// Stored URLs of the restart test, over [`DOMAINS`] domains; 1% queued;
/// in segments of [`SEGMENT_URLS`].
const STORED: u64 = 10_000;
const SEGMENT_URLS: u64 = 20;

/// A dispatcher started on a stored frontier (written by `frontier_fill`,
/// as a crawl stopped midway leaves it) reads every stored URL into its
/// seen-set in pages of segments: the pages hold each stored segment once
/// (a page that skipped one would leave the seen-set short, one read
/// twice would not be seen here but in the segments counted), and the
/// crawl then leases only what was queued.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_reads_the_stored_urls_into_the_seen_set_in_pages() {
    let store = StoreServer::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    fill(&store, STORED, "0.01", SEGMENT_URLS).await;
    let queued = STORED / 100;

    let (mut spec, logs) = load_spec(&store, dir.path(), 2);
    let debug = format!("127.0.0.1:{}", crawl_tests::harness::free_port());
    spec.dispatcher_args = flags(&format!(
        "--max-pages {} --max-depth 1000 --progress-secs 0 --debug-addr {debug}",
        2 * STORED
    ));
    let crawl = spawn_crawl(&spec).await.unwrap();
    // No supervisor has joined yet, so nothing is crawled while the stored
    // URLs are read: the pages must find each of them, and nothing else.
    let http = shared::http_client::builder().no_proxy().build().unwrap();
    let metrics = format!("{}/metrics", crawl.debug_url().unwrap());
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    loop {
        let seen = match http.get(&metrics).timeout(Duration::from_secs(5)).send().await {
            Ok(resp) => resp.text().await.unwrap_or_default(),
            Err(_) => String::new(),
        };
        let seen: u64 = seen
            .lines()
            .find_map(|l| l.strip_prefix("crawler_frontier_seen "))
            .and_then(|v| v.trim().parse::<f64>().ok())
            .map_or(0, |v| v as u64);
        if seen >= STORED {
            assert_eq!(seen, STORED, "the seen-set holds URLs the store does not");
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the seen-set holds {seen} of the {STORED} stored URLs after 120 s"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let load_args = flags(&format!("--supervisors 2 --domains {DOMAINS} --links 0"));
    let (report, run) = load(crawl, &spec, &load_args).await;
    // Only the queued URLs were leased: the seeds, stored and crawled
    // before, were known.
    assert_eq!(report["leases_received"], queued, "{report}");
    assert_eq!(run.summary["fetched"], queued, "{}", run.summary);
    let pages = timed(&logs, "seen_scan");
    let segments = DOMAINS * (STORED / DOMAINS).div_ceil(SEGMENT_URLS);
    assert_eq!(
        pages.iter().sum::<u64>(),
        segments,
        "the reads of stored segments for the seen-set returned {pages:?}"
    );
    assert!(
        pages.len() >= 2,
        "{segments} stored segments in {} pages",
        pages.len()
    );
}

/// Links a restarted crawl cannot judge yet, because its stored URLs are
/// still being read in, are held in a file past `--held-links-memory`
/// (here 0: all of them), and leasing goes on meanwhile; once the read
/// ends every held link is judged from the file. The dispatcher reaches
/// the store through a relay that delays each way by 150 ms, so that the
/// read (20 pages of segments) lasts seconds while the load's results
/// bring links (`http://d<i>.test/p<n>`, none of them stored). Of those,
/// `--max-pages` lets [`HELD_NEW`] in: each is leased once, and every
/// stored URL that was queued is leased once too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_holds_the_links_it_cannot_judge_yet_in_a_file_and_judges_them_after_the_read() {
    const STORED_HERE: u64 = 20_000;
    const HELD_NEW: u64 = 500;
    let store = StoreServer::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    fill(&store, STORED_HERE, "0.05", 4).await;
    let queued = STORED_HERE / 20;
    let addr: std::net::SocketAddr = store
        .uri
        .trim_start_matches("mongodb://")
        .split(['/', '?'])
        .next()
        .and_then(|a| a.parse().ok())
        .expect("the store's address in its URI");
    let relay =
        crawl_tests::relay::Relay::start("127.0.0.1:0".parse().unwrap(), addr, Duration::from_millis(150))
            .unwrap();
    let (mut spec, _logs) = load_spec(&store, dir.path(), 2);
    spec.mongo_uri = store
        .uri
        .replacen(&addr.to_string(), &relay.addr().to_string(), 1);
    spec.dispatcher_args = flags(&format!(
        "--max-pages {} --max-depth 1000 --progress-secs 0 --held-links-memory 0",
        STORED_HERE + HELD_NEW
    ));
    let crawl = spawn_crawl(&spec).await.unwrap();
    let load_args = flags(&format!("--supervisors 2 --domains {DOMAINS} --links 5"));
    let (report, run) = load(crawl, &spec, &load_args).await;
    let s = &run.summary;
    let held = s["held_links"].as_u64().unwrap_or(0);
    assert!(
        held > 0,
        "no link was held while the stored URLs were read in: {s}"
    );
    assert_eq!(s["held_links_in_file"], held, "{s}");
    assert_eq!(s["new_urls"], HELD_NEW, "{s}");
    assert_eq!(report["leases_received"], queued + HELD_NEW, "{report}");
    assert_eq!(s["fetched"], queued + HELD_NEW, "{s}");
    let db = store.client().await.unwrap().database("crawler");
    let frontier = crawl_tests::verify::frontier_urls(&db, &Default::default())
        .await
        .unwrap();
    assert_eq!(frontier.len() as u64, STORED_HERE + HELD_NEW);
    drop(relay);
}
