//! Forgetting domains, with the whole cluster in the test process
//! (`crawl_tests::in_process`): a domain whose URLs are all done
//! leaves the dispatcher's memory, and when a late page links to it again
//! it is crawled afresh; nothing is fetched or stored twice.
//!
//! `late.test/slow` answers after [`SLOW`], linking to a page of
//! `early.test` that nothing else links to. By then `early.test` (and the
//! `bN.test` domains) have been done for longer than the forgetting period
//! (`--forget-idle-domains-ms`, raised to the politeness gap plus 2 s).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::StatusCode;
use crawl_tests::harness::{all_pages, flags, write_lines, ClusterSpec, StoreServer};
use crawl_tests::host_server::{self, Asked};
use crawl_tests::in_process::run_in_process;
use crawl_tests::verify;

/// How long `late.test/slow` takes: four forgetting periods of 2.5 s.
const SLOW: Duration = Duration::from_secs(10);
/// Fast domains besides `early.test`.
const OTHERS: usize = 4;
/// Domains done long before the late link: `early.test` and the others.
const DONE_EARLY: u64 = OTHERS as u64 + 1;

type Hits = Arc<Mutex<HashMap<String, usize>>>;

/// Every host's `/` links to `/a` and `/b`; `late.test/` links to
/// `/slow`, which links (late) to `early.test/again`. Counts requests by
/// host and path (robots.txt left out: 404 everywhere).
async fn serve(hits: Hits) -> u16 {
    host_server::serve(move |asked: Asked| {
        let hits = hits.clone();
        async move {
            let Asked { host, port, path } = asked;
            if let Ok(mut h) = hits.lock() {
                *h.entry(format!("{host}{path}")).or_default() += 1;
            }
            let links = match (host.as_str(), path.as_str()) {
                ("late.test", "/") => "<a href=\"/slow\">slow</a>".to_string(),
                ("late.test", "/slow") => {
                    tokio::time::sleep(SLOW).await;
                    format!("<a href=\"http://early.test:{port}/again\">again</a>")
                }
                (_, "/") => "<a href=\"/a\">a</a><a href=\"/b\">b</a>".to_string(),
                _ => String::new(),
            };
            (
                StatusCode::OK,
                format!("<html><title>{host}</title>{links}</html>"),
            )
        }
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_domain_done_is_forgotten_and_crawled_afresh_when_met_again() {
    let dir = tempfile::tempdir().unwrap();
    let store = StoreServer::start().unwrap();
    let hits: Hits = Arc::default();
    let port = serve(hits.clone()).await;
    let mut names: Vec<String> = (0..OTHERS).map(|i| format!("b{i}.test")).collect();
    names.extend(["early.test".to_string(), "late.test".to_string()]);
    let seeds: Vec<String> = names.iter().map(|n| format!("http://{n}:{port}/")).collect();
    let seeds = write_lines(dir.path(), "seeds", &seeds).unwrap();
    let hosts = write_lines(dir.path(), "hosts", &[format!("127.0.0.1 {}", names.join(" "))]).unwrap();
    let mut spec = ClusterSpec::new(&store.uri, &seeds);
    spec.hosts_file = Some(hosts);
    spec.supervisors = 2;
    spec.children = 1;
    // Raised to the politeness gap (500 ms here) plus 2 s: 2.5 s.
    spec.dispatcher_args =
        flags("--forget-idle-domains-ms 1 --min-delay-ms 500 --max-crawl-delay-ms 500 --progress-secs 0");
    let run = run_in_process(&spec, Duration::from_secs(120)).await.unwrap();
    eprintln!("crawl took {:?}; summary {}", run.wall, run.summary);
    verify::assert_exited_ok(&run);
    assert_eq!(run.summary["frontier_left"], 0, "{}", run.summary);

    // early.test and the bN.test were done long before the late link came.
    let forgotten = run.summary["domains_forgotten"].as_u64().unwrap_or(0);
    assert!(
        forgotten >= DONE_EARLY,
        "{forgotten} domains forgotten: {}",
        run.summary
    );

    // Every page was fetched once, the late one included.
    let hits = hits.lock().unwrap().clone();
    let mut want: Vec<String> = names
        .iter()
        .filter(|n| *n != "late.test")
        .flat_map(|n| [format!("{n}/"), format!("{n}/a"), format!("{n}/b")])
        .collect();
    want.extend([
        "late.test/".into(),
        "late.test/slow".into(),
        "early.test/again".into(),
    ]);
    let mut got: Vec<String> = hits.keys().cloned().collect();
    got.sort();
    want.sort();
    assert_eq!(got, want, "pages fetched");
    assert!(hits.values().all(|n| *n == 1), "a page fetched twice: {hits:?}");

    // And stored once each.
    let db = store.client().await.unwrap().database("crawler");
    let pages = all_pages(&db, &Default::default()).await.unwrap();
    let mut stored: Vec<&str> = pages.iter().map(|p| p.url.as_str()).collect();
    stored.sort();
    let before = stored.len();
    stored.dedup();
    assert_eq!(stored.len(), before, "a page stored twice");
    assert_eq!(stored.len(), want.len(), "stored: {stored:?}");
    assert!(
        stored.contains(&format!("http://early.test:{port}/again").as_str()),
        "the late link's page was not stored: {stored:?}"
    );
}
