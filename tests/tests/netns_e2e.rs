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
use crawl_tests::verify;
use crawl_tests::web::{Expected, WebServer, WebSpec};

use crate::fault_e2e::assert_end_state;

const HOSTS: usize = 16;
const NODES: [&str; 2] = ["n1", "n2"];
/// Each test stays within about a minute.
const CRAWL_TIMEOUT: Duration = Duration::from_secs(50);

/// A web served on the bridge, the store beside it, and a cluster spec
/// with the dispatcher in node "d" and a supervisor in each of `nodes`.
pub(crate) struct Setup {
    pub(crate) server: WebServer,
    pub(crate) expected: Expected,
    pub(crate) store: StoreServer,
    pub(crate) spec: ClusterSpec,
    /// Holds the seeds and hosts files.
    _dir: tempfile::TempDir,
    /// Last, so it is dropped last: the servers on its bridge go first.
    pub(crate) net: Net,
}

/// A web whose crawl is not held back by politeness (no Crawl-delay, no
/// minimum delay), so that its rate shows what the links cost: realistic
/// pages, `HOSTS` hosts.
fn unpaced_web(seed: u64) -> WebSpec {
    WebSpec {
        seed,
        crawl_delay_every: 0,
        ..WebSpec::realistic_sized(HOSTS, 150)
    }
}

async fn setup(seed: u64) -> Option<Setup> {
    let mut s = setup_with(unpaced_web(seed), &NODES).await?;
    s.spec.dispatcher_args = args(&["--min-delay-ms", "0", "--progress-secs", "5"]);
    Some(s)
}

/// `None` when namespaces cannot be made.
pub(crate) async fn setup_with(web: WebSpec, nodes: &[&str]) -> Option<Setup> {
    let mut names = vec!["d"];
    names.extend_from_slice(nodes);
    let net = Net::create(&names).expect("creating the network")?;
    let host = IpAddr::V4(net.host_addr());
    let server = WebServer::start(web, SocketAddr::new(host, 0))
        .await
        .expect("starting the web on the bridge");
    let expected = server.web().expected_crawl();
    let store = StoreServer::start_on(host).expect("starting the store on the bridge");
    eprintln!(
        "netns: web on {}, store ({}) at {}, dispatcher in {} ({}), supervisors at {:?}",
        server.addr(),
        store.kind,
        store.uri,
        net.ns("d"),
        net.addr("d"),
        nodes.iter().map(|n| net.addr(n)).collect::<Vec<_>>()
    );
    let dir = tempfile::tempdir().expect("temp dir");
    let mut spec = ClusterSpec::for_web_at(&store.uri, &server, dir.path(), host).expect("cluster spec");
    spec.supervisors = nodes.len();
    spec.children = 2;
    spec.netns = Some(NetPlacement::new(&net, "d", nodes));
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
pub(crate) fn requests_by_client(server: &WebServer) -> BTreeMap<Option<IpAddr>, usize> {
    let mut by = BTreeMap::new();
    for r in server.requests() {
        *by.entry(r.client).or_insert(0) += 1;
    }
    by
}

/// Runs the spec to its end and checks it: every process exited cleanly,
/// the ground truth is stored once each, and the web saw requests from the
/// supervisors' nodes only (all of them when `all_nodes`).
async fn crawl_and_check(s: &Setup, label: &str, all_nodes: bool) {
    let run = spawn_crawl(&s.spec)
        .await
        .expect("starting the crawl")
        .wait(CRAWL_TIMEOUT)
        .await
        .expect("the crawl ends");
    // The figure (not asserted: tests never judge time) for the notes.
    eprintln!(
        "netns: {label}: {} pages in {:?}, {:.0} pages/s",
        run.summary["fetched"],
        run.wall,
        run.summary["pages_per_sec"].as_f64().unwrap_or(0.0)
    );
    verify::assert_finished(&run);
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
    crawl_and_check(&s, "0 ms between the nodes and the dispatcher", true).await;
}

/// The same web through a relay adding 20 ms each way (40 ms round trips)
/// between the supervisors and the dispatcher: credits (512 URLs a node)
/// keep the nodes busy across the latency (Little's law: 40 ms at
/// 2,000 pages/s holds 80 URLs). The rates of both tests are printed
/// (`netns: ... pages/s`), for the notes; a test does not judge time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn netns_crawl_through_a_40ms_link_stores_everything_once() {
    let Some(mut s) = setup(61).await else { return };
    let place = s.spec.netns.as_mut().expect("placed");
    let relay = Relay::start(
        SocketAddr::new(IpAddr::V4(s.net.host_addr()), 0),
        place.dispatcher_socket(),
        Duration::from_millis(20),
    )
    .expect("starting the relay");
    place.supervisor_endpoint = Some(format!("tcp://{}", relay.addr()));
    crawl_and_check(&s, "40 ms round trips between the nodes and the dispatcher", true).await;
    drop(relay);
}
