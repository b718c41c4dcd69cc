//! Tests of the synthetic web. The central one, `reference_crawl_matches_ground_truth`,
//! crawls the web through `respond()` with an independent naive extractor, the
//! `url` crate and `texting_robots`, and checks it agrees with `expected_crawl()`.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use url::Url;

use super::changing::parse_http_date;
use super::hostile::http_date;
use super::links::Target;
use super::model::{HostRef, Loc, Profile};
use super::*;

fn small_spec() -> WebSpec {
    WebSpec {
        seed: 7,
        hosts: 12,
        outside_hosts: 2,
        pages_per_host: 60,
        links_per_page: 10,
        crawl_delay_every: 4,
        crawl_delay_secs: 0.2,
        page_bytes: 3000,
        profile: Profile::Small,
    }
}

fn header<'a>(r: &'a Response, name: &str) -> Option<&'a str> {
    r.headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

#[test]
fn same_seed_same_bytes_other_seed_other_bytes() {
    let a = SyntheticWeb::new(WebSpec::default(), 4000);
    let b = SyntheticWeb::new(WebSpec::default(), 4000);
    let c = SyntheticWeb::new(
        WebSpec {
            seed: 2,
            ..WebSpec::default()
        },
        4000,
    );
    for (host, path) in [
        ("site0.test:4000", "/"),
        ("site3.test", "/p/42"),
        ("SITE5.test:4000", "/p/0"),
        ("out1.test", "/p/9"),
        ("site2.test", "/private/3"),
    ] {
        let ra = a.respond(host, path);
        assert_eq!(ra.status, 200, "{host}{path}");
        assert_eq!(ra, b.respond(host, path));
        assert_ne!(ra.body, c.respond(host, path).body, "{host}{path}");
    }
    assert_eq!(a.expected_crawl(), b.expected_crawl());
}

#[test]
fn page_shape_and_statuses() {
    let web = SyntheticWeb::new(WebSpec::default(), 4000);
    let r = web.respond("site4.test:4000", "/p/17");
    assert_eq!(header(&r, "content-type"), Some("text/html; charset=utf-8"));
    let html = std::str::from_utf8(&r.body).expect("utf-8");
    for needle in [
        "<html lang=\"en\">",
        "<title>site4.test page 17</title>",
        "<meta name=\"description\"",
        "<link rel=\"canonical\" href=\"http://site4.test:4000/p/17\">",
    ] {
        assert!(html.contains(needle), "missing {needle}");
    }
    assert!(r.body.len() >= 4000 && r.body.len() < 7000, "{}", r.body.len());

    let robots = web.respond("site0.test", "/robots.txt");
    assert_eq!(robots.status, 200);
    assert_eq!(header(&robots, "content-type"), Some("text/plain; charset=utf-8"));
    assert_eq!(web.respond("site3.test", "/robots.txt").status, 404);

    let moved = web.respond("site4.test:4000", "/r/5");
    assert_eq!((moved.status, header(&moved, "location")), (301, Some("/p/5")));
    let chain = web.respond("site4.test", "/rr/5");
    assert_eq!((chain.status, header(&chain, "location")), (302, Some("/r/5")));
    let cross = web.respond("site4.test", "/x/9/5");
    assert_eq!(
        (cross.status, header(&cross, "location")),
        (302, Some("http://site9.test:4000/p/5"))
    );
    for (host, path) in [
        ("site4.test", "/p/100"),
        ("site4.test", "/missing/3"),
        ("site4.test", "/r/100"),
        ("site4.test", "/x/20/1"),
        ("site4.test", "/nope"),
        ("site20.test", "/"),
        ("example.com", "/"),
        ("", "/"),
    ] {
        assert_eq!(web.respond(host, path).status, 404, "{host}{path}");
    }
}

#[test]
fn robots_rules_agree_with_texting_robots() {
    let web = SyntheticWeb::new(small_spec(), 4000);
    let cases = [
        ("site0.test", "/private/1", false),
        ("site0.test", "/p/1", true),
        ("site1.test", "/p/1", false),
        ("site1.test", "/p/15", false),
        ("site1.test", "/p/2", true),
        ("site5.test", "/p/3", true), // own synthcrawler group beats `*`
        ("site5.test", "/private/3", false),
    ];
    for (host, path, allowed) in cases {
        let txt = web.robots_txt(host).expect("has robots");
        let robot = texting_robots::Robot::new(USER_AGENT_TOKEN, txt.as_bytes()).expect("parses");
        assert_eq!(robot.allowed(path), allowed, "{host}{path}\n{txt}");
        let other = texting_robots::Robot::new("otherbot", txt.as_bytes()).expect("parses");
        if host == "site0.test" {
            assert!(!other.allowed("/p/2"), "otherbot group present on site0");
        }
    }
    let delayed = texting_robots::Robot::new(
        USER_AGENT_TOKEN,
        web.robots_txt("site8.test").expect("robots").as_bytes(),
    )
    .expect("parses");
    assert_eq!(delayed.delay, Some(0.2));
    assert_eq!(web.crawl_delay("site8.test:4000"), Some(0.2));
    assert_eq!(web.crawl_delay("site2.test"), None);
    assert!(web.robots_txt("site3.test").is_none());
}

