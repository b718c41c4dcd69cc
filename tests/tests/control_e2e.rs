//! Steering a running crawl with `crawlctl`, on real processes: a blocked
//! domain gets no request beyond the one in flight, a paused crawl none at
//! all, a domain's new delay spaces its requests, added seeds are crawled
//! (and an unreachable one fails alone), and a dispatcher killed and
//! started again keeps the block and the delay.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use crawl_tests::harness::{
    all_pages, bin, flags, free_port, spawn_crawl, write_lines, ClusterSpec, RunningCrawl, StoreServer,
};
use crawl_tests::host_server::{self, Asked};
use crawl_tests::verify;

/// Pages of each host besides `/`, which links to them all.
const PAGES: usize = 80;
const MIN_DELAY_MS: u64 = 100;
/// The delay an operator gives `paced.test`.
const PACED_MS: u64 = 400;

type Log = Arc<Mutex<Vec<(String, String, Instant)>>>;

/// Serves every host, logging (host, path, when) of each request.
async fn serve(log: Log) -> u16 {
    host_server::serve(move |asked: Asked| {
        let log = log.clone();
        async move {
            log.lock()
                .unwrap()
                .push((asked.host.clone(), asked.path.clone(), Instant::now()));
            let links: String = match asked.path.as_str() {
                "/" => (0..PAGES)
                    .map(|i| format!("<a href=\"/p/{i}\">{i}</a>"))
                    .collect(),
                _ => "<a href=\"/\">home</a>".into(),
            };
            (
                StatusCode::OK,
                format!("<html><title>{}</title>{links}</html>", asked.host),
            )
        }
    })
    .await
    .unwrap()
}

/// When each request to `host` arrived, after `from` if given.
fn requests_to(log: &Log, host: &str, from: Option<Instant>) -> Vec<Instant> {
    log.lock()
        .unwrap()
        .iter()
        .filter(|(h, _, at)| h == host && from.is_none_or(|f| *at >= f))
        .map(|(_, _, at)| *at)
        .collect()
}

/// Runs `crawlctl` against the crawl's dispatcher; its stdout, or a panic
/// with its stderr.
fn status(crawl: &RunningCrawl) -> serde_json::Value {
    serde_json::from_str(&crawl.crawlctl(&["status"]).unwrap()).unwrap()
}

