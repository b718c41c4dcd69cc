//! The timing logs answer "which operation slows the crawl down": checks that
//! `scripts/oprates.py` names the operation that slows down, first on a
//! synthetic log whose answer is known, then on a real crawl with a slowdown
//! injected into `parse` (`CRAWLER_FAULT_SLOW_PARSE_US_PER_SEC`).

use std::time::Duration;

use crawl_tests::harness::{
    args, run_crawl, run_oprates, run_oprates_json, write_lines, ClusterSpec, StoreServer,
};
use crawl_tests::web::{WebServer, WebSpec};

fn line(ts: f64, node: &str, pid: u32, op: &str, dur_us: u64, outcome: &str) -> String {
    format!(
        "{{\"ts\":{ts:.6},\"node\":\"{node}\",\"role\":\"crawler-child\",\"pid\":{pid},\"op\":\"{op}\",\"dur_us\":{dur_us},\"outcome\":\"{outcome}\",\"domain\":\"a.test\"}}"
    )
}

/// 120 s on two nodes: `fetch` steady (10/s per node, ~2 ms), `store`
/// growing linearly from 1 ms to ~21 ms, `politeness_wait` growing even
/// more (it must not win: waiting is deliberate), `parse` steady, and a few
/// broken lines. Returns the lines and how many `fetch` lines there are.
fn synthetic_log() -> (Vec<String>, usize) {
    let t0 = 1_700_000_000.0;
    let mut lines = Vec::new();
    let mut fetches = 0;
    for (n, node) in ["n1", "n2"].iter().enumerate() {
        let pid = 100 + n as u32;
        for i in 0..1200u64 {
            let t = t0 + i as f64 * 0.1 + n as f64 * 0.03;
            // Deterministic jitter, so percentiles are not all equal.
            let jitter = (i * 7919 + n as u64 * 31) % 400;
            let outcome = if i % 97 == 0 { "timeout" } else { "ok" };
            lines.push(line(t, node, pid, "fetch", 1800 + jitter, outcome));
            fetches += 1;
            lines.push(line(t + 0.01, node, pid, "parse", 80 + jitter / 10, "ok"));
            if i % 5 == 0 {
                let secs = i as f64 * 0.1;
                let store = 1000.0 + secs * 170.0 + jitter as f64;
                lines.push(line(t + 0.02, node, pid, "store", store as u64, "ok"));
                let wait = 1000.0 + secs * 5000.0;
                lines.push(line(
                    t + 0.03,
                    node,
                    pid,
                    "politeness_wait",
                    wait as u64,
                    "waited",
                ));
            }
        }
    }
    lines.push("not json at all".into());
    lines.push("{\"ts\":1700000001.0,\"node\":\"n1\",\"op\":\"fetch\"}".into()); // no dur_us
    lines.push("{\"ts\":1700000002.0,\"node\":\"n1\",\"role\":\"crawler-child\",\"op\":\"fe".into()); // cut off
    (lines, fetches)
}