#[test]
fn ground_truth_is_sane() {
    let spec = WebSpec::default();
    let web = SyntheticWeb::new(spec.clone(), 4000);
    let exp = web.expected_crawl();
    for i in 0..spec.hosts {
        let h = HostRef::InScope(i);
        let rules = web.rules(h);
        assert_eq!(exp.pages.get(&web.url(h, Loc::Home)), Some(&200));
        for j in 0..spec.pages_per_host {
            let url = web.url(h, Loc::Page(j));
            if rules.disallows(&Loc::Page(j).path()) {
                assert!(exp.must_not_fetch.contains(&url), "{url}");
            } else {
                assert_eq!(exp.pages.get(&url), Some(&200), "{url} unreachable");
            }
        }
    }
    assert!(exp.pages.keys().all(|u| u.starts_with("http://site")));
    assert!(exp
        .pages
        .keys()
        .all(|u| !u.contains('#') && !u.ends_with("/robots.txt")));
    assert!(!exp.must_not_fetch.is_empty());
    assert!(exp.must_not_fetch.iter().all(|u| !exp.pages.contains_key(u)));
    assert!(exp.must_not_fetch.iter().any(|u| u.contains("/private/")));
    assert!(exp.must_not_fetch.contains("http://site1.test:4000/p/1"));
    assert!(exp.must_not_fetch.contains("http://site1.test:4000/p/10"));
    // Hosts without robots.txt have /private/ stored.
    assert!(exp
        .pages
        .keys()
        .any(|u| u.starts_with("http://site3.test:4000/private/")));
    assert!(exp.count_status(404) > 10);
    assert!(exp.count_status(302) > 10);
    assert!(exp.pages.keys().any(|u| u.contains("/r/")));
    assert!(exp.pages.keys().any(|u| u.contains("/rr/")));
    // Some page links to an outside host.
    let outside_linked = (0..spec.pages_per_host).any(|j| {
        let mut found = false;
        web.for_each_link(&web.page_ctx(HostRef::InScope(0), Loc::Page(j)), &mut |l| {
            found |= matches!(l.target, Target::Url(HostRef::Outside(_), _));
        });
        found
    });
    assert!(outside_linked);
    let pages = exp.pages.len();
    assert!(pages > spec.hosts * spec.pages_per_host, "{pages}");
}

/// Renders every href of a page and resolves it the way a browser would.
#[test]
fn hrefs_resolve_to_their_targets() {
    let web = SyntheticWeb::new(small_spec(), 4000);
    let mut styles = HashSet::new();
    for h in web.all_hosts() {
        let locs = [Loc::Home, Loc::Private(3)]
            .into_iter()
            .chain((0..web.spec.pages_per_host).map(Loc::Page));
        for loc in locs {
            let ctx = web.page_ctx(h, loc);
            let page = Url::parse(&web.url(h, loc)).expect("url");
            let base = match ctx.base {
                Some(b) => page.join(b).expect("base"),
                None => page.clone(),
            };
            web.for_each_link(&ctx, &mut |l| {
                let mut href = String::new();
                web.write_href(&mut href, &ctx, l);
                let mut resolved = base.join(&href).expect("href parses");
                match l.target {
                    Target::Url(th, tl) => {
                        styles.insert(format!("{:?}", l.style));
                        assert_eq!(resolved.fragment().is_some(), l.frag.is_some(), "{href}");
                        resolved.set_fragment(None);
                        assert_eq!(resolved.as_str(), web.url(th, tl), "{href} on {page}");
                    }
                    Target::Mailto(_) => assert_eq!(resolved.scheme(), "mailto"),
                    Target::Javascript => assert_eq!(resolved.scheme(), "javascript"),
                }
            });
        }
    }
    assert_eq!(styles.len(), 8, "{styles:?}");
}

/// A naive but independent link extractor: skips comments, honours `<base>`,
/// accepts double, single and bare quoting, and any tag case.
fn extract_links(html: &str, page: &Url) -> Vec<Url> {
    let mut text = String::with_capacity(html.len());
    let mut rest = html;
    while let Some(i) = rest.find("<!--") {
        text.push_str(&rest[..i]);
        rest = rest[i..].find("-->").map_or("", |j| &rest[i + j + 3..]);
    }
    text.push_str(rest);
    let lower = text.to_ascii_lowercase();
    let attr = |tag_start: usize| -> Option<&str> {
        let end = tag_start + lower[tag_start..].find('>')?;
        let at = tag_start + lower[tag_start..end].find("href=")? + 5;
        let raw = &text[at..end];
        Some(match raw.chars().next()? {
            q @ ('"' | '\'') => raw[1..].split(q).next()?,
            _ => raw.split(char::is_whitespace).next()?,
        })
    };
    let base = lower
        .find("<base ")
        .and_then(attr)
        .and_then(|b| page.join(b).ok())
        .unwrap_or_else(|| page.clone());
    let mut out = Vec::new();
    for (i, _) in lower.match_indices("<a ") {
        if let Some(href) = attr(i) {
            if let Ok(mut u) = base.join(href) {
                u.set_fragment(None);
                out.push(u);
            }
        }
    }
    out
}

