//! Sitemaps: robots.txt names a sitemap index, which
//! points to gzipped and plain sitemaps listing pages no link reaches;
//! they are crawled, robots.txt still rules, off-site URLs are not taken,
//! and a broken sitemap, a gzip bomb and a feed that is no sitemap each
//! cost only themselves. In a crawl that revisits, a `<lastmod>` newer
//! than a page's capture makes the page due at once; with
//! `--guess-sitemap`, a sitemap robots.txt does not name is found at
//! `/sitemap.xml`. The whole cluster runs in the test process
//! (`crawl_tests::in_process`), but for the revisit test, which stops the
//! dispatcher with a signal.

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::{header, HeaderMap, StatusCode, Uri};
use axum::response::IntoResponse;
use crawl_tests::harness::{
    all_docs, all_pages, flags, signal, spawn_crawl, write_lines, ClusterSpec, StoreServer,
};
use crawl_tests::in_process::run_in_process;
use crawl_tests::verify;
use store::docs::SitemapKind;

/// Sitemaps may hold this much XML (crawler-child/src/sitemap.rs).
const MAX_XML_BYTES: usize = 50 * 1024 * 1024;

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut z = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    z.write_all(bytes).unwrap();
    z.finish().unwrap()
}

fn urlset(locs: &[String]) -> String {
    let urls: String = locs
        .iter()
        .map(|l| format!("<url><loc>{l}</loc></url>\n"))
        .collect();
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\">\n{urls}</urlset>\n"
    )
}

