//! End-to-end: strangers on the dispatcher's ZeroMQ port, beside a
//! running crawl (issue 62).
//!
//! A real dispatcher and two real supervisors crawl the synthetic web.
//! Meanwhile the test speaks raw ZMTP to the dispatcher's port
//! ([`crawl_tests::zmtp`]), from other loopback addresses, as peers that
//! never prove the cluster secret:
//!
//! - one frame header declaring 2^41 bytes (the crate as published
//!   reserved it at once: 2 TiB of virtual memory);
//! - one message of a thousand empty frames;
//! - a peer that sends Hellos as fast as it can and never reads (each
//!   Hello used to be answered, with the loop awaiting the send);
//! - 5,000 connections, each sending a Hello (from 100 addresses).
//!
//! What must hold: the dispatcher's virtual size grows by less than 1 GiB
//! and its resident size stays under 256 MiB; the first two connections
//! are closed; no supervisor is dropped (each stays live in
//! `/debug/cluster` while the attacks last, and the crawl counts two
//! joins in all); the crawl ends by itself with every page stored once.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use crawl_tests::check;
use crawl_tests::harness::{args, free_port, spawn_crawl, ClusterSpec, StoreServer};
use crawl_tests::procfs;
use crawl_tests::verify::{self, Findings};
use crawl_tests::web::{WebServer, WebSpec};
use crawl_tests::zmtp;
use link::envelope::FrameToDispatcher;
use link::protocol::{self, PROTOCOL_VERSION};

const GIB: u64 = 1 << 30;
const MIB: u64 = 1 << 20;
/// How long the Hello flood of the peer that never reads lasts.
const FLOOD: Duration = Duration::from_secs(8);
/// The connections of the mass of Hellos, and the addresses they come from.
const MANY: usize = 5000;
const MANY_SOURCES: usize = 100;

/// The n-th attacker address: 127.0.1.0/24 upwards, away from 127.0.0.1
/// where the supervisors are.
fn attacker(n: usize) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 1 + (n / 250) as u8, 1 + (n % 250) as u8))
}

fn hello(n: u8) -> Vec<u8> {
    zmtp::frame(
        &protocol::encode(&FrameToDispatcher::Hello {
            version: PROTOCOL_VERSION,
            nonce: [n; 32],
        }),
        false,
    )
}