/// Crawls through `respond()` like the real crawler should, without using any
/// of the generator's internals.
fn reference_crawl(web: &SyntheticWeb) -> Expected {
    let in_scope: HashSet<String> = web
        .seed_urls()
        .iter()
        .filter_map(|s| Url::parse(s).ok()?.host_str().map(str::to_string))
        .collect();
    let mut robots: HashMap<String, Option<texting_robots::Robot>> = HashMap::new();
    let mut seen = HashSet::new();
    let mut queue = VecDeque::new();
    let mut pages = BTreeMap::new();
    let mut must_not_fetch = BTreeSet::new();
    // As the crawler does: links are judged by their canonical form.
    let canonical = shared::canonical::CanonicalRules::default()
        .compile()
        .expect("the default rules compile");
    let mut discover = |mut u: Url, queue: &mut VecDeque<Url>| {
        canonical.apply(&mut u);
        let ok = u.scheme() == "http" && u.host_str().is_some_and(|h| in_scope.contains(h));
        if ok && seen.insert(u.to_string()) {
            queue.push_back(u);
        }
    };
    for s in web.seed_urls() {
        discover(Url::parse(&s).expect("seed"), &mut queue);
    }
    let authority = |u: &Url| format!("{}:{}", u.host_str().unwrap_or(""), u.port().unwrap_or(80));
    let target = |u: &Url| match u.query() {
        Some(q) => format!("{}?{q}", u.path()),
        None => u.path().to_string(),
    };
    while let Some(url) = queue.pop_front() {
        let host = url.host_str().unwrap_or("").to_string();
        let robot = robots.entry(host.clone()).or_insert_with(|| {
            let r = web.respond(&authority(&url), "/robots.txt");
            (r.status == 200)
                .then(|| texting_robots::Robot::new(USER_AGENT_TOKEN, &r.body).expect("robots parse"))
        });
        let allowed = |u: &Url| robot.as_ref().is_none_or(|r| r.allowed(u.as_str()));
        if !allowed(&url) {
            must_not_fetch.insert(url.to_string());
            continue;
        }
        let mut cur = url.clone();
        let mut hops = 0;
        let status = loop {
            let resp = web.respond(&authority(&cur), &target(&cur));
            if matches!(resp.status, 301 | 302) {
                let next = cur
                    .join(header(&resp, "location").expect("location"))
                    .expect("join");
                if next.host_str() == cur.host_str()
                    && next.port() == cur.port()
                    && hops < 10
                    && allowed(&next)
                {
                    cur = next;
                    hops += 1;
                    continue;
                }
                if next.host_str() != cur.host_str() {
                    discover(next, &mut queue);
                }
                break resp.status;
            }
            if resp.status == 200 && header(&resp, "content-type").is_some_and(|c| c.starts_with("text/html"))
            {
                let html = std::str::from_utf8(&resp.body).expect("utf-8");
                for link in extract_links(html, &cur) {
                    discover(link, &mut queue);
                }
            }
            break resp.status;
        };
        pages.insert(url.to_string(), status);
    }
    Expected {
        pages,
        must_not_fetch,
    }
}

#[test]
fn reference_crawl_matches_ground_truth() {
    for spec in [small_spec(), WebSpec::default()] {
        let web = SyntheticWeb::new(spec, 4000);
        let exp = web.expected_crawl();
        let got = reference_crawl(&web);
        let diff: Vec<_> = exp
            .pages
            .iter()
            .filter(|(k, v)| got.pages.get(*k) != Some(v))
            .chain(got.pages.iter().filter(|(k, _)| !exp.pages.contains_key(*k)))
            .take(10)
            .collect();
        assert!(diff.is_empty(), "pages differ: {diff:?}");
        assert_eq!(exp, got);
    }
}

/// Sends one raw HTTP/1.1 request and returns (status line, headers+body text).
async fn raw_get(addr: SocketAddr, host: &str, path: &str) -> (String, String) {
    raw_request(addr, host, path, "").await
}

/// [`raw_get`] with more header lines (`extra`, each ending in CRLF).
async fn raw_request(addr: SocketAddr, host: &str, path: &str, extra: &str) -> (String, String) {
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let req = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\n{extra}Connection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.expect("write");
    let mut buf = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut buf))
        .await
        .expect("timely")
        .expect("read");
    let text = String::from_utf8(buf).expect("utf-8");
    let (status, rest) = text.split_once("\r\n").unwrap_or((&text, ""));
    (status.to_string(), rest.to_string())
}

#[tokio::test]
async fn serves_over_http_and_logs_requests() {
    let bind: SocketAddr = "127.0.0.1:0".parse().expect("addr");
    let server = WebServer::start(small_spec(), bind).await.expect("start");
    let addr = server.addr();
    assert!(addr.ip().is_loopback());
    let web = server.web();
    assert_eq!(web.port(), addr.port());
    assert_eq!(web.seed_urls()[2], format!("http://site2.test:{}/", addr.port()));

    let host = format!("site2.test:{}", addr.port());
    let (status, rest) = raw_get(addr, &host, "/p/5").await;
    assert_eq!(status, "HTTP/1.1 200 OK");
    let (head, body) = rest.split_once("\r\n\r\n").expect("head/body");
    assert!(head
        .to_ascii_lowercase()
        .contains("content-type: text/html; charset=utf-8"));
    let want = web.respond(&host, "/p/5").body;
    assert!(
        head.to_ascii_lowercase()
            .contains(&format!("content-length: {}", want.len())),
        "{head}"
    );
    assert_eq!(body.as_bytes(), &want[..]);

    let (status, rest) = raw_get(addr, "SITE2.test", "/r/4").await;
    assert_eq!(status, "HTTP/1.1 301 Moved Permanently");
    assert!(rest.to_ascii_lowercase().contains("location: /p/4\r\n"));
    let (status, _) = raw_get(addr, "nowhere.test", "/").await;
    assert_eq!(status, "HTTP/1.1 404 Not Found");

    let log = server.requests();
    let got: Vec<_> = log
        .iter()
        .map(|r| (r.host.as_str(), r.path.as_str(), r.status))
        .collect();
    assert_eq!(
        got,
        [
            ("site2.test", "/p/5", 200),
            ("site2.test", "/r/4", 301),
            ("nowhere.test", "/", 404)
        ]
    );
    assert!(log.windows(2).all(|w| w[0].at <= w[1].at));
    // Each request is logged with the address it came from.
    assert!(
        log.iter().all(|r| r.client == Some(addr.ip())),
        "clients: {:?}",
        log.iter().map(|r| r.client).collect::<Vec<_>>()
    );
    // Each response was finished (queued to the socket) before the next request came.
    assert!(log
        .windows(2)
        .all(|w| w[0].done.is_some_and(|d| d <= w[1].arrived)));
    assert!(log.iter().all(|r| r.arrived <= r.at && Some(r.at) <= r.done));
    server.stop(Duration::from_secs(5)).await;
    assert!(tokio::net::TcpStream::connect(addr).await.is_err());
}

