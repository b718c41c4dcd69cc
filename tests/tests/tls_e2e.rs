//! End-to-end over HTTPS: the synthetic web serves every site with a
//! certificate of the run's own CA (`crawl_tests::tls`), by HTTP/2 or by
//! HTTP/1.1 alone; the crawler trusts that CA with `--ca-file` (given to
//! the supervisor, which passes it to its children) and the machine's
//! trust store stays as it is.
//!
//! Checked: every page stored once with its status and nothing fetched out
//! of scope, and the TLS handshakes the server completed, per domain: a
//! child keeps one connection per site across its politeness gaps, so a
//! site costs about one handshake, not one per page.

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crawl_tests::harness::{flags, run_crawl, ClusterSpec, StoreServer};
use crawl_tests::tls::Offer;
use crawl_tests::verify;
use crawl_tests::web::{WebExtras, WebServer, WebSpec};

/// Crawls a small HTTPS web offering `offer`; returns nothing, asserts.
async fn crawl_over_https(offer: Offer, seed: u64) {
    let dir = tempfile::tempdir().unwrap();
    let store = StoreServer::start().unwrap();
    let spec = WebSpec {
        seed,
        hosts: 4,
        outside_hosts: 1,
        pages_per_host: 15,
        crawl_delay_every: 0,
        ..WebSpec::default()
    };
    let extras = WebExtras {
        tls: Some(offer),
        ..WebExtras::default()
    };
    let server = WebServer::local_with(spec, extras).await;
    let web = server.web();
    assert!(web.seed_urls().iter().all(|u| u.starts_with("https://")));
    let ca = server
        .ca()
        .expect("an HTTPS web has a CA")
        .write_ca(dir.path())
        .unwrap();
    let mut cluster = ClusterSpec::for_web(&store.uri, &server, dir.path()).unwrap();
    cluster.supervisors = 1;
    cluster.children = 2;
    cluster.supervisor_args = flags(&format!("--ca-file {}", ca.display()));
    // A gap between a site's requests, as on the open web (shorter than
    // the client's 30 s idle timeout): its connection must outlive it.
    cluster.dispatcher_args = flags("--min-delay-ms 200 --max-depth 100");
    let run = run_crawl(&cluster, Duration::from_secs(150)).await.unwrap();
    eprintln!("{offer:?}: crawl took {:?}; summary {}", run.wall, run.summary);
    verify::assert_finished(&run);

    let db = store.client().await.unwrap().database("crawler");
    let expected = web.expected_crawl();
    verify::assert_pages_match(&verify::stored_statuses(&db).await.unwrap(), &expected);
    verify::assert_frontier_finished(&db).await.unwrap();
    let in_scope: BTreeSet<String> = web.in_scope_host_names().into_iter().collect();
    let log = server.requests();
    for r in &log {
        assert!(
            in_scope.contains(&r.host),
            "out-of-scope request {}{}",
            r.host,
            r.path
        );
    }

    // Handshakes per domain crawled (the target: at most 1.1).
    let hs = server.handshakes();
    let (full, resumed, failed) = (
        hs.full.load(Ordering::Relaxed),
        hs.resumed.load(Ordering::Relaxed),
        hs.failed.load(Ordering::Relaxed),
    );
    let domains = log.iter().map(|r| r.host.as_str()).collect::<BTreeSet<_>>().len() as u64;
    eprintln!(
        "{offer:?}: {} requests to {domains} domains over {} connections: {full} full and {resumed} resumed handshakes, {failed} failed",
        log.len(),
        server.connections_accepted()
    );
    assert_eq!(failed, 0, "handshakes failed");
    assert!(domains >= 4, "{domains} domains crawled");
    assert!(
        (full + resumed) as f64 <= 1.1 * domains as f64,
        "{offer:?}: {} handshakes for {domains} domains: a connection per page?",
        full + resumed
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crawl_over_https_by_http2_trusts_its_ca_file() {
    crawl_over_https(Offer::Http2, 71).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crawl_over_https_by_http1_keeps_a_connection_per_site() {
    crawl_over_https(Offer::Http1, 72).await;
}
