//! Commands take hold at once under load (issue 63), judged from the web
//! server's own log: a crawl of many hosts with a delay, two supervisors of
//! two children, some hosts with a robots.txt Crawl-delay. After `crawlctl`
//! returns:
//! - `block`: at most one more request to the blocked domain (the one that
//!   may already be on its way);
//! - `pause` and `stop`: no request *starting* more than [`TAKES_HOLD`]
//!   later;
//! - `stop`: every process (dispatcher, supervisors, children) gone within
//!   [`EXITS_WITHIN`], Crawl-delay hosts' held URLs included.
//!
//! And nothing is fetched twice: a URL handed back is one never requested.
//! The bounds are the issue's; each is measured from the instant `crawlctl`
//! returned to the arrival the server logged, with no further slack.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::http::{header, HeaderMap, StatusCode, Uri};
use axum::response::IntoResponse;
use crawl_tests::harness::{
    flags, free_port, spawn_crawl, write_lines, ClusterSpec, RunningCrawl, StoreServer,
};
use crawl_tests::procfs;

/// Hosts crawled; [`CRAWL_DELAY_HOSTS`] of them say `Crawl-delay: 2`.
const HOSTS: usize = 100;
const CRAWL_DELAY_HOSTS: usize = 10;
/// Pages of each host besides `/`, which links to them all: more than a
/// host gets in the test's time, so every host is busy throughout.
const PAGES: usize = 150;
/// As in the issue: every host is waiting for its turn most of the time.
const MIN_DELAY_MS: u64 = 300;
/// The bound for `pause` and `stop`.
const TAKES_HOLD: Duration = Duration::from_millis(250);
/// The bound for every process to be gone after `stop`.
const EXITS_WITHIN: Duration = Duration::from_secs(5);

/// (host, path, arrived) of every request, robots.txt included.
type Log = Arc<Mutex<Vec<(String, String, Instant)>>>;

