//! `store::point_reads` against the real store: thousands of reads of one
//! document each, asked at once as a child at a wide crawl's start asks
//! for robots records, come back right (found, missing, malformed) and
//! travel in a few `find` commands, not one each (issue 61).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bson::doc;
use crawl_tests::harness::StoreServer;
use mongodb::event::command::CommandEvent;
use mongodb::event::EventHandler;
use mongodb::options::ClientOptions;
use store::docs::RobotsDoc;
use store::point_reads::{PointReads, Read, MAX_IDS};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thousands_of_point_reads_travel_in_a_few_queries_and_come_back_right() {
    let store = StoreServer::start().unwrap();
    let finds = Arc::new(AtomicU64::new(0));
    let mut opts = ClientOptions::parse(&store.uri).await.unwrap();
    let counted = finds.clone();
    opts.command_event_handler = Some(EventHandler::callback(move |event| {
        if let CommandEvent::Started(e) = event {
            if e.command_name == "find" || e.command_name == "getMore" {
                counted.fetch_add(1, Ordering::Relaxed);
            }
        }
    }));
    let client = mongodb::Client::with_options(opts).unwrap();
    let coll = client.database("point_reads").collection::<RobotsDoc>("robots");
    let raw = coll.clone_with_type::<bson::Document>();
    // Every even origin is stored; origin 7 is stored malformed.
    let origin = |i: usize| format!("https://site{i}.test:443");
    let docs: Vec<bson::Document> = (0..4_000)
        .step_by(2)
        .map(|i| doc! {"_id": origin(i), "status": 200, "body": format!("# {i}"), "fetched_at_ms": 1_i64})
        .chain([doc! {"_id": origin(7), "status": "not a number", "fetched_at_ms": 1_i64}])
        .collect();
    raw.insert_many(docs).await.unwrap();
    finds.store(0, Ordering::Relaxed);

    let reads = PointReads::spawn(coll);
    // 4,000 origins, every one asked for twice, all at once.
    let asks: Vec<usize> = (0..4_000).chain(0..4_000).collect();
    let tasks: Vec<_> = asks
        .iter()
        .map(|&i| {
            let reads = reads.clone();
            let id = origin(i);
            tokio::spawn(async move { (i, reads.get(&id).await) })
        })
        .collect();
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for task in tasks {
        let (i, read) = task.await.unwrap();
        let kind = match read {
            Read::Found(d) => {
                assert_eq!(i % 2, 0, "origin {i} is not stored but was found");
                assert_eq!(d.body, format!("# {i}"));
                assert_eq!(d.origin, origin(i));
                "found"
            }
            Read::Missing => {
                assert!(i % 2 == 1 && i != 7, "origin {i} is stored but read as missing");
                "missing"
            }
            Read::Failed(why) => {
                assert_eq!(i, 7, "origin {i}: {why}");
                assert!(why.contains("malformed"), "{why}");
                "malformed"
            }
            Read::TimedOut => panic!("origin {i} timed out"),
        };
        *seen.entry(kind).or_default() += 1;
    }
    assert_eq!(seen["found"], 4_000);
    assert_eq!(seen["missing"], 3_998);
    assert_eq!(seen["malformed"], 2);
    // 8,000 asks; one query per ask would be 8,000 finds.
    let finds = finds.load(Ordering::Relaxed);
    let least = (8_000 / MAX_IDS) as u64;
    assert!(
        (least..=800).contains(&finds),
        "{finds} find/getMore commands for 8,000 reads"
    );
}
