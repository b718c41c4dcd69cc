//! A whole cluster as tasks of the test process (`crawl_tests::in_process`):
//! the dispatcher, two supervisors and their children, over real ZeroMQ
//! sockets, a real store server and the synthetic web, with no binary
//! spawned. It checks what the process-spawning crawl test checks of the
//! store and the web server's log (each page stored once, byte for byte,
//! nothing forbidden fetched), so a change in any role can be checked
//! end to end by `cargo test` alone.

use std::collections::BTreeSet;
use std::time::Duration;

use crawl_tests::harness::{all_pages, crawl_coll, flags, ClusterSpec, StoreServer};
use crawl_tests::in_process::run_in_process;
use crawl_tests::verify;
use crawl_tests::web::{WebServer, WebSpec};
use store::body_dict::Dictionaries;
use store::CrawlId;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_in_one_process_crawls_the_web_and_stores_each_page_once() {
    let dir = tempfile::tempdir().unwrap();
    let primary = StoreServer::start().unwrap();
    let server = WebServer::local(WebSpec {
        seed: 11,
        hosts: 8,
        outside_hosts: 2,
        pages_per_host: 60,
        crawl_delay_every: 4,
        crawl_delay_secs: 0.05,
        ..WebSpec::default()
    })
    .await;
    let web = server.web();
    let expected = web.expected_crawl();
    assert!(
        expected.pages.len() >= 300,
        "web too small: {}",
        expected.pages.len()
    );

    let mut spec = ClusterSpec::for_web(&primary.uri, &server, dir.path()).unwrap();
    spec.dispatcher_args = flags("--min-delay-ms 20 --max-depth 100");
    spec.supervisors = 2;
    spec.children = 2;
    let run = run_in_process(&spec, Duration::from_secs(300)).await.unwrap();
    verify::assert_exited_ok(&run);

    // Every reachable allowed page stored exactly once, with its status;
    // every admitted URL finished.
    let db = primary.client().await.unwrap().database("crawler");
    let stored = verify::stored_statuses(&db).await.unwrap();
    verify::assert_pages_match(&stored, &expected);
    verify::assert_frontier_finished(&db).await.unwrap();

    // HTML bodies byte for byte as served.
    let pages = all_pages(&db, &CrawlId::default()).await.unwrap();
    let dicts = Dictionaries::load(&db.collection(&crawl_coll(store::BODY_DICTS)))
        .await
        .unwrap();
    let html = pages.iter().filter(|d| d.status == 200).collect::<Vec<_>>();
    assert!(!html.is_empty());
    for d in html {
        let url = url::Url::parse(d.final_url.as_deref().unwrap_or(&d.url)).unwrap();
        let served = web.respond(url.host_str().unwrap(), &url[url::Position::BeforePath..]);
        let body = store::page_body::raw_of(d, &dicts).unwrap_or_else(|e| panic!("body of {}: {e}", d.url));
        assert!(
            body == served.body,
            "body of {} differs from what was served",
            d.url
        );
    }

    // Nothing disallowed or out of scope requested.
    let requests = server.requests();
    let in_scope: BTreeSet<String> = web.host_names().into_iter().take(8).collect();
    verify::assert_nothing_forbidden_fetched(&requests, &expected, &in_scope, server.addr().port());
    server.stop(Duration::from_secs(5)).await;
}
