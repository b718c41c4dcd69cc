//! The dispatcher alone against `dispatcher_load` (fake supervisors over
//! real ZeroMQ sockets, with the cluster secret), a real store, and a
//! memory budget so small that most of each domain's queue lives in the
//! store: every admitted URL is leased exactly once and finished, and the
//! stored frontier says so. (What `scripts/bench-dispatcher.sh` times.)

use std::time::Duration;

use bson::doc;
use crawl_tests::harness::{args, bin, crawl_coll, spawn_crawl, write_lines, ClusterSpec, StoreServer};

const URLS: u64 = 3000;
const DOMAINS: u64 = 40;
const SUPERVISORS: usize = 5;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_admitted_url_is_leased_once_and_finished_with_queues_in_the_store() {
    let store = StoreServer::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let seeds: Vec<String> = (0..DOMAINS).map(|i| format!("http://d{i}.test/")).collect();
    let seeds_file = write_lines(dir.path(), "seeds.txt", &seeds).unwrap();
    let mut spec = ClusterSpec::new(&store.uri, &seeds_file);
    spec.supervisors = 0;
    spec.min_supervisors = Some(SUPERVISORS);
    spec.dispatcher_args = args(&[
        "--max-pages",
        &URLS.to_string(),
        "--max-depth",
        "1000",
        "--max-inflight-per-domain",
        "4",
        // 3,000 URLs over 40 domains against a budget of 200 and windows of 8.
        "--frontier-memory-urls",
        "200",
        "--frontier-window",
        "8",
        "--progress-secs",
        "0",
    ]);
    let crawl = spawn_crawl(&spec).await.unwrap();
    let load = tokio::process::Command::new(bin("dispatcher_load").unwrap())
        .args(["--dispatcher", crawl.endpoint()])
        .args(["--supervisors", &SUPERVISORS.to_string()])
        .args([
            "--domains",
            &DOMAINS.to_string(),
            "--capacity",
            "64",
            "--links",
            "10",
        ])
        .args(["--max-secs", "300"])
        .env(shared::cluster_auth::SECRET_ENV, &spec.cluster_secret)
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(320), load)
        .await
        .expect("dispatcher_load did not finish")
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "dispatcher_load: {stdout}");
    let report: serde_json::Value = stdout
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str(l).ok())
        .expect("a JSON report");
    let run = crawl.wait(Duration::from_secs(60)).await.unwrap();
    assert!(run.dispatcher.success(), "dispatcher: {:?}", run.dispatcher);

    // Exactly the admitted URLs were leased, each once (no lease expired,
    // no supervisor left, so a second lease would be a doubled one), and
    // each result was taken.
    assert_eq!(report["leases_received"], URLS, "{report}");
    assert_eq!(report["results_sent"], URLS, "{report}");
    assert_eq!(run.summary["fetched"], URLS, "{}", run.summary);
    assert_eq!(run.summary["seen_urls"], URLS, "{}", run.summary);
    assert_eq!(run.summary["frontier_left"], 0, "{}", run.summary);
    assert_eq!(run.summary["leases_expired"], 0, "{}", run.summary);

    // The store holds every admitted URL once, finished, each with its own
    // place in the queue.
    let db = store.client().await.unwrap().database("crawler");
    let frontier = db.collection::<bson::Document>(&crawl_coll(shared::store::FRONTIER));
    assert_eq!(frontier.count_documents(doc! {}).await.unwrap(), URLS);
    assert_eq!(
        frontier.count_documents(doc! {"state": "done"}).await.unwrap(),
        URLS
    );
    let seqs: Vec<i64> = crawl_tests::harness::all_docs(&db, &crawl_coll(shared::store::FRONTIER))
        .await
        .unwrap()
        .iter()
        .filter_map(|d| match d.get("seq") {
            // (nx-27017 hands small 64-bit numbers back as 32-bit ones)
            Some(bson::Bson::Int64(n)) => Some(*n),
            Some(bson::Bson::Int32(n)) => Some(i64::from(*n)),
            _ => None,
        })
        .collect();
    let distinct: std::collections::BTreeSet<i64> = seqs.iter().copied().collect();
    assert_eq!((seqs.len(), distinct.len()), (URLS as usize, URLS as usize));
}