/// Serves every host on 127.0.0.1: `/` links to its pages, each page back
/// to `/`; `slow*` hosts' robots.txt says `Crawl-delay: 2`.
async fn serve(log: Log) -> u16 {
    let app = axum::Router::new().fallback(move |headers: HeaderMap, uri: Uri| {
        let log = log.clone();
        async move {
            let host = headers
                .get(header::HOST)
                .and_then(|h| h.to_str().ok())
                .unwrap_or_default();
            let name = host.split(':').next().unwrap_or_default().to_string();
            let path = uri.path().to_string();
            log.lock()
                .unwrap()
                .push((name.clone(), path.clone(), Instant::now()));
            let (status, body) = match path.as_str() {
                "/robots.txt" if name.starts_with("slow") => {
                    (StatusCode::OK, "User-agent: *\nCrawl-delay: 2\n".to_string())
                }
                "/robots.txt" => (StatusCode::NOT_FOUND, String::new()),
                "/" => (
                    StatusCode::OK,
                    (0..PAGES)
                        .map(|i| format!("<a href=\"/p/{i}\">page {i}</a>\n"))
                        .collect(),
                ),
                _ => (
                    StatusCode::OK,
                    format!("<html><title>{name} {path}</title><p>text</p><a href=\"/\">home</a></html>"),
                ),
            };
            (status, [(header::CONTENT_TYPE, "text/html")], body).into_response()
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(listener, app).await });
    port
}

fn host(i: usize) -> String {
    if i < CRAWL_DELAY_HOSTS {
        format!("slow{i:02}.test")
    } else {
        format!("h{i:03}.test")
    }
}

/// Runs `crawlctl`; returns when it has, with the instant it did.
fn crawlctl(crawl: &RunningCrawl, verb: &[&str]) -> Instant {
    crawl.crawlctl(verb).unwrap();
    Instant::now()
}

/// Arrivals (host, path, at) from `from` on.
fn since(log: &Log, from: Instant) -> Vec<(String, String, Instant)> {
    log.lock()
        .unwrap()
        .iter()
        .filter(|r| r.2 >= from)
        .cloned()
        .collect()
}

/// Whether process `pid` is gone: no such process, or a zombie (exited,
/// not reaped yet).
fn gone(pid: u32) -> bool {
    procfs::stat(pid).is_none_or(|s| s.exited())
}

/// What the server saw after one command returned at `at`.
struct After {
    /// Requests that arrived more than [`TAKES_HOLD`] after it.
    late: usize,
    /// The last of them, after the command returned.
    last: Option<Duration>,
    /// The hosts most of them went to, with their counts.
    hosts: Vec<(String, usize)>,
}

fn after(reqs: &[(String, String, Instant)], at: Instant) -> After {
    let late: Vec<&(String, String, Instant)> = reqs
        .iter()
        .filter(|r| r.2.saturating_duration_since(at) > TAKES_HOLD)
        .collect();
    let mut by_host: HashMap<String, usize> = HashMap::new();
    for r in &late {
        *by_host.entry(r.0.clone()).or_default() += 1;
    }
    let mut hosts: Vec<(String, usize)> = by_host.into_iter().collect();
    hosts.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    hosts.truncate(4);
    After {
        late: late.len(),
        last: late.iter().map(|r| r.2 - at).max(),
        hosts,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn block_pause_and_stop_take_hold_at_once_under_load() {
    let dir = tempfile::tempdir().unwrap();
    let store = StoreServer::start().unwrap();
    let log: Log = Arc::default();
    let port = serve(log.clone()).await;
    let names: Vec<String> = (0..HOSTS).map(host).collect();
    let seeds: Vec<String> = names.iter().map(|n| format!("http://{n}:{port}/")).collect();
    let seeds = write_lines(dir.path(), "seeds", &seeds).unwrap();
    let hosts = write_lines(dir.path(), "hosts", &[format!("127.0.0.1 {}", names.join(" "))]).unwrap();
    let mut spec = ClusterSpec::new(&store.uri, &seeds);
    spec.hosts_file = Some(hosts);
    spec.supervisors = 2;
    spec.children = 2;
    spec.dispatcher_args = flags(&format!(
        "--min-delay-ms {MIN_DELAY_MS} --progress-secs 0 --debug-addr 127.0.0.1:{}",
        free_port()
    ));
    let crawl = spawn_crawl(&spec).await.unwrap();

    // Under load: every host's pages are coming.
    let deadline = Instant::now() + Duration::from_secs(60);
    while log.lock().unwrap().len() < 2 * HOSTS + 600 {
        assert!(Instant::now() < deadline, "the crawl never got going");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let loaded_at = Instant::now();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let rate = since(&log, loaded_at).len() as f64 / loaded_at.elapsed().as_secs_f64();

    // Block a busy host.
    let blocked = host(CRAWL_DELAY_HOSTS + 5);
    let block_at = crawlctl(&crawl, &["block", &format!("{blocked}:{port}")]);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let to_blocked: Vec<Duration> = since(&log, block_at)
        .iter()
        .filter(|r| r.0 == blocked)
        .map(|r| r.2 - block_at)
        .collect();

    // Pause, and resume two seconds later.
    let pause_at = crawlctl(&crawl, &["pause"]);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let paused = after(&since(&log, pause_at), pause_at);
    let during_pause = since(&log, pause_at).len();
    crawlctl(&crawl, &["resume"]);
    tokio::time::sleep(Duration::from_millis(2500)).await;

    // Stop: nothing starts, and every process is gone.
    let mut pids: Vec<u32> = crawl.supervisor_pids();
    pids.extend(crawl.dispatcher_pid());
    for i in 0..spec.supervisors {
        pids.extend(crawl.child_pids(i));
    }
    assert_eq!(
        pids.len(),
        1 + 2 + 4,
        "dispatcher, supervisors, children: {pids:?}"
    );
    let stop_at = crawlctl(&crawl, &["stop"]);
    let deadline = stop_at + Duration::from_secs(60);
    while !pids.iter().all(|p| gone(*p)) {
        assert!(Instant::now() < deadline, "still running a minute after stop");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let all_gone = stop_at.elapsed();
    let run = crawl.wait(Duration::from_secs(10)).await.unwrap();
    let after_stop = since(&log, stop_at);
    let stopped = after(&after_stop, stop_at);

    eprintln!(
        "under load: {rate:.0} requests/s over {HOSTS} hosts ({CRAWL_DELAY_HOSTS} with Crawl-delay 2), \
         --min-delay-ms {MIN_DELAY_MS}, 2 supervisors x 2 children"
    );
    eprintln!(
        "block {blocked}: {} more requests, at {to_blocked:?} after crawlctl returned",
        to_blocked.len()
    );
    eprintln!(
        "pause: {during_pause} requests while paused (2 s), {} of them more than {TAKES_HOLD:?} after \
         crawlctl returned, the last at {:?} (most to {:?})",
        paused.late, paused.last, paused.hosts
    );
    eprintln!(
        "stop: {} requests after it, {} more than {TAKES_HOLD:?} after crawlctl returned, the last at {:?}; \
         every process gone after {all_gone:?} (dispatcher {:?}, supervisors {:?}); late ones most to {:?}",
        after_stop.len(),
        stopped.late,
        stopped.last,
        run.dispatcher,
        run.supervisors,
        stopped.hosts
    );

    // Nothing fetched twice: what was handed back had not been requested.
    let mut asked: HashMap<(String, String), usize> = HashMap::new();
    for (h, p, _) in log.lock().unwrap().iter() {
        *asked.entry((h.clone(), p.clone())).or_default() += 1;
    }
    let twice: Vec<_> = asked.iter().filter(|(_, n)| **n > 1).take(5).collect();
    assert!(twice.is_empty(), "requested more than once: {twice:?}");

    assert!(
        to_blocked.len() <= 1,
        "{} requests to {blocked} after the block",
        to_blocked.len()
    );
    assert_eq!(
        paused.late, 0,
        "requests starting {TAKES_HOLD:?} after pause returned"
    );
    assert_eq!(
        stopped.late, 0,
        "requests starting {TAKES_HOLD:?} after stop returned"
    );
    assert!(
        all_gone <= EXITS_WITHIN,
        "the processes took {all_gone:?} to exit after stop"
    );
    assert!(run.dispatcher.success(), "dispatcher {:?}", run.dispatcher);
}