/// Small slow hosts (`slow_host_pages`) keep the generator and the ground truth in step.
#[test]
fn small_slow_hosts_match_ground_truth() {
    let extras = WebExtras {
        slow_hosts: 2,
        slow_ms: 1,
        slow_host_pages: 3,
        ..WebExtras::default()
    };
    let web = SyntheticWeb::with_extras(small_spec(), extras, 4000);
    let exp = web.expected_crawl();
    assert_eq!(exp, reference_crawl(&web));
    let on_slow = exp
        .pages
        .keys()
        .filter(|u| u.starts_with("http://site0.test"))
        .count();
    assert!((4..40).contains(&on_slow), "{on_slow} URLs on the slow host");
    // Other hosts are as big as before.
    let plain = SyntheticWeb::new(small_spec(), 4000).expected_crawl();
    let on = |e: &Expected, h: &str| e.pages.keys().filter(|u| u.starts_with(h)).count();
    assert!(on(&exp, "http://site5.test") >= small_spec().pages_per_host);
    assert!(on(&plain, "http://site0.test") > on_slow);
}

/// `slow_varied`: per-path latencies, some none, the rest within 3/8..=1 of `slow_ms`.
#[test]
fn varied_latencies_are_per_path_and_bounded() {
    let extras = WebExtras {
        slow_hosts: 1,
        slow_ms: 400,
        slow_varied: true,
        ..WebExtras::default()
    };
    let web = SyntheticWeb::with_extras(small_spec(), extras.clone(), 4000);
    let paths: Vec<String> = (0..300).map(|n| format!("/p/{n}")).collect();
    let lat: Vec<Option<Duration>> = paths.iter().map(|p| web.latency("site0.test", p)).collect();
    let none = lat.iter().filter(|l| l.is_none()).count();
    assert!((50..150).contains(&none), "{none} of 300 answer at once");
    for l in lat.iter().flatten() {
        assert!(
            (Duration::from_millis(150)..=Duration::from_millis(400)).contains(l),
            "{l:?}"
        );
    }
    let distinct: HashSet<_> = lat.iter().flatten().collect();
    assert!(distinct.len() > 50, "{} distinct latencies", distinct.len());
    // Deterministic, only on slow hosts.
    let again = SyntheticWeb::with_extras(small_spec(), extras, 4000);
    assert!(paths
        .iter()
        .all(|p| again.latency("site0.test:4000", p) == web.latency("site0.test", p)));
    assert!(paths.iter().all(|p| web.latency("site1.test", p).is_none()));
    assert_eq!(web.slow_delay("site0.test"), Some(Duration::from_millis(400)));
}

/// `response_delay_ms`: every answer of the generated hosts but robots.txt
/// waits (pages, 404s, redirects); other hosts and slow hosts keep theirs.
#[test]
fn response_delay_spares_robots_txt() {
    let extras = WebExtras {
        response_delay_ms: 300,
        slow_hosts: 1,
        slow_ms: 50,
        ..WebExtras::default()
    };
    let web = SyntheticWeb::with_extras(small_spec(), extras, 4000);
    let d = Some(Duration::from_millis(300));
    for path in ["/", "/p/3", "/p/3?sort=new", "/missing/1", "/r/2"] {
        assert_eq!(web.latency("site2.test:4000", path), d, "{path}");
    }
    assert_eq!(web.latency("out0.test", "/p/1"), d);
    assert_eq!(web.latency("site2.test", "/robots.txt"), None);
    assert_eq!(web.latency("elsewhere.example", "/p/1"), None);
    assert_eq!(web.latency("site0.test", "/p/1"), Some(Duration::from_millis(50)));
    assert_eq!(
        SyntheticWeb::new(small_spec(), 4000).latency("site2.test", "/p/3"),
        None
    );
}
/// FNV-1a over every byte of a web's answers to a fixed set of requests and
/// of its ground truth: pins down that a small-profile web (the default, and
/// what the end-to-end tests build) serves exactly what it always served.
fn web_fingerprint(web: &SyntheticWeb) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325_u64;
    let mut eat = |bytes: &[u8]| {
        for &b in bytes {
            h = (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
        }
        h = (h ^ 0xff).wrapping_mul(0x100_0000_01b3);
    };
    let spec = web.spec().clone();
    let mut hosts: Vec<String> = web.host_names();
    hosts.push("nowhere.test".to_string());
    for host in &hosts {
        let host = format!("{host}:{}", web.port());
        let mut paths = vec!["/".to_string(), "/robots.txt".to_string(), "/nope".to_string()];
        for n in 0..spec.pages_per_host + 2 {
            paths.push(format!("/p/{n}"));
        }
        for n in [0, 3, 17, 999] {
            for prefix in ["/missing/", "/r/", "/rr/", "/private/"] {
                paths.push(format!("{prefix}{n}"));
            }
            paths.push(format!("/x/{}/{n}", n % (spec.hosts + 1)));
            paths.push(format!("/p/{n}?ref=nav"));
            paths.push(format!("/p/{n}?sort=1#top"));
        }
        for path in paths {
            let r = web.respond(&host, &path);
            eat(host.as_bytes());
            eat(path.as_bytes());
            eat(&r.status.to_be_bytes());
            for (k, v) in &r.headers {
                eat(k.as_bytes());
                eat(v.as_bytes());
            }
            eat(&r.body);
        }
    }
    let exp = web.expected_crawl();
    for (url, status) in &exp.pages {
        eat(url.as_bytes());
        eat(&status.to_be_bytes());
    }
    for url in &exp.must_not_fetch {
        eat(url.as_bytes());
    }
    h
}

