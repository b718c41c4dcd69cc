//! The Grafana dashboard (`profiling/dashboards/crawler.json`) over a live
//! crawl: a real Prometheus (Debian's `prometheus`; the test says it skipped
//! where that is not installed) finds every process of a short crawl at the
//! dispatcher's `/debug/targets` (its HTTP service discovery) and scrapes
//! them, with the bearer token the processes were given
//! (`shared::debug_token`: a token given guards `/metrics` too, as on a
//! cluster off loopback), and every expression of every panel is evaluated
//! through Prometheus's HTTP query API over the crawl's time: each must
//! return data.
//!
//! The crawl revisits (`--revisit-after`) a web with hostile hosts, and
//! paces its server (`--min-ip-delay-ms`), so that the revisit queue, the
//! failures by kind and the server waits have something to show; the
//! hostile hosts are served on a second address (127.0.0.2), paced apart,
//! so that their hanging answers hold up only themselves.
//!
//! Without Prometheus, [`every_metric_the_dashboard_names_is_exported`]
//! still checks each name against the metric families the code declares.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crawl_tests::harness::{flags, free_port, repo_root, signal, spawn_crawl, ClusterSpec, StoreServer};
use crawl_tests::web::{Changing, WebExtras, WebServer, WebSpec};

/// The dashboard, from the repository's root.
const DASHBOARD: &str = "profiling/dashboards/crawler.json";
/// What `$__rate_interval` stands for here: a few of the test's 1 s scrapes
/// (Grafana makes it at least four scrape intervals).
const RATE_INTERVAL: &str = "5s";
/// How long the crawl is scraped after every target is up.
const SCRAPED: Duration = Duration::from_secs(12);

/// Every `expr` of the dashboard's panels, with the panel's title.
fn expressions(dashboard: &serde_json::Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for panel in dashboard["panels"].as_array().into_iter().flatten() {
        let title = panel["title"].as_str().unwrap_or_default();
        for t in panel["targets"].as_array().into_iter().flatten() {
            if let Some(expr) = t["expr"].as_str() {
                out.push((title.to_string(), expr.to_string()));
            }
        }
    }
    out
}

fn prometheus_binary() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("prometheus"))
        .find(|p| p.is_file())
}