/// The site's files by path: (content type, body).
fn site(port: u16) -> BTreeMap<String, (&'static str, Vec<u8>)> {
    let here = format!("http://maps.test:{port}");
    let other = format!("http://other.test:{port}");
    let html = |body: &str| {
        (
            "text/html",
            format!("<html><body>{body}</body></html>").into_bytes(),
        )
    };
    let mut files = BTreeMap::new();
    files.insert(
        "/robots.txt".to_string(),
        (
            "text/plain",
            format!(
                "User-agent: *\nDisallow: /private/\n\nSitemap: {here}/sitemap_index.xml\nSitemap: {other}/sitemap.xml\nSitemap: {here}/private/hidden.xml\n"
            )
            .into_bytes(),
        ),
    );
    files.insert("/".into(), html(r#"<a href="/about">about</a>"#));
    files.insert("/about".into(), html("no links"));
    let index: String = [
        format!("{here}/maps/one.xml.gz"),
        format!("{here}/maps/two.xml"),
        format!("{here}/maps/broken.xml"),
        format!("{here}/maps/bomb.xml.gz"),
        format!("{here}/maps/feed.xml"),
        format!("{other}/maps/x.xml"),
    ]
    .iter()
    .map(|l| format!("<sitemap><loc>{l}</loc></sitemap>"))
    .collect();
    files.insert(
        "/sitemap_index.xml".into(),
        (
            "application/xml",
            format!(
                "<sitemapindex xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\">{index}</sitemapindex>"
            )
            .into_bytes(),
        ),
    );
    let mut one: Vec<String> = (0..20).map(|i| format!("{here}/orphan/{i}")).collect();
    one.push(format!("{here}/private/secret"));
    one.push(format!("{other}/orphan/x"));
    one.push(format!("{here}/orphan/q?a=1&amp;b=2"));
    files.insert(
        "/maps/one.xml.gz".into(),
        ("application/gzip", gzip(urlset(&one).as_bytes())),
    );
    let two: Vec<String> = (20..30)
        .map(|i| format!("<![CDATA[{here}/orphan/{i}]]>"))
        .collect();
    files.insert("/maps/two.xml".into(), ("text/xml", urlset(&two).into_bytes()));
    files.insert(
        "/maps/broken.xml".into(),
        (
            "text/xml",
            format!("<urlset><url><loc>{here}/orphan/30</loc></url></wrong><url><loc>{here}/orphan/31</loc></url></urlset>").into_bytes(),
        ),
    );
    let mut bomb = format!("<urlset><url><loc>{here}/orphan/40</loc></url>");
    bomb.push_str(&" ".repeat(MAX_XML_BYTES + 1024));
    bomb.push_str(&format!("<url><loc>{here}/orphan/41</loc></url></urlset>"));
    files.insert(
        "/maps/bomb.xml.gz".into(),
        ("application/x-gzip", gzip(bomb.as_bytes())),
    );
    files.insert(
        "/maps/feed.xml".into(),
        (
            "application/rss+xml",
            format!("<rss><channel><item><link>{here}/orphan/50</link></item></channel></rss>").into_bytes(),
        ),
    );
    for i in (0..31).chain([40, 41, 50]) {
        files.insert(format!("/orphan/{i}"), html(&format!("orphan {i}")));
    }
    files.insert("/orphan/q".into(), html("with a query"));
    files.insert("/private/secret".into(), html("secret"));
    files.insert(
        "/private/hidden.xml".into(),
        ("text/xml", urlset(&[format!("{here}/orphan/50")]).into_bytes()),
    );
    files
}

/// Serves [`site`] to every host name, logging (host, path) of each request.
async fn serve(asked: Arc<Mutex<Vec<(String, String)>>>) -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let files = Arc::new(site(port));
    let app = axum::Router::new().fallback(move |uri: Uri, headers: HeaderMap| {
        let (asked, files) = (asked.clone(), files.clone());
        async move {
            let host = headers
                .get(header::HOST)
                .and_then(|h| h.to_str().ok())
                .and_then(|h| h.split(':').next())
                .unwrap_or_default()
                .to_string();
            let path = uri.path().to_string();
            asked.lock().unwrap().push((host.clone(), path.clone()));
            match files.get(&path).filter(|_| host == "maps.test") {
                Some((kind, body)) => ([(header::CONTENT_TYPE, *kind)], body.clone()).into_response(),
                None => StatusCode::NOT_FOUND.into_response(),
            }
        }
    });
    tokio::spawn(async move { axum::serve(listener, app).await });
    port
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sitemaps_from_robots_txt_reach_pages_no_link_reaches() {
    let dir = tempfile::tempdir().unwrap();
    let store = StoreServer::start().unwrap();
    let asked = Arc::new(Mutex::new(Vec::new()));
    let port = serve(asked.clone()).await;
    let seeds = write_lines(dir.path(), "seeds", &[format!("http://maps.test:{port}/")]).unwrap();
    let mut spec = ClusterSpec::new(&store.uri, &seeds);
    // other.test is served too: a URL of it wrongly taken would be fetched.
    let hosts = [
        "127.0.0.1 maps.test".to_string(),
        "127.0.0.1 other.test".to_string(),
    ];
    spec.hosts_file = Some(write_lines(dir.path(), "hosts", &hosts).unwrap());
    spec.supervisors = 1;
    spec.children = 2;
    spec.dispatcher_args = flags("--min-delay-ms 5 --progress-secs 0");
    let run = run_in_process(&spec, Duration::from_secs(180)).await.unwrap();
    verify::assert_finished(&run);

    let asked = asked.lock().unwrap().clone();
    let mut times: BTreeMap<&str, usize> = BTreeMap::new();
    for (host, path) in &asked {
        assert_eq!(host, "maps.test", "a request to another site: {path}");
        *times.entry(path.as_str()).or_default() += 1;
    }
    let mut want: Vec<String> = [
        "/robots.txt",
        "/",
        "/about",
        "/sitemap_index.xml",
        "/maps/one.xml.gz",
        "/maps/two.xml",
        "/maps/broken.xml",
        "/maps/bomb.xml.gz",
        "/maps/feed.xml",
        "/orphan/q",
        "/orphan/30",
        "/orphan/40",
    ]
    .map(str::to_string)
    .to_vec();
    want.extend((0..30).map(|i| format!("/orphan/{i}")));
    for path in &want {
        assert_eq!(times.get(path.as_str()), Some(&1), "{path} requests: {times:?}");
    }
    // Disallowed (a listed page, a sitemap named in robots.txt), after the
    // break of a broken sitemap or past a bomb's bound, or in a feed.
    for never in [
        "/private/secret",
        "/private/hidden.xml",
        "/orphan/31",
        "/orphan/41",
        "/orphan/50",
    ] {
        assert!(!times.contains_key(never), "{never} was requested");
    }
    assert_eq!(times.len(), want.len(), "{times:?}");

    // The store says which bodies were sitemaps and which stopped early.
    let db = store.client().await.unwrap().database("crawler");
    let pages = all_pages(&db, &Default::default()).await.unwrap();
    assert_eq!(
        pages.len(),
        want.len() - 1,
        "every URL but robots.txt stored once"
    );
    let by_path: BTreeMap<String, &store::docs::PageDoc> = pages
        .iter()
        .map(|p| (url::Url::parse(&p.url).unwrap().path().to_string(), p))
        .collect();
    let sitemap = |path: &str| {
        let p = by_path[path];
        (p.sitemap, p.sitemap_stopped.is_some(), p.outlinks)
    };
    assert_eq!(
        sitemap("/sitemap_index.xml"),
        (Some(SitemapKind::Index), false, Some(5))
    );
    assert_eq!(
        by_path["/sitemap_index.xml"].outlinks_dropped,
        Some(1),
        "the off-site sitemap"
    );
    assert_eq!(
        sitemap("/maps/one.xml.gz"),
        (Some(SitemapKind::Urlset), false, Some(22))
    );
    assert_eq!(
        sitemap("/maps/two.xml"),
        (Some(SitemapKind::Urlset), false, Some(10))
    );
    assert_eq!(
        sitemap("/maps/broken.xml"),
        (Some(SitemapKind::Urlset), true, Some(1))
    );
    assert_eq!(
        sitemap("/maps/bomb.xml.gz"),
        (Some(SitemapKind::Urlset), true, Some(1))
    );
    assert_eq!(sitemap("/maps/feed.xml").0, None);
    assert_eq!(sitemap("/orphan/3").0, None);
}

/// One request of the lastmod site: path, the `If-None-Match` it sent,
/// and the status answered.
type Asked = (String, Option<String>, u16);

/// A site for lastmods: `/` links to `/p/0` .. `/p/9`, each with an ETag
/// that never changes (a conditional request gets 304); robots.txt names
/// `/sitemap.xml`, which lists the ten pages, `/p/0` .. `/p/4` with a
/// lastmod in the future (changed since any capture) and `/p/5` .. `/p/9`
/// with one long past.
async fn serve_lastmods(asked: Arc<Mutex<Vec<Asked>>>) -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let here = format!("http://dated.test:{port}");
    let app = axum::Router::new().fallback(move |uri: Uri, headers: HeaderMap| {
        let (asked, here) = (asked.clone(), here.clone());
        async move {
            let path = uri.path().to_string();
            let inm = headers
                .get(header::IF_NONE_MATCH)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string);
            let etag = format!("\"{path}\"");
            let (status, kind, body) = match path.as_str() {
                "/robots.txt" => (
                    200,
                    "text/plain",
                    format!("User-agent: *\nSitemap: {here}/sitemap.xml\n"),
                ),
                "/" => (
                    200,
                    "text/html",
                    (0..10).map(|i| format!("<a href=\"/p/{i}\">{i}</a>")).collect(),
                ),
                "/sitemap.xml" => {
                    let urls: String = (0..10)
                        .map(|i| {
                            let lastmod = if i < 5 { "2100-01-01" } else { "2000-01-01T00:00Z" };
                            format!("<url><loc>{here}/p/{i}</loc><lastmod>{lastmod}</lastmod></url>")
                        })
                        .collect();
                    (200, "application/xml", format!("<urlset>{urls}</urlset>"))
                }
                p if p.starts_with("/p/") && inm.as_deref() == Some(etag.as_str()) => {
                    (304, "text/html", String::new())
                }
                p if p.starts_with("/p/") => {
                    (200, "text/html", format!("<html><body>page {p}</body></html>"))
                }
                _ => (404, "text/html", String::new()),
            };
            asked.lock().unwrap().push((path, inm, status));
            let status = StatusCode::from_u16(status).unwrap();
            (
                status,
                [(header::CONTENT_TYPE, kind.to_string()), (header::ETAG, etag)],
                body,
            )
                .into_response()
        }
    });
    tokio::spawn(async move { axum::serve(listener, app).await });
    port
}

