//! End-to-end tests: real server on 127.0.0.1:0, real HTTP/1.1 over a TcpStream.
//!
//! The CPU profiler and the global metrics recorder are process-wide, so everything that
//! profiles lives in ONE test function (`profiles_metrics_and_busy`); the other tests only
//! touch routes that do not profile and can run in parallel with it.

use std::io::Read as _;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use pprof::protos::Message as _;
use profiling::axum::routing::get;
use profiling::axum::Router;
use profiling::{install_metrics, start_debug_server, DebugServerConfig};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

struct HttpResponse {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl HttpResponse {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// Minimal HTTP/1.1 GET with `Connection: close`; handles Content-Length and chunked bodies.
async fn get_req(addr: SocketAddr, path: &str, auth: Option<&str>) -> HttpResponse {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    let mut req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    if let Some(auth) = auth {
        req.push_str(&format!("Authorization: {auth}\r\n"));
    }
    req.push_str("\r\n");
    stream.write_all(req.as_bytes()).await.expect("write");

    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await.expect("read");

    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("end of headers");
    let head = std::str::from_utf8(&raw[..split]).expect("utf8 head");
    let rest = &raw[split + 4..];
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap();
    let status: u16 = status_line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("status code");
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();

    let chunked = headers
        .iter()
        .any(|(k, v)| k.eq_ignore_ascii_case("transfer-encoding") && v.eq_ignore_ascii_case("chunked"));
    let body = if chunked { dechunk(rest) } else { rest.to_vec() };
    HttpResponse {
        status,
        headers,
        body,
    }
}

fn dechunk(mut data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let eol = data
            .windows(2)
            .position(|w| w == b"\r\n")
            .expect("chunk size line");
        let size_str = std::str::from_utf8(&data[..eol]).unwrap();
        let size = usize::from_str_radix(size_str.split(';').next().unwrap().trim(), 16).unwrap();
        data = &data[eol + 2..];
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&data[..size]);
        data = &data[size + 2..];
    }
}

/// The function the profile must show. `inline(never)` keeps it a real frame in release.
#[inline(never)]
fn busy_crawler_work(seed: u64) -> u64 {
    let mut x = seed;
    for i in 0..200_000u64 {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(i) ^ (x >> 29);
    }
    std::hint::black_box(x)
}

