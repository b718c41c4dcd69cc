//! End-to-end: the real dispatcher, supervisors and children crawl the
//! synthetic web into real store servers; we check what was stored and
//! what the web server saw. The second test's runs have the whole cluster
//! in the test process (`crawl_tests::in_process`).

use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, UNIX_EPOCH};

use crawl_tests::harness::{
    all_docs, all_pages, args, bin, crawl_coll, flags, run_crawl, write_lines, ClusterSpec, StoreServer,
};
use crawl_tests::in_process::run_in_process;
use crawl_tests::verify;
use crawl_tests::web::{WebServer, WebSpec};
use store::body_dict::Dictionaries;
use store::CrawlId;

const MIN_DELAY_MS: u64 = 20;

fn web_spec() -> WebSpec {
    WebSpec {
        seed: 7,
        hosts: 20,
        outside_hosts: 3,
        pages_per_host: 110,
        crawl_delay_every: 5,
        crawl_delay_secs: 0.05,
        ..WebSpec::default()
    }
}

fn policy_args() -> Vec<String> {
    flags(&format!(
        "--min-delay-ms {MIN_DELAY_MS} --max-depth 100 --progress-secs 5"
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crawls_the_synthetic_web_into_two_stores() {
    let dir = tempfile::tempdir().unwrap();
    let primary = StoreServer::start().unwrap();
    let second = StoreServer::start().unwrap();
    eprintln!(
        "stores: primary {} ({}), second {} ({})",
        primary.uri, primary.kind, second.uri, second.kind
    );
    let server = WebServer::local(web_spec()).await;
    let web = server.web();
    let expected = web.expected_crawl();
    let n = expected.pages.len();
    assert!(n >= 2000, "web too small: {n}");

    let mut spec = ClusterSpec::for_web(&primary.uri, &server, dir.path()).unwrap();
    spec.robots_uri = Some(second.uri.clone());
    spec.dispatcher_args = policy_args();
    let run = run_crawl(&spec, Duration::from_secs(600)).await.unwrap();

    // The crawl ended by itself and every process exited 0.
    verify::assert_finished(&run);

    // Every reachable allowed page is stored exactly once, with its status.
    let db = primary.client().await.unwrap().database("crawler");
    let stored = verify::stored_statuses(&db).await.unwrap();
    verify::assert_pages_match(&stored, &expected);
    assert!(expected.count_status(404) > 0 && expected.count_status(302) > 0);
    verify::assert_frontier_finished(&db).await.unwrap();
    let pages = all_pages(&db, &CrawlId::default()).await.unwrap();
    let dicts = Dictionaries::load(&db.collection(&crawl_coll(store::BODY_DICTS)))
        .await
        .unwrap();

    // HTML pages carry their body, byte for byte as served (compressed in
    // the store, read back as an archive would), and their features.
    for d in pages.iter().filter(|d| d.status == 200) {
        let id = &d.url;
        let url = url::Url::parse(d.final_url.as_deref().unwrap_or(id)).unwrap();
        let served = web.respond(url.host_str().unwrap(), &url[url::Position::BeforePath..]);
        let stored = store::page_body::raw_of(d, &dicts).unwrap_or_else(|e| panic!("body of {id}: {e}"));
        assert!(stored == served.body, "body of {id} differs from what was served");
        let html = store::page_body::html_of(d, &dicts).unwrap();
        assert!(html.contains("</html>"), "html of {id} missing");
        assert!(d.title.is_some(), "title of {id}");
    }

    // Children learnt a body dictionary from their first pages, stored it,
    // and compressed later pages with it (the bodies above read back
    // through it).
    let with_dict = pages.iter().filter(|d| d.body_dict.is_some()).count();
    let dict_ids: BTreeSet<&str> = pages.iter().filter_map(|d| d.body_dict.as_deref()).collect();
    assert!(
        with_dict > 100,
        "only {with_dict} pages compressed with a dictionary"
    );
    assert!(
        dict_ids.iter().all(|id| dicts.get(id).is_some()),
        "a page names a dictionary the store lacks"
    );

    // Nothing disallowed, nothing out of scope was requested.
    let requests = server.requests();
    let in_scope: BTreeSet<String> = web.host_names().into_iter().take(web_spec().hosts).collect();
    verify::assert_nothing_forbidden_fetched(&requests, &expected, &in_scope, server.addr().port());

    // robots.txt was fetched once per host, and is in the second store with
    // every domain's last-crawled time.
    let robots_fetches = requests.iter().filter(|r| r.path == "/robots.txt").count();
    assert_eq!(
        robots_fetches,
        in_scope.len(),
        "robots.txt fetched more than once per host"
    );
    let sdb = second.client().await.unwrap().database("crawler_robots");
    let robots = all_docs(&sdb, store::ROBOTS).await.unwrap();
    assert_eq!(robots.len(), in_scope.len());
    for d in &robots {
        let origin = d.get_str("_id").unwrap();
        let host = origin.trim_start_matches("http://").split(':').next().unwrap();
        let status = d.get_i32("status").unwrap();
        match web.robots_txt(host) {
            Some(body) => {
                assert_eq!(status, 200, "{origin}");
                assert_eq!(d.get_str("body").unwrap(), body, "{origin}");
            }
            None => assert_eq!(status, 404, "{origin}"),
        }
    }
    let domains = all_docs(&sdb, store::DOMAINS).await.unwrap();
    assert_eq!(domains.len(), in_scope.len());
    assert!(domains
        .iter()
        .all(|d| d.get_i64("last_crawled_ms").is_ok_and(|t| t > 1_600_000_000_000)));
    // The primary store holds no robots data and vice versa.
    assert!(all_docs(&db, store::ROBOTS).await.unwrap().is_empty());

    // Politeness: requests to one host are at least the delay apart.
    let mut by_host: HashMap<&str, Vec<u128>> = HashMap::new();
    for r in &requests {
        let t = r.at.duration_since(UNIX_EPOCH).unwrap().as_micros();
        by_host.entry(r.host.as_str()).or_default().push(t);
    }
    for (host, mut times) in by_host {
        times.sort();
        let delay_ms = web
            .crawl_delay(host)
            .map_or(MIN_DELAY_MS as f64, |d| (d * 1000.0).max(MIN_DELAY_MS as f64));
        let min_gap = times.windows(2).map(|w| w[1] - w[0]).min().unwrap_or(u128::MAX);
        assert!(
            min_gap as f64 >= delay_ms * 1000.0,
            "{host}: two requests {min_gap} µs apart, delay is {delay_ms} ms"
        );
    }
    server.stop(Duration::from_secs(5)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_run_on_the_same_store_stores_nothing_twice() {
    let dir = tempfile::tempdir().unwrap();
    let store = StoreServer::start().unwrap();
    let spec_web = WebSpec {
        seed: 3,
        hosts: 6,
        pages_per_host: 40,
        ..WebSpec::default()
    };
    let server = WebServer::local(spec_web).await;
    let expected = server.web().expected_crawl();
    let mut spec = ClusterSpec::for_web(&store.uri, &server, dir.path()).unwrap();
    spec.supervisors = 1;
    // The crawl described in a file; the command line adds to it.
    let config = dir.path().join("crawl.toml");
    std::fs::write(
        &config,
        format!("crawl-id = \"c1\"\nmin-delay-ms = {MIN_DELAY_MS}\nmax_depth = 100\n"),
    )
    .unwrap();
    spec.dispatcher_args = args(&["--config", config.to_str().unwrap(), "--progress-secs", "5"]);

    let first = run_in_process(&spec, Duration::from_secs(300)).await.unwrap();
    verify::assert_exited_ok(&first);
    // The summary says how the crawl ended, what it fetched, and with
    // which settings (from the file, the command line and defaults).
    let summary = &first.summary;
    assert_eq!(summary["crawl_id"], "c1", "summary: {summary}");
    assert_eq!(summary["finish_reason"], "done", "summary: {summary}");
    assert!(
        summary["bytes_fetched"].as_u64().unwrap() > 100_000,
        "summary: {summary}"
    );
    assert!(summary["started_at"].as_str().unwrap() < summary["finished_at"].as_str().unwrap());
    assert_eq!(summary["settings"]["min-delay-ms"], MIN_DELAY_MS.to_string());
    assert_eq!(summary["settings"]["max-depth"], "100");
    assert_eq!(summary["settings"]["progress-secs"], "5");
    assert_eq!(summary["settings"]["max-redirects"], "10");
    assert!(!summary["settings"]["mongo-uri"].is_null());
    let db = store.client().await.unwrap().database("crawler");
    let c1 = CrawlId::parse("c1").unwrap();
    let c1_coll = |kind: &str| c1.collection(kind);
    let pages_of_c1 = || async { all_docs(&db, &c1_coll(store::PAGES)).await.unwrap() };
    let first_pages = pages_of_c1().await;
    let after_first = first_pages.len();
    assert_eq!(after_first, expected.pages.len());
    let requests_after_first = server.request_count();

    // A malformed segment (by hand, an older version, a store gone wrong)
    // is skipped on resume, with a word, not the end of the crawl: one
    // whose domain is not a string (in no queue), one whose URLs do not
    // unpack (read with its domain's queue, and passed over).
    let segments_of_c1 = db.collection::<bson::Document>(&c1_coll(store::SEGMENTS));
    let malformed = [
        bson::doc! {"_id": 1_000_000_i64, "domain": 5, "seq": 1_000_000_i64, "first": 999_999_i64, "n": 2, "state": "queued"},
        bson::doc! {"_id": 1_000_002_i64, "domain": "bad.test", "seq": 1_000_002_i64, "first": 1_000_001_i64, "n": 2,
        "state": "queued", "urls": bson::Binary { subtype: bson::spec::BinarySubtype::Generic, bytes: b"not zstd".to_vec() },
        "places": bson::Binary { subtype: bson::spec::BinarySubtype::Generic, bytes: vec![0, 0, 1, 0] }},
    ];
    segments_of_c1.insert_many(malformed.clone()).await.unwrap();
    db.collection::<bson::Document>(&c1_coll(store::SEEDS))
        .insert_one(bson::doc! {"_id": 42})
        .await
        .unwrap();
    // A URL whose page is gone, in a domain whose recorded progress is
    // moved back before it (as a dispatcher killed between records leaves
    // it): the second run reads that domain's queue from its progress,
    // finds every other page stored, and crawls this one once more.
    let frontier = verify::frontier_urls(&db, &c1).await.unwrap();
    assert!(frontier
        .iter()
        .all(|u| u.state == "done" || u.state == "failed" || u.state == "disallowed"));
    let statuses = verify::stored_statuses_of(&db, &c1).await.unwrap();
    let again = frontier
        .iter()
        // Not a URL of the web's redirect chains (/r/, /rr/): fetched
        // again, it would cost a request a hop.
        .filter(|u| u.state == "done" && statuses.get(&u.url) == Some(&200))
        .filter(|u| !u.url.contains("/r/") && !u.url.contains("/rr/"))
        .nth(frontier.len() / 4)
        .unwrap()
        .clone();
    let progress_of_c1 = db.collection::<bson::Document>(&c1_coll(store::PROGRESS));
    let recorded = progress_of_c1
        .find_one(bson::doc! {"_id": &again.domain})
        .await
        .unwrap()
        .expect("the first run recorded every domain's progress");
    let below = match recorded.get("below") {
        Some(bson::Bson::Int64(n)) => *n,
        Some(bson::Bson::Int32(n)) => i64::from(*n),
        _ => panic!("{recorded}"),
    };
    assert!(below > again.seq, "{recorded}");
    progress_of_c1
        .update_one(
            bson::doc! {"_id": &again.domain},
            bson::doc! {"$set": {"below": again.seq - 3}},
        )
        .await
        .unwrap();
    let removed = db
        .collection::<bson::Document>(&c1_coll(store::PAGES))
        .delete_one(bson::doc! {"_id": &again.url})
        .await
        .unwrap();
    assert_eq!(removed.deleted_count, 1);

    // A memory budget of one URL: every queue is read window by window.
    let mut small = spec.clone();
    small.dispatcher_args.extend(flags("--frontier-memory-urls 1"));
    let second = run_in_process(&small, Duration::from_secs(300)).await.unwrap();
    verify::assert_exited_ok(&second);
    assert_eq!(second.summary["fetched"], 1, "summary: {}", second.summary);
    let second_pages = pages_of_c1().await;
    assert_eq!(second_pages.len(), after_first);
    let without = |pages: &[bson::Document]| -> Vec<bson::Document> {
        pages
            .iter()
            .filter(|p| p.get_str("_id") != Ok(again.url.as_str()))
            .cloned()
            .collect()
    };
    assert_eq!(without(&second_pages), without(&first_pages));
    let requests = server.request_count() - requests_after_first;
    assert!(
        (1..=2).contains(&requests),
        "the second run made {requests} requests for one URL (and perhaps its robots.txt): {:?}",
        &server.requests()[requests_after_first..]
    );
    let frontier = verify::frontier_urls(&db, &c1).await.unwrap();
    let entry = frontier.iter().find(|u| u.url == again.url).unwrap();
    assert_eq!(entry.state, "done", "{entry:?}");
    let segments_after = all_docs(&db, &c1_coll(store::SEGMENTS)).await.unwrap();
    for m in &malformed {
        // The store may hand small 64-bit numbers back as 32-bit ones.
        let same = |d: &bson::Document| {
            d.iter().count() == m.iter().count()
                && m.iter().all(|(k, v)| match (v, d.get(k)) {
                    (bson::Bson::Int64(a), Some(bson::Bson::Int32(b))) => *a == i64::from(*b),
                    (a, b) => Some(a) == b,
                })
        };
        assert!(
            segments_after.iter().any(same),
            "the malformed segment {m} was changed or lost"
        );
    }

    // Another crawl id on the same database is another crawl: it crawls
    // the whole web again into its own collections, rather than skipping
    // every URL the first crawl saw, and leaves the first one as it was.
    let mut other = spec.clone();
    other.dispatcher_args.extend(flags("--crawl-id c2"));
    let third = run_in_process(&other, Duration::from_secs(300)).await.unwrap();
    verify::assert_exited_ok(&third);
    assert_eq!(third.summary["crawl_id"], "c2", "summary: {}", third.summary);
    assert_eq!(
        third.summary["fetched"], after_first,
        "summary: {}",
        third.summary
    );
    let c2_pages = all_pages(&db, &CrawlId::parse("c2").unwrap()).await.unwrap();
    let c2_urls: BTreeSet<&str> = c2_pages.iter().map(|p| p.url.as_str()).collect();
    let c1_urls: BTreeSet<&str> = first_pages.iter().filter_map(|p| p.get_str("_id").ok()).collect();
    // (Read from c2's own collection, which names the crawl: its pages
    // do not repeat the crawl id.)
    assert_eq!(c2_urls, c1_urls, "crawl c2 did not store the same web");
    assert_eq!(
        pages_of_c1().await,
        second_pages,
        "crawl c2 changed crawl c1's pages"
    );
    assert_eq!(
        all_docs(&db, &c1_coll(store::SEGMENTS)).await.unwrap(),
        segments_after,
        "crawl c2 changed crawl c1's frontier"
    );
    assert!(
        server.request_count() >= requests_after_first + after_first,
        "crawl c2 did not fetch the pages again"
    );
    // Nothing went to the default crawl's collections.
    assert!(all_docs(&db, &crawl_coll(store::PAGES)).await.unwrap().is_empty());

    // A seed on the open web needs a user agent that names someone; the
    // refused seed is not stored.
    let open_web = write_lines(dir.path(), "open.txt", &["https://example.org/".to_string()]).unwrap();
    let out = std::process::Command::new(bin("dispatcher").unwrap())
        .env("CRAWLER_MONGO_URI", &store.uri)
        .env(
            shared::debug_token::TOKEN_FILE_ENV,
            dir.path().join("debug_token"),
        )
        .args([
            "--config",
            config.to_str().unwrap(),
            "--insecure-cluster",
            "--seeds",
        ])
        .arg(&open_web)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "a crawl of the open web ran with the default user agent: {stderr}"
    );
    assert!(stderr.contains("--user-agent"), "{stderr}");
    let seeds = all_docs(&db, &c1_coll(store::SEEDS)).await.unwrap();
    assert!(
        seeds
            .iter()
            .all(|d| d.get_str("_id") != Ok("https://example.org/")),
        "the refused seed was stored"
    );
    server.stop(Duration::from_secs(5)).await;
}