#[test]
fn small_profile_webs_serve_what_they_always_served() {
    let got = [
        web_fingerprint(&SyntheticWeb::new(WebSpec::default(), 4000)),
        web_fingerprint(&SyntheticWeb::new(small_spec(), 80)),
        web_fingerprint(&SyntheticWeb::new(
            WebSpec {
                seed: 3,
                hosts: 7,
                pages_per_host: 30,
                links_per_page: 25,
                crawl_delay_every: 3,
                page_bytes: 18000,
                ..WebSpec::default()
            },
            31337,
        )),
    ];
    assert_eq!(
        got,
        [
            0xab9f_adb6_b9e2_ed09,
            0x9e85_7bed_e9a7_e759,
            0x190e_ffb6_e1f3_2b32
        ],
        "fingerprints: {got:x?}"
    );
}

/// A realistic web small enough to crawl through `respond()` in a test.
fn small_realistic() -> WebSpec {
    WebSpec {
        seed: 5,
        ..WebSpec::realistic_sized(12, 60)
    }
}

#[test]
fn realistic_hrefs_resolve_to_their_targets() {
    let web = SyntheticWeb::new(small_realistic(), 4000);
    let mut styles = HashSet::new();
    let (mut frags, mut variants, mut scheme_relative) = (0, 0, 0);
    for h in web.all_hosts() {
        let locs = [Loc::Home, Loc::Private(3)]
            .into_iter()
            .chain((0..web.spec.pages_per_host).map(Loc::Page));
        for loc in locs {
            let ctx = web.page_ctx(h, loc);
            assert!(ctx.base.is_none());
            let page = Url::parse(&web.url(h, loc)).expect("url");
            web.for_each_link(&ctx, &mut |l| {
                let mut href = String::new();
                web.write_href(&mut href, &ctx, l);
                assert!(!href.starts_with(['#', '?']), "{href}");
                let mut resolved = page.join(&href).expect("href parses");
                if let Target::Url(th, tl) = l.target {
                    styles.insert(format!("{:?}", l.style));
                    frags += usize::from(l.frag.is_some());
                    variants += usize::from(matches!(tl, Loc::Variant(..)));
                    scheme_relative += usize::from(href.starts_with("//"));
                    assert_eq!(resolved.fragment().is_some(), l.frag.is_some(), "{href}");
                    resolved.set_fragment(None);
                    assert_eq!(resolved.as_str(), web.url(th, tl), "{href} on {page}");
                }
            });
        }
    }
    let want = ["AbsPath", "AbsUrl", "SchemeRel", "RelSame", "RelDot", "RelParent"];
    assert_eq!(styles.len(), want.len(), "{styles:?}");
    assert!(want.iter().all(|s| styles.contains(*s)), "{styles:?}");
    assert!(
        frags > 50 && variants > 5 && scheme_relative > 20,
        "{frags} {variants} {scheme_relative}"
    );
}

#[test]
fn realistic_reference_crawl_matches_ground_truth() {
    for spec in [
        small_realistic(),
        WebSpec {
            seed: 9,
            links_per_page: 10,
            ..WebSpec::realistic_sized(5, 25)
        },
    ] {
        let web = SyntheticWeb::new(spec, 4000);
        let exp = web.expected_crawl();
        let got = reference_crawl(&web);
        assert_eq!(exp, got);
        assert!(exp.pages.keys().any(|u| u.contains("?sort=new")));
    }
}

#[test]
fn realistic_robots_and_variants() {
    let web = SyntheticWeb::new(WebSpec::realistic(), 4000);
    let mut disallowing = 0;
    let mut delayed = Vec::new();
    for i in 0..web.spec.hosts {
        let host = format!("site{i}.test");
        let txt = web.robots_txt(&host).expect("every host has a robots.txt");
        let robot = texting_robots::Robot::new(USER_AGENT_TOKEN, txt.as_bytes()).expect("parses");
        assert!(robot.allowed("/p/17") && robot.allowed("/p/1?sort=new") && robot.allowed("/"));
        if !robot.allowed("/private/2") {
            disallowing += 1;
        }
        if let Some(d) = robot.delay {
            assert_eq!(d, 0.5, "{txt}");
            delayed.push(i);
        }
        assert_eq!(web.crawl_delay(&host), robot.delay.map(f64::from));
    }
    assert_eq!(disallowing, (web.spec.hosts + 1) / 3);
    assert_eq!(delayed, [0, 67, 134]);

    assert_eq!(Loc::parse("/p/3?sort=new"), Some(Loc::Variant(3, 0)));
    assert_eq!(Loc::parse("/p/3?ref=nav#top"), Some(Loc::Variant(3, 1)));
    assert_eq!(Loc::parse("/p/3?sort=old"), Some(Loc::Page(3)));
    assert_eq!(Loc::parse("/r/3?sort=new"), Some(Loc::Redirect(3)));
    let page = web.respond("site5.test:4000", "/p/3");
    for q in ["sort=new", "ref=nav", "utm_source=newsletter", "other=1"] {
        assert_eq!(web.respond("site5.test:4000", &format!("/p/3?{q}")), page, "{q}");
    }
    assert_eq!(web.respond("site5.test", "/p/250?sort=new").status, 404);
}

