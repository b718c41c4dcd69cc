//! `cluster-profile`: CPU-profiles every process of a running crawl at the same time and
//! writes flamegraphs.
//!
//! ```text
//! cluster-profile --dispatcher http://127.0.0.1:6060 --seconds 10 --out prof/ [--token T]
//! ```
//!
//! Asks the dispatcher's debug endpoint for `/debug/cluster` (every live process with role,
//! node, pid and debug address), fetches `/debug/pprof/folded?seconds=N` from all of them
//! concurrently, and writes into `--out`:
//!
//! * `<role>-<node>-<pid>.svg`: one flamegraph per process,
//! * `role-<role>.svg`: the stacks of all processes of one role, merged,
//! * `cluster.svg` / `cluster.folded`: everything merged, each stack under a root frame
//!   naming its role, so the flamegraph splits by role at the bottom.
//!
//! A process that cannot be profiled (gone, busy with another capture, refused) is reported
//! and skipped; the command fails only when the dispatcher cannot be asked or no process at
//! all could be profiled.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use clap::Parser;
use profiling::Stacks;
use reqwest::StatusCode;
use serde::Deserialize;

/// Extra time allowed per process beyond the capture itself, for symbolising and sending.
const FETCH_MARGIN: Duration = Duration::from_secs(60);
const CLUSTER_TIMEOUT: Duration = Duration::from_secs(10);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Profile every process of a running crawl at once and write flamegraphs (SVG).
#[derive(Debug, Parser)]
#[command(name = "cluster-profile", version)]
struct Args {
    /// The dispatcher's debug endpoint (its --debug-addr), e.g. http://127.0.0.1:6060.
    #[arg(long, env = "CRAWLER_DISPATCHER_DEBUG")]
    dispatcher: String,
    /// Capture length in seconds; every process is profiled over the same window.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=300))]
    seconds: u64,
    /// Output directory (created if missing).
    #[arg(long)]
    out: PathBuf,
    /// Bearer token of the debug endpoints (--debug-token of the crawl); by
    /// default the run's, from $CRAWLER_DEBUG_TOKEN_FILE or ./debug_token.
    #[arg(long, env = "CRAWLER_DEBUG_TOKEN", hide_env_values = true)]
    token: Option<String>,
}

/// The parts of the dispatcher's `/debug/cluster` JSON we need.
#[derive(Debug, Deserialize)]
struct ClusterView {
    dispatcher: Option<ProcessInfo>,
    #[serde(default)]
    supervisors: BTreeMap<String, SupervisorView>,
}

#[derive(Debug, Deserialize)]
struct SupervisorView {
    process: Option<ProcessInfo>,
    #[serde(default = "yes")]
    live: bool,
    #[serde(default)]
    children: BTreeMap<u32, ProcessInfo>,
}

fn yes() -> bool {
    true
}

#[derive(Debug, Clone, Deserialize)]
struct ProcessInfo {
    role: String,
    node: String,
    pid: u32,
    debug_addr: Option<String>,
}

/// One process to profile.
#[derive(Debug, Clone)]
struct Target {
    info: ProcessInfo,
    /// Where it sits in the cluster, for messages: `dispatcher`, `sup0`, `sup0/child1`.
    place: String,
    base_url: String,
}

impl Target {
    fn file_stem(&self) -> String {
        format!(
            "{}-{}-{}",
            file_part(&self.info.role),
            file_part(&self.info.node),
            self.info.pid
        )
    }

