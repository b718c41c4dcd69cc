//! Politeness as the web server sees it: when a domain's delay (its
//! `Crawl-delay`, or `--min-delay-ms`) is above zero, its requests go one at
//! a time, and each one arrives at least the delay after the previous
//! response ended, however slowly that response came and however many
//! connections `--max-domain-connections` would allow (those only add
//! parallelism to domains whose delay is zero).
//!
//! The slow host answers each path after its own latency (none, or
//! 150–400 ms), so a crawler that spaces request *starts* but lets a slow
//! answer overlap the next request is caught. Times come from the server's
//! request log: `arrived` (request head parsed) and `done` (the last bytes
//! of the response queued for the socket, never after the client saw them).

use std::collections::BTreeSet;
use std::time::{Duration, SystemTime};

use crawl_tests::harness::{flags, StoreServer};
use crawl_tests::in_process::run_in_process;
use crawl_tests::verify;
use crawl_tests::web::{RequestRecord, WebExtras, WebServer, WebSpec};

use crate::hostile_e2e::one_node;

/// The slow host's longest answer.
const SLOW_MS: u64 = 400;
/// Pages on the slow host (and on each host of the web). 24 give 23
/// consecutive gaps a host: a crawler that overlaps a slow answer with the
/// next request does it on nearly every gap, so more pages add no power,
/// only time (they are paced one after another: 40 made each of these two
/// tests a 75 s crawl, at the end of CI; 24, both in 52 s side by side).
const SLOW_PAGES: usize = 24;
/// Clock granularity allowed in the gaps (SystemTime in the server against
/// the crawler's monotonic clock).
const SLACK: Duration = Duration::from_millis(1);

/// Signed `b - a` in milliseconds.
fn ms_between(a: SystemTime, b: SystemTime) -> f64 {
    b.duration_since(a)
        .map_or_else(|e| -e.duration().as_secs_f64(), |d| d.as_secs_f64())
        * 1000.0
}

/// What the server saw of one host.
struct Gaps {
    requests: usize,
    /// Smallest gap between two arrivals, ms.
    min_arrival_gap: f64,
    /// Smallest gap from the end of one response to the next arrival, ms
    /// (negative when two requests overlapped).
    min_done_gap: f64,
    /// Most requests in flight at once.
    most_at_once: usize,
    /// Pairs that broke the delay, described.
    violations: Vec<String>,
}

/// Checks consecutive requests to `host` (by arrival) against `delay`.
fn gaps(log: &[RequestRecord], host: &str, delay: Duration) -> Gaps {
    let mut reqs: Vec<&RequestRecord> = log.iter().filter(|r| r.host == host).collect();
    reqs.sort_by_key(|r| r.arrived);
    let want = (delay - SLACK).as_secs_f64() * 1000.0;
    let mut g = Gaps {
        requests: reqs.len(),
        min_arrival_gap: f64::INFINITY,
        min_done_gap: f64::INFINITY,
        most_at_once: usize::from(!reqs.is_empty()),
        violations: Vec::new(),
    };
    for (i, r) in reqs.iter().enumerate() {
        let at_once = reqs[..i]
            .iter()
            .filter(|p| p.done.is_none_or(|d| d > r.arrived))
            .count()
            + 1;
        g.most_at_once = g.most_at_once.max(at_once);
    }
    for w in reqs.windows(2) {
        let (prev, next) = (w[0], w[1]);
        let arrival_gap = ms_between(prev.arrived, next.arrived);
        g.min_arrival_gap = g.min_arrival_gap.min(arrival_gap);
        let done_gap = prev
            .done
            .map_or(f64::NEG_INFINITY, |d| ms_between(d, next.arrived));
        g.min_done_gap = g.min_done_gap.min(done_gap);
        if arrival_gap < want || done_gap < want {
            g.violations.push(format!(
                "{} (served in {:?}) then {}: {arrival_gap:.1} ms after its arrival, {done_gap:.1} ms after its end",
                prev.path,
                prev.served_in(),
                next.path
            ));
        }
    }
    g
}

