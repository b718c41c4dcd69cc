//! Observability of a running crawl: while 2 supervisors × 2 children crawl the synthetic
//! web, the `cluster-profile` command profiles every process at once and writes merged
//! flamegraphs; a child's `/debug/pprof/profile` is a pprof protobuf with our frames; the
//! dispatcher's `/metrics` is Prometheus text whose counters move, and every process's
//! `/metrics` has HELP on each family and the `process_*` families.
//!
//! Needs the release binaries: `cargo build --release --workspace --bins`. Set
//! `CLUSTER_PROFILE_OUT=DIR` to keep the flamegraphs the test makes.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read as _;
use std::path::Path;
use std::time::{Duration, Instant};

use crawl_tests::harness::{bin, flags, free_port, spawn_crawl, ClusterSpec, StoreServer};
use crawl_tests::verify;
use crawl_tests::web::{WebServer, WebSpec};
use pprof::protos::Message as _;

const ROLES: [&str; 3] = ["dispatcher", "supervisor", "crawler-child"];
const SUPERVISORS: usize = 2;
const CHILDREN: usize = 2;

/// Big enough to keep 4 children busy for well over the ~8 s this test pokes at the
/// cluster: about 30 000 fetches (pages, redirects, 404s), and `MIN_DELAY_MS` on 20 hosts
/// caps the crawl at 2 000 fetches/s however fast the machine is.
fn web_spec() -> WebSpec {
    WebSpec {
        seed: 11,
        hosts: 20,
        outside_hosts: 2,
        pages_per_host: 600,
        ..WebSpec::default()
    }
}

const MIN_DELAY_MS: &str = "10";

fn http_client() -> reqwest::Client {
    shared::http_client::builder()
        .no_proxy()
        .connect_timeout(Duration::from_secs(5))
        .build()
        .unwrap()
}

async fn get(http: &reqwest::Client, url: &str, timeout: Duration) -> anyhow::Result<(u16, Vec<u8>)> {
    let resp = http.get(url).timeout(timeout).send().await?;
    let status = resp.status().as_u16();
    Ok((status, resp.bytes().await?.to_vec()))
}

/// One process from `/debug/cluster`.
#[derive(Debug, Clone)]
struct Proc {
    role: String,
    pid: u64,
    debug_addr: String,
}

fn procs(view: &serde_json::Value) -> Vec<Proc> {
    let one = |p: &serde_json::Value| -> Option<Proc> {
        Some(Proc {
            role: p["role"].as_str()?.to_string(),
            pid: p["pid"].as_u64()?,
            debug_addr: p["debug_addr"].as_str()?.to_string(),
        })
    };
    let mut out: Vec<Proc> = view.get("dispatcher").and_then(one).into_iter().collect();
    if let Some(sups) = view["supervisors"].as_object() {
        for sup in sups.values().filter(|s| s["live"] == true) {
            out.extend(sup.get("process").and_then(one));
            if let Some(children) = sup["children"].as_object() {
                out.extend(children.values().filter_map(one));
            }
        }
    }
    out
}

