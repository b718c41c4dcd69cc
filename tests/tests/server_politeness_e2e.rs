//! Per-server politeness as the server sees it: twenty host names on one
//! address (127.0.0.2, each name mapped with a hosts file), crawled by two
//! supervisors of two children each with no per-domain delay. With
//! `--min-ip-delay-ms 100` the server's log shows its requests one at a
//! time, never two closer than 100 ms, robots.txt included; the domains
//! were grouped on one supervisor and one child (the names first given to
//! the other moved). Without the flag (names
//! the operator mapped are not paced by server by default) the same web
//! is hit many times within 100 ms: the check can fail.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::http::{header, HeaderMap, StatusCode, Uri};
use axum::response::IntoResponse;
use crawl_tests::harness::{all_pages, flags, write_lines, ClusterSpec, StoreServer};
use crawl_tests::in_process::run_in_process;
use crawl_tests::verify;

/// Host names on the one server.
const NAMES: usize = 20;
/// Pages of each name besides `/`, which links to them.
const PAGES: usize = 3;
const GAP_MS: u64 = 100;
/// The second loopback address, which the test's server alone listens on.
const ADDR: &str = "127.0.0.2";

/// (host, path, arrived, answered) of every request.
type Log = Arc<Mutex<Vec<(String, String, Instant, Instant)>>>;

/// Serves every name on `ADDR`, each `/` linking to its pages, and logs
/// each request (robots.txt too) with when it arrived and was answered.
async fn serve(log: Log) -> u16 {
    let app = axum::Router::new().fallback(move |headers: HeaderMap, uri: Uri| {
        let log = log.clone();
        async move {
            let arrived = Instant::now();
            let host = headers
                .get(header::HOST)
                .and_then(|h| h.to_str().ok())
                .unwrap_or_default();
            let name = host.split(':').next().unwrap_or_default().to_string();
            // A little work per answer, so overlapping requests would show.
            tokio::time::sleep(Duration::from_millis(5)).await;
            let path = uri.path().to_string();
            let (status, body) = match path.as_str() {
                "/robots.txt" => (StatusCode::NOT_FOUND, String::new()),
                "/" => (
                    StatusCode::OK,
                    (0..PAGES).map(|i| format!("<a href=\"/p{i}\">{i}</a>")).collect(),
                ),
                _ => (StatusCode::OK, format!("<p>{name} {path}</p>")),
            };
            log.lock().unwrap().push((name, path, arrived, Instant::now()));
            (status, [(header::CONTENT_TYPE, "text/html")], body).into_response()
        }
    });
    let listener = tokio::net::TcpListener::bind((ADDR, 0)).await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(listener, app).await });
    port
}

/// What the server saw of one crawl.
struct Seen {
    requests: usize,
    /// The shortest gap from one request's arrival to the next's.
    shortest_arrival_gap: Duration,
    /// The shortest gap from one answer to the next arrival (`None` when
    /// two requests overlapped).
    shortest_answer_gap: Option<Duration>,
    pages_stored: usize,
    /// URLs handed back to be regrouped, or recalled (the summary's count).
    handed_back: u64,
    /// Domains moved to another supervisor.
    moved: u64,
}

async fn crawl(dir: &std::path::Path, store: &StoreServer, db: &str, extra: &str) -> Seen {
    let log: Log = Arc::default();
    let port = serve(log.clone()).await;
    let names: Vec<String> = (0..NAMES).map(|i| format!("s{i}.test")).collect();
    let seeds: Vec<String> = names.iter().map(|n| format!("http://{n}:{port}/")).collect();
    let seeds = write_lines(dir, &format!("seeds-{db}"), &seeds).unwrap();
    let hosts = write_lines(
        dir,
        &format!("hosts-{db}"),
        &[format!("{ADDR} {}", names.join(" "))],
    )
    .unwrap();
    let mut spec = ClusterSpec::new(&store.uri, &seeds);
    spec.db = db.to_string();
    spec.hosts_file = Some(hosts);
    spec.supervisors = 2;
    spec.children = 2;
    spec.dispatcher_args = flags(&format!(
        "--min-delay-ms 0 --max-inflight-per-domain 4 --progress-secs 0 {extra}"
    ));
    let run = run_in_process(&spec, Duration::from_secs(180)).await.unwrap();
    verify::assert_exited_ok(&run);
    verify::assert_exited_ok(&run);

    let mut reqs = log.lock().unwrap().clone();
    reqs.sort_by_key(|r| r.2);
    let shortest_arrival_gap = reqs.windows(2).map(|w| w[1].2 - w[0].2).min().unwrap();
    let shortest_answer_gap = reqs
        .windows(2)
        .map(|w| w[1].2.checked_duration_since(w[0].3))
        .try_fold(Duration::MAX, |min, gap| gap.map(|g| min.min(g)));
    let db = store.client().await.unwrap().database(db);
    let pages = all_pages(&db, &Default::default()).await.unwrap();
    let pages_stored = pages.iter().filter(|p| p.status == 200).count();
    Seen {
        requests: reqs.len(),
        shortest_arrival_gap,
        shortest_answer_gap,
        pages_stored,
        handed_back: run.summary["handed_back"].as_u64().unwrap_or(0),
        moved: run.summary["domains_moved"].as_u64().unwrap_or(0),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_names_on_one_address_are_paced_as_one_server_across_two_supervisors() {
    let dir = tempfile::tempdir().unwrap();
    let store = StoreServer::start().unwrap();
    let want_pages = NAMES * (1 + PAGES);

    let paced = crawl(
        dir.path(),
        &store,
        "paced",
        &format!("--min-ip-delay-ms {GAP_MS}"),
    )
    .await;
    eprintln!(
        "--min-ip-delay-ms {GAP_MS}: {} requests, {} pages; shortest gap between arrivals {:?}, \
         from an answer to the next arrival {:?}; {} URLs handed back, {} domains moved",
        paced.requests,
        paced.pages_stored,
        paced.shortest_arrival_gap,
        paced.shortest_answer_gap,
        paced.handed_back,
        paced.moved
    );
    assert_eq!(paced.pages_stored, want_pages, "every page of every name");
    // Each page once, and robots.txt once per name.
    assert_eq!(paced.requests, want_pages + NAMES);
    let gap = Duration::from_millis(GAP_MS);
    assert!(
        paced.shortest_arrival_gap >= gap,
        "two requests to the server {:?} apart",
        paced.shortest_arrival_gap
    );
    let answer_gap = paced.shortest_answer_gap.expect("two requests overlapped");
    assert!(
        answer_gap >= gap,
        "a request {answer_gap:?} after the previous answer"
    );
    // Every name's first URL came back with its server, and the names
    // first given to the other supervisor moved to the server's owner.
    assert!(
        paced.handed_back >= NAMES as u64,
        "{} handed back",
        paced.handed_back
    );
    assert!(paced.moved >= 1, "no name moved to the server's owner");

    let unpaced = crawl(dir.path(), &store, "unpaced", "").await;
    eprintln!(
        "no flag (mapped names are not paced by server): {} requests; shortest gap between arrivals {:?}; \
         {} URLs handed back, {} domains moved",
        unpaced.requests, unpaced.shortest_arrival_gap, unpaced.handed_back, unpaced.moved
    );
    assert_eq!((unpaced.handed_back, unpaced.moved), (0, 0), "nothing to regroup");
    assert_eq!(unpaced.pages_stored, want_pages);
    assert!(
        unpaced.shortest_arrival_gap < gap,
        "without the flag the check would still pass: it could not fail"
    );
}
