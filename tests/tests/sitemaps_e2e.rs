//! Sitemaps on real processes: robots.txt names a sitemap index, which
//! points to gzipped and plain sitemaps listing pages no link reaches;
//! they are crawled, robots.txt still rules, off-site URLs are not taken,
//! and a broken sitemap, a gzip bomb and a feed that is no sitemap each
//! cost only themselves.

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::{header, HeaderMap, StatusCode, Uri};
use axum::response::IntoResponse;
use crawl_tests::harness::{all_pages, flags, run_crawl, write_lines, ClusterSpec, StoreServer};
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
    let run = run_crawl(&spec, Duration::from_secs(180)).await.unwrap();
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