/// A crawl that revisits only hourly: a sitemap's lastmod newer than a
/// stored page's capture makes that page due at once (asked again,
/// conditionally, within the test), one long past leaves it alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sitemap_lastmod_makes_a_changed_page_due_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let store = StoreServer::start().unwrap();
    let asked = Arc::new(Mutex::new(Vec::new()));
    let port = serve_lastmods(asked.clone()).await;
    let seeds = write_lines(dir.path(), "seeds", &[format!("http://dated.test:{port}/")]).unwrap();
    let mut spec = ClusterSpec::new(&store.uri, &seeds);
    spec.hosts_file = Some(write_lines(dir.path(), "hosts", &["127.0.0.1 dated.test".to_string()]).unwrap());
    spec.supervisors = 1;
    spec.children = 1;
    spec.dispatcher_args = flags("--min-delay-ms 5 --progress-secs 1 --revisit-after 1h");
    let mut crawl = spawn_crawl(&spec).await.unwrap();

    let newer: Vec<String> = (0..5).map(|i| format!("/p/{i}")).collect();
    let times = |path: &str| asked.lock().unwrap().iter().filter(|(p, _, _)| p == path).count();
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    let db = store.client().await.unwrap().database("crawler");
    while !newer.iter().all(|p| times(p) >= 2) {
        if std::time::Instant::now() > deadline {
            // What the store says of each page's schedule, to tell why.
            for p in all_docs(&db, &store::CrawlId::default().collection(store::PAGES))
                .await
                .unwrap()
            {
                eprintln!(
                    "{:?} due {:?} revisit {:?}",
                    p.get_str("_id"),
                    p.get("due_ms"),
                    p.get("revisit")
                );
            }
            panic!(
                "pages with a newer lastmod were not asked again: {:?}",
                asked.lock().unwrap()
            );
        }
        assert!(!crawl.dispatcher_exited(), "a revisiting crawl ended by itself");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    // A little longer: nothing else is due.
    tokio::time::sleep(Duration::from_secs(3)).await;
    signal(crawl.dispatcher_pid().unwrap(), libc::SIGTERM);
    let run = crawl.wait(Duration::from_secs(60)).await.unwrap();
    verify::assert_exited_ok(&run);

    let asked = asked.lock().unwrap().clone();
    let sitemap_at = asked
        .iter()
        .position(|(p, _, _)| p == "/sitemap.xml")
        .expect("the sitemap was read");
    for i in 0..10 {
        let path = format!("/p/{i}");
        let visits: Vec<(usize, &Asked)> = asked.iter().enumerate().filter(|(_, a)| a.0 == path).collect();
        assert!(
            visits[0].0 < sitemap_at,
            "{path} was stored before the sitemap was read: {asked:?}"
        );
        assert_eq!(visits[0].1 .2, 200, "{path}: its first visit");
        if i < 5 {
            assert_eq!(
                visits.len(),
                2,
                "{path}: a lastmod after its capture makes it due now: {asked:?}"
            );
            let etag = format!("\"{path}\"");
            assert_eq!(
                visits[1].1 .1.as_deref(),
                Some(etag.as_str()),
                "{path}: asked conditionally"
            );
            assert_eq!(visits[1].1 .2, 304);
        } else {
            assert_eq!(
                visits.len(),
                1,
                "{path}: a lastmod before its capture changes nothing: {asked:?}"
            );
        }
    }
    for once in ["/", "/robots.txt", "/sitemap.xml"] {
        assert_eq!(
            asked.iter().filter(|a| a.0 == once).count(),
            1,
            "{once}: {asked:?}"
        );
    }

    // The revisits are captures, and moved each page's due time an hour on.
    let captures = all_docs(&db, &store::CrawlId::default().collection(store::CAPTURES))
        .await
        .unwrap();
    let revisited: std::collections::BTreeSet<String> = captures
        .iter()
        .map(|c| {
            assert_eq!(c.get_str("kind"), Ok("not_modified"));
            let url = c.get_document("_id").unwrap().get_str("url").unwrap();
            url::Url::parse(url).unwrap().path().to_string()
        })
        .collect();
    assert_eq!(revisited, newer.iter().cloned().collect(), "captures");
    let now_ms = store::docs::PageDoc::new(String::new(), String::new(), 0, 0, 0)
        .fetched_at
        .timestamp_millis();
    for p in all_pages(&db, &Default::default()).await.unwrap() {
        let due = p.due_ms.expect("a page of a revisiting crawl has a due time");
        assert!(
            due > now_ms + 50 * 60_000,
            "{} due in {} s",
            p.url,
            (due - now_ms) / 1000
        );
    }
}