/// Polls `/debug/cluster` until the dispatcher, every supervisor and every child are listed.
async fn wait_for_cluster(http: &reqwest::Client, base: &str, within: Duration) -> Vec<Proc> {
    let want = 1 + SUPERVISORS + SUPERVISORS * CHILDREN;
    let deadline = Instant::now() + within;
    let mut last = String::new();
    loop {
        if let Ok((200, body)) = get(http, &format!("{base}/debug/cluster"), Duration::from_secs(5)).await {
            last = String::from_utf8_lossy(&body).into_owned();
            let view: serde_json::Value = serde_json::from_str(&last).expect("/debug/cluster is JSON");
            let p = procs(&view);
            if p.len() >= want {
                return p;
            }
        }
        assert!(
            Instant::now() < deadline,
            "cluster never showed {want} processes; last /debug/cluster:\n{last}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// One sample line of the Prometheus text format.
#[derive(Debug)]
struct Sample {
    name: String,
    labels: Vec<(String, String)>,
    value: f64,
}

/// One `/metrics` page: its samples, and the families named by `# HELP` and `# TYPE` lines.
#[derive(Debug, Default)]
struct Exposition {
    samples: Vec<Sample>,
    /// Family name → HELP text.
    help: BTreeMap<String, String>,
    /// Family name → type.
    types: BTreeMap<String, String>,
}

/// Parses the Prometheus text exposition format (0.0.4) strictly enough to catch a broken
/// exporter: comments must be `# HELP`/`# TYPE` with a valid name and type, at most one of
/// each per family, sample lines must be `name{label="value",...} value [timestamp]`.
fn parse_prometheus(text: &str) -> Result<Exposition, String> {
    fn valid_name(n: &str) -> bool {
        let mut chars = n.chars();
        matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_' || c == ':')
            && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
    }
    fn value(v: &str) -> Option<f64> {
        match v {
            "+Inf" | "Inf" => Some(f64::INFINITY),
            "-Inf" => Some(f64::NEG_INFINITY),
            "NaN" => Some(f64::NAN),
            v => v.parse().ok(),
        }
    }
    let mut out = Exposition::default();
    for (i, raw) in text.lines().enumerate() {
        let err = |why: &str| format!("line {}: {why}: {raw:?}", i + 1);
        let line = raw.trim();
        if line.is_empty() {
            continue;
        }
        if let Some(comment) = line.strip_prefix('#') {
            let parts: Vec<&str> = comment.split_whitespace().collect();
            match parts.as_slice() {
                ["TYPE", name, kind] => {
                    if !valid_name(name) {
                        return Err(err("bad metric name"));
                    }
                    if !["counter", "gauge", "histogram", "summary", "untyped"].contains(kind) {
                        return Err(err("bad type"));
                    }
                    if out.types.insert(name.to_string(), kind.to_string()).is_some() {
                        return Err(err("second TYPE of a family"));
                    }
                }
                ["HELP", name, help @ ..] => {
                    if !valid_name(name) {
                        return Err(err("bad metric name"));
                    }
                    if out.help.insert(name.to_string(), help.join(" ")).is_some() {
                        return Err(err("second HELP of a family"));
                    }
                }
                ["HELP", ..] | ["TYPE", ..] => return Err(err("bad HELP/TYPE")),
                _ => {}
            }
            continue;
        }
        let name_end = line
            .find(|c: char| c == '{' || c.is_whitespace())
            .ok_or_else(|| err("no value"))?;
        let name = &line[..name_end];
        if !valid_name(name) {
            return Err(err("bad metric name"));
        }
        let mut rest = &line[name_end..];
        let mut labels = Vec::new();
        if let Some(body) = rest.strip_prefix('{') {
            // key="value" pairs; values may contain escaped quotes, commas and braces.
            let mut chars = body.char_indices().peekable();
            loop {
                while chars.next_if(|(_, c)| *c == ',' || *c == ' ').is_some() {}
                match chars.peek() {
                    Some((j, '}')) => {
                        rest = &body[j + 1..];
                        break;
                    }
                    None => return Err(err("unterminated labels")),
                    _ => {}
                }
                let mut key = String::new();
                for (_, c) in chars.by_ref() {
                    if c == '=' {
                        break;
                    }
                    key.push(c);
                }
                if !valid_name(&key) || chars.next().map(|(_, c)| c) != Some('"') {
                    return Err(err("bad label"));
                }
                let mut val = String::new();
                loop {
                    match chars.next() {
                        Some((_, '\\')) => match chars.next() {
                            Some((_, 'n')) => val.push('\n'),
                            Some((_, c)) => val.push(c),
                            None => return Err(err("bad escape")),
                        },
                        Some((_, '"')) => break,
                        Some((_, c)) => val.push(c),
                        None => return Err(err("unterminated label value")),
                    }
                }
                labels.push((key, val));
            }
        }
        let mut fields = rest.split_whitespace();
        let v = fields.next().and_then(value).ok_or_else(|| err("bad value"))?;
        if let Some(ts) = fields.next() {
            ts.parse::<i64>().map_err(|_| err("bad timestamp"))?;
        }
        if fields.next().is_some() {
            return Err(err("trailing fields"));
        }
        out.samples.push(Sample {
            name: name.to_string(),
            labels,
            value: v,
        });
    }
    Ok(out)
}

/// Sum over all label sets of one metric.
fn total(metrics: &Exposition, name: &str) -> f64 {
    metrics
        .samples
        .iter()
        .filter(|s| s.name == name)
        .fold(0.0, |a, s| a + s.value)
}

/// Checks what every process's `/metrics` must have: a HELP line on every family (so each
/// says what it counts) and the process's own CPU seconds.
fn assert_described(metrics: &Exposition, who: &Proc) {
    for name in metrics.types.keys() {
        assert!(
            metrics.help.get(name).is_some_and(|h| !h.is_empty()),
            "{who:?}: the family {name} has no HELP (declare it in its crate's metric.rs)"
        );
    }
    for name in metrics.help.keys() {
        assert!(
            metrics.types.contains_key(name),
            "{who:?}: {name} has HELP but no TYPE"
        );
    }
    assert_eq!(
        metrics.types.get("process_cpu_seconds_total").map(String::as_str),
        Some("counter"),
        "{who:?}: no process_cpu_seconds_total counter"
    );
    let cpu = total(metrics, "process_cpu_seconds_total");
    assert!(cpu > 0.0, "{who:?}: process_cpu_seconds_total is {cpu}");
    for gauge in [
        "process_resident_memory_bytes",
        "process_virtual_memory_bytes",
        "process_open_fds",
        "process_max_fds",
        "process_start_time_seconds",
    ] {
        assert!(total(metrics, gauge) > 0.0, "{who:?}: {gauge}");
    }
}

async fn scrape(http: &reqwest::Client, addr: &str) -> Exposition {
    let (status, body) = get(http, &format!("http://{addr}/metrics"), Duration::from_secs(10))
        .await
        .expect("GET /metrics");
    assert_eq!(status, 200);
    let text = String::from_utf8(body).expect("metrics are UTF-8");
    parse_prometheus(&text)
        .unwrap_or_else(|e| panic!("/metrics of {addr} is not Prometheus text: {e}\n{text}"))
}

/// The process's resident file-backed memory (`RssFile`), in KiB: what it
/// has mapped of files, its own binary's debug info among them while that is
/// parsed for symbols.
fn rss_file_kib(pid: u64) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("RssFile:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no RssFile for pid {pid}"))
}

/// More file-backed memory than a profile may leave a process holding: a
/// symboliser that keeps the binary's debug info mapped keeps about 64 MiB
/// (the dispatcher's; the cache also held about 250 MiB of heap).
const SYMBOLS_KEPT_KIB: u64 = 32 * 1024;

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn assert_svg(path: &Path) -> String {
    let svg = read(path);
    assert!(
        svg.starts_with("<?xml") && svg.contains("<svg") && svg.trim_end().ends_with("</svg>"),
        "{} is not an SVG",
        path.display()
    );
    svg
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cluster_profile_pprof_and_metrics_during_a_crawl() {
    let dir = tempfile::tempdir().unwrap();
    let store = StoreServer::start().unwrap();
    let server = WebServer::local(web_spec()).await;
    let mut spec = ClusterSpec::for_web(&store.uri, &server, dir.path()).unwrap();
    spec.supervisors = SUPERVISORS;
    spec.children = CHILDREN;
    let debug_addr = format!("127.0.0.1:{}", free_port());
    spec.dispatcher_args = flags(&format!(
        "--min-delay-ms {MIN_DELAY_MS} --max-depth 100 --debug-addr {debug_addr}"
    ));

    let started = Instant::now();
    let crawl = spawn_crawl(&spec).await.unwrap();
    let base = crawl.debug_url().unwrap();
    assert_eq!(base, format!("http://{debug_addr}"));
    let http = http_client();
    let procs = wait_for_cluster(&http, &base, Duration::from_secs(60)).await;
    eprintln!("[{:.1}s] cluster up: {procs:?}", started.elapsed().as_secs_f64());
    let roles: BTreeSet<&str> = procs.iter().map(|p| p.role.as_str()).collect();
    assert_eq!(roles, ROLES.into_iter().collect(), "roles in /debug/cluster");

    // Secrets reach children through their environment: no child's command
    // line (what `ps` shows every user of the machine) holds the store URI.
    for p in procs.iter().filter(|p| p.role == "crawler-child") {
        let cmdline = std::fs::read(format!("/proc/{}/cmdline", p.pid)).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        assert!(cmdline.contains("crawler-child"), "child {}: {cmdline:?}", p.pid);
        assert!(
            !cmdline.contains(&store.uri) && !cmdline.contains("--mongo-uri"),
            "child {} has the store URI on its command line: {cmdline}",
            p.pid
        );
        let environ = std::fs::read(format!("/proc/{}/environ", p.pid)).unwrap_or_default();
        let want = format!("CRAWLER_MONGO_URI={}", store.uri);
        assert!(
            environ.split(|&b| b == 0).any(|v| v == want.as_bytes()),
            "child {} was not given the store URI in its environment",
            p.pid
        );
    }

    let before = scrape(&http, &debug_addr).await;
    let results_before = total(&before, "crawler_dispatcher_results_total");
    let metrics_at = Instant::now();

    let rss_file_before: Vec<u64> = procs.iter().map(|p| rss_file_kib(p.pid)).collect();

    // (a) The cluster flamegraph command.
    // CLUSTER_PROFILE_OUT=DIR keeps the flamegraphs for a look.
    let out = std::env::var_os("CLUSTER_PROFILE_OUT")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| dir.path().join("profile"));
    let output = tokio::process::Command::new(bin("cluster-profile").unwrap())
        .args(["--dispatcher", &base, "--seconds", "3", "--out"])
        .arg(&out)
        .env(shared::debug_token::TOKEN_FILE_ENV, crawl.debug_token_file())
        .kill_on_drop(true)
        .output()
        .await
        .expect("running cluster-profile");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    eprintln!(
        "[{:.1}s] cluster-profile {}:\n{stdout}{stderr}",
        started.elapsed().as_secs_f64(),
        output.status
    );
    assert!(output.status.success(), "cluster-profile failed");
    // Every process was profiled, and let go of its symbols afterwards.
    for (p, before) in procs.iter().zip(rss_file_before) {
        let after = rss_file_kib(p.pid);
        assert!(
            after < before + SYMBOLS_KEPT_KIB,
            "{p:?} holds {after} KiB of file-backed memory after a profile, {before} before: the symbols' debug info was kept"
        );
    }
    assert!(
        stdout.contains("cluster.svg"),
        "summary names cluster.svg: {stdout}"
    );

    // cluster.svg merges every process; frames carry our crates' names. (Idle processes
    // may have no samples in 3 s: the supervisors mostly wait on sockets, and the profiler
    // drops samples taken inside libc. The children are busy, so they always show.)
    let cluster = assert_svg(&out.join("cluster.svg"));
    assert!(
        cluster.contains("crawler_child::"),
        "cluster.svg has no crawler_child frames"
    );
    // The merged graph splits by role at the bottom: every stack's root frame is a role.
    let folded = read(&out.join("cluster.folded"));
    let mut samples = std::collections::BTreeMap::<&str, (u64, u64)>::new();
    for line in folded.lines() {
        let root = line.split(';').next().unwrap();
        assert!(
            ROLES.contains(&root),
            "cluster.folded line not rooted at a role: {line}"
        );
        let count: u64 = line.rsplit(' ').next().unwrap().parse().expect("sample count");
        assert!(count > 0, "zero count: {line}");
        let own = match root {
            "crawler-child" => "crawler_child::",
            "dispatcher" => "dispatcher::",
            _ => "supervisor::",
        };
        let e = samples.entry(root).or_default();
        e.0 += count;
        if line.contains(own) {
            e.1 += count;
        }
    }
    eprintln!("samples per role in cluster.folded (all, under the role's own crate): {samples:?}");
    let (_, child_own) = samples.get("crawler-child").copied().unwrap_or_default();
    assert!(
        child_own > 0,
        "no crawler-child stack in cluster.folded shows crawler_child functions"
    );
    for role in ROLES {
        assert_svg(&out.join(format!("role-{role}.svg")));
    }
    let role_child = read(&out.join("role-crawler-child.svg"));
    assert!(
        role_child.contains("crawler_child::"),
        "role-crawler-child.svg has no crawler_child frames"
    );
    for p in &procs {
        let name = format!("{}-", p.role);
        let suffix = format!("-{}.svg", p.pid);
        let found = std::fs::read_dir(&out)
            .unwrap()
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .any(|f| f.starts_with(&name) && f.ends_with(&suffix));
        assert!(found, "no per-process flamegraph for {p:?}");
    }

    // (b) The children's pprof protobufs parse and show our frames. All children are
    // profiled at once (same 2 s) and the frames are looked for in all of them, since one
    // child alone may get only a handful of samples in 2 s on a loaded machine.
    // Profiles need the run's token (`shared::debug_token`): without it, 401.
    let children: Vec<&Proc> = procs.iter().filter(|p| p.role == "crawler-child").collect();
    let token = std::fs::read_to_string(crawl.debug_token_file()).expect("the run's token file");
    let token = token.trim().to_string();
    if let Some(child) = children.first() {
        let url = format!("http://{}/debug/pprof/profile?seconds=2", child.debug_addr);
        let (status, _) = get(&http, &url, Duration::from_secs(10)).await.unwrap();
        assert_eq!(status, 401, "a profile without the token");
    }
    let fetches = children.iter().map(|child| {
        let url = format!("http://{}/debug/pprof/profile?seconds=2", child.debug_addr);
        let req = http
            .get(&url)
            .bearer_auth(&token)
            .timeout(Duration::from_secs(60));
        async move {
            let got = async {
                let resp = req.send().await?;
                let status = resp.status().as_u16();
                anyhow::Ok((status, resp.bytes().await?.to_vec()))
            }
            .await;
            (url, got)
        }
    });
    let mut samples = 0usize;
    let mut ours = BTreeSet::new();
    for (url, got) in futures::future::join_all(fetches).await {
        let (status, body) = got.unwrap_or_else(|e| panic!("{url}: {e:#}"));
        assert_eq!(status, 200, "{url}: {}", String::from_utf8_lossy(&body));
        assert_eq!(&body[..2], &[0x1f, 0x8b], "{url}: gzip magic");
        let mut raw = Vec::new();
        flate2::read::GzDecoder::new(&body[..])
            .read_to_end(&mut raw)
            .expect("gunzip");
        let profile = pprof::protos::Profile::decode(raw.as_slice())
            .unwrap_or_else(|e| panic!("{url}: not a pprof protobuf: {e}"));
        assert!(!profile.string_table.is_empty() && profile.string_table[0].is_empty());
        samples += profile.sample.len();
        ours.extend(
            profile
                .string_table
                .into_iter()
                .filter(|s| s.contains("crawler_child::")),
        );
    }
    eprintln!(
        "[{:.1}s] children's pprof: {samples} samples, {} strings naming crawler_child functions, e.g. {:?}",
        started.elapsed().as_secs_f64(),
        ours.len(),
        ours.iter().take(3).collect::<Vec<_>>()
    );
    assert!(samples > 0, "the children's profiles have no samples");
    assert!(
        !ours.is_empty(),
        "no crawler_child:: function in the children's profiles"
    );

    // (c) /metrics is Prometheus text and the dispatcher's result counter moved.
    let wait = Duration::from_secs(3).saturating_sub(metrics_at.elapsed());
    tokio::time::sleep(wait).await;
    let after = scrape(&http, &debug_addr).await;
    let results_after = total(&after, "crawler_dispatcher_results_total");
    eprintln!(
        "[{:.1}s] crawler_dispatcher_results_total {results_before} -> {results_after}",
        started.elapsed().as_secs_f64()
    );
    assert!(
        results_after > results_before,
        "crawler_dispatcher_results_total did not move ({results_before} -> {results_after}); \
         did the crawl finish before the test could look at it?"
    );
    assert!(
        after
            .samples
            .iter()
            .any(|s| s.name == "crawler_dispatcher_results_total"
                && s.labels.iter().any(|(k, v)| k == "outcome" && v == "fetched")),
        "no outcome=\"fetched\" series"
    );
    // The children's own expositions parse too, with their page counters.
    // Summed: each domain goes to one child by hash, and early in the
    // crawl a child may have none of the few domains with work yet (CI
    // once saw a child with 1 profile sample in 3 s and no page).
    let mut child_pages = 0.0;
    for child in &children {
        child_pages += total(&scrape(&http, &child.debug_addr).await, "crawler_pages_total");
    }
    assert!(child_pages > 0.0, "the children's crawler_pages_total");
    // Every process: HELP on every family, and its CPU seconds so far.
    for p in &procs {
        let metrics = scrape(&http, &p.debug_addr).await;
        assert_described(&metrics, p);
        eprintln!(
            "{} {}: {} families, process_cpu_seconds_total {}",
            p.role,
            p.pid,
            metrics.types.len(),
            total(&metrics, "process_cpu_seconds_total")
        );
    }

    // The crawl still ends by itself, cleanly.
    let run = crawl.wait(Duration::from_secs(600)).await.unwrap();
    eprintln!("crawl finished in {:?}: {}", run.wall, run.summary);
    verify::assert_finished(&run);
}

#[test]
fn prometheus_parser() {
    let text = "# HELP x_total things\n# TYPE x_total counter\nx_total{a=\"1\",b=\"q\\\"}, z\"} 3\nx_total 2 1700000000000\n\n# TYPE y_seconds histogram\ny_seconds_bucket{le=\"+Inf\"} 4\ny_seconds_sum 0.5\n";
    let s = parse_prometheus(text).unwrap();
    assert_eq!(s.samples.len(), 4);
    assert_eq!(total(&s, "x_total"), 5.0);
    assert_eq!(s.help.get("x_total").map(String::as_str), Some("things"));
    assert_eq!(s.help.get("y_seconds"), None);
    assert_eq!(s.types.get("y_seconds").map(String::as_str), Some("histogram"));
    assert_eq!(
        s.samples[0].labels,
        vec![("a".into(), "1".into()), ("b".into(), "q\"}, z".into())]
    );
    for bad in [
        "x_total",
        "x_total abc",
        "1x 2",
        "x{a=1} 2",
        "x{a=\"1\" 2",
        "# TYPE x wat",
        "x 1 2 3",
        "# TYPE x counter\n# TYPE x gauge",
        "# HELP x a\n# HELP x b",
        "# HELP 1x a",
    ] {
        assert!(parse_prometheus(bad).is_err(), "{bad:?} should not parse");
    }
}