/// Burns CPU in `busy_crawler_work` on a separate OS thread until dropped.
struct Burner {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Burner {
    fn start() -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("burner".into())
            .spawn(move || {
                let mut acc = 0u64;
                while !flag.load(Ordering::Relaxed) {
                    acc = busy_crawler_work(std::hint::black_box(acc));
                }
                std::hint::black_box(acc);
            })
            .unwrap();
        Burner {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Burner {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn profiles_metrics_and_busy() {
    let metrics = install_metrics().expect("install metrics");
    // Second install must hand back the same recorder, not fail.
    install_metrics().expect("install metrics twice");
    let server = start_debug_server(DebugServerConfig::default(), metrics, Router::new())
        .await
        .expect("start server");
    let addr = server.addr;
    assert!(addr.ip().is_loopback());
    assert_ne!(addr.port(), 0);

    let _burner = Burner::start();

    // --- pprof protobuf, plus 409 for a concurrent capture ---
    let first = tokio::spawn(async move { get_req(addr, "/debug/pprof/profile?seconds=1", None).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let busy = get_req(addr, "/debug/pprof/flamegraph?seconds=1", None).await;
    assert_eq!(busy.status, 409, "concurrent capture: {}", busy.text());

    let resp = first.await.unwrap();
    assert_eq!(resp.status, 200, "profile: {}", resp.text());
    assert_eq!(resp.header("content-type"), Some("application/octet-stream"));
    assert_eq!(&resp.body[..2], &[0x1f, 0x8b], "gzip magic");
    let mut raw = Vec::new();
    flate2::read::GzDecoder::new(&resp.body[..])
        .read_to_end(&mut raw)
        .expect("gunzip");
    let profile = pprof::protos::Profile::decode(raw.as_slice()).expect("decode pprof");
    assert!(!profile.sample.is_empty(), "profile has no samples");
    assert!(
        profile
            .string_table
            .iter()
            .any(|s| s.contains("busy_crawler_work")),
        "busy_crawler_work not in string table ({} strings)",
        profile.string_table.len()
    );

    // --- flamegraph ---
    let resp = get_req(addr, "/debug/pprof/flamegraph?seconds=1", None).await;
    assert_eq!(resp.status, 200, "flamegraph: {}", resp.text());
    assert_eq!(resp.header("content-type"), Some("image/svg+xml"));
    let svg = resp.text();
    assert!(svg.starts_with("<?xml") || svg.contains("<svg"), "not svg");
    assert!(svg.contains("busy_crawler_work"), "busy_crawler_work not in svg");

    // --- folded stacks: `frame;frame count` lines that parse and merge ---
    let resp = get_req(addr, "/debug/pprof/folded?seconds=1", None).await;
    assert_eq!(resp.status, 200, "folded: {}", resp.text());
    assert_eq!(resp.header("content-type"), Some("text/plain; charset=utf-8"));
    let text = resp.text();
    let stacks = profiling::Stacks::parse(&text).expect("folded stacks parse");
    assert!(stacks.samples() > 0, "no samples:\n{text}");
    let (hot, _) = stacks
        .iter()
        .find(|(s, _)| s.contains("busy_crawler_work"))
        .unwrap_or_else(|| panic!("busy_crawler_work not in folded stacks:\n{text}"));
    // Root first: the thread name, then callers, the sampled function last-ish.
    assert!(hot.starts_with("burner;"), "root frame is the thread name: {hot}");

    // --- bad seconds → 400 from the query extractor, and the slot is free again ---
    let resp = get_req(addr, "/debug/pprof/profile?seconds=abc", None).await;
    assert_eq!(resp.status, 400);

    // --- metrics ---
    metrics::counter!("test_things_total").increment(3);
    metrics::histogram!("test_fetch_seconds").record(0.003);
    metrics::histogram!("test_body_bytes").record(5000.0);
    let resp = get_req(addr, "/metrics", None).await;
    assert_eq!(resp.status, 200);
    assert_eq!(resp.header("content-type"), Some("text/plain; version=0.0.4"));
    let text = resp.text();
    assert!(text.contains("test_things_total 3"), "metrics:\n{text}");
    assert!(
        text.contains("test_fetch_seconds_bucket{le=\"0.005\"} 1"),
        "seconds histogram buckets:\n{text}"
    );
    assert!(
        text.contains("test_fetch_seconds_bucket{le=\"0.0025\"} 0"),
        "seconds histogram buckets:\n{text}"
    );
    assert!(
        text.contains("test_body_bytes_bucket{le=\"16384\"} 1"),
        "bytes histogram buckets:\n{text}"
    );

    // --- healthz ---
    let resp = get_req(addr, "/healthz", None).await;
    assert_eq!(resp.status, 200);
    assert_eq!(resp.text(), "ok");

    server.abort();
}

#[tokio::test]
async fn token_is_enforced_on_all_routes() {
    let metrics = install_metrics().unwrap();
    let extra = Router::new().route("/debug/cluster", get(|| async { "{}" }));
    let config = DebugServerConfig {
        token: Some("s3cret".into()),
        ..DebugServerConfig::default()
    };
    let server = start_debug_server(config, metrics, extra).await.unwrap();
    let addr = server.addr;

    for path in [
        "/healthz",
        "/metrics",
        "/debug/cluster",
        "/debug/pprof/profile?seconds=1",
        "/debug/pprof/folded?seconds=1",
    ] {
        let resp = get_req(addr, path, None).await;
        assert_eq!(resp.status, 401, "{path} without token");
        let resp = get_req(addr, path, Some("Bearer wrong")).await;
        assert_eq!(resp.status, 401, "{path} with wrong token");
    }
    let resp = get_req(addr, "/healthz", Some("Bearer s3cret")).await;
    assert_eq!(resp.status, 200);
    assert_eq!(resp.text(), "ok");
    let resp = get_req(addr, "/debug/cluster", Some("Bearer s3cret")).await;
    assert_eq!(resp.status, 200);
    assert_eq!(resp.text(), "{}");
    server.abort();
}

#[tokio::test]
async fn extra_routes_are_merged() {
    let metrics = install_metrics().unwrap();
    let extra = Router::new().route(
        "/debug/cluster",
        get(|| async {
            (
                [(profiling::axum::http::header::CONTENT_TYPE, "application/json")],
                serde_json::json!({"supervisors": 2}).to_string(),
            )
        }),
    );
    let server = start_debug_server(DebugServerConfig::default(), metrics, extra)
        .await
        .unwrap();
    let resp = get_req(server.addr, "/debug/cluster", None).await;
    assert_eq!(resp.status, 200);
    assert_eq!(resp.header("content-type"), Some("application/json"));
    let v: serde_json::Value = serde_json::from_slice(&resp.body).unwrap();
    assert_eq!(v["supervisors"], 2);
    let resp = get_req(server.addr, "/nope", None).await;
    assert_eq!(resp.status, 404);
    server.abort();
}

#[tokio::test]
async fn non_loopback_requires_token() {
    let metrics = install_metrics().unwrap();
    let any: SocketAddr = "0.0.0.0:0".parse().unwrap();

    let err = start_debug_server(
        DebugServerConfig {
            addr: any,
            token: None,
            ..DebugServerConfig::default()
        },
        metrics.clone(),
        Router::new(),
    )
    .await
    .expect_err("non-loopback without token must fail");
    assert!(err.to_string().contains("token"), "{err}");

    start_debug_server(
        DebugServerConfig {
            addr: any,
            token: Some(String::new()),
            ..DebugServerConfig::default()
        },
        metrics.clone(),
        Router::new(),
    )
    .await
    .expect_err("empty token counts as no token");

    // The run's own token leaves /metrics open: loopback only.
    start_debug_server(
        DebugServerConfig {
            addr: any,
            token: Some("t0k".into()),
            guards: profiling::Guards::ControlAndProfiles,
        },
        metrics.clone(),
        Router::new(),
    )
    .await
    .expect_err("a token guarding control and profiles only, off loopback");

    let server = start_debug_server(
        DebugServerConfig {
            addr: any,
            token: Some("t0k".into()),
            ..DebugServerConfig::default()
        },
        metrics,
        Router::new(),
    )
    .await
    .expect("non-loopback with token");
    let local = SocketAddr::from(([127, 0, 0, 1], server.addr.port()));
    assert_eq!(get_req(local, "/healthz", None).await.status, 401);
    assert_eq!(get_req(local, "/healthz", Some("Bearer t0k")).await.status, 200);
    server.abort();
}

/// The families of a Prometheus text exposition: name → (HELP text, TYPE, sample values).
#[derive(Debug, Default)]
struct Family {
    help: Option<String>,
    kind: Option<String>,
    values: Vec<f64>,
}

/// Reads `# HELP`, `# TYPE` and unlabelled sample lines (all the process families have);
/// labelled samples are skipped.
fn families(text: &str) -> std::collections::BTreeMap<String, Family> {
    let mut out = std::collections::BTreeMap::<String, Family>::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').unwrap_or((rest, ""));
            let f = out.entry(name.to_string()).or_default();
            assert!(f.help.is_none(), "two HELP lines for {name}");
            f.help = Some(help.to_string());
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').expect("TYPE line has a type");
            let f = out.entry(name.to_string()).or_default();
            assert!(f.kind.is_none(), "two TYPE lines for {name}");
            f.kind = Some(kind.to_string());
        } else if let Some((name, value)) = line.split_once(' ') {
            if !name.contains('{') && !name.starts_with('#') {
                let value = value.parse().unwrap_or_else(|_| panic!("bad value: {line}"));
                out.entry(name.to_string()).or_default().values.push(value);
            }
        }
    }
    out
}

#[tokio::test]
async fn metrics_have_help_and_process_families() {
    let metrics = install_metrics().unwrap();
    let server = start_debug_server(DebugServerConfig::default(), metrics, Router::new())
        .await
        .unwrap();
    // A described family gets its HELP line (what shared::metric::describe relies on).
    metrics::describe_counter!("test_described_total", "Things counted for this test.");
    metrics::counter!("test_described_total").increment(1);

    let scrape = || async {
        let resp = get_req(server.addr, "/metrics", None).await;
        assert_eq!(resp.status, 200);
        let text = resp.text();
        (families(&text), text)
    };
    let (first, text) = scrape().await;
    let described = &first["test_described_total"];
    assert_eq!(
        described.help.as_deref(),
        Some("Things counted for this test."),
        "{text}"
    );

    let expected = [
        ("process_cpu_seconds_total", "counter"),
        ("process_resident_memory_bytes", "gauge"),
        ("process_virtual_memory_bytes", "gauge"),
        ("process_open_fds", "gauge"),
        ("process_max_fds", "gauge"),
        ("process_start_time_seconds", "gauge"),
    ];
    for (name, kind) in expected {
        let f = first
            .get(name)
            .unwrap_or_else(|| panic!("no {name} in /metrics:\n{text}"));
        assert!(
            f.help.as_deref().is_some_and(|h| !h.is_empty()),
            "{name} has no HELP:\n{text}"
        );
        assert_eq!(f.kind.as_deref(), Some(kind), "TYPE of {name}");
        assert_eq!(f.values.len(), 1, "one sample of {name}");
    }
    let value = |fams: &std::collections::BTreeMap<String, Family>, name: &str| fams[name].values[0];
    let cpu = value(&first, "process_cpu_seconds_total");
    // A young test process may not have used one clock tick yet; the loop below sees it grow.
    assert!(cpu >= 0.0, "cpu {cpu}");
    assert!(value(&first, "process_resident_memory_bytes") > 1e6);
    assert!(value(&first, "process_virtual_memory_bytes") >= value(&first, "process_resident_memory_bytes"));
    let (fds, max) = (
        value(&first, "process_open_fds"),
        value(&first, "process_max_fds"),
    );
    // At least stdio and the listening socket.
    assert!(fds >= 4.0 && fds <= max, "open fds {fds}, max {max}");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let start = value(&first, "process_start_time_seconds");
    assert!(
        start <= now + 1.0 && start > now - 3600.0,
        "start {start}, now {now}"
    );

    // The CPU counter is read at scrape time: work done in between shows in the next scrape.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        for i in 0..50 {
            busy_crawler_work(i);
        }
        let (next, text) = scrape().await;
        let later = value(&next, "process_cpu_seconds_total");
        assert!(
            later >= cpu,
            "the CPU counter went down: {cpu} -> {later}\n{text}"
        );
        if later > cpu {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the CPU counter never moved from {cpu}"
        );
    }
    server.abort();
}