/// Crawls `spec` (+ the varied-latency slow host `site0`) with
/// `--min-delay-ms min_delay_ms` and 8 connections allowed per domain,
/// checks the ground truth, and returns the web server for the log.
async fn crawl(spec: WebSpec, min_delay_ms: u64) -> WebServer {
    let dir = tempfile::tempdir().unwrap();
    let store = StoreServer::start().unwrap();
    let extras = WebExtras {
        slow_hosts: 1,
        slow_ms: SLOW_MS,
        slow_host_pages: SLOW_PAGES,
        slow_varied: true,
        ..WebExtras::default()
    };
    let (server, mut cluster) = one_node(spec, extras, &store, dir.path()).await;
    let expected = server.web().expected_crawl();
    cluster.dispatcher_args = flags(&format!(
        "--min-delay-ms {min_delay_ms} --max-domain-connections 8 --child-concurrency 32 --max-depth 100"
    ));
    let run = run_in_process(&cluster, Duration::from_secs(240)).await.unwrap();
    eprintln!("crawl took {:?}; summary {}", run.wall, run.summary);
    verify::assert_finished(&run);
    let db = store.client().await.unwrap().database("crawler");
    verify::assert_pages_match(&verify::stored_statuses(&db).await.unwrap(), &expected);
    verify::assert_frontier_finished(&db).await.unwrap();
    server
}

/// The slow host's answers really varied: some at once, some slow.
fn assert_latencies_varied(log: &[RequestRecord], host: &str) {
    let served: Vec<Duration> = log
        .iter()
        .filter(|r| r.host == host)
        .filter_map(RequestRecord::served_in)
        .collect();
    let fast = served.iter().filter(|d| **d < Duration::from_millis(50)).count();
    let slow = served
        .iter()
        .filter(|d| **d >= Duration::from_millis(150))
        .count();
    assert!(
        fast >= 5 && slow >= 5,
        "{host}: {fast} fast and {slow} slow answers"
    );
}

fn assert_spaced(log: &[RequestRecord], host: &str, delay: Duration, min_requests: usize) {
    let g = gaps(log, host, delay);
    eprintln!(
        "{host}: {} requests, delay {delay:?}: closest arrivals {:.1} ms apart, \
         closest arrival after a response end {:.1} ms, at most {} at once",
        g.requests, g.min_arrival_gap, g.min_done_gap, g.most_at_once
    );
    assert!(g.requests >= min_requests, "{host}: only {} requests", g.requests);
    assert!(
        g.violations.is_empty(),
        "{host}: {} of {} requests came sooner than {delay:?} (less {SLACK:?}) after the previous \
         request or its response, at most {} at once; e.g.\n  {}",
        g.violations.len(),
        g.requests,
        g.most_at_once,
        g.violations[..g.violations.len().min(8)].join("\n  ")
    );
}

/// `Crawl-delay: 0.3` on a host whose answers take 0–400 ms, with 8
/// connections allowed per domain and no minimum delay of our own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crawl_delay_is_kept_from_the_end_of_each_response() {
    const CRAWL_DELAY: f64 = 0.3;
    let hosts = 4;
    let spec = WebSpec {
        seed: 41,
        hosts,
        outside_hosts: 1,
        pages_per_host: SLOW_PAGES,
        // Only site0 (the slow host) has a Crawl-delay.
        crawl_delay_every: hosts,
        crawl_delay_secs: CRAWL_DELAY,
        ..WebSpec::default()
    };
    let server = crawl(spec, 0).await;
    let web = server.web();
    let slow = web.in_scope_host_names()[0].clone();
    assert_eq!(web.crawl_delay(&slow), Some(CRAWL_DELAY));
    let log = server.requests();
    assert_latencies_varied(&log, &slow);
    assert_spaced(&log, &slow, Duration::from_secs_f64(CRAWL_DELAY), SLOW_PAGES);
    server.stop(Duration::from_secs(5)).await;
}

/// No Crawl-delay anywhere, `--min-delay-ms 200`, 8 connections allowed per
/// domain: every host, the slow one included, is asked one request at a time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn min_delay_is_kept_from_the_end_of_each_response() {
    const MIN_DELAY_MS: u64 = 200;
    let spec = WebSpec {
        seed: 42,
        hosts: 4,
        outside_hosts: 1,
        pages_per_host: SLOW_PAGES,
        crawl_delay_every: 0,
        ..WebSpec::default()
    };
    let server = crawl(spec, MIN_DELAY_MS).await;
    let web = server.web();
    let log = server.requests();
    let names = web.in_scope_host_names();
    assert_latencies_varied(&log, &names[0]);
    let requested: BTreeSet<&str> = log.iter().map(|r| r.host.as_str()).collect();
    for host in &names {
        assert!(web.crawl_delay(host).is_none());
        assert!(requested.contains(host.as_str()), "{host} never requested");
        // Robots rules cut some hosts' pages (site1 disallows /p/1*).
        let min_requests = if *host == names[0] { SLOW_PAGES } else { 20 };
        assert_spaced(&log, host, Duration::from_millis(MIN_DELAY_MS), min_requests);
    }
    server.stop(Duration::from_secs(5)).await;
}
