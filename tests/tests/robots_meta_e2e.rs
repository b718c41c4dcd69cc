//! Robots meta tags and `X-Robots-Tag`, with the whole cluster in the
//! test process (`crawl_tests::in_process`): `nofollow` (ours,
//! or for our agent by name) keeps a page's links from being followed,
//! `noindex` and `noarchive` are recorded with the page, another robot's
//! directives are ignored, `rel=nofollow` links are followed by default,
//! and `pages export --respect-noarchive` leaves the noarchive pages out.

use std::collections::BTreeMap;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::{header, HeaderMap, StatusCode, Uri};
use axum::response::IntoResponse;
use crawl_tests::harness::{all_pages, bin, flags, write_lines, ClusterSpec, StoreServer};
use crawl_tests::in_process::run_in_process;
use crawl_tests::verify;
use store::docs::RobotsDirectives;

/// Each page: its `<head>` extra, its `X-Robots-Tag` header, and the
/// directives the crawl must record for it. Each links to `/from<path>`.
const PAGES: &[(&str, &str, Option<&str>, [bool; 3])] = &[
    (
        "/meta-nofollow",
        r#"<meta name="robots" content="nofollow">"#,
        None,
        [false, true, false],
    ),
    (
        "/meta-none",
        r#"<meta name="ROBOTS" content="none">"#,
        None,
        [true, true, false],
    ),
    (
        "/meta-noindex",
        r#"<meta name="robots" content="noindex, noarchive">"#,
        None,
        [true, false, true],
    ),
    (
        "/meta-ours",
        r#"<meta name="SynthCrawler" content="nofollow">"#,
        None,
        [false, true, false],
    ),
    (
        "/meta-other",
        r#"<meta name="otherbot" content="noindex, nofollow">"#,
        None,
        [false, false, false],
    ),
    ("/header-nofollow", "", Some("nofollow"), [false, true, false]),
    (
        "/header-ours",
        "",
        Some("synthcrawler: noarchive"),
        [false, false, true],
    ),
    (
        "/header-other",
        "",
        Some("otherbot: noindex, nofollow"),
        [false, false, false],
    ),
    ("/rel-nofollow", "", None, [false, false, false]),
];

fn directives([noindex, nofollow, noarchive]: [bool; 3]) -> RobotsDirectives {
    RobotsDirectives {
        noindex,
        nofollow,
        noarchive,
    }
}

/// Serves [`PAGES`] (and `/`, linking to them all), logging each path asked.
async fn serve(asked: Arc<Mutex<Vec<String>>>) -> u16 {
    let app = axum::Router::new().fallback(move |uri: Uri| {
        let asked = asked.clone();
        async move {
            let path = uri.path().to_string();
            if path == "/robots.txt" {
                return StatusCode::NOT_FOUND.into_response();
            }
            asked.lock().unwrap().push(path.clone());
            let mut headers = HeaderMap::new();
            headers.insert(header::CONTENT_TYPE, "text/html".parse().unwrap());
            let (head, body) = match PAGES.iter().find(|p| p.0 == path) {
                Some((_, head, tag, _)) => {
                    if let Some(tag) = tag {
                        headers.insert("x-robots-tag", tag.parse().unwrap());
                    }
                    let rel = if path == "/rel-nofollow" {
                        r#" rel="nofollow""#
                    } else {
                        ""
                    };
                    (*head, format!(r#"<a{rel} href="/from{path}">next</a>"#))
                }
                None if path == "/" => (
                    "",
                    PAGES
                        .iter()
                        .map(|p| format!(r#"<a href="{}">p</a>"#, p.0))
                        .collect(),
                ),
                None => ("", String::new()),
            };
            let html = format!("<html><head><title>{path}</title>{head}</head><body>{body}</body></html>");
            (headers, html).into_response()
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(listener, app).await });
    port
}

/// The URLs in a `pages export --format jsonl` of the store at `uri`,
/// with their `robots` field.
fn exported(uri: &str, out: &std::path::Path, extra: &[&str]) -> BTreeMap<String, Option<String>> {
    let status = Command::new(bin("pages").unwrap())
        .env("CRAWLER_MONGO_URI", uri)
        .args(["export", "--format", "jsonl", "--out", out.to_str().unwrap()])
        .args(extra)
        .status()
        .unwrap();
    assert!(status.success(), "pages export {extra:?}: {status}");
    let lines = std::fs::read_to_string(out.join("pages-00000.jsonl")).unwrap();
    lines
        .lines()
        .map(|l| {
            let row: serde_json::Value = serde_json::from_str(l).unwrap();
            let robots = row["robots"].as_str().map(str::to_string);
            (row["url"].as_str().unwrap().to_string(), robots)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn robots_meta_and_headers_are_obeyed_and_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let store = StoreServer::start().unwrap();
    let asked = Arc::new(Mutex::new(Vec::new()));
    let port = serve(asked.clone()).await;
    let seeds = write_lines(dir.path(), "seeds", &[format!("http://meta.test:{port}/")]).unwrap();
    let mut spec = ClusterSpec::new(&store.uri, &seeds);
    spec.hosts_file = Some(write_lines(dir.path(), "hosts", &["127.0.0.1 meta.test".to_string()]).unwrap());
    spec.supervisors = 1;
    spec.children = 1;
    spec.dispatcher_args = flags("--min-delay-ms 5 --progress-secs 0");
    let run = run_in_process(&spec, Duration::from_secs(120)).await.unwrap();
    verify::assert_finished(&run);

    // The followed pages' links were fetched; the nofollow pages' were not.
    let asked = asked.lock().unwrap().clone();
    for (path, _, _, [_, nofollow, _]) in PAGES {
        let next = format!("/from{path}");
        assert_eq!(
            asked.contains(&next),
            !nofollow,
            "{next} fetched: {}",
            asked.contains(&next)
        );
    }
    // What each page said is stored with it.
    let db = store.client().await.unwrap().database("crawler");
    let pages = all_pages(&db, &Default::default()).await.unwrap();
    let by_path: BTreeMap<String, RobotsDirectives> = pages
        .iter()
        .map(|p| (url::Url::parse(&p.url).unwrap().path().to_string(), p.robots))
        .collect();
    for (path, _, _, expected) in PAGES {
        assert_eq!(by_path.get(*path), Some(&directives(*expected)), "{path}");
    }
    assert_eq!(
        by_path.len(),
        1 + PAGES.len() + PAGES.iter().filter(|p| !p.3[1]).count()
    );

    // The export keeps every page, or leaves the noarchive ones out.
    let all = exported(&store.uri, &dir.path().join("all"), &[]);
    let kept = exported(&store.uri, &dir.path().join("kept"), &["--respect-noarchive"]);
    assert_eq!(all.len(), by_path.len());
    let noarchive: Vec<String> = PAGES
        .iter()
        .filter(|p| p.3[2])
        .map(|p| format!("http://meta.test:{port}{}", p.0))
        .collect();
    assert_eq!(noarchive.len(), 2);
    assert_eq!(kept.len(), all.len() - noarchive.len());
    assert!(noarchive
        .iter()
        .all(|u| all.contains_key(u) && !kept.contains_key(u)));
    // The export says what each page asked.
    let meta_none = format!("http://meta.test:{port}/meta-none");
    assert_eq!(all[&meta_none].as_deref(), Some("noindex,nofollow"));
    assert_eq!(all[&format!("http://meta.test:{port}/")], None);
}