    fn describe(&self) -> String {
        format!(
            "{} {} (node {}, pid {})",
            self.info.role, self.place, self.info.node, self.info.pid
        )
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    shared::logging::init("cluster-profile");
    let args = Args::parse();
    match run(args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            tracing::error!("{err:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> anyhow::Result<()> {
    // Given, or the run's (`$CRAWLER_DEBUG_TOKEN_FILE`, `./debug_token`).
    let token = shared::debug_token::for_client(args.token.clone());
    let client = shared::http_client::builder()
        // Debug endpoints are cluster-internal; never send profiles through a proxy.
        .no_proxy()
        .connect_timeout(CONNECT_TIMEOUT)
        .user_agent(concat!("cluster-profile/", env!("CARGO_PKG_VERSION")))
        .build()
        .context("building the HTTP client")?;

    let dispatcher = normalise_base_url(&args.dispatcher);
    let view = fetch_cluster(&client, &dispatcher, token.as_deref()).await?;
    let (targets, skipped) = targets(&view);
    for s in &skipped {
        tracing::warn!("skipping {s}");
    }
    if targets.is_empty() {
        bail!("{dispatcher}/debug/cluster lists no process with a debug address");
    }
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating output directory {}", args.out.display()))?;

    tracing::info!("profiling {} processes for {} s ...", targets.len(), args.seconds);
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for (i, target) in targets.iter().enumerate() {
        let client = client.clone();
        let token = token.clone();
        let url = format!("{}/debug/pprof/folded?seconds={}", target.base_url, args.seconds);
        let timeout = Duration::from_secs(args.seconds) + FETCH_MARGIN;
        tasks.spawn(async move { (i, fetch_folded(&client, &url, token.as_deref(), timeout).await) });
    }
    let mut results: Vec<Option<anyhow::Result<Stacks>>> = targets.iter().map(|_| None).collect();
    while let Some(joined) = tasks.join_next().await {
        let (i, result) = joined.context("profile fetch task failed")?;
        results[i] = Some(result);
    }
    let wall = started.elapsed();

    // Per process, then merged per role and for the whole cluster.
    let mut written: Vec<(PathBuf, String)> = Vec::new();
    let mut failed: Vec<String> = Vec::new();
    let mut by_role: BTreeMap<&str, (Stacks, usize)> = BTreeMap::new();
    let mut cluster = Stacks::new();
    let mut profiled = 0usize;
    for (target, result) in targets.iter().zip(results) {
        let stacks = match result {
            Some(Ok(stacks)) => stacks,
            Some(Err(err)) => {
                failed.push(format!("{}: {err:#}", target.describe()));
                continue;
            }
            None => continue,
        };
        profiled += 1;
        let title = format!(
            "{} {} on {}, pid {}: {} s CPU",
            target.info.role, target.place, target.info.node, target.info.pid, args.seconds
        );
        let subtitle = format!("{} samples at 99 Hz", stacks.samples());
        let path = args.out.join(format!("{}.svg", target.file_stem()));
        write(&path, &stacks.flamegraph_svg(&title, Some(&subtitle)))?;
        written.push((path, format!("{} samples", stacks.samples())));

        let role = by_role.entry(target.info.role.as_str()).or_default();
        role.0.merge(&stacks);
        role.1 += 1;
        cluster.merge_under(&target.info.role, &stacks);
    }
    if profiled == 0 {
        for f in &failed {
            tracing::error!("FAILED {f}");
        }
        bail!("no process could be profiled ({} failed)", failed.len());
    }

    for (role, (stacks, n)) in &by_role {
        let path = args.out.join(format!("role-{}.svg", file_part(role)));
        let title = format!("{role}: {n} processes merged, {} s CPU", args.seconds);
        let subtitle = format!("{} samples", stacks.samples());
        write(&path, &stacks.flamegraph_svg(&title, Some(&subtitle)))?;
        written.push((path, format!("{n} processes, {} samples", stacks.samples())));
    }
    let title = format!("crawl cluster: {profiled} processes, {} s CPU", args.seconds);
    let subtitle = format!(
        "{} samples; bottom frame = role ({})",
        cluster.samples(),
        by_role.keys().copied().collect::<Vec<_>>().join(", ")
    );
    let path = args.out.join("cluster.svg");
    write(&path, &cluster.flamegraph_svg(&title, Some(&subtitle)))?;
    written.push((
        path,
        format!("{profiled} processes, {} samples", cluster.samples()),
    ));
    let path = args.out.join("cluster.folded");
    write(&path, cluster.to_text().as_bytes())?;
    written.push((path, format!("{} distinct stacks", cluster.len())));

    println!(
        "profiled {profiled} of {} processes for {} s ({:.1} s wall), {} failed, {} skipped:",
        targets.len(),
        args.seconds,
        wall.as_secs_f64(),
        failed.len(),
        skipped.len()
    );
    for (path, what) in &written {
        println!("  {}  ({what})", path.display());
    }
    for f in &failed {
        println!("  FAILED {f}");
    }
    Ok(())
}

/// `127.0.0.1:6060` → `http://127.0.0.1:6060`; trailing slashes dropped.
fn normalise_base_url(s: &str) -> String {
    let s = s.trim().trim_end_matches('/');
    if s.contains("://") {
        s.to_string()
    } else {
        format!("http://{s}")
    }
}

/// The URL of a process's debug server (see [`profiling::reachable_addr`]).
fn process_base_url(debug_addr: &str, node: &str) -> String {
    normalise_base_url(&profiling::reachable_addr(debug_addr, node))
}

fn targets(view: &ClusterView) -> (Vec<Target>, Vec<String>) {
    let mut targets = Vec::new();
    let mut skipped = Vec::new();
    let mut add = |info: &ProcessInfo, place: String| match &info.debug_addr {
        Some(addr) if !addr.is_empty() => targets.push(Target {
            base_url: process_base_url(addr, &info.node),
            info: info.clone(),
            place,
        }),
        _ => skipped.push(format!(
            "{} {place} (node {}, pid {}): no debug address",
            info.role, info.node, info.pid
        )),
    };
    if let Some(d) = &view.dispatcher {
        add(d, "dispatcher".into());
    }
    for (id, sup) in &view.supervisors {
        if !sup.live {
            continue;
        }
        if let Some(p) = &sup.process {
            add(p, id.clone());
        }
        for (slot, child) in &sup.children {
            add(child, format!("{id}/child{slot}"));
        }
    }
    (targets, skipped)
}

async fn fetch_cluster(
    client: &reqwest::Client,
    base: &str,
    token: Option<&str>,
) -> anyhow::Result<ClusterView> {
    let url = format!("{base}/debug/cluster");
    let body = get_text(client, &url, token, CLUSTER_TIMEOUT)
        .await
        .context(
            "cannot get the process list from the dispatcher (is the crawl running, and is --dispatcher its --debug-addr?)",
        )?;
    serde_json::from_str(&body).with_context(|| {
        format!(
            "{url} did not answer with the cluster JSON (is this the dispatcher's debug address?): {}",
            snippet(&body)
        )
    })
}

async fn fetch_folded(
    client: &reqwest::Client,
    url: &str,
    token: Option<&str>,
    timeout: Duration,
) -> anyhow::Result<Stacks> {
    let body = get_text(client, url, token, timeout).await?;
    Stacks::parse(&body).with_context(|| format!("{url} did not answer with folded stacks"))
}

async fn get_text(
    client: &reqwest::Client,
    url: &str,
    token: Option<&str>,
    timeout: Duration,
) -> anyhow::Result<String> {
    let mut req = client.get(url).timeout(timeout);
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let resp = req.send().await.map_err(|e| describe_reqwest(e, url))?;
    let status = resp.status();
    let body = resp
        .text()
        .await
        .with_context(|| format!("reading the answer of {url}"))?;
    match status {
        s if s.is_success() => Ok(body),
        StatusCode::UNAUTHORIZED => bail!("{url}: 401 unauthorized (pass --token / CRAWLER_DEBUG_TOKEN, or the run's token file in CRAWLER_DEBUG_TOKEN_FILE)"),
        StatusCode::CONFLICT => bail!("{url}: busy, another CPU profile is being captured in that process"),
        StatusCode::NOT_FOUND => bail!("{url}: 404 (an older build without this route?)"),
        s => bail!("{url}: HTTP {s}: {}", snippet(&body)),
    }
}

fn describe_reqwest(err: reqwest::Error, url: &str) -> anyhow::Error {
    let what = if err.is_connect() {
        "cannot connect"
    } else if err.is_timeout() {
        "timed out"
    } else {
        "request failed"
    };
    anyhow::Error::new(err.without_url()).context(format!("{url}: {what}"))
}

fn snippet(body: &str) -> String {
    let t = body.trim();
    let mut s: String = t.chars().take(200).collect();
    if s.len() < t.len() {
        s.push_str("...");
    }
    s
}

/// Keeps `[A-Za-z0-9._-]`, everything else becomes `_`, so node names are safe file names.
fn file_part(s: &str) -> String {
    let out: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    if out.is_empty() || out.starts_with('.') {
        format!("_{out}")
    } else {
        out
    }
}

fn write(path: &Path, data: &[u8]) -> anyhow::Result<()> {
    std::fs::write(path, data).with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        assert_eq!(normalise_base_url("127.0.0.1:6060"), "http://127.0.0.1:6060");
        assert_eq!(
            normalise_base_url("http://127.0.0.1:6060/"),
            "http://127.0.0.1:6060"
        );
        assert_eq!(process_base_url("127.0.0.1:1234", "n1"), "http://127.0.0.1:1234");
        assert_eq!(process_base_url("[::1]:1234", "n1"), "http://[::1]:1234");
        assert_eq!(process_base_url("0.0.0.0:1234", "n1"), "http://n1:1234");
    }

    #[test]
    fn file_parts() {
        assert_eq!(file_part("crawler-child"), "crawler-child");
        assert_eq!(file_part("host/a b"), "host_a_b");
        assert_eq!(file_part("../x"), "_.._x");
        assert_eq!(file_part(""), "_");
    }

    #[test]
    fn targets_from_cluster_json() {
        let json = r#"{
          "dispatcher": {"role":"dispatcher","node":"n1","pid":1,"debug_addr":"127.0.0.1:10"},
          "supervisors": {
            "sup0": {"process": {"role":"supervisor","node":"n1","pid":2,"debug_addr":"127.0.0.1:11"},
                     "live": true,
                     "children": {"0": {"role":"crawler-child","node":"n1","pid":3,"debug_addr":"127.0.0.1:12"},
                                  "1": {"role":"crawler-child","node":"n1","pid":4,"debug_addr":null}}},
            "sup1": {"process": {"role":"supervisor","node":"n2","pid":5,"debug_addr":"127.0.0.1:13"},
                     "live": false, "children": {}}
          }
        }"#;
        let view: ClusterView = serde_json::from_str(json).unwrap();
        let (t, skipped) = targets(&view);
        let places: Vec<_> = t.iter().map(|t| t.place.as_str()).collect();
        assert_eq!(places, ["dispatcher", "sup0", "sup0/child0"]);
        assert_eq!(t[2].file_stem(), "crawler-child-n1-3");
        assert_eq!(t[2].base_url, "http://127.0.0.1:12");
        assert_eq!(skipped.len(), 1, "{skipped:?}");
        assert!(skipped[0].contains("sup0/child1"));
    }
}