/// With `--guess-sitemap`, a site whose robots.txt names no sitemap has
/// `/sitemap.xml` asked for once, and the pages it lists are crawled,
/// robots.txt still ruling.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unnamed_sitemap_is_guessed_when_asked_to() {
    let dir = tempfile::tempdir().unwrap();
    let store = StoreServer::start().unwrap();
    let asked = Arc::new(Mutex::new(Vec::<String>::new()));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let here = format!("http://guess.test:{port}");
    let log = asked.clone();
    let app = axum::Router::new().fallback(move |uri: Uri| {
        let (log, here) = (log.clone(), here.clone());
        async move {
            let path = uri.path().to_string();
            log.lock().unwrap().push(path.clone());
            let (kind, body) = match path.as_str() {
                "/robots.txt" => ("text/plain", "User-agent: *\nDisallow: /private/\n".to_string()),
                "/" => ("text/html", "<html><body>no links</body></html>".to_string()),
                "/sitemap.xml" => (
                    "application/xml",
                    urlset(&[format!("{here}/hidden"), format!("{here}/private/x")]),
                ),
                "/hidden" | "/private/x" => ("text/html", "<html><body>listed</body></html>".to_string()),
                _ => return StatusCode::NOT_FOUND.into_response(),
            };
            ([(header::CONTENT_TYPE, kind)], body).into_response()
        }
    });
    tokio::spawn(async move { axum::serve(listener, app).await });
    let seeds = write_lines(dir.path(), "seeds", &[format!("http://guess.test:{port}/")]).unwrap();
    let mut spec = ClusterSpec::new(&store.uri, &seeds);
    spec.hosts_file = Some(write_lines(dir.path(), "hosts", &["127.0.0.1 guess.test".to_string()]).unwrap());
    spec.supervisors = 1;
    spec.children = 1;
    spec.dispatcher_args = flags("--min-delay-ms 5 --progress-secs 0 --guess-sitemap");
    let run = run_in_process(&spec, Duration::from_secs(120)).await.unwrap();
    verify::assert_finished(&run);

    let mut asked = asked.lock().unwrap().clone();
    asked.sort();
    assert_eq!(asked, ["/", "/hidden", "/robots.txt", "/sitemap.xml"]);
    let db = store.client().await.unwrap().database("crawler");
    let pages = all_pages(&db, &Default::default()).await.unwrap();
    let sitemap = pages
        .iter()
        .find(|p| p.url.ends_with("/sitemap.xml"))
        .expect("the guessed sitemap stored");
    assert_eq!(sitemap.sitemap, Some(SitemapKind::Urlset));
}