#[test]
fn trend_table_and_plot_on_a_synthetic_log() {
    let dir = tempfile::tempdir().unwrap();
    let (lines, fetches) = synthetic_log();
    let log = write_lines(dir.path(), "crawler-child-100.jsonl", &lines).unwrap();
    let log = log.to_str().unwrap();

    let trend = run_oprates_json(&["trend", log, "--json"]);
    assert_eq!(trend["bad_lines"], 3, "{trend:#}");
    let worst = &trend["worst_latency_growth"];
    assert_eq!(worst["op"], "store", "trend: {trend:#}");
    let factor = worst["factor"].as_f64().unwrap();
    // First third ~4.4 ms, last third ~17.9 ms: about 4x.
    assert!((3.0..6.0).contains(&factor), "store growth factor {factor}");
    assert!(
        trend["ops"]["fetch"]["latency_growth"].as_f64().unwrap() < 1.2,
        "fetch is steady: {:#}",
        trend["ops"]["fetch"]
    );
    // Per node, the verdict also names store.
    let by_node = run_oprates_json(&["trend", log, "--by", "op,node", "--json"]);
    assert_eq!(by_node["worst_latency_growth"]["op"], "store", "{by_node:#}");
    // The human report says it in words.
    let text = run_oprates(&["trend", log]);
    assert!(text.contains("store: median latency grew"), "{text}");

    let table = run_oprates_json(&["table", log, "--by", "op", "--json"]);
    let total_fetch = table["totals"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["op"] == "fetch")
        .unwrap_or_else(|| panic!("no fetch row: {table:#}"));
    assert_eq!(total_fetch["count"], fetches as u64, "{total_fetch:#}");
    let windowed: u64 = table["rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["op"] == "fetch")
        .map(|r| r["count"].as_u64().unwrap())
        .sum();
    assert_eq!(windowed, fetches as u64, "windows lose no lines");
    assert!(total_fetch["error_share"].as_f64().unwrap() > 0.0);
    // The text table prints too.
    let text = run_oprates(&["table", log, "--window", "30", "--by", "op,node"]);
    assert!(
        text.lines().any(|l| l.trim_start().starts_with("all ")) && text.contains("n2"),
        "{text}"
    );

    let out = dir.path().join("plots");
    run_oprates(&["plot", log, "--out", out.to_str().unwrap()]);
    for name in ["rate-fetch.svg", "rate-store.svg", "latency-p95.svg"] {
        let svg = std::fs::read_to_string(out.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(
            svg.starts_with("<svg") || svg.starts_with("<?xml"),
            "{name}: {svg:.80}"
        );
        assert!(svg.trim_end().ends_with("</svg>"), "{name} is cut short");
    }
    // One line per node in the per-op rate chart.
    let fetch_svg = std::fs::read_to_string(out.join("rate-fetch.svg")).unwrap();
    assert!(fetch_svg.contains("node=n1") && fetch_svg.contains("node=n2"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trend_names_parse_when_parse_slows_down_in_a_real_crawl() {
    let dir = tempfile::tempdir().unwrap();
    let logs = dir.path().join("logs");
    let store = StoreServer::start().unwrap();
    let web = WebSpec {
        seed: 11,
        hosts: 20,
        pages_per_host: 500,
        ..WebSpec::default()
    };
    let server = WebServer::local(web).await;
    let mut spec = ClusterSpec::for_web(&store.uri, &server, dir.path()).unwrap();
    spec.supervisors = 1;
    spec.children = 2;
    spec.timing_dir = Some(logs.clone());
    // Every parse sleeps 300 µs more for each second its child has run.
    spec.env = vec![("CRAWLER_FAULT_SLOW_PARSE_US_PER_SEC".into(), "300".into())];
    spec.dispatcher_args = args(&[
        "--min-delay-ms",
        "5",
        "--max-depth",
        "100",
        "--progress-secs",
        "5",
    ]);
    let run = run_crawl(&spec, Duration::from_secs(600)).await.unwrap();
    eprintln!("crawl took {:?}: {}", run.wall, run.summary);
    assert!(run.dispatcher.success(), "dispatcher: {:?}", run.dispatcher);
    assert!(
        run.supervisors.iter().all(|s| s.success()),
        "{:?}",
        run.supervisors
    );
    assert!(
        run.summary["fetched"].as_u64().unwrap_or(0) >= 1000,
        "too few pages for a trend: {}",
        run.summary
    );

    let logs = logs.to_str().unwrap();
    eprintln!("{}", run_oprates(&["trend", logs]));
    let trend = run_oprates_json(&["trend", logs, "--json"]);
    let worst = &trend["worst_latency_growth"];
    assert_eq!(worst["op"], "parse", "trend: {trend:#}");
    assert!(
        worst["factor"].as_f64().unwrap() >= 2.0,
        "parse should have slowed down a lot: {worst:#}"
    );
    assert_eq!(trend["bad_lines"], 0, "{trend:#}");
    server.stop(Duration::from_secs(5)).await;
}