/// The realistic web at its benchmark size: page sizes, link counts and
/// the shares of 404s and redirects in its ground truth.
#[test]
fn realistic_profile_has_the_advertised_shape() {
    let spec = WebSpec::realistic();
    assert_eq!((spec.hosts, spec.pages_per_host), (200, 250));
    let web = SyntheticWeb::new(spec.clone(), 4000);
    let exp = web.expected_crawl();
    // Every page is reachable, none is disallowed.
    for i in 0..spec.hosts {
        let h = HostRef::InScope(i);
        assert_eq!(exp.pages.get(&web.url(h, Loc::Home)), Some(&200));
        for j in 0..spec.pages_per_host {
            let url = web.url(h, Loc::Page(j));
            assert_eq!(exp.pages.get(&url), Some(&200), "{url} unreachable");
        }
    }
    let total = exp.pages.len();
    let share = |n: usize| n as f64 / total as f64;
    let not_found = share(exp.count_status(404));
    let redirects = share(exp.pages.keys().filter(|u| u.contains("/r/")).count());
    let variants = share(exp.pages.keys().filter(|u| u.contains('?')).count());
    assert!((0.02..0.06).contains(&not_found), "404 share {not_found}");
    assert!((0.003..0.02).contains(&redirects), "redirect share {redirects}");
    assert!((0.01..0.08).contains(&variants), "query-variant share {variants}");
    assert!(exp.must_not_fetch.iter().all(|u| u.contains("/private/")));
    assert!(!exp.must_not_fetch.is_empty());
    assert!(
        total < spec.hosts * spec.pages_per_host * 115 / 100,
        "{total} URLs"
    );

    // Sizes and links of every page of every 10th host.
    let (mut sizes, mut counts) = (Vec::new(), Vec::new());
    let (mut same_host, mut urls) = (0usize, 0usize);
    for i in (0..spec.hosts).step_by(10) {
        let host = format!("site{i}.test:4000");
        for j in 0..spec.pages_per_host {
            let r = web.respond(&host, &format!("/p/{j}"));
            assert_eq!(r.status, 200);
            sizes.push(r.body.len());
            let mut n = 0;
            let h = HostRef::InScope(i);
            web.for_each_link(&web.page_ctx(h, Loc::Page(j)), &mut |l| {
                n += 1;
                if let Target::Url(th, _) = l.target {
                    urls += 1;
                    same_host += usize::from(th == h);
                }
            });
            counts.push(n);
        }
    }
    let (min, max) = (sizes.iter().min().unwrap(), sizes.iter().max().unwrap());
    let mean = sizes.iter().sum::<usize>() as f64 / sizes.len() as f64;
    assert!(*min >= 5 * 1024 && *max <= 32 * 1024, "sizes {min}..{max}");
    assert!((15_000.0..21_000.0).contains(&mean), "mean size {mean}");
    let (lo, hi) = (counts.iter().min().unwrap(), counts.iter().max().unwrap());
    let mean_links = counts.iter().sum::<usize>() as f64 / counts.len() as f64;
    assert!(*lo >= 10 && *hi <= 40, "links {lo}..{hi}");
    assert!((22.0..28.0).contains(&mean_links), "mean links {mean_links}");
    let same = same_host as f64 / urls as f64;
    assert!((0.75..0.88).contains(&same), "same-host share {same}");
    println!(
        "realistic: {total} URLs, 404 {:.1}%, redirects {:.1}%, variants {:.1}%, \
         size {min}..{max} mean {mean:.0}, links {lo}..{hi} mean {mean_links:.1}, same host {:.1}%",
        not_found * 100.0,
        redirects * 100.0,
        variants * 100.0,
        same * 100.0
    );
}

/// A small web whose pages change every `every` ([`WebExtras::changing`]).
fn changing_web(every: Duration, share_percent: u8) -> SyntheticWeb {
    let extras = WebExtras {
        changing: Some(Changing { every, share_percent }),
        ..WebExtras::default()
    };
    SyntheticWeb::with_extras(small_spec(), extras, 4000)
}

/// A request with `If-None-Match` values and an `If-Modified-Since`.
fn cond<'a>(if_none_match: &'a [&'a str], if_modified_since: Option<&'a str>) -> Conditions<'a> {
    Conditions {
        if_none_match,
        if_modified_since,
    }
}

/// Validators on the HTML pages of a changing web only, about the share of
/// pages asked for changing, and nothing else different: version 0 is the
/// plain web's bytes, and the URLs to crawl are the same.
#[test]
fn changing_web_adds_validators_to_pages_only() {
    let plain = SyntheticWeb::new(small_spec(), 4000);
    let web = changing_web(Duration::from_secs(60), 30);
    let epoch = http_date(web.change_epoch());
    for path in ["/", "/p/3", "/p/3?ref=nav", "/private/2"] {
        let p = plain.respond("site2.test:4000", path);
        assert_eq!(header(&p, "etag"), None, "{path}");
        assert_eq!(header(&p, "last-modified"), None, "{path}");
        assert!(!plain.changes("site2.test", path));
        assert_eq!(plain.version("site2.test", path), None);
        assert_eq!(plain.etag("site2.test", path), None);

        let r = web.respond("site2.test:4000", path);
        assert_eq!(r.status, 200, "{path}");
        assert_eq!(header(&r, "content-type"), header(&p, "content-type"));
        let etag = header(&r, "etag").expect("an etag");
        assert!(
            etag.len() == 20 && etag.starts_with('"') && etag.ends_with("-0\""),
            "{etag}"
        );
        assert_eq!(web.etag("site2.test", path).as_deref(), Some(etag));
        assert_eq!(header(&r, "last-modified"), Some(epoch.as_str()));
        assert_eq!(r.body, p.body, "{path}: version 0 is the plain page");
    }
    // A query variant serves its page's bytes, so it has its page's tag.
    assert_eq!(
        web.etag("SITE2.test:4000", "/p/3?ref=nav"),
        web.etag("site2.test", "/p/3")
    );
    assert_ne!(web.etag("site2.test", "/p/4"), web.etag("site2.test", "/p/3"));
    assert_ne!(web.etag("site3.test", "/p/3"), web.etag("site2.test", "/p/3"));
    for path in [
        "/robots.txt",
        "/r/3",
        "/rr/3",
        "/x/1/3",
        "/missing/1",
        "/nope",
        "/p/999",
    ] {
        let r = web.respond("site2.test:4000", path);
        assert_eq!(r, plain.respond("site2.test:4000", path), "{path}");
        assert!(!web.changes("site2.test", path), "{path}");
        assert_eq!(web.version("site2.test", path), None, "{path}");
    }

    let pages: Vec<(String, String)> = web
        .host_names()
        .iter()
        .flat_map(|h| (0..60).map(move |n| (h.clone(), format!("/p/{n}"))))
        .collect();
    let share = pages.iter().filter(|(h, p)| web.changes(h, p)).count() as f64 / pages.len() as f64;
    assert!((0.24..0.36).contains(&share), "{share} of the pages change");
    // The same pages every time (not a function of `every`); none or all at 0 and 100.
    let other = changing_web(Duration::from_secs(5), 30);
    assert!(pages
        .iter()
        .all(|(h, p)| web.changes(h, p) == other.changes(h, p)));
    let (none, all) = (
        changing_web(Duration::from_secs(60), 0),
        changing_web(Duration::from_secs(60), 100),
    );
    assert!(pages
        .iter()
        .all(|(h, p)| !none.changes(h, p) && all.changes(h, p)));

    assert_eq!(web.expected_crawl(), plain.expected_crawl());
    assert_eq!(reference_crawl(&web), plain.expected_crawl());
}