/// How many of a process's threads are in each state (`R 1 S 9`), from
/// `/proc/PID/task/*/stat`.
fn thread_states(pid: u32) -> String {
    let mut counts = std::collections::BTreeMap::<char, usize>::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten()
        .flatten()
    {
        if let Some(s) = procfs::stat_at(task.path().join("stat")) {
            *counts.entry(s.state).or_default() += 1;
        }
    }
    counts
        .iter()
        .map(|(s, n)| format!("{s} {n}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Supervisor id → live, from `/debug/cluster`.
async fn supervisors_live(http: &reqwest::Client, base: &str) -> Option<Vec<(String, bool)>> {
    let text = http
        .get(format!("{base}/debug/cluster"))
        .timeout(Duration::from_secs(5))
        .send()
        .await
        .ok()?
        .text()
        .await
        .ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    let sups = v.get("supervisors")?.as_object()?;
    Some(
        sups.iter()
            .map(|(id, s)| (id.clone(), s["live"].as_bool().unwrap_or(false)))
            .collect(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strangers_on_the_cluster_port_cost_little_and_stall_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = StoreServer::start().unwrap();
    let web_spec = WebSpec {
        seed: 62,
        hosts: 4,
        outside_hosts: 0,
        pages_per_host: 40,
        crawl_delay_every: 0,
        ..WebSpec::default()
    };
    let server = WebServer::start(web_spec, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let expected = server.web().expected_crawl();
    let mut spec = ClusterSpec::for_web(&store.uri, &server, dir.path()).unwrap();
    spec.supervisors = 2;
    let debug = format!("127.0.0.1:{}", free_port());
    // Slow enough per host that the crawl outlasts the attacks.
    spec.dispatcher_args = args(&[
        "--min-delay-ms",
        "250",
        "--max-depth",
        "100",
        "--debug-addr",
        &debug,
    ]);
    let crawl = spawn_crawl(&spec).await.unwrap();
    let pid = crawl.dispatcher_pid().expect("the dispatcher runs");
    let to: SocketAddr = crawl.endpoint().trim_start_matches("tcp://").parse().unwrap();
    let http = shared::http_client::builder().no_proxy().build().unwrap();
    let base = format!("http://{debug}");

    // Both supervisors joined: the attacks start from there.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let live = supervisors_live(&http, &base).await.unwrap_or_default();
        if live.len() == 2 && live.iter().all(|(_, l)| *l) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the supervisors did not join: {live:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (vm_before, _) = zmtp::memory_of(pid).unwrap();

    // Watches memory until the dispatcher exits, and the supervisors while
    // the attacks last (at the crawl's end they leave, and are not live).
    // Also its CPU time and its threads' states, said at the end: should
    // the crawl not end, they tell a dispatcher spinning from one waiting.
    // (It hung here once in CI and in 1 of 3 runs three at a time: its
    // serve loop blocked on a lock of the socket's peer table; fixed in
    // the vendored zeromq, vendor/zeromq/PATCH.md.)
    let attacking = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let watch = {
        let (http, base, attacking) = (http.clone(), base.clone(), attacking.clone());
        tokio::spawn(async move {
            let (mut vm_max, mut rss_max) = (0u64, 0u64);
            let mut dropped = Vec::new();
            let mut cpu = std::collections::VecDeque::<(Instant, f64)>::new();
            let mut states = String::new();
            while let Some((vm, rss)) = zmtp::memory_of(pid) {
                if let Some(secs) = profiling::cpu_seconds_of(pid) {
                    cpu.push_back((Instant::now(), secs));
                    while cpu
                        .front()
                        .is_some_and(|(t, _)| t.elapsed() > Duration::from_secs(10))
                    {
                        cpu.pop_front();
                    }
                    states = thread_states(pid);
                }
                vm_max = vm_max.max(vm);
                rss_max = rss_max.max(rss);
                if attacking.load(std::sync::atomic::Ordering::Relaxed) {
                    if let Some(live) = supervisors_live(&http, &base).await {
                        dropped.extend(live.into_iter().filter(|(_, l)| !l).map(|(id, _)| id));
                    }
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            if let (Some((t0, c0)), Some((t1, c1))) = (cpu.front(), cpu.back()) {
                let secs = t1.duration_since(*t0).as_secs_f64();
                let used = c1 - c0;
                eprintln!(
                    "dispatcher: {used:.2} CPU s in its last {secs:.1} s; its threads at the last look: {states}"
                );
            }
            (vm_max, rss_max, dropped)
        })
    };

    // 1. A frame header declaring 2 TiB.
    let mut huge = zmtp::connect_from(attacker(0), to).await.unwrap();
    let mut bytes = zmtp::handshake();
    bytes.extend_from_slice(&zmtp::frame_header(1 << 41, false));
    assert!(zmtp::send(&mut huge, &bytes).await);
    // 2. A thousand empty frames in one message.
    let mut frames = zmtp::connect_from(attacker(1), to).await.unwrap();
    let mut bytes = zmtp::handshake();
    for _ in 0..1000 {
        bytes.extend_from_slice(&zmtp::frame(&[], true));
    }
    let _ = zmtp::send(&mut frames, &bytes).await;
    // 3. Hellos as fast as they go, never reading.
    let flood = tokio::spawn(async move {
        let mut peer = zmtp::connect_from(attacker(2), to).await.unwrap();
        let mut sent = 0u64;
        if !zmtp::send(&mut peer, &zmtp::handshake()).await {
            return sent;
        }
        let burst: Vec<u8> = (0..64).flat_map(|i| hello(i as u8)).collect();
        let end = Instant::now() + FLOOD;
        while Instant::now() < end && zmtp::send(&mut peer, &burst).await {
            sent += 64;
        }
        sent
    });
    // 4. 5,000 connections, one Hello each, kept open.
    let mut many = Vec::with_capacity(MANY);
    for i in 0..MANY {
        many.push(tokio::spawn(async move {
            let mut peer = zmtp::connect_from(attacker(3 + i % MANY_SOURCES), to)
                .await
                .ok()?;
            let mut bytes = zmtp::handshake();
            bytes.extend_from_slice(&hello(7));
            zmtp::send(&mut peer, &bytes).await.then_some(peer)
        }));
    }
    let mut open = Vec::new();
    for task in many {
        if let Ok(Some(peer)) = task.await {
            open.push(peer);
        }
    }
    let mut findings = Findings::default();
    let huge_closed = zmtp::closed_within(&mut huge, Duration::from_secs(10)).await;
    check!(
        findings,
        huge_closed,
        "the connection that declared a 2 TiB frame was kept open"
    );
    let frames_closed = zmtp::closed_within(&mut frames, Duration::from_secs(10)).await;
    check!(
        findings,
        frames_closed,
        "the connection that sent a thousand frames was kept open"
    );
    let hellos = flood.await.unwrap();
    eprintln!(
        "hostile peers: {hellos} Hellos from the peer that never reads; {} of {MANY} connections took a Hello",
        open.len()
    );
    drop(open);
    attacking.store(false, std::sync::atomic::Ordering::Relaxed);

    // The crawl ends by itself whatever happened: its end is a finding too.
    let run = crawl.wait(Duration::from_secs(300)).await;
    let (vm_max, rss_max, dropped) = watch.await.unwrap();
    eprintln!(
        "dispatcher: VmSize {} MiB before the attacks, at most {} MiB; VmRSS at most {} MiB",
        vm_before / MIB,
        vm_max / MIB,
        rss_max / MIB
    );
    let grew = vm_max.saturating_sub(vm_before);
    check!(
        findings,
        grew < GIB,
        "the dispatcher's virtual size grew by {} MiB",
        grew / MIB
    );
    check!(
        findings,
        rss_max < 256 * MIB,
        "the dispatcher's RSS reached {} MiB",
        rss_max / MIB
    );
    check!(
        findings,
        dropped.is_empty(),
        "supervisors dropped during the attacks: {dropped:?}"
    );
    match &run {
        Ok(run) => {
            findings.check_run_ok(run);
            // Every join is a member: a supervisor dropped and back is a third.
            let joins = &run.summary["supervisors"];
            check!(findings, *joins == 2, "{joins} supervisor joins (2 supervisors)");
        }
        Err(e) => check!(findings, false, "the crawl did not end: {e:#}"),
    }
    findings.assert_none();
    let db = store.client().await.unwrap().database("crawler");
    // Fails on a page stored twice.
    let stored = verify::stored_statuses(&db).await.unwrap();
    verify::assert_pages_match(&stored, &expected);
    verify::assert_frontier_finished(&db).await.unwrap();
    server.stop(Duration::from_secs(5)).await;
}
