//! The circuit breaker, with the whole cluster in the test process
//! (`crawl_tests::in_process`): a domain that keeps failing is
//! halted (recorded in the second store, its URLs left queued), stays
//! halted across runs, and crawls again once an operator un-halts it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use bson::doc;
use crawl_tests::harness::{all_pages, flags, write_lines, ClusterSpec, StoreServer};
use crawl_tests::host_server::{self, Asked};
use crawl_tests::in_process::run_in_process;
use crawl_tests::verify;

const PAGES: usize = 40;
const HALT_AFTER: usize = 5;

/// `fine.test` answers everything; `broken.test` answers its home page and
/// then 500 for every page it links to. Counts requests to `broken.test`.
async fn serve(broken_hits: Arc<AtomicUsize>) -> u16 {
    host_server::serve(move |asked: Asked| {
        let hits = broken_hits.clone();
        async move {
            if asked.host == "broken.test" {
                hits.fetch_add(1, Ordering::SeqCst);
                if asked.path != "/" {
                    return (StatusCode::INTERNAL_SERVER_ERROR, "oops".to_string());
                }
            }
            let links: String = (0..PAGES)
                .map(|i| format!("<a href=\"/p/{i}\">{i}</a>"))
                .collect();
            (
                StatusCode::OK,
                format!("<html><title>{}</title>{links}</html>", asked.host),
            )
        }
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_domain_is_halted_until_unhalted() {
    let dir = tempfile::tempdir().unwrap();
    let store = StoreServer::start().unwrap();
    let hits = Arc::new(AtomicUsize::new(0));
    let port = serve(hits.clone()).await;
    let seeds = write_lines(
        dir.path(),
        "seeds",
        &[
            format!("http://broken.test:{port}/"),
            format!("http://fine.test:{port}/"),
        ],
    )
    .unwrap();
    let hosts = write_lines(
        dir.path(),
        "hosts",
        &["127.0.0.1 broken.test fine.test".to_string()],
    )
    .unwrap();
    let mut spec = ClusterSpec::new(&store.uri, &seeds);
    spec.hosts_file = Some(hosts);
    spec.supervisors = 1;
    spec.children = 1;
    let broken = format!("broken.test:{port}");
    // Only the halt is under test here, not pauses.
    let base_args: Vec<String> = flags(&format!(
        "--min-delay-ms 10 --breaker-halt-after {HALT_AFTER} --breaker-error-share 1.0 \
         --max-inflight-per-domain 1 --progress-secs 0"
    ));
    spec.dispatcher_args = base_args.clone();

    // Run 1: broken.test is halted after HALT_AFTER failures in a row.
    let run = run_in_process(&spec, Duration::from_secs(120)).await.unwrap();
    verify::assert_exited_ok(&run);
    let first_hits = hits.load(Ordering::SeqCst);
    // The home page, then at most HALT_AFTER failing pages (one in flight at a time).
    assert_eq!(first_hits, 1 + HALT_AFTER, "requests to broken.test");
    let sdb = store.client().await.unwrap().database("crawler_robots");
    let d = sdb
        .collection::<bson::Document>(store::DOMAINS)
        .find_one(doc! {"_id": &broken})
        .await
        .unwrap()
        .expect("domain record");
    assert_eq!(d.get_bool("halted"), Ok(true), "{d}");
    assert!(d.get_str("halted_reason").unwrap().contains("in a row"), "{d}");
    let db = store.client().await.unwrap().database("crawler");
    let frontier = crawl_tests::verify::frontier_urls(&db, &Default::default())
        .await
        .unwrap();
    let queued_broken = frontier
        .iter()
        .filter(|f| f.domain == broken && f.state == "queued")
        .count();
    assert_eq!(queued_broken, PAGES - HALT_AFTER, "halted URLs stay queued");
    // The healthy domain was crawled in full.
    let pages = all_pages(&db, &Default::default()).await.unwrap();
    let fine_ok = pages
        .iter()
        .filter(|p| p.domain.starts_with("fine.test") && p.status == 200)
        .count();
    assert_eq!(fine_ok, 1 + PAGES);

    // Run 2: the halt persists; nothing is asked of broken.test.
    let run = run_in_process(&spec, Duration::from_secs(120)).await.unwrap();
    verify::assert_exited_ok(&run);
    assert_eq!(hits.load(Ordering::SeqCst), first_hits);

    // Run 3: an operator un-halts it; it is crawled (and halted) again.
    spec.dispatcher_args = base_args.clone();
    spec.dispatcher_args
        .extend(["--unhalt".to_string(), broken.clone()]);
    let run = run_in_process(&spec, Duration::from_secs(120)).await.unwrap();
    verify::assert_exited_ok(&run);
    assert_eq!(hits.load(Ordering::SeqCst), first_hits + HALT_AFTER);
}
