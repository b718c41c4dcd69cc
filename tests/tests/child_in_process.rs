//! A crawler child run as a task of this test's own process
//! (`crawler_child::run_on` over `tokio::io::duplex`), spoken to as its
//! supervisor speaks to it: Configure, Fence, Work, then Stop. No binary
//! is spawned, so a change to the child is checked here without a release
//! build of the cluster: the first of the in-process tests issue 64 asks
//! for. The child is the library the binary runs, with its real store
//! (through the driver), its real HTTP client and the synthetic web.
//!
//! Checked: the child says Ready, reports each URL it was sent once with
//! the status the web answered, and the links the page holds; it stores
//! each page once, with the body byte for byte as served; on Stop it ends
//! by itself; and it fetched nothing else but robots.txt.

use std::time::Duration;

use crawl_tests::harness::{all_pages, write_lines, StoreServer};
use crawl_tests::web::{WebServer, WebSpec};
use link::framing::{read_frame, write_frame};
use link::protocol::{CrawlPolicy, FromChild, Outcome, ToChild, WorkItem};
use tokio::io::AsyncWriteExt;

/// The policy a dispatcher would push (`dispatcher --min-delay-ms 0`).
fn policy(crawl_id: &str) -> CrawlPolicy {
    CrawlPolicy {
        crawl_id: crawl_id.into(),
        user_agent: "synthcrawler/0.1 (+in-process test)".into(),
        robots_agent: "synthcrawler".into(),
        min_delay_ms: 0,
        server_delay_ms: 0,
        named_server_delay_ms: 0,
        max_domain_connections: 2,
        max_domain_rps: 0.0,
        max_crawl_delay_ms: 2_000,
        robots_ttl_secs: 3600,
        connect_timeout_ms: 2_000,
        request_timeout_ms: 5_000,
        max_body_bytes: 1 << 20,
        max_redirects: 5,
        skip_nofollow: false,
        max_outlinks_per_page: 500,
        child_concurrency: 8,
        allow_private_networks: false,
        keep_non_html_bodies: false,
        guess_sitemap: false,
        canonical: Default::default(),
        heartbeat_timeout_ms: 15_000,
        revisit: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_in_the_test_process_crawls_what_it_is_sent_and_stores_it_once() {
    let dir = tempfile::tempdir().unwrap();
    let store = StoreServer::start().unwrap();
    let spec = WebSpec {
        seed: 64,
        hosts: 3,
        outside_hosts: 0,
        pages_per_host: 5,
        crawl_delay_every: 0,
        ..WebSpec::default()
    };
    let server = WebServer::local(spec).await;
    let web = server.web();
    let names: Vec<String> = web
        .host_names()
        .iter()
        .map(|h| format!("127.0.0.1 {h}"))
        .collect();
    let hosts = write_lines(dir.path(), "hosts", &names).unwrap();
    let token = dir.path().join("debug-token");
    // The command line a supervisor gives its children (parsed by the
    // library: a bad flag would be an error here, not an exit).
    let config = crawler_child::Config::from_args([
        "crawler-child",
        "--mongo-uri",
        &store.uri,
        "--db",
        "crawler",
        "--robots-db",
        "crawler_robots",
        "--hosts-file",
        hosts.to_str().unwrap(),
        "--debug-token-file",
        token.to_str().unwrap(),
    ])
    .unwrap();

    let (to_child, child_in) = tokio::io::duplex(1 << 20);
    let (child_out, mut from_child) = tokio::io::duplex(1 << 20);
    let (_stop, shutdown) = crawler_child::Shutdown::new();
    let child = tokio::spawn(crawler_child::run_on(config, shutdown, child_in, child_out));
    let mut to_child = to_child;

    let crawl_id = "inproc";
    // The in-scope sites' home pages (not the special hosts some webs add).
    let seeds: Vec<String> = web.seed_urls().into_iter().take(web.spec().hosts).collect();
    let now = link::protocol::now_ms();
    let items: Vec<WorkItem> = seeds
        .iter()
        .enumerate()
        .map(|(i, u)| WorkItem {
            lease: i as u64 + 1,
            lease_expires_ms: now + 120_000,
            leased_ms: now,
            url: u.clone(),
            domain: shared::urls::domain_of(&url::Url::parse(u).unwrap()),
            depth: 0,
            min_delay_ms: None,
            server: None,
            revisit: None,
        })
        .collect();
    for msg in [
        ToChild::Configure(policy(crawl_id)),
        ToChild::Fence {
            until_mono_ms: link::fence::mono_ms() + 120_000,
        },
        ToChild::Work(items.clone()),
    ] {
        write_frame(&mut to_child, &msg).await.unwrap();
    }
    to_child.flush().await.unwrap();

    // Ready, then one result per URL sent (heartbeats in between).
    let mut ready = false;
    let mut results = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while results.len() < items.len() {
        let frame = tokio::time::timeout_at(deadline, read_frame::<_, FromChild>(&mut from_child))
            .await
            .expect("every URL reported within 60 s")
            .unwrap()
            .expect("the child's output stays open");
        match frame {
            FromChild::Ready(info) => {
                assert_eq!(info.role, "crawler-child");
                ready = true;
            }
            FromChild::Result(r) => {
                assert!(ready, "a result before Ready");
                results.push(r);
            }
            FromChild::Heartbeat => {}
        }
    }
    write_frame(&mut to_child, &ToChild::Stop).await.unwrap();
    to_child.flush().await.unwrap();
    tokio::time::timeout(Duration::from_secs(30), child)
        .await
        .expect("the child ends by itself after Stop")
        .unwrap()
        .unwrap();

    // Each URL reported once, with the web's status and the page's links.
    results.sort_by_key(|r| r.lease);
    for (item, r) in items.iter().zip(&results) {
        assert_eq!(r.lease, item.lease);
        assert_eq!(r.url, item.url);
        let host = url::Url::parse(&item.url)
            .unwrap()
            .host_str()
            .unwrap()
            .to_string();
        let want = web.respond(&host, "/");
        match &r.outcome {
            Outcome::Fetched { status, .. } => assert_eq!(*status, want.status, "{}", item.url),
            other => panic!("{}: {other:?}", item.url),
        }
        assert!(!r.outlinks.is_empty(), "{}: no links reported", item.url);
    }

    // Each page stored once, its body as served.
    let db = store.client().await.unwrap().database("crawler");
    let crawl = store::CrawlId::parse(crawl_id).unwrap();
    let pages = all_pages(&db, &crawl).await.unwrap();
    assert_eq!(
        pages.len(),
        items.len(),
        "pages stored: {:?}",
        pages.iter().map(|p| &p.url).collect::<Vec<_>>()
    );
    let dicts = store::body_dict::Dictionaries::load(&db.collection(&crawl.collection(store::BODY_DICTS)))
        .await
        .unwrap();
    for page in &pages {
        let host = url::Url::parse(&page.url)
            .unwrap()
            .host_str()
            .unwrap()
            .to_string();
        let served = web.respond(&host, "/");
        let body = store::page_body::raw_of(page, &dicts).unwrap();
        assert_eq!(
            body,
            served.body.to_vec(),
            "{}: body differs from what was served",
            page.url
        );
    }

    // Nothing fetched but the pages sent and each host's robots.txt.
    let mut paths: Vec<(String, String)> = server.requests().into_iter().map(|r| (r.host, r.path)).collect();
    paths.sort();
    let mut want: Vec<(String, String)> = Vec::new();
    for u in &seeds {
        let host = url::Url::parse(u).unwrap().host_str().unwrap().to_string();
        want.push((host.clone(), "/".into()));
        want.push((host, "/robots.txt".into()));
    }
    want.sort();
    assert_eq!(paths, want);

    // Each origin's rules reached the robots store (written in a batch,
    // the last one at the stop), with the status its robots.txt had.
    let robots = store.client().await.unwrap().database("crawler_robots");
    let mut stored: Vec<(String, i32)> = Vec::new();
    store::decode_each(
        &robots.collection::<store::docs::RobotsDoc>(store::ROBOTS),
        bson::doc! {},
        |r| stored.push((r.origin, r.status)),
        |_, e| panic!("a malformed robots record: {e}"),
    )
    .await
    .unwrap();
    stored.sort();
    let mut origins: Vec<(String, i32)> = seeds
        .iter()
        .map(|u| {
            let url = url::Url::parse(u).unwrap();
            let host = &url[url::Position::BeforeHost..url::Position::AfterPort];
            let status = if web.robots_txt(host).is_some() { 200 } else { 404 };
            (url.origin().ascii_serialization(), status)
        })
        .collect();
    origins.sort();
    origins.dedup();
    assert_eq!(stored, origins);
}