/// `If-None-Match` (weak comparison, lists, `*`) decides when present;
/// `If-Modified-Since` otherwise; garbage in either is ignored.
#[test]
fn unchanged_pages_answer_conditional_requests_with_304() {
    let web = changing_web(Duration::from_secs(60), 30);
    let now = web.change_epoch() + Duration::from_secs(5);
    let (host, path) = ("site3.test:4000", "/p/7");
    let full = web.respond_at(host, path, Conditions::default(), now);
    assert_eq!(full.status, 200);
    let etag = header(&full, "etag").expect("an etag").to_string();
    let modified = header(&full, "last-modified")
        .expect("a last-modified")
        .to_string();
    let since = parse_http_date(&modified).expect("an HTTP-date");
    let (weak, listed, earlier) = (
        format!("W/{etag}"),
        format!("\"nope\", {etag}"),
        http_date(std::time::UNIX_EPOCH + Duration::from_secs(since - 1)),
    );
    let asctime = {
        // The same instant in the obsolete asctime format: `Sun Nov  6 08:49:37 1994`.
        let w: Vec<&str> = modified.split(' ').collect();
        let day: u32 = w[1].parse().expect("day");
        format!("{} {} {day:2} {} {}", &w[0][..3], w[2], w[4], w[3])
    };
    for (inm, ims, want) in [
        (&[etag.as_str()][..], None, 304),
        (&[weak.as_str()], None, 304),
        (&["\"nope\"", listed.as_str()], None, 304),
        (&["*"], None, 304),
        (&[], Some(modified.as_str()), 304),
        (&[], Some(asctime.as_str()), 304),
        (&[], Some("Sun, 06 Nov 2994 08:49:37 GMT"), 304),
        (&["\"nope\""], Some(modified.as_str()), 200),
        (&["garbage"], Some(modified.as_str()), 304),
        (&[], Some(earlier.as_str()), 200),
        (&[], Some("garbage"), 200),
        (&[""], Some(""), 200),
    ] {
        let r = web.respond_at(host, path, cond(inm, ims), now);
        assert_eq!(r.status, want, "{inm:?} {ims:?}");
        assert_eq!(header(&r, "etag"), Some(etag.as_str()));
        assert_eq!(header(&r, "last-modified"), Some(modified.as_str()));
        if want == 304 {
            assert!(r.body.is_empty());
            assert_eq!(header(&r, "content-type"), None);
        } else {
            assert_eq!(r.body, full.body);
        }
    }
    // Without the changing web, conditional headers change nothing.
    let plain = SyntheticWeb::new(small_spec(), 4000);
    let r = plain.respond_conditional(host, path, cond(&["*"], Some(modified.as_str())));
    assert_eq!(r, plain.respond(host, path));
}

