//! `--max-domain-connections`: a slow site whose delay is zero may be asked
//! by several connections at once, never more than allowed. (A domain with
//! a delay above zero is asked one request at a time: politeness_gap_e2e.)

use std::time::{Duration, SystemTime};

use crawl_tests::harness::{flags, ClusterSpec, StoreServer};
use crawl_tests::in_process::run_in_process;
use crawl_tests::verify;
use crawl_tests::web::{WebExtras, WebServer, WebSpec};

const SLOW_MS: u64 = 400;
const CONNECTIONS: usize = 3;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_site_without_delay_gets_parallel_connections_up_to_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let store = StoreServer::start().unwrap();
    let spec = WebSpec {
        seed: 9,
        hosts: 3,
        pages_per_host: 15,
        ..WebSpec::default()
    };
    let extras = WebExtras {
        slow_hosts: 1,
        slow_ms: SLOW_MS,
        slow_host_pages: 15,
        ..WebExtras::default()
    };
    let server = WebServer::local_with(spec, extras).await;
    let web = server.web();
    let expected = web.expected_crawl();
    let mut cluster = ClusterSpec::for_web(&store.uri, &server, dir.path()).unwrap();
    cluster.supervisors = 1;
    cluster.children = 1;
    // Parallel connections only for domains without a delay.
    cluster.dispatcher_args = flags(&format!(
        "--min-delay-ms 0 --max-domain-connections {CONNECTIONS} --max-depth 100"
    ));
    let run = run_in_process(&cluster, Duration::from_secs(120)).await.unwrap();
    verify::assert_exited_ok(&run);
    let db = store.client().await.unwrap().database("crawler");
    verify::assert_pages_match(&verify::stored_statuses(&db).await.unwrap(), &expected);

    // Each request from its arrival to the end of its response.
    let slow = web.in_scope_host_names()[0].clone();
    let mut spans: Vec<(SystemTime, SystemTime)> = server
        .requests()
        .iter()
        .filter(|r| r.host == slow)
        .map(|r| (r.arrived, r.done.expect("every request was answered")))
        .collect();
    spans.sort();
    assert!(
        spans.len() >= 10,
        "only {} requests to the slow host",
        spans.len()
    );
    let most_at_once = spans
        .iter()
        .map(|(start, _)| spans.iter().filter(|(s, e)| s <= start && start < e).count())
        .max()
        .unwrap_or(0);
    eprintln!(
        "{} requests to the slow host: at most {most_at_once} at once",
        spans.len()
    );
    assert!(most_at_once <= CONNECTIONS, "{most_at_once} requests at once");
    assert!(most_at_once >= 2, "the connections were never used in parallel");
    server.stop(Duration::from_secs(5)).await;
}