/// A Prometheus server for one test; stopped on drop.
struct Prometheus {
    child: Child,
    port: u16,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Prometheus {
    fn start(binary: &Path, dir: &Path, config: &str) -> Prometheus {
        let file = dir.join("prometheus.yml");
        std::fs::write(&file, config).unwrap();
        let port = free_port();
        let child = Command::new(binary)
            .arg(format!("--config.file={}", file.display()))
            .arg(format!("--storage.tsdb.path={}", dir.join("tsdb").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--log.level=warn")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("prometheus.log")).unwrap())
            .spawn()
            .expect("starting prometheus");
        Prometheus { child, port }
    }

    /// `/api/v1/PATH?PARAMS`, the parameters encoded.
    fn api(&self, path: &str, params: &[(&str, &str)]) -> String {
        let mut u = url::Url::parse(&format!("http://127.0.0.1:{}/api/v1/{path}", self.port)).unwrap();
        u.query_pairs_mut().extend_pairs(params);
        u.into()
    }
}

/// The scrape configuration of a cluster (docs/observability.md): the
/// targets from the dispatcher's `/debug/targets`, looked at every second
/// here, and the token from a file, for both.
fn scrape_config(dispatcher_debug: &str, token_file: &Path) -> String {
    let auth = format!(
        "authorization: {{type: Bearer, credentials_file: '{}'}}",
        token_file.display()
    );
    format!(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  - job_name: crawler\n    {auth}\n    http_sd_configs:\n      - url: 'http://{dispatcher_debug}/debug/targets'\n        refresh_interval: 1s\n        {auth}\n"
    )
}

/// A response's body as JSON, if it is.
async fn json(r: reqwest::Response) -> Option<serde_json::Value> {
    serde_json::from_slice(&r.bytes().await.ok()?).ok()
}

fn now_secs() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_dashboard_query_returns_data_from_a_live_crawl() {
    let dashboard: serde_json::Value =
        serde_json::from_slice(&std::fs::read(repo_root().join(DASHBOARD)).unwrap())
            .expect("the dashboard is JSON");
    let exprs = expressions(&dashboard);
    assert!(exprs.len() >= 10, "{} expressions in {DASHBOARD}", exprs.len());
    let Some(prometheus) = prometheus_binary() else {
        eprintln!("skipped: prometheus is not installed (Debian's package `prometheus`; .ci/run installs it where it can)");
        return;
    };
    let started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let store = StoreServer::start().unwrap();
    let spec = WebSpec {
        seed: 5,
        hosts: 8,
        outside_hosts: 0,
        pages_per_host: 150,
        ..WebSpec::default()
    };
    let extras = WebExtras {
        hostile: true,
        // The server listens on 127.0.0.2 too (and the internal-links host
        // adds a few blocked requests).
        internal: true,
        changing: Some(Changing {
            every: Duration::from_secs(1),
            share_percent: 30,
        }),
        ..WebExtras::default()
    };
    let server = WebServer::local_with(spec, extras).await;
    let mut cluster = ClusterSpec::for_web(&store.uri, &server, dir.path()).unwrap();
    // The generated sites on 127.0.0.1, the hostile hosts on 127.0.0.2.
    let names: Vec<String> = server
        .web()
        .host_names()
        .iter()
        .map(|h| {
            let generated = h.starts_with("site") && !h.contains('-');
            format!("{} {h}", if generated { "127.0.0.1" } else { "127.0.0.2" })
        })
        .collect();
    cluster.hosts_file = Some(crawl_tests::harness::write_lines(dir.path(), "hosts", &names).unwrap());
    cluster.supervisors = 2;
    cluster.children = 1;
    // A token given guards every route, /metrics too: the scrapes must carry it.
    let token = crawl_tests::harness::random_secret();
    let token_file = dir.path().join("scrape_token");
    std::fs::write(&token_file, &token).unwrap();
    for env in [&mut cluster.env, &mut cluster.dispatcher_env] {
        env.push((shared::debug_token::TOKEN_ENV.into(), token.clone()));
    }
    let debug_addr = format!("127.0.0.1:{}", free_port());
    cluster.dispatcher_args = flags(&format!(
        "--min-delay-ms 50 --min-ip-delay-ms 1 --request-timeout-ms 2000 --max-depth 100 --revisit-after 3s --debug-addr {debug_addr}"
    ));
    let mut crawl = spawn_crawl(&cluster).await.unwrap();
    let http = shared::http_client::builder()
        .timeout(Duration::from_secs(10))
        .no_proxy()
        .build()
        .unwrap();

    // Every process, in the dispatcher's list of targets.
    let want = 1 + cluster.supervisors * (1 + cluster.children);
    let deadline = Instant::now() + Duration::from_secs(60);
    let targets = loop {
        let listed = http
            .get(format!("http://{debug_addr}/debug/targets"))
            .bearer_auth(&token)
            .send()
            .await;
        if let Ok(r) = listed {
            if let Some(serde_json::Value::Array(groups)) = json(r).await {
                if groups.len() >= want {
                    break groups;
                }
            }
        }
        assert!(
            Instant::now() < deadline,
            "the dispatcher never listed {want} targets"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let roles: std::collections::BTreeSet<&str> = targets
        .iter()
        .filter_map(|g| g["labels"]["role"].as_str())
        .collect();
    assert_eq!(
        roles,
        ["crawler-child", "dispatcher", "supervisor"].into(),
        "{targets:?}"
    );
    let child = targets
        .iter()
        .find(|g| g["labels"]["role"] == "crawler-child")
        .and_then(|g| g["targets"][0].as_str())
        .unwrap();
    let unauthorised = http
        .get(format!("http://{child}/metrics"))
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(unauthorised.as_u16(), 401, "/metrics without the token given");

    let prom_dir = dir.path().join("prometheus");
    std::fs::create_dir_all(&prom_dir).unwrap();
    let prom = Prometheus::start(&prometheus, &prom_dir, &scrape_config(&debug_addr, &token_file));
    let from = now_secs();
    // Every target scraped successfully (the token accepted).
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let up = http.get(prom.api("query", &[("query", "sum(up)")])).send().await;
        let n = match up {
            Ok(r) => json(r).await.and_then(|v| {
                v["data"]["result"][0]["value"][1]
                    .as_str()
                    .and_then(|s| s.parse::<f64>().ok())
            }),
            Err(_) => None,
        };
        if n.is_some_and(|n| n >= want as f64) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "Prometheus never scraped all {want} processes (up = {n:?}); its log: {}",
            std::fs::read_to_string(prom_dir.join("prometheus.log")).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    tokio::time::sleep(SCRAPED).await;
    assert!(!crawl.dispatcher_exited(), "a revisiting crawl ended by itself");

    let to = now_secs();
    let mut empty = Vec::new();
    for (title, expr) in &exprs {
        let query = expr.replace("$__rate_interval", RATE_INTERVAL);
        let (start, end) = (format!("{from:.3}"), format!("{to:.3}"));
        let params = [
            ("query", query.as_str()),
            ("start", &start),
            ("end", &end),
            ("step", "1"),
        ];
        let resp = http.get(prom.api("query_range", &params)).send().await.unwrap();
        let resp = json(resp).await.expect("Prometheus answers JSON");
        assert_eq!(resp["status"], "success", "{title}: {query}: {resp}");
        // Series with at least one number (a ratio is NaN while its
        // denominator is 0), and the largest value seen.
        let mut series = 0;
        let mut peak = f64::NAN;
        for s in resp["data"]["result"].as_array().into_iter().flatten() {
            let values: Vec<f64> = s["values"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|v| v[1].as_str()?.parse::<f64>().ok())
                .filter(|v| v.is_finite())
                .collect();
            if !values.is_empty() {
                series += 1;
                peak = values.iter().copied().fold(peak, f64::max);
            }
        }
        eprintln!("dashboard: {title}: {series} series, peak {peak:.4}: {query}");
        if series == 0 {
            empty.push(format!("{title}: {query}"));
        }
    }
    signal(crawl.dispatcher_pid().unwrap(), libc::SIGTERM);
    let _ = crawl.wait(Duration::from_secs(60)).await;
    eprintln!(
        "dashboard: {} expressions over {:.0} s of scrapes of {want} processes; test {:.1} s",
        exprs.len(),
        to - from,
        started.elapsed().as_secs_f64()
    );
    assert!(
        empty.is_empty(),
        "expressions that returned no data:\n{}",
        empty.join("\n")
    );
}

/// The metric families (`crawler_*`, `process_*`) an expression names,
/// without a histogram's `_sum`, `_count` or `_bucket`.
fn metric_names(expr: &str) -> Vec<String> {
    expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| w.starts_with("crawler_") || w.starts_with("process_"))
        .map(|w| {
            let base = ["_sum", "_count", "_bucket"].iter().find_map(|s| {
                w.strip_suffix(s)
                    .filter(|b| b.ends_with("_seconds") || b.ends_with("_items"))
            });
            base.unwrap_or(w).to_string()
        })
        .collect()
}

/// Every family the dashboard names is one the code declares (its name
/// as a string in the crates' sources: `metric.rs`, the timing ops'
/// histograms, the `process_*` families): a misspelt name, or a term that
/// may be absent (`or vector(0)`), would otherwise show nothing or zero
/// without a word. Cheap: no crawl, no Prometheus.
#[test]
fn every_metric_the_dashboard_names_is_exported() {
    let root = repo_root();
    let dashboard: serde_json::Value =
        serde_json::from_slice(&std::fs::read(root.join(DASHBOARD)).unwrap()).expect("the dashboard is JSON");
    let mut sources = String::new();
    for dir in [
        "dispatcher/src",
        "supervisor/src",
        "crawler-child/src",
        "shared",
        "profiling/src",
    ] {
        let mut stack = vec![root.join(dir)];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap().flatten() {
                let p = e.path();
                if p.is_dir() {
                    stack.push(p);
                } else if p.extension().is_some_and(|x| x == "rs") {
                    sources.push_str(&std::fs::read_to_string(&p).unwrap());
                }
            }
        }
    }
    let mut unknown = std::collections::BTreeSet::new();
    for (title, expr) in expressions(&dashboard) {
        for name in metric_names(&expr) {
            if !sources.contains(&format!("\"{name}\"")) {
                unknown.insert(format!("{title}: {name}"));
            }
        }
    }
    assert!(
        unknown.is_empty(),
        "families the code does not export: {unknown:?}"
    );
}