/// Waits until `host` was asked at least `n` times.
async fn wait_for(log: &Log, host: &str, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while requests_to(log, host, None).len() < n {
        assert!(Instant::now() < deadline, "{host} never got {n} requests");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_steers_a_running_crawl_and_a_restart_keeps_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = StoreServer::start().unwrap();
    let log: Log = Arc::default();
    let port = serve(log.clone()).await;
    let seeds = write_lines(
        dir.path(),
        "seeds",
        &[
            format!("http://busy.test:{port}/"),
            format!("http://paced.test:{port}/"),
        ],
    )
    .unwrap();
    let hosts = "127.0.0.1 busy.test paced.test new.test unreachable.test".to_string();
    let mut spec = ClusterSpec::new(&store.uri, &seeds);
    spec.hosts_file = Some(write_lines(dir.path(), "hosts", &[hosts]).unwrap());
    spec.supervisors = 1;
    spec.children = 1;
    spec.dispatcher_args = flags(&format!(
        "--min-delay-ms {MIN_DELAY_MS} --max-inflight-per-domain 10 --max-domain-connections 1 --progress-secs 0 --debug-addr 127.0.0.1:{}",
        free_port()
    ));
    let mut crawl = spawn_crawl(&spec).await.unwrap();
    let busy = format!("busy.test:{port}");
    let paced = format!("paced.test:{port}");
    wait_for(&log, "busy.test", 10).await;

    // Block busy.test: at most the request in flight follows.
    let said = crawl
        .crawlctl(&["block", &busy, "--reason", "the site asked"])
        .unwrap();
    let blocked_at = Instant::now();
    assert!(said.contains("\"blocked\":true"), "{said}");
    // A new delay for paced.test: its leases come back and go out with it.
    crawl.crawlctl(&["delay", &paced, &PACED_MS.to_string()]).unwrap();
    let paced_at = Instant::now();

    // Both take hold on their own, before the pause below recalls all.
    tokio::time::sleep(Duration::from_millis(2500)).await;

    // Pause: once what is in flight ended, no request at all.
    crawl.crawlctl(&["pause"]).unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let quiet_from = Instant::now();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let during_pause = log
        .lock()
        .unwrap()
        .iter()
        .filter(|(.., at)| *at >= quiet_from)
        .count();
    let st = status(&crawl);
    assert_eq!(st["paused"], true, "{st}");
    assert_eq!(st["in_flight"], 0, "a paused crawl holds nothing out: {st}");
    crawl.crawlctl(&["resume"]).unwrap();

    // Seeds, one of a host nothing listens for; a malformed one is refused
    // alone.
    let said = crawl
        .crawlctl(&[
            "seeds",
            &format!("http://new.test:{port}/"),
            &format!("http://unreachable.test:{}/", free_port()),
            "http//bad",
        ])
        .unwrap();
    let added: serde_json::Value = serde_json::from_str(&said).unwrap();
    assert_eq!(added["added"], 2, "{said}");
    assert_eq!(added["refused"].as_array().map(Vec::len), Some(1), "{said}");
    // A refused command says why, and changes nothing.
    let refused = std::process::Command::new(bin("crawlctl").unwrap())
        .env("CRAWLER_DISPATCHER_DEBUG", crawl.debug_url().unwrap())
        .env(shared::debug_token::TOKEN_FILE_ENV, crawl.debug_token_file())
        .args(["delay", &paced, "99999999999"])
        .output()
        .unwrap();
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("block the domain instead"));
    // Control needs the run's token: without it, or with a wrong one,
    // refused, and the crawl is not paused.
    for (token, file) in [(None, "no-such-file"), (Some("wrong"), "no-such-file")] {
        let mut cmd = std::process::Command::new(bin("crawlctl").unwrap());
        cmd.env("CRAWLER_DISPATCHER_DEBUG", crawl.debug_url().unwrap())
            .env(shared::debug_token::TOKEN_FILE_ENV, file)
            .env_remove(shared::debug_token::TOKEN_ENV)
            .arg("pause");
        if let Some(t) = token {
            cmd.env(shared::debug_token::TOKEN_ENV, t);
        }
        let out = cmd.output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && stderr.contains("401"),
            "token {token:?}: {stderr}"
        );
    }
    assert_eq!(status(&crawl)["paused"], false, "paused without the token");

    // The dispatcher is killed and started again: the block and the delay
    // were recorded and stand.
    wait_for(&log, "new.test", 3).await;
    crawl.kill_dispatcher().await.unwrap();
    crawl.restart_dispatcher().unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let st = loop {
        if let Ok(out) = std::process::Command::new(bin("crawlctl").unwrap())
            .env("CRAWLER_DISPATCHER_DEBUG", crawl.debug_url().unwrap())
            .env(shared::debug_token::TOKEN_FILE_ENV, crawl.debug_token_file())
            .arg("status")
            .output()
        {
            if out.status.success() {
                break serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap();
            }
        }
        assert!(
            Instant::now() < deadline,
            "the restarted dispatcher never answered"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(st["blocked"].get(&busy).is_some(), "{st}");
    assert_eq!(st["delays"][&paced], PACED_MS, "{st}");
    assert_eq!(st["paused"], false, "{st}");

    // The crawl ends by itself with busy.test's rest still queued.
    let run = crawl.wait(Duration::from_secs(240)).await.unwrap();
    verify::assert_exited_ok(&run);

    let after_block = requests_to(&log, "busy.test", Some(blocked_at)).len();
    assert!(
        after_block <= 1,
        "{after_block} requests to busy.test after it was blocked"
    );
    assert_eq!(during_pause, 0, "requests while paused");
    // Once the delay took hold (what was in flight or waiting ended),
    // every gap between paced.test's requests is at least the delay.
    let paced_times = requests_to(&log, "paced.test", Some(paced_at + Duration::from_millis(500)));
    assert!(
        paced_times.len() > 20,
        "only {} paced requests",
        paced_times.len()
    );
    let shortest = paced_times.windows(2).map(|w| w[1] - w[0]).min().unwrap();
    eprintln!(
        "after the block: {after_block} requests to busy.test; while paused: {during_pause}; \
         paced.test: {} requests, the shortest gap {shortest:?}",
        paced_times.len()
    );
    assert!(
        shortest >= Duration::from_millis(PACED_MS - 5),
        "paced.test requests {shortest:?} apart, under its {PACED_MS} ms"
    );

    let db = store.client().await.unwrap().database("crawler");
    let pages = all_pages(&db, &Default::default()).await.unwrap();
    let stored = |host: &str| {
        pages
            .iter()
            .filter(|p| p.domain == host && p.status == 200)
            .count()
    };
    assert_eq!(stored(&paced), 1 + PAGES);
    assert_eq!(stored(&format!("new.test:{port}")), 1 + PAGES);
    let busy_stored = stored(&busy);
    assert_eq!(busy_stored, requests_to(&log, "busy.test", None).len());
    assert!(busy_stored < PAGES / 2, "{busy_stored} busy.test pages stored");
    // The blocked domain's rest stays queued for a later run.
    let frontier = crawl_tests::verify::frontier_urls(&db, &Default::default())
        .await
        .unwrap();
    let queued_busy = frontier
        .iter()
        .filter(|u| u.domain == busy && u.state == "queued")
        .count();
    assert!(queued_busy > 0, "busy.test's queued URLs were lost");
    let unreachable = frontier
        .iter()
        .find(|u| u.url.starts_with("http://unreachable.test:"))
        .expect("the unreachable seed is in the frontier");
    assert_eq!(unreachable.state, "failed", "{unreachable:?}");
}
