//! The crawl across real network links: the dispatcher in one network
//! namespace, each supervisor (with its children) in another, the web and
//! the store on the bridge between them (`crawl_tests::netns`). Each run
//! must end with the ground truth stored once, and the web server must
//! have seen both nodes' addresses and no other.
//!
//! Skips (passes, after saying why on stderr) where namespaces cannot be
//! made: not root, or a container that forbids them.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use crawl_tests::harness::{args, spawn_crawl, ClusterSpec, NetPlacement, StoreServer};
use crawl_tests::netns::Net;
use crawl_tests::relay::Relay;
use crawl_tests::web::{Expected, WebServer, WebSpec};

use crate::fault_e2e::assert_end_state;

const HOSTS: usize = 6;
const NODES: [&str; 2] = ["n1", "n2"];
/// Each test stays within about a minute.
const CRAWL_TIMEOUT: Duration = Duration::from_secs(50);

/// A small web with two Crawl-delay hosts (site0, site3), served on the
/// bridge, with the store beside it.
struct Setup {
    server: WebServer,
    expected: Expected,
    store: StoreServer,
    spec: ClusterSpec,
    /// Holds the seeds and hosts files.
    _dir: tempfile::TempDir,
    /// Last, so it is dropped last: the servers on its bridge go first.
    net: Net,
}

/// `None` when namespaces cannot be made.
async fn setup(seed: u64) -> Option<Setup> {
    let net = Net::create(&["d", NODES[0], NODES[1]]).expect("creating the network")?;
    let host = IpAddr::V4(net.host_addr());
    let web = WebSpec {
        seed,
        hosts: HOSTS,
        outside_hosts: 1,
        pages_per_host: 30,
        crawl_delay_every: 3,
        crawl_delay_secs: 0.2,
        ..WebSpec::default()
    };
    let server = WebServer::start(web, SocketAddr::new(host, 0))
        .await
        .expect("starting the web on the bridge");
    let expected = server.web().expected_crawl();
    let store = StoreServer::start_on(host).expect("starting the store on the bridge");
    eprintln!(
        "netns: web on {}, store ({}) at {}, dispatcher in {} ({}), supervisors in {:?}",
        server.addr(),
        store.kind,
        store.uri,
        net.ns("d"),
        net.addr("d"),
        NODES.map(|n| net.addr(n))
    );
    let dir = tempfile::tempdir().expect("temp dir");
    let mut spec = ClusterSpec::for_web_at(&store.uri, &server, dir.path(), host).expect("cluster spec");
    spec.supervisors = NODES.len();
    spec.children = 2;
    spec.dispatcher_args = args(&["--min-delay-ms", "50", "--progress-secs", "5"]);
    spec.netns = Some(NetPlacement::new(&net, "d", &NODES));
    Some(Setup {
        server,
        expected,
        store,
        spec,
        _dir: dir,
        net,
    })
}

/// Requests per client address in the web server's log.
fn requests_by_client(server: &WebServer) -> BTreeMap<Option<IpAddr>, usize> {
    let mut by = BTreeMap::new();
    for r in server.requests() {
        *by.entry(r.client).or_insert(0) += 1;
    }
    by
}

/// Runs the spec to its end and checks it: every process exited cleanly,
/// the ground truth is stored once each, and the web saw requests from the
/// supervisors' nodes only (all of them when `all_nodes`).
async fn crawl_and_check(s: &Setup, all_nodes: bool) {
    let run = spawn_crawl(&s.spec)
        .await
        .expect("starting the crawl")
        .wait(CRAWL_TIMEOUT)
        .await
        .expect("the crawl ends");
    eprintln!("netns: crawl took {:?}; summary {}", run.wall, run.summary);
    assert!(run.dispatcher.success(), "dispatcher: {:?}", run.dispatcher);
    assert!(
        run.supervisors.iter().all(|st| st.success()),
        "supervisors: {:?}",
        run.supervisors
    );
    assert_eq!(run.summary["frontier_left"], 0, "summary: {}", run.summary);
    assert_end_state(&s.store, &s.server, &s.expected, HOSTS).await;

    let by_client = requests_by_client(&s.server);
    eprintln!("netns: requests by client address: {by_client:?}");
    let nodes: BTreeSet<Option<IpAddr>> = NODES.iter().map(|n| Some(IpAddr::V4(s.net.addr(n)))).collect();
    let strangers: Vec<_> = by_client.keys().filter(|c| !nodes.contains(c)).collect();
    assert!(
        strangers.is_empty(),
        "requests from outside the supervisors' namespaces: {strangers:?}"
    );
    if all_nodes {
        for node in &nodes {
            assert!(
                by_client.contains_key(node),
                "no request from {node:?}: {by_client:?}"
            );
        }
    }
}

/// Dispatcher in "d", supervisors in "n1" and "n2", straight over the bridge.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn netns_crawl_across_namespaces_stores_everything_once() {
    let Some(s) = setup(61).await else { return };
    crawl_and_check(&s, true).await;
}

/// The same through a relay adding 20 ms each way (40 ms round trips)
/// between the supervisors and the dispatcher. Only correctness is
/// checked here; rates under latency are the product's to assert.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn netns_crawl_through_a_40ms_link_stores_everything_once() {
    let Some(mut s) = setup(62).await else { return };
    let place = s.spec.netns.as_mut().expect("placed");
    let relay = Relay::start(
        SocketAddr::new(IpAddr::V4(s.net.host_addr()), 0),
        place.dispatcher_socket(),
        Duration::from_millis(20),
    )
    .expect("starting the relay");
    place.supervisor_endpoint = Some(format!("tcp://{}", relay.addr()));
    crawl_and_check(&s, true).await;
    drop(relay);
}

/// A node that joins a running crawl: "n2" starts once pages are being
/// stored, and the crawl still ends with everything stored once and both
/// supervisors exiting cleanly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn netns_late_supervisor_joins_and_exits_with_the_crawl() {
    let Some(mut s) = setup(63).await else { return };
    s.spec.late_supervisors = 1;
    let mut crawl = spawn_crawl(&s.spec).await.expect("starting the crawl");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while s.server.request_count() < 20 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(s.server.request_count() >= 20, "the crawl did not start");
    assert!(crawl.start_late_supervisor(1).is_ok());
    assert!(crawl.start_late_supervisor(1).is_err(), "started twice");
    let run = crawl.wait(CRAWL_TIMEOUT).await.expect("the crawl ends");
    eprintln!("netns: crawl took {:?}; summary {}", run.wall, run.summary);
    assert!(run.dispatcher.success(), "dispatcher: {:?}", run.dispatcher);
    assert_eq!(run.supervisors.len(), 2, "both supervisors waited for");
    assert!(
        run.supervisors.iter().all(|st| st.success()),
        "supervisors: {:?}",
        run.supervisors
    );
    assert_end_state(&s.store, &s.server, &s.expected, HOSTS).await;
    let by_client = requests_by_client(&s.server);
    eprintln!("netns: requests by client address: {by_client:?}");
    let n1 = Some(IpAddr::V4(s.net.addr("n1")));
    assert!(by_client.contains_key(&n1), "no request from n1: {by_client:?}");
}
