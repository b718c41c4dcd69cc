//! Revisits on real processes: a crawl told to revisit (`--revisit-after`)
//! keeps running, asks again for every stored page when it is due, with
//! `If-None-Match`/`If-Modified-Since` from what the page was served with;
//! the synthetic web's unchanged pages answer 304 and cost no body, its
//! changing pages are stored anew as captures, and each page's schedule
//! moves on.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use crawl_tests::harness::{all_docs, all_pages, flags, signal, spawn_crawl, ClusterSpec, StoreServer};
use crawl_tests::verify;
use crawl_tests::web::{Changing, WebExtras, WebServer, WebSpec};
use store::docs::{CaptureDoc, CaptureKind, PageDoc};
use store::CrawlId;

/// The changing pages' period: shorter than the revisit interval, so every
/// changing page has a new version at each revisit.
const CHANGE_EVERY: Duration = Duration::from_secs(1);
const REVISIT_AFTER: &str = "3s";

fn host_path(url: &str) -> (String, String) {
    let u = url::Url::parse(url).unwrap();
    let host = u.host_str().unwrap().to_string();
    let host = match u.port() {
        Some(p) => format!("{host}:{p}"),
        None => host,
    };
    (host, u[url::Position::BeforePath..].to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revisit_asks_conditionally_and_stores_only_what_changed() {
    let dir = tempfile::tempdir().unwrap();
    let store = StoreServer::start().unwrap();
    let spec = WebSpec {
        seed: 11,
        hosts: 3,
        outside_hosts: 0,
        pages_per_host: 20,
        ..WebSpec::default()
    };
    let extras = WebExtras {
        changing: Some(Changing {
            every: CHANGE_EVERY,
            share_percent: 30,
        }),
        ..WebExtras::default()
    };
    let server = WebServer::local_with(spec, extras).await;
    let web = server.web();
    let mut cluster = ClusterSpec::for_web(&store.uri, &server, dir.path()).unwrap();
    cluster.supervisors = 1;
    cluster.dispatcher_args = flags(&format!(
        "--min-delay-ms 5 --max-depth 100 --progress-secs 1 --revisit-after {REVISIT_AFTER}"
    ));
    let mut crawl = spawn_crawl(&cluster).await.unwrap();
    let db = store.client().await.unwrap().database("crawler");
    let captures_coll = format!("{}__captures", CrawlId::DEFAULT);

    // Until every stored page has been revisited at least once.
    let deadline = Instant::now() + Duration::from_secs(240);
    let (pages, captures) = loop {
        assert!(Instant::now() < deadline, "not every page was revisited in time");
        assert!(!crawl.dispatcher_exited(), "a revisiting crawl ended by itself");
        tokio::time::sleep(Duration::from_millis(500)).await;
        let pages = all_pages(&db, &CrawlId::default()).await.unwrap();
        let docs = all_docs(&db, &captures_coll).await.unwrap();
        let captures: Vec<CaptureDoc> = docs
            .into_iter()
            .map(|d| bson::from_document(d).unwrap())
            .collect();
        let revisited: std::collections::HashSet<&str> = captures.iter().map(|c| c.id.url.as_str()).collect();
        if pages.len() > 10 && pages.iter().all(|p| revisited.contains(p.url.as_str())) {
            break (pages, captures);
        }
    };
    signal(crawl.dispatcher_pid().unwrap(), libc::SIGTERM);
    let run = crawl.wait(Duration::from_secs(60)).await.unwrap();
    verify::assert_exited_ok(&run);

    let by_url: HashMap<&str, &PageDoc> = pages.iter().map(|p| (p.url.as_str(), p)).collect();
    let mut kinds: BTreeMap<&str, usize> = BTreeMap::new();
    let (mut changing_seen, mut still_seen) = (0, 0);
    for c in &captures {
        let page = by_url[c.id.url.as_str()];
        let kind = match c.kind {
            CaptureKind::Changed => "changed",
            CaptureKind::NotModified => "not_modified",
            CaptureKind::SamePayload => "same_payload",
        };
        *kinds.entry(kind).or_default() += 1;
        assert!(
            c.page.due_ms.is_none() && c.page.revisit.is_none(),
            "a capture carries no schedule"
        );
        assert!(
            c.id.at > page.fetched_at.timestamp_millis(),
            "a capture after its first visit"
        );
        if page.status != 200 {
            continue;
        }
        let (host, path) = host_path(page.final_url.as_deref().unwrap_or(&page.url));
        if web.changes(&host, &path) {
            changing_seen += 1;
            assert_eq!(c.kind, CaptureKind::Changed, "{} changes: {c:?}", page.url);
            assert!(c.page.body.is_some(), "a changed page keeps its new body");
            assert_ne!(
                c.page.payload_sha1, page.payload_sha1,
                "a new version, a new digest"
            );
            let sent = c
                .page
                .request_head
                .as_ref()
                .map(|h| String::from_utf8_lossy(&h.0).to_string());
            assert!(
                sent.unwrap_or_default().contains("if-none-match"),
                "asked conditionally"
            );
        } else {
            still_seen += 1;
            assert_eq!(
                c.kind,
                CaptureKind::NotModified,
                "{} does not change: {c:?}",
                page.url
            );
            assert_eq!(c.page.status, 304);
            assert!(c.page.body.is_none());
            let first = store::exchange::fetch_started(page).unwrap_or(page.fetched_at);
            assert_eq!(c.refers_to, Some(first), "refers to the first capture's response");
        }
    }
    assert!(
        changing_seen > 0 && still_seen > 0,
        "both kinds of page revisited: {kinds:?}"
    );

    // The server's word: it answered 304 exactly as often as captures say.
    let requests = server.requests();
    let not_modified = requests.iter().filter(|r| r.status == 304).count();
    let stored_304 = captures
        .iter()
        .filter(|c| c.kind == CaptureKind::NotModified)
        .count();
    // A 304 answered after the last read of the captures may not be in it.
    assert!(
        not_modified >= stored_304 && not_modified > 0,
        "{not_modified} 304s served, {stored_304} stored"
    );

    // Each page's schedule moved past its last capture.
    let pages_now = all_pages(&db, &CrawlId::default()).await.unwrap();
    for p in &pages_now {
        let last = captures
            .iter()
            .filter(|c| c.id.url == p.url)
            .map(|c| c.id.at)
            .max()
            .unwrap_or(0);
        let due = p.due_ms.expect("a page of a revisiting crawl has a due time");
        assert!(due > last, "{} due {due} before its last visit {last}", p.url);
        assert!(p.revisit.is_some());
    }
    // Everything as WARC: each page's response, each later visit's response
    // (changed) or revisit record (unchanged), digests verified by warcio,
    // and the CDXJ index beside the file read back at its offsets.
    let all: Vec<CaptureDoc> = all_docs(&db, &captures_coll)
        .await
        .unwrap()
        .into_iter()
        .map(|d| bson::from_document(d).unwrap())
        .collect();
    let out = dir.path().join("warc");
    crate::export_e2e::export(&store.uri, "warc", &out);
    let file = out.join("pages-00000.warc.gz");
    let (ok, text) = crate::export_e2e::warcio(&["check", "-v", file.to_str().unwrap()]);
    assert!(ok, "warcio check:\n{text}");
    let records = crate::export_e2e::warcio_index(
        "warc-type,warc-target-uri,warc-profile,warc-refers-to-date,warc-payload-digest,http:status,length",
        &file,
        "",
    );
    let of = |t: &str| records.iter().filter(|r| r["warc-type"] == t).collect::<Vec<_>>();
    let changed = all.iter().filter(|c| c.kind == CaptureKind::Changed).count();
    let robots_coll = CrawlId::default().collection(store::ROBOTS_TXT);
    let robots_txt = all_docs(&db, &robots_coll).await.unwrap().len();
    assert!(
        robots_txt >= 3,
        "{robots_txt} robots.txt responses kept, for 3 hosts"
    );
    assert_eq!(
        of("response").len(),
        pages_now.len() + changed + robots_txt,
        "a response per page, per change and per robots.txt response"
    );
    let revisits = of("revisit");
    assert_eq!(
        revisits.len(),
        all.len() - changed,
        "a revisit record per unchanged visit"
    );
    for r in &revisits {
        let profile = r["warc-profile"].as_str().unwrap_or_default();
        match profile.rsplit('/').next() {
            Some("server-not-modified") => {
                // No head in the block (it would replay as an empty 304):
                // the 304 is in the metadata record, checked below.
                assert!(r["http:status"].is_null(), "{r}");
                assert!(r["warc-payload-digest"].is_null(), "a 304 had no payload: {r}");
            }
            _ => {
                assert!(profile.ends_with("/identical-payload-digest"), "{r}");
                assert!(
                    r["warc-payload-digest"]
                        .as_str()
                        .is_some_and(|d| d.starts_with("sha1:")),
                    "{r}"
                );
            }
        }
        assert!(r["warc-refers-to-date"].as_str().is_some(), "{r}");
    }
    // Each 304 is in the metadata record concurrent to its revisit, as
    // received: its status line and headers.
    let metadata_304 = crate::export_e2e::warcio_304_metadata(&file);
    assert_eq!(
        metadata_304,
        all.iter().filter(|c| c.kind == CaptureKind::NotModified).count(),
        "a metadata record with the 304's head per 304"
    );
    let cdxj = crate::export_e2e::check_cdxj(&file);
    assert_eq!(cdxj["sorted"], true, "{cdxj}");
    assert_eq!(cdxj["same_as_cdxj_indexer"], true, "{cdxj}");
    assert_eq!(
        cdxj["read_at_offsets"],
        records
            .iter()
            .filter(|r| r["warc-type"] != "request"
                && r["warc-type"] != "metadata"
                && r["warc-type"] != "warcinfo")
            .count(),
        "{cdxj}"
    );
    let replayed = crate::replay_e2e::check(&out, &pages_now, &all).await;
    eprintln!("revisits: {replayed}");
    let warc_bytes = std::fs::metadata(&file).unwrap().len();
    // What the unchanged visits cost in the WARC file, against the first
    // visits' responses of the same URLs (what a full refetch would write
    // again).
    let length = |r: &serde_json::Value| {
        let l = &r["length"];
        l.as_u64().or_else(|| l.as_str()?.parse().ok()).unwrap_or(0)
    };
    let revisit_warc: u64 = revisits.iter().map(|r| length(r)).sum();
    let unchanged: std::collections::HashSet<&str> = revisits
        .iter()
        .filter_map(|r| r["warc-target-uri"].as_str())
        .collect();
    let first_warc: u64 = of("response")
        .iter()
        .filter(|r| {
            r["warc-target-uri"]
                .as_str()
                .is_some_and(|u| unchanged.contains(u))
        })
        .map(|r| length(r))
        .sum();

    let first_bytes: i64 = pages.iter().map(|p| p.bytes).sum();
    let revisit_bytes: i64 = captures.iter().map(|c| c.page.bytes).sum();
    eprintln!(
        "revisits: {} pages, {} captures {kinds:?}; {} requests, {not_modified} answered 304; body bytes: first visits {first_bytes}, revisits {revisit_bytes}; WARC {warc_bytes} bytes, {} records ({} revisit: {revisit_warc} bytes, against {first_warc} for the responses they repeat)",
        pages.len(),
        captures.len(),
        requests.len(),
        records.len(),
        revisits.len(),
    );
}
