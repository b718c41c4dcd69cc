//! A crawl whose names are resolved only through a DNS server of the
//! test's (`--dns-server`; no hosts file): answers with TTLs, a CNAME
//! chain, a name with two addresses (the first refuses connections), one
//! slow to answer, and seeds whose names do not exist (NXDOMAIN), whose
//! lookups fail (SERVFAIL) or never get an answer.
//!
//! Checked: every page of the web is stored, the failing names' URLs end
//! as failures of their DNS kind, each name is asked about once per TTL
//! (the child's cache, one lookup in flight per name), and the slow name
//! did not hold up the other domains: the web server's log shows them
//! crawled while the slow name's answer was on its way.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::time::Duration;

use crawl_tests::dns_server::{Behaviour, DnsServer, Zone};
use crawl_tests::harness::{flags, write_lines, ClusterSpec, StoreServer};
use crawl_tests::in_process::run_in_process;
use crawl_tests::verify;
use crawl_tests::web::{WebServer, WebSpec};

/// How long the slow name takes to answer (under the child's 2 s per try).
const SLOW_ANSWER: Duration = Duration::from_secs(1);
/// The TTL of the names that keep theirs through the crawl.
const LONG_TTL: u32 = 600;
/// The child's floor for a TTL (`crawler-child/src/dns_cache.rs`).
const TTL_FLOOR_SECS: u64 = 30;

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crawl_resolves_through_its_dns_server() {
    let dir = tempfile::tempdir().unwrap();
    let store = StoreServer::start().unwrap();
    let spec = WebSpec {
        seed: 61,
        hosts: 6,
        outside_hosts: 1,
        pages_per_host: 15,
        ..WebSpec::default()
    };
    let server = WebServer::local(spec).await;
    let web = server.web();
    let names = web.host_names();
    let [_, slow, aliased, multi, short_ttl, ..] = &names[..] else {
        panic!("too few hosts: {names:?}");
    };
    let here = Behaviour::Answer {
        addrs: vec![ip("127.0.0.1")],
        ttl: LONG_TTL,
    };
    let mut zone = Zone::default();
    for name in &names {
        zone.set(name, here.clone());
    }
    zone.set(slow, here.clone()).latency(slow, SLOW_ANSWER);
    // alias → cdn-a → cdn-b → 127.0.0.1, with TTLs the chain's shortest wins.
    zone.set(
        aliased,
        Behaviour::Cname {
            target: "cdn-a.test".into(),
            ttl: LONG_TTL,
        },
    )
    .set(
        "cdn-a.test",
        Behaviour::Cname {
            target: "cdn-b.test".into(),
            ttl: LONG_TTL,
        },
    )
    .set("cdn-b.test", here.clone());
    // Nothing listens on 127.0.0.9: the second address is the one that answers.
    zone.set(
        multi,
        Behaviour::Answer {
            addrs: vec![ip("127.0.0.9"), ip("127.0.0.1")],
            ttl: LONG_TTL,
        },
    );
    // A TTL of 1 s is kept for the child's floor.
    zone.set(
        short_ttl,
        Behaviour::Answer {
            addrs: vec![ip("127.0.0.1")],
            ttl: 1,
        },
    );
    zone.set("broken.test", Behaviour::ServFail)
        .set("quiet.test", Behaviour::Silent);
    // gone.test is not in the zone: NXDOMAIN.
    let dns = DnsServer::local(zone).await.unwrap();

    let failing = [
        ("gone.test", "dns_not_found"),
        ("broken.test", "dns_failed"),
        ("quiet.test", "dns_timeout"),
    ];
    let mut seeds = web.seed_urls();
    seeds.extend(failing.iter().map(|(host, _)| web.url_on(host, "/")));
    let seeds = write_lines(dir.path(), "seeds.txt", &seeds).unwrap();
    let mut cluster = ClusterSpec::new(&store.uri, &seeds);
    cluster.supervisors = 1;
    cluster.children = 2;
    cluster.supervisor_args = flags(&format!("--dns-server {}", dns.addr()));
    // The web is on loopback, which only the operator's opt-in reaches
    // through DNS (a hosts file would be trusted without it).
    cluster.dispatcher_args = flags("--allow-private-networks --min-delay-ms 50 --max-depth 100");

    let run = run_in_process(&cluster, Duration::from_secs(120)).await.unwrap();
    eprintln!("crawl took {:?}; summary {}", run.wall, run.summary);
    verify::assert_finished(&run);

    // Every page of the web stored (a URL is stored once: it is the page's id).
    let db = store.client().await.unwrap().database("crawler");
    let expected = web.expected_crawl();
    verify::assert_pages_match(&verify::stored_statuses(&db).await.unwrap(), &expected);
    verify::assert_frontier_finished(&db).await.unwrap();

    // The failing names' URLs failed, each as its kind of DNS failure.
    let frontier = verify::frontier_urls(&db, &Default::default()).await.unwrap();
    for (host, kind) in failing {
        let url = web.url_on(host, "/");
        let got = frontier
            .iter()
            .find(|u| u.url == url)
            .expect("the seed is in the frontier");
        assert_eq!(
            (got.state, got.failure.as_deref()),
            ("failed", Some(kind)),
            "{url}"
        );
    }

    // Queries: one per name and TTL (each domain is crawled by one child),
    // none for the chain's inner names (the server answers it whole).
    let counts: BTreeMap<String, (u64, u64)> = dns.query_counts().into_iter().collect();
    eprintln!("DNS (queries, datagrams) per name: {counts:?}");
    let windows = |ttl: u64| run.wall.as_secs().div_ceil(ttl.max(TTL_FLOOR_SECS)).max(1);
    let crawled = web.in_scope_host_names();
    let mut asked = 0;
    let mut allowed = 0;
    for name in &crawled {
        let ttl = if name == short_ttl { 1 } else { u64::from(LONG_TTL) };
        let q = dns.queries(name);
        assert!(q >= 1, "{name} was never asked for");
        assert!(
            q <= windows(ttl),
            "{name}: {q} queries in {:?} (TTL {ttl} s)",
            run.wall
        );
        asked += q;
        allowed += windows(ttl);
    }
    assert!(
        asked as f64 <= 1.05 * allowed as f64,
        "{asked} queries for {} names, {allowed} TTL windows",
        crawled.len()
    );
    assert_eq!(dns.queries("cdn-a.test") + dns.queries("cdn-b.test"), 0);
    for (host, _) in failing {
        assert!(dns.queries(host) >= 1, "{host} was never asked for");
    }

    // The slow name held up only its own domain: before its first request,
    // the other domains were being crawled (their robots.txt and pages).
    let mut log = server.requests();
    log.sort_by_key(|r| r.arrived);
    let first_slow = log
        .iter()
        .position(|r| &r.host == slow)
        .expect("the slow name's domain was crawled");
    let before: Vec<&str> = log[..first_slow].iter().map(|r| r.host.as_str()).collect();
    let others = crawled.iter().filter(|h| *h != slow).count();
    let domains_before = crawled.iter().filter(|h| before.contains(&h.as_str())).count();
    eprintln!(
        "before the slow name's first request: {} requests to {domains_before} of {others} other domains",
        before.len()
    );
    assert!(
        domains_before == others && before.len() >= 2 * others,
        "the other domains waited for the slow name: {} requests to {domains_before} of {others} before it",
        before.len()
    );
}