/// On the tests' clock: a changing page gets a new version every `every`
/// (new body and validators, same links), a steady one never does.
#[test]
fn changing_pages_get_new_versions_with_the_same_links() {
    let every = 60;
    let web = changing_web(Duration::from_secs(every), 30);
    let host = "site5.test:4000";
    let paths: Vec<String> = (0..60).map(|n| format!("/p/{n}")).collect();
    let changing = paths
        .iter()
        .find(|p| web.changes(host, p))
        .expect("a changing page");
    let steady = paths
        .iter()
        .find(|p| !web.changes(host, p))
        .expect("a steady page");
    let at = |secs: u64| web.change_epoch() + Duration::from_secs(secs);
    let get = |path: &str, inm: &[&str], ims: Option<&str>, secs: u64| {
        web.respond_at(host, path, cond(inm, ims), at(secs))
    };
    let validators = |r: &Response| {
        (
            header(r, "etag").expect("an etag").to_string(),
            header(r, "last-modified").expect("a last-modified").to_string(),
        )
    };

    let first = get(changing, &[], None, 0);
    let (etag0, modified0) = validators(&first);
    assert_eq!(get(changing, &[&etag0], None, every - 1).status, 304);
    assert_eq!(web.version_at(host, changing, at(every - 1)), Some(0));
    assert_eq!(web.version_at(host, changing, at(every)), Some(1));
    assert_eq!(web.version_at(host, changing, at(5 * every + 7)), Some(5));

    let second = get(changing, &[&etag0], None, every);
    assert_eq!(second.status, 200);
    let (etag1, modified1) = validators(&second);
    assert!(etag1.ends_with("-1\"") && etag1 != etag0, "{etag0} → {etag1}");
    assert_eq!(
        parse_http_date(&modified1),
        parse_http_date(&modified0).map(|t| t + every)
    );
    assert_eq!(get(changing, &[], Some(&modified0), every).status, 200);
    assert_eq!(get(changing, &[], Some(&modified1), every).status, 304);
    assert_eq!(get(changing, &[&etag1], None, 2 * every - 1).status, 304);
    // Every version has its own Last-Modified.
    let stamps: HashSet<String> = (0..10)
        .map(|v| validators(&get(changing, &[], None, v * every)).1)
        .collect();
    assert_eq!(stamps.len(), 10);

    // The body changed, its links did not.
    let (html0, html1) = (
        std::str::from_utf8(&first.body).expect("utf-8"),
        std::str::from_utf8(&second.body).expect("utf-8"),
    );
    assert!(
        html1.contains("<p class=\"rev\">revision 1</p>\n</body>"),
        "{html1}"
    );
    assert!(!html0.contains("class=\"rev\""));
    let url = Url::parse(&format!("http://{host}{changing}")).expect("url");
    let links = extract_links(html0, &url);
    assert!(!links.is_empty());
    assert_eq!(links, extract_links(html1, &url));

    // A steady page keeps its validators, and its 304s, forever.
    let (tag, modified) = validators(&get(steady, &[], None, 0));
    for secs in [every, 100 * every + 3] {
        let r = get(steady, &[&tag], None, secs);
        assert_eq!(r.status, 304);
        assert_eq!(validators(&r), (tag.clone(), modified.clone()));
        assert_eq!(web.version_at(host, steady, at(secs)), Some(0));
    }

    // Below a second, `every` counts as one second: versions never share a Last-Modified.
    let fast = changing_web(Duration::from_millis(1), 100);
    let t = fast.change_epoch() + Duration::from_millis(3_999);
    assert_eq!(fast.version_at(host, changing, t), Some(3));
}

/// Over HTTP: a revisit of an unchanged page gets a bodiless 304, which the
/// request log records; once a changing page changed, its old tag gets a
/// 200 with the new one. (The one test that waits for the clock, about 1 s.)
#[tokio::test]
async fn server_answers_revisits_with_304_and_logs_them() {
    let extras = WebExtras {
        changing: Some(Changing {
            every: Duration::from_secs(1),
            share_percent: 50,
        }),
        ..WebExtras::default()
    };
    let server = WebServer::local_with(small_spec(), extras).await;
    let (addr, web) = (server.addr(), server.web());
    let host = format!("site2.test:{}", addr.port());
    let paths: Vec<String> = (0..60).map(|n| format!("/p/{n}")).collect();
    let changing = paths
        .iter()
        .find(|p| web.changes(&host, p))
        .expect("a changing page");
    let steady = paths
        .iter()
        .find(|p| !web.changes(&host, p))
        .expect("a steady page");
    let value = |head: &str, name: &str| -> Option<String> {
        head.split("\r\n").find_map(|line| {
            let (k, v) = line.split_once(':')?;
            k.eq_ignore_ascii_case(name).then(|| v.trim().to_string())
        })
    };

    let (status, rest) = raw_get(addr, &host, steady).await;
    assert_eq!(status, "HTTP/1.1 200 OK");
    let etag = value(&rest, "etag").expect("an etag");
    let modified = value(&rest, "last-modified").expect("a last-modified");
    for extra in [
        format!("If-None-Match: {etag}\r\n"),
        format!("If-Modified-Since: {modified}\r\n"),
    ] {
        let (status, rest) = raw_request(addr, &host, steady, &extra).await;
        assert_eq!(status, "HTTP/1.1 304 Not Modified", "{extra}");
        let (head, body) = rest.split_once("\r\n\r\n").expect("head/body");
        assert_eq!(body, "");
        assert_eq!(value(head, "etag").as_ref(), Some(&etag));
        assert_eq!(value(head, "last-modified").as_ref(), Some(&modified));
        assert_eq!(value(head, "content-length"), None, "{head}");
    }
    // Garbage validators are ignored.
    let (status, _) = raw_request(
        addr,
        &host,
        steady,
        "If-None-Match: \u{e9}t\u{e9}\r\nIf-Modified-Since: yesterday\r\n",
    )
    .await;
    assert_eq!(status, "HTTP/1.1 200 OK");

    let (status, rest) = raw_get(addr, &host, changing).await;
    assert_eq!(status, "HTTP/1.1 200 OK");
    let old = value(&rest, "etag").expect("an etag");
    let seen: u64 = old
        .trim_matches('"')
        .rsplit('-')
        .next()
        .and_then(|v| v.parse().ok())
        .expect("a version in the tag");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while web.version(&host, changing) <= Some(seen) {
        assert!(std::time::Instant::now() < deadline, "{changing} never changed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (status, rest) = raw_request(addr, &host, changing, &format!("If-None-Match: {old}\r\n")).await;
    assert_eq!(status, "HTTP/1.1 200 OK");
    let new = value(&rest, "etag").expect("an etag");
    assert_ne!(new, old);
    assert!(rest.contains("<p class=\"rev\">revision "));

    let statuses: Vec<u16> = server.requests().iter().map(|r| r.status).collect();
    assert_eq!(statuses, [200, 304, 304, 200, 200, 200]);
    server.stop(Duration::from_secs(5)).await;
}
