//! The bottleneck report names the resource a crawl is short of. One real
//! crawl per injected bottleneck (a slow store, a tiny capacity, CPU burnt
//! in parse, only delayed hosts), each checked twice: every page is stored,
//! and `scripts/oprates.py bottleneck` names the resource that was starved.
//!
//! The crawls run one at a time (`SERIAL`): a crawl short of CPU would
//! otherwise make every other one look short of CPU too.

use std::time::Duration;

use crawl_tests::harness::{args, run_crawl, run_oprates, run_oprates_json, ClusterSpec, StoreServer};
use crawl_tests::verify;
use crawl_tests::web::{WebServer, WebSpec};

static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Crawls `web` with one supervisor and two children (plus `setup`), checks
/// that every reachable page was stored, and returns the report's word for
/// the main phase.
async fn limiting_word(web: WebSpec, setup: impl FnOnce(&mut ClusterSpec)) -> String {
    let _one_at_a_time = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let logs = dir.path().join("logs");
    let store = StoreServer::start().unwrap();
    let server = WebServer::local(web).await;
    let expected = server.web().expected_crawl();
    let mut spec = ClusterSpec::for_web(&store.uri, &server, dir.path()).unwrap();
    spec.supervisors = 1;
    spec.children = 2;
    spec.timing_dir = Some(logs.clone());
    spec.dispatcher_args = args(&["--min-delay-ms", "0", "--max-domain-connections", "4"]);
    setup(&mut spec);
    let run = run_crawl(&spec, Duration::from_secs(300)).await.unwrap();
    eprintln!("crawl took {:?}: {}", run.wall, run.summary);
    assert!(run.dispatcher.success(), "dispatcher: {:?}", run.dispatcher);
    assert_eq!(run.summary["frontier_left"], 0, "summary: {}", run.summary);
    let db = store.client().await.unwrap().database("crawler");
    let stored = verify::stored_statuses(&db).await.unwrap();
    verify::assert_pages_match(&stored, &expected);
    server.stop(Duration::from_secs(5)).await;

    let logs = logs.to_str().unwrap();
    eprintln!("{}", run_oprates(&["bottleneck", logs, "--window", "2"]));
    let report = run_oprates_json(&["bottleneck", logs, "--window", "2", "--json"]);
    assert_eq!(report["bad_lines"], 0, "{report:#}");
    report["limiting"]["word"]
        .as_str()
        .unwrap_or_else(|| panic!("no verdict: {:#}", report["limiting"]))
        .to_string()
}

fn web(hosts: usize, pages_per_host: usize) -> WebSpec {
    WebSpec {
        seed: 21,
        hosts,
        pages_per_host,
        ..WebSpec::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_store_is_named_store() {
    // 4 ms of store time per page: each child stores at most 250 pages/s.
    let word = limiting_word(web(20, 60), |spec| {
        spec.env = vec![("CRAWLER_FAULT_STORE_US_PER_PAGE".into(), "4000".into())];
    })
    .await;
    assert_eq!(word, "store");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tiny_capacity_is_named_capacity() {
    // One URL per child in flight: the rest of the machine waits for credit.
    let word = limiting_word(web(5, 40), |spec| {
        spec.supervisor_args = args(&["--child-capacity", "1"]);
    })
    .await;
    assert_eq!(word, "capacity");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cpu_burnt_in_parse_is_named_cpu() {
    // 5 ms of spinning per page: 2,200 HTML pages are 11 s of CPU on 2 cores.
    let word = limiting_word(web(20, 60), |spec| {
        spec.env = vec![("CRAWLER_FAULT_BURN_PARSE_US".into(), "5000".into())];
    })
    .await;
    assert_eq!(word, "cpu");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_delayed_hosts_is_named_politeness() {
    // 4 hosts, each with Crawl-delay 0.1: 40 pages/s at most, however much
    // room the crawler has.
    let spec = WebSpec {
        crawl_delay_every: 1,
        crawl_delay_secs: 0.1,
        ..web(4, 20)
    };
    let word = limiting_word(spec, |_| {}).await;
    assert_eq!(word, "politeness");
}
