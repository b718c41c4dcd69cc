//! End-to-end over HTTPS: the synthetic web serves every site with a
//! certificate of the run's own CA (`crawl_tests::tls`), by HTTP/2 or by
//! HTTP/1.1 alone; the crawler trusts that CA with `--ca-file` (given to
//! the supervisor, which passes it to its children) and the machine's
//! trust store stays as it is.
//!
//! Checked: every page stored once with its status and nothing fetched out
//! of scope, and the TLS handshakes the server completed, per domain: a
//! child keeps one connection per site across its politeness gaps, so a
//! site costs about one handshake, not one per page. The children count
//! their handshakes too (full and resumed, in their timing logs' gauge
//! lines): their counts must be the server's.
//!
//! Over HTTP/1.1 the server ends every connection after a few requests (a
//! keep-alive limit), so the crawler reconnects and must resume its TLS
//! session: one full handshake per site, the rest resumed. Over HTTP/2 a
//! seed on a site whose certificate comes from another CA fails as `tls`
//! (its robots.txt cannot be fetched, which is final, not retried as an
//! unavailable robots.txt), nothing of it is stored, the other sites are
//! crawled as usual.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::Ordering;
use std::time::Duration;

use crawl_tests::harness::{flags, run_crawl, write_lines, ClusterSpec, StoreServer};
use crawl_tests::tls::Offer;
use crawl_tests::verify;
use crawl_tests::web::{WebExtras, WebServer, WebSpec};

/// The name of the site whose certificate the crawler must refuse.
const UNTRUSTED: &str = "untrusted.test";

/// What the children's timing logs say they counted, summed over the
/// children: the last gauge line of each log, by key (`tls_handshakes.full`,
/// `tls_failures.unknown_issuer`, ...).
fn children_counted(dir: &std::path::Path) -> BTreeMap<String, f64> {
    let mut sum = BTreeMap::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if !name.starts_with("crawler-child") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let last = text
            .lines()
            .rev()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .find_map(|v| v.get("gauges").cloned());
        for (k, v) in last.and_then(|g| g.as_object().cloned()).unwrap_or_default() {
            if k.starts_with("tls_") {
                *sum.entry(k).or_insert(0.0) += v.as_f64().unwrap_or(0.0);
            }
        }
    }
    sum
}

/// Crawls a small HTTPS web offering `offer`, whose connections end after
/// `per_connection` requests if given, with a seed on [`UNTRUSTED`] if
/// `untrusted`; returns nothing, asserts.
async fn crawl_over_https(offer: Offer, seed: u64, per_connection: Option<u32>, untrusted: bool) {
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
        tls_untrusted: vec![UNTRUSTED.to_string()],
        tls_requests_per_connection: per_connection,
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
    let timing = dir.path().join("timing");
    cluster.timing_dir = Some(timing.clone());
    let untrusted_seed = web.url_on(UNTRUSTED, "/");
    if untrusted {
        let mut seeds = web.seed_urls();
        seeds.push(untrusted_seed.clone());
        cluster.seeds_file = write_lines(dir.path(), "seeds.txt", &seeds).unwrap();
        let hosts = cluster.hosts_file.clone().expect("a web's spec maps its names");
        let mut names = std::fs::read_to_string(&hosts).unwrap();
        names.push_str(&format!("127.0.0.1 {UNTRUSTED}\n"));
        std::fs::write(&hosts, names).unwrap();
    }
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
    let counted = children_counted(&timing);
    eprintln!(
        "{offer:?}: {} requests to {domains} domains over {} connections: {full} full and {resumed} resumed handshakes, {failed} failed; the children counted {counted:?}",
        log.len(),
        server.connections_accepted()
    );
    assert!(domains >= 4, "{domains} domains crawled");
    // The children's counts are the server's.
    let child = |k: &str| counted.get(k).copied().unwrap_or(0.0) as u64;
    assert_eq!(
        (child("tls_handshakes.full"), child("tls_handshakes.resumed")),
        (full, resumed),
        "{offer:?}: the children's (full, resumed) handshakes against the server's"
    );
    // A full handshake per site at most (the target: <= 1.1 per domain).
    assert!(
        full as f64 <= 1.1 * domains as f64,
        "{offer:?}: {full} full handshakes for {domains} domains"
    );
    match per_connection {
        // Every reconnection resumed its session.
        Some(n) => {
            let connections = server.connections_accepted() - failed;
            assert!(
                connections as usize >= log.len() / n as usize,
                "{offer:?}: {connections} connections for {} requests at {n} a connection",
                log.len()
            );
            assert_eq!(
                full + resumed,
                connections,
                "{offer:?}: a handshake per connection"
            );
            assert!(resumed > 0, "{offer:?}: no session was resumed");
        }
        None => assert!(
            (full + resumed) as f64 <= 1.1 * domains as f64,
            "{offer:?}: {} handshakes for {domains} domains: a connection per page?",
            full + resumed
        ),
    }

    // The untrusted site: refused at its handshake, its seed failed as
    // `tls` (unknown issuer), no request made there.
    if untrusted {
        let frontier = verify::frontier_urls(&db, &Default::default()).await.unwrap();
        let got = frontier
            .iter()
            .find(|u| u.url == untrusted_seed)
            .expect("the untrusted seed is in the frontier");
        assert_eq!(
            (got.state, got.failure.as_deref()),
            ("failed", Some("tls")),
            "{untrusted_seed}"
        );
        assert!(failed >= 1, "{offer:?}: no handshake failed on the server");
        assert_eq!(
            child("tls_failures.unknown_issuer"),
            failed,
            "{offer:?}: the children's refusals against the server's failed handshakes"
        );
    } else {
        assert_eq!(failed, 0, "handshakes failed");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crawl_over_https_by_http2_trusts_its_ca_file_and_only_it() {
    crawl_over_https(Offer::Http2, 71, None, true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crawl_over_https_by_http1_resumes_sessions_when_servers_close() {
    crawl_over_https(Offer::Http1, 72, Some(5), false).await;
}
