//! End-to-end against a hostile web: the real dispatcher, supervisor and
//! children crawl the synthetic web's hostile hosts (hangs, drips, huge and
//! gzip-bomb bodies, odd charsets, redirect loops, bad links, 429/503, and
//! robots.txt edge cases), answers too big for the crawler (a `Crawl-delay:
//! 1e20`, a page decoding past the store's document limit, 300,000 outlinks
//! on one page), and a web with one slow host (fair scheduling).
//!
//! Findings are collected and reported together ([`verify::Findings`]).

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, SystemTime};

use crawl_tests::check;
use crawl_tests::harness::{
    all_docs, all_pages, args, crawl_coll, flags, run_crawl, ClusterSpec, StoreServer,
};
use crawl_tests::verify::{self, Findings};
use crawl_tests::web::hostile::{self, Oversized, RobotsCase, HOSTILE_HOST, ROBOTS_CASE_LINKS};
use crawl_tests::web::{RequestRecord, WebExtras, WebServer, WebSpec};
use store::body_dict::Dictionaries;
use store::docs::{PageDoc, RobotsTxtDoc, Skipped};

const MIN_DELAY_MS: u64 = 20;
const REQUEST_TIMEOUT_MS: u64 = 2000;
const MAX_BODY: i64 = 1 << 20;
/// How long the slow host of the fair-scheduling test takes per answer.
const SLOW_MS: u64 = 2000;

/// The hostile crawls' dispatcher flags, then `extra`.
fn dispatcher_args(request_timeout_ms: u64, extra: &[&str]) -> Vec<String> {
    // The traps trip the circuit breaker; a short pause keeps the test short.
    let mut v = flags(&format!(
        "--min-delay-ms {MIN_DELAY_MS} --request-timeout-ms {request_timeout_ms} \
         --max-body-bytes {MAX_BODY} --max-depth 10 --progress-secs 5 --breaker-pause-secs 5"
    ));
    v.extend(args(extra));
    v
}

fn secs_between(a: SystemTime, b: SystemTime) -> f64 {
    b.duration_since(a)
        .map_or_else(|e| -e.duration().as_secs_f64(), |d| d.as_secs_f64())
}

/// What the crawl left in the primary store.
struct Stored {
    pages: BTreeMap<String, PageDoc>,
    /// URL → (state, failure kind) of the stored frontier.
    frontier: BTreeMap<String, (String, Option<String>)>,
    /// To read the pages' bodies.
    dicts: Dictionaries,
    /// The robots.txt responses kept for the archive.
    robots_txt: Vec<RobotsTxtDoc>,
}

async fn stored(store: &StoreServer) -> Stored {
    let db = store.client().await.unwrap().database("crawler");
    let pages = all_pages(&db, &Default::default()).await.unwrap();
    let n = pages.len();
    let pages: BTreeMap<String, PageDoc> = pages.into_iter().map(|d| (d.url.clone(), d)).collect();
    assert_eq!(pages.len(), n, "a page was stored twice");
    let frontier = verify::frontier_urls(&db, &Default::default())
        .await
        .unwrap()
        .into_iter()
        .map(|u| (u.url, (u.state.to_string(), u.failure)))
        .collect();
    let dicts = Dictionaries::load(&db.collection(&crawl_coll(store::BODY_DICTS)))
        .await
        .unwrap();
    let robots_txt = all_docs(&db, &crawl_coll(store::ROBOTS_TXT))
        .await
        .unwrap()
        .into_iter()
        .map(|d| bson::from_document(d).unwrap())
        .collect();
    Stored {
        pages,
        frontier,
        dicts,
        robots_txt,
    }
}

impl Stored {
    fn state(&self, url: &str) -> &str {
        self.frontier.get(url).map_or("absent", |(s, _)| s.as_str())
    }
}

/// Requests to one host, in log order.
fn to_host<'a>(log: &'a [RequestRecord], host: &str) -> Vec<&'a RequestRecord> {
    log.iter().filter(|r| r.host == host).collect()
}

/// Seconds between the first answer `status` to `path` on `host` and the
/// next request to that host, if both happened.
fn gap_after(log: &[RequestRecord], host: &str, path: &str, status: u16) -> Option<f64> {
    let reqs = to_host(log, host);
    let i = reqs.iter().position(|r| r.path == path && r.status == status)?;
    let at = reqs[i].at;
    // The log is in answer order; a never-answered request is logged when it
    // arrives, so take the earliest later timestamp.
    reqs.iter()
        .skip(i + 1)
        .map(|r| secs_between(at, r.at))
        .min_by(|a, b| a.total_cmp(b))
}

/// Serves `spec` (with `extras`) and returns a cluster of one supervisor
/// with two children to crawl it into `store`: the set-up of every crawl
/// here, in `traps_e2e.rs` and in `politeness_gap_e2e.rs`.
pub(crate) async fn one_node(
    spec: WebSpec,
    extras: WebExtras,
    store: &StoreServer,
    dir: &std::path::Path,
) -> (WebServer, ClusterSpec) {
    let server = WebServer::local_with(spec, extras).await;
    let mut cluster = ClusterSpec::for_web(&store.uri, &server, dir).unwrap();
    cluster.supervisors = 1;
    cluster.children = 2;
    (server, cluster)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn survives_a_hostile_web() {
    let dir = tempfile::tempdir().unwrap();
    let store = StoreServer::start().unwrap();
    eprintln!("store: {} ({})", store.uri, store.kind);
    let spec = WebSpec {
        seed: 11,
        hosts: 2,
        outside_hosts: 1,
        pages_per_host: 8,
        ..WebSpec::default()
    };
    let extras = WebExtras {
        hostile: true,
        ..WebExtras::default()
    };
    let (server, mut cluster) = one_node(spec, extras, &store, dir.path()).await;
    let web = server.web();
    cluster.dispatcher_args = dispatcher_args(REQUEST_TIMEOUT_MS, &["--keep-non-html-bodies"]);
    let run = run_crawl(&cluster, Duration::from_secs(170)).await.unwrap();
    eprintln!("crawl took {:?}; summary {}", run.wall, run.summary);
    let log = server.requests();
    let got = stored(&store).await;
    let mut f = Findings::default();

    f.check_run_ok(&run);

    let url = |path: &str| web.url_on(HOSTILE_HOST, path);
    let page = |path: &str| got.pages.get(&url(path));
    let requested = |path: &str| {
        to_host(&log, HOSTILE_HOST)
            .iter()
            .filter(|r| r.path == path)
            .count()
    };
    let status_of = |path: &str| page(path).map(|d| d.status);

    // What happened on hostile.test, for the record.
    for path in hostile::HOSTILE_LINKS
        .iter()
        .filter(|p| !p.contains('#'))
        .chain(&["/after-bad-links"])
    {
        let d = page(path);
        eprintln!(
            "{path:18} state {:10} requests {} status {:?} bytes {:?} truncated {:?} title {:?} skipped {:?}",
            got.state(&url(path)),
            requested(path),
            status_of(path),
            d.map(|d| d.bytes),
            d.map(|d| d.truncated),
            d.and_then(|d| d.title.as_deref()),
            d.and_then(|d| d.skipped),
        );
    }

    // The generated sites are crawled as usual.
    let expected = web.expected_crawl();
    for (u, status) in &expected.pages {
        let s = got.pages.get(u).map(|d| d.status);
        f.check(s == Some(i32::from(*status)), || {
            format!("{u}: stored status {s:?}, expected {status}")
        });
    }

    // Nothing out of scope, nothing absurd was requested.
    let in_scope: BTreeSet<String> = web.in_scope_host_names().into_iter().collect();
    for r in &log {
        f.check(in_scope.contains(&r.host), || {
            format!("out-of-scope request {}{}", r.host, r.path)
        });
        f.check(r.path.len() < 2048, || {
            format!("over-long request to {} ({} bytes)", r.host, r.path.len())
        });
    }

    // Requests that never finish fail after their retries, and the crawl goes on.
    for path in ["/hang", "/drip"] {
        f.check(got.state(&url(path)) == "failed", || {
            format!(
                "{path}: frontier state {}, expected failed",
                got.state(&url(path))
            )
        });
        check!(f, page(path).is_none(), "{path} was stored: {:?}", page(path));
        let n = requested(path);
        check!(f, (1..=3).contains(&n), "{path} requested {n} times (1..=3)");
    }
    for path in ["/normal", "/after-bad-links"] {
        f.check(status_of(path) == Some(200), || {
            format!("{path}: stored status {:?}, expected 200", status_of(path))
        });
    }

    // A 90 KiB response head is kept to 64 KiB of whole headers, marked.
    match page("/big-head") {
        None => check!(
            f,
            false,
            "/big-head not stored (state {})",
            got.state(&url("/big-head"))
        ),
        Some(d) => {
            let kept = d.response_head.as_ref().map_or(0, |h| h.0.len());
            check!(
                f,
                d.head_truncated,
                "/big-head: head not marked truncated ({kept} bytes)"
            );
            check!(
                f,
                kept <= store::exchange::MAX_RESPONSE_HEAD && kept > store::exchange::MAX_RESPONSE_HEAD / 2,
                "/big-head: {kept} bytes of head kept"
            );
            let headers = store::exchange::Exchange::of(d).headers;
            let fillers = headers.iter().filter(|(n, _)| n == "x-filler").count();
            check!(
                f,
                fillers > 0 && fillers < hostile::BIG_HEAD_HEADERS,
                "/big-head: {fillers} of {} filler headers kept",
                hostile::BIG_HEAD_HEADERS
            );
            check!(
                f,
                headers
                    .iter()
                    .all(|(n, v)| n != "x-filler" || v.len() == hostile::BIG_HEAD_VALUE),
                "/big-head: a header was kept in part"
            );
            check!(
                f,
                d.title.as_deref() == Some("a big head"),
                "/big-head title {:?}",
                d.title
            );
        }
    }
    check!(
        f,
        page("/normal").is_some_and(|d| !d.head_truncated),
        "/normal: head marked truncated"
    );

    // Bodies beyond --max-body-bytes are cut, compressed or not.
    for path in ["/huge", "/gzip-bomb"] {
        match page(path) {
            None => check!(f, false, "{path} not stored (state {})", got.state(&url(path))),
            Some(d) => {
                let bytes = d.bytes;
                check!(f, d.truncated, "{path}: not marked truncated");
                f.check(bytes > 0 && bytes <= MAX_BODY, || {
                    format!("{path}: bytes = {bytes}, expected 1..={MAX_BODY}")
                });
            }
        }
    }
    if let Some(title) = page("/gzip-bomb").and_then(|d| d.title.as_deref()) {
        f.check(title == "gzip bomb", || {
            format!("/gzip-bomb title {title:?}: not inflated?")
        });
    }

    // Non-HTML is recorded, not parsed; with --keep-non-html-bodies its
    // body is kept as served, with no charset (it is not text).
    match page("/pdf") {
        None => check!(f, false, "/pdf not stored"),
        Some(d) => {
            f.check(d.skipped == Some(Skipped::ContentType), || {
                format!("/pdf: skipped = {:?}", d.skipped)
            });
            let body = store::page_body::raw_of(d, &got.dicts);
            f.check(body.as_deref().ok() == Some(hostile::PDF), || {
                format!("/pdf: stored body {body:?}, expected what was served")
            });
            check!(f, d.charset.is_none(), "/pdf: charset {:?}", d.charset);
        }
    }

    // Charsets: from the header, from <meta charset>, and broken UTF-8.
    let title = |path: &str| page(path).and_then(|d| d.title.clone());
    f.check(title("/latin1").as_deref() == Some("café"), || {
        format!("/latin1 title {:?}, expected \"café\"", title("/latin1"))
    });
    f.check(title("/meta-charset").as_deref() == Some("naïve"), || {
        format!(
            "/meta-charset title {:?}, expected \"naïve\" (<meta charset> sniffing)",
            title("/meta-charset")
        )
    });
    f.check(title("/bad-utf8").is_some_and(|t| t.contains('\u{FFFD}')), || {
        format!("/bad-utf8 title {:?}, expected U+FFFD", title("/bad-utf8"))
    });
    if let Some(html) = page("/latin1").and_then(|d| store::page_body::html_of(d, &got.dicts).ok()) {
        check!(f, html.contains("café crème"), "/latin1 html not decoded");
    }

    // Redirect loops and over-long chains fail; nothing is stored.
    for path in ["/loop/a", "/chain/0"] {
        f.check(got.state(&url(path)) == "failed", || {
            format!(
                "{path}: frontier state {}, expected failed",
                got.state(&url(path))
            )
        });
        check!(f, page(path).is_none(), "{path} was stored");
    }
    f.check(requested("/loop/a") <= 3 && requested("/loop/b") <= 3, || {
        format!(
            "redirect loop requested {} + {} times",
            requested("/loop/a"),
            requested("/loop/b")
        )
    });
    let chain_end = format!("/chain/{}", hostile::CHAIN_LEN);
    f.check(requested(&chain_end) == 0, || {
        format!("{chain_end} was requested: more than 10 redirects followed")
    });

    // Malformed links are dropped, the good one on the same page is followed.
    f.check(status_of("/bad-links") == Some(200), || {
        format!("/bad-links: stored status {:?}", status_of("/bad-links"))
    });
    f.check(!log.iter().any(|r| r.path.starts_with("/aaaaaaaaaa")), || {
        "the over-long link was requested".to_string()
    });

    // 503 + Retry-After (seconds, then an HTTP date) and 429: retried later,
    // after the domain waited.
    for path in ["/retry-after", "/retry-after-date", "/throttle"] {
        f.check(status_of(path) == Some(200), || {
            format!(
                "{path}: stored status {:?} (state {}), expected 200 after a retry",
                status_of(path),
                got.state(&url(path))
            )
        });
    }
    for (path, status, min_gap) in [
        ("/retry-after", 503, hostile::RETRY_AFTER_SECS as f64),
        ("/retry-after-date", 503, hostile::RETRY_AFTER_SECS as f64),
        // No Retry-After: backoff (the crawler starts at one second).
        ("/throttle", 429, 1.0),
    ] {
        let gap = gap_after(&log, HOSTILE_HOST, path, status);
        eprintln!("after {status} on {path}: next request to {HOSTILE_HOST} after {gap:?} s");
        f.check(gap.is_some_and(|g| g >= min_gap), || format!("after {status} on {path}, next request to {HOSTILE_HOST} after {gap:?} s (want >= {min_gap})"));
    }

    // robots.txt edge cases: exactly the allowed paths, robots files once each.
    for case in RobotsCase::ALL {
        let host = case.host();
        let reqs = to_host(&log, host);
        let robots_files = case.robots_paths();
        let fetched: BTreeSet<&str> = reqs
            .iter()
            .map(|r| r.path.as_str())
            .filter(|p| !robots_files.contains(p))
            .collect();
        let want: BTreeSet<&str> = case.fetched_paths().into_iter().collect();
        f.check(fetched == want, || {
            format!("{host}: requested {fetched:?}, expected {want:?}")
        });
        for p in robots_files {
            let n = reqs.iter().filter(|r| r.path == *p).count();
            check!(f, n == 1, "{host}{p} requested {n} times, expected once");
        }
        let home = web.url_on(host, "/");
        if case == RobotsCase::ServerError {
            f.check(got.state(&home) == "failed", || {
                format!("{home}: state {}, expected failed (robots 500)", got.state(&home))
            });
            continue;
        }
        for p in ROBOTS_CASE_LINKS {
            let u = web.url_on(host, p);
            let (want_state, want_stored) = if case.allows(p) {
                ("done", true)
            } else {
                ("disallowed", false)
            };
            f.check(got.state(&u) == want_state, || {
                format!("{u}: state {}, expected {want_state}", got.state(&u))
            });
            f.check(got.pages.contains_key(&u) == want_stored, || {
                format!("{u}: stored = {}, expected {want_stored}", !want_stored)
            });
        }
    }

    // Each robots.txt response is kept for the archive as served: every
    // hop of the redirect, the 4xx and 5xx too, the huge file cut at the
    // 500 KiB read.
    for case in RobotsCase::ALL {
        let host = case.host();
        let mut kept: Vec<&RobotsTxtDoc> = got
            .robots_txt
            .iter()
            .filter(|d| url::Url::parse(&d.id.url).is_ok_and(|u| u.host_str() == Some(host)))
            .collect();
        kept.sort_by(|a, b| a.id.cmp(&b.id));
        let (status, body) = case.robots();
        let want: Vec<(i32, String, Vec<u8>)> = match case {
            RobotsCase::Redirect => vec![
                (301, web.url_on(host, "/robots.txt"), body.to_vec()),
                (
                    200,
                    web.url_on(host, "/real-robots.txt"),
                    hostile::REAL_ROBOTS.into(),
                ),
            ],
            RobotsCase::Huge => vec![(200, web.url_on(host, "/robots.txt"), body[..500 * 1024].to_vec())],
            _ => vec![(i32::from(status), web.url_on(host, "/robots.txt"), body.to_vec())],
        };
        let seen: Vec<(i32, String, Vec<u8>)> = kept
            .iter()
            .map(|d| {
                let answered = d.page.final_url.clone().unwrap_or_else(|| d.page.url.clone());
                let body = store::page_body::raw_of(&d.page, &got.dicts).unwrap_or_default();
                (d.page.status, answered, body)
            })
            .collect();
        let brief = |v: &[(i32, String, Vec<u8>)]| -> Vec<(i32, String, usize)> {
            v.iter().map(|(s, u, b)| (*s, u.clone(), b.len())).collect()
        };
        f.check(seen == want, || {
            format!(
                "{host}: robots.txt responses kept {:?}, expected {:?}",
                brief(&seen),
                brief(&want)
            )
        });
        f.check(
            kept.iter().enumerate().all(|(hop, d)| {
                d.id.hop == hop as i32
                    && d.id.url == web.url_on(host, "/robots.txt")
                    && d.id.at == kept[0].id.at
            }),
            || {
                format!(
                    "{host}: robots.txt responses keyed {:?}",
                    kept.iter().map(|d| &d.id).collect::<Vec<_>>()
                )
            },
        );
        let truncated = kept.iter().any(|d| d.page.truncated);
        check!(
            f,
            truncated == (case == RobotsCase::Huge),
            "{host}: robots.txt truncated = {truncated}"
        );
    }

    // robots.txt once per in-scope host.
    for host in &in_scope {
        let n = log
            .iter()
            .filter(|r| &r.host == host && r.path == "/robots.txt")
            .count();
        check!(f, n == 1, "{host}/robots.txt requested {n} times");
    }

    server.stop(Duration::from_secs(5)).await;
    f.assert_none();
}

/// `--max-crawl-delay-ms` of the oversized crawl: what `Crawl-delay: 1e20` is clamped to.
const MAX_CRAWL_DELAY_MS: u64 = 300;
/// `--max-outlinks-per-page` of the oversized crawl.
const MAX_OUTLINKS: i64 = 500;
/// Bodies up to this size are read whole (/wide and /many are below it).
const OVERSIZED_MAX_BODY: u64 = 16 << 20;

/// Answers too big for a naive crawler, beside a few ordinary hosts: a
/// `Crawl-delay: 1e20` (must be clamped to `--max-crawl-delay-ms`, not
/// panic), a page whose decoded HTML would exceed MongoDB's 16 MiB document
/// limit (must be stored, its body byte for byte as served, not retried
/// forever), and a page with 300,000 outlinks of 1.5 KB each
/// (only the first `--max-outlinks-per-page` are kept, the rest counted in
/// `outlinks_dropped`). The crawl ends by itself and the ordinary hosts are
/// crawled exactly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn survives_answers_too_big_for_the_crawler() {
    let dir = tempfile::tempdir().unwrap();
    let store = StoreServer::start().unwrap();
    let spec = WebSpec {
        seed: 12,
        hosts: 3,
        outside_hosts: 1,
        pages_per_host: 20,
        ..WebSpec::default()
    };
    let extras = WebExtras {
        oversized: true,
        ..WebExtras::default()
    };
    let (server, mut cluster) = one_node(spec, extras, &store, dir.path()).await;
    let web = server.web();
    cluster.dispatcher_args = flags(&format!(
        "--min-delay-ms {MIN_DELAY_MS} --max-crawl-delay-ms {MAX_CRAWL_DELAY_MS} \
         --max-outlinks-per-page {MAX_OUTLINKS} --max-body-bytes {OVERSIZED_MAX_BODY} \
         --request-timeout-ms 20000 --max-depth 10 --progress-secs 5"
    ));
    // A crawl that does not end by itself is a finding too; what it stored
    // until then shows which answer stalled it.
    let run = run_crawl(&cluster, Duration::from_secs(240)).await;
    let log = server.requests();
    let got = stored(&store).await;
    let mut f = Findings::default();
    match &run {
        Err(e) => check!(f, false, "the crawl did not end by itself: {e}"),
        Ok(run) => {
            eprintln!("crawl took {:?}; summary {}", run.wall, run.summary);
            f.check_run_ok(run);
        }
    }

    // The ordinary hosts: exactly the ground truth, nothing cut.
    let expected = web.expected_crawl();
    let oversized: BTreeSet<&str> = Oversized::ALL.iter().map(|c| c.host()).collect();
    let on_oversized = |u: &str| oversized.iter().any(|h| u.starts_with(&web.url_on(h, "/")));
    let ordinary: BTreeMap<&String, i32> = got
        .pages
        .iter()
        .filter(|(u, _)| !on_oversized(u))
        .map(|(u, d)| (u, d.status))
        .collect();
    let want: BTreeMap<&String, i32> = expected.pages.iter().map(|(u, s)| (u, i32::from(*s))).collect();
    f.check(ordinary == want, || {
        let missing: Vec<_> = want
            .keys()
            .filter(|u| !ordinary.contains_key(*u))
            .take(5)
            .collect();
        let extra: Vec<_> = ordinary
            .keys()
            .filter(|u| !want.contains_key(*u))
            .take(5)
            .collect();
        format!(
            "ordinary hosts: {} pages stored, {} expected; missing e.g. {missing:?}, extra e.g. {extra:?}",
            ordinary.len(),
            want.len()
        )
    });
    for (u, d) in got.pages.iter().filter(|(u, _)| !on_oversized(u)) {
        check!(f, !d.truncated, "{u}: truncated on an ordinary page");
    }

    // Every oversized host: its pages stored with 200, robots.txt once.
    for case in Oversized::ALL {
        let host = case.host();
        let reqs = to_host(&log, host);
        for path in case.fetched_paths() {
            let u = web.url_on(host, &path);
            let status = got.pages.get(&u).map(|d| d.status);
            f.check(status == Some(200), || {
                format!(
                    "{u}: stored status {status:?} (state {}), expected 200",
                    got.state(&u)
                )
            });
        }
        let robots = reqs.iter().filter(|r| r.path == "/robots.txt").count();
        check!(f, robots == 1, "{host}/robots.txt requested {robots} times");
    }

    // Crawl-delay: 1e20 is clamped to --max-crawl-delay-ms: the pages come,
    // one at least the cap after the other.
    let host = Oversized::CrawlDelay.host();
    let mut arrivals: Vec<SystemTime> = to_host(&log, host).iter().map(|r| r.arrived).collect();
    arrivals.sort();
    let gaps: Vec<f64> = arrivals.windows(2).map(|w| secs_between(w[0], w[1])).collect();
    eprintln!("{host}: {} requests, gaps {gaps:.3?} s", arrivals.len());
    let cap = (MAX_CRAWL_DELAY_MS as f64 - 1.0) / 1000.0;
    f.check(arrivals.len() > hostile::CRAWL_DELAY_PAGES, || {
        format!("{host}: only {} requests", arrivals.len())
    });
    f.check(gaps.iter().all(|&g| g >= cap), || {
        format!("{host}: requests {gaps:.3?} s apart, want >= {MAX_CRAWL_DELAY_MS} ms (the clamped delay)")
    });

    // /wide: stored whole, as the bytes that were served (its decoded text,
    // 28 MB, would not fit a document; the compressed bytes do).
    let wide_url = web.url_on(Oversized::WideUtf8.host(), "/wide");
    if let Some(d) = got.pages.get(&wide_url) {
        let raw = store::page_body::raw_of(d, &got.dicts);
        eprintln!(
            "/wide: bytes {:?}, stored body {:?} bytes, truncated {:?}",
            d.bytes,
            raw.as_ref().map(Vec::len),
            d.truncated
        );
        let served = hostile::wide_body();
        f.check(raw.as_ref().is_ok_and(|r| r[..] == served[..]), || {
            format!(
                "/wide: stored body {:?} bytes, not the {} bytes served",
                raw.as_ref().map(Vec::len),
                served.len()
            )
        });
        let html = store::page_body::html_of(d, &got.dicts).unwrap_or_default();
        f.check(
            html.starts_with(hostile::WIDE_HEAD)
                && html.len() > 3 * hostile::WIDE_BYTES / 2
                && html.contains('\u{FFFD}'),
            || {
                format!(
                    "/wide: read back as {} bytes of text, not the decoded page",
                    html.len()
                )
            },
        );
    }

    // /many: the first --max-outlinks-per-page links kept, the rest counted;
    // the kept ones (under the disallowed /trap/) never requested.
    let many = Oversized::ManyLinks.host();
    let many_url = web.url_on(many, "/many");
    if let Some(d) = got.pages.get(&many_url) {
        eprintln!(
            "/many: bytes {:?}, outlinks {:?}, outlinks_dropped {:?}",
            d.bytes, d.outlinks, d.outlinks_dropped
        );
        f.check(d.outlinks.map(i64::from) == Some(MAX_OUTLINKS), || {
            format!("/many: outlinks = {:?}, expected {MAX_OUTLINKS}", d.outlinks)
        });
        f.check(d.outlinks_dropped.is_some_and(|n| n > 0), || {
            format!(
                "/many: outlinks_dropped = {:?}, expected an integer > 0",
                d.outlinks_dropped
            )
        });
    }
    let trap = web.url_on(many, hostile::MANY_LINKS_DISALLOWED);
    let queued_traps: BTreeMap<&String, &String> = got
        .frontier
        .iter()
        .filter(|(u, _)| u.starts_with(&trap))
        .map(|(u, (state, _))| (u, state))
        .collect();
    let first: BTreeSet<String> = (0..MAX_OUTLINKS as usize)
        .map(|n| web.url_on(many, &hostile::many_links_target(n)))
        .collect();
    let kept: BTreeSet<String> = queued_traps.keys().map(|u| u.to_string()).collect();
    f.check(kept == first, || {
        format!(
            "/many: {} of its links reached the frontier, expected the first {MAX_OUTLINKS} \
             (l0..l{}); e.g. unexpected {:?}",
            kept.len(),
            MAX_OUTLINKS - 1,
            kept.difference(&first)
                .next()
                .map(|u| &u[u.len().saturating_sub(12)..])
        )
    });
    f.check(queued_traps.values().all(|s| *s == "disallowed"), || {
        let states: BTreeSet<&&String> = queued_traps.values().collect();
        format!("/many: its links ended in states {states:?}, expected disallowed")
    });
    let trap_requests = to_host(&log, many)
        .iter()
        .filter(|r| r.path.starts_with(hostile::MANY_LINKS_DISALLOWED))
        .count();
    f.check(trap_requests == 0, || {
        format!("{trap_requests} requests under the disallowed {many}/trap/")
    });

    server.stop(Duration::from_secs(5)).await;
    f.assert_none();
}

/// When the fast hosts' last request came, relative to the first request.
struct Timeline {
    fast_done: f64,
    all_done: f64,
    slow_requests: usize,
}

async fn crawl_with_slow_host(slow_ms: u64) -> Timeline {
    let dir = tempfile::tempdir().unwrap();
    let store = StoreServer::start().unwrap();
    let spec = WebSpec {
        seed: 5,
        hosts: 20,
        pages_per_host: 60,
        ..WebSpec::default()
    };
    // Both runs serve the same web (the slow host has few pages, so the
    // crawl ends soon after it); only the sleep differs.
    let extras = WebExtras {
        slow_hosts: 1,
        slow_ms,
        slow_host_pages: 3,
        ..WebExtras::default()
    };
    let (server, mut cluster) = one_node(spec, extras, &store, dir.path()).await;
    let web = server.web();
    let expected = web.expected_crawl();
    // A timeout well above the slow host's answer time: it is slow, not broken.
    cluster.dispatcher_args = dispatcher_args(SLOW_MS * 5, &[]);
    let run = run_crawl(&cluster, Duration::from_secs(150)).await.unwrap();
    eprintln!(
        "slow_ms={slow_ms}: crawl took {:?}; summary {}",
        run.wall, run.summary
    );
    verify::assert_exited_ok(&run);
    let got = stored(&store).await;
    let missing: Vec<_> = expected
        .pages
        .keys()
        .filter(|u| !got.pages.contains_key(*u))
        .take(5)
        .collect();
    assert!(
        missing.is_empty(),
        "slow_ms={slow_ms}: pages missing, e.g. {missing:?}"
    );

    let log = server.requests();
    let slow = web.in_scope_host_names()[0].clone();
    let start = log.iter().map(|r| r.at).min().unwrap();
    let since = |t: SystemTime| secs_between(start, t);
    let fast_done = log
        .iter()
        .filter(|r| r.host != slow)
        .map(|r| since(r.at))
        .fold(0.0, f64::max);
    let all_done = log.iter().map(|r| since(r.at)).fold(0.0, f64::max);
    let slow_requests = log.iter().filter(|r| r.host == slow).count();
    server.stop(Duration::from_secs(5)).await;
    Timeline {
        fast_done,
        all_done,
        slow_requests,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_host_does_not_hold_up_the_others() {
    let slow = crawl_with_slow_host(SLOW_MS).await;
    let fast = crawl_with_slow_host(0).await;
    eprintln!(
        "fast hosts done after {:.1} s with a slow host (all done {:.1} s, {} slow requests), \
         {:.1} s without (all done {:.1} s)",
        slow.fast_done, slow.all_done, slow.slow_requests, fast.fast_done, fast.all_done
    );
    // The slow host really was slow: its requests alone take longer than the rest.
    assert!(
        slow.all_done >= (slow.slow_requests as f64 - 1.0) * SLOW_MS as f64 / 1000.0,
        "slow host answered {} requests in {:.1} s",
        slow.slow_requests,
        slow.all_done
    );
    assert!(
        slow.fast_done <= 1.5 * fast.fast_done + 3.0,
        "the fast hosts finished after {:.1} s with a slow host, {:.1} s without",
        slow.fast_done,
        fast.fast_done
    );
}

/// A bug that panics on one URL fails that URL, with kind `internal`, and
/// nothing else: its domain, its child and the crawl go on. (The child's
/// test-only `CRAWLER_FAULT_PANIC_ON_URL` panics while crawling the URL.)
/// The URL chosen answers 404, so no page depends on its links.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panic_on_one_url_fails_that_url_alone() {
    let dir = tempfile::tempdir().unwrap();
    let store = StoreServer::start().unwrap();
    let spec = WebSpec {
        seed: 31,
        hosts: 3,
        outside_hosts: 1,
        pages_per_host: 30,
        ..WebSpec::default()
    };
    let (server, mut cluster) = one_node(spec, WebExtras::default(), &store, dir.path()).await;
    let mut expected = server.web().expected_crawl();
    let victim = expected
        .pages
        .iter()
        .find(|(_, status)| **status == 404)
        .map(|(url, _)| url.clone())
        .expect("the web has a 404 page");
    expected.pages.remove(&victim);
    cluster.dispatcher_args = flags("--min-delay-ms 10 --max-depth 100 --progress-secs 5");
    cluster.env = vec![("CRAWLER_FAULT_PANIC_ON_URL".into(), victim.clone())];
    let run = run_crawl(&cluster, Duration::from_secs(180)).await.unwrap();
    verify::assert_exited_ok(&run);
    assert_eq!(run.summary["failed"]["internal"], 1, "summary: {}", run.summary);

    let db = store.client().await.unwrap().database("crawler");
    // Everything else is stored exactly; the victim is not stored, and the
    // stored frontier says it failed.
    verify::assert_pages_match(&verify::stored_statuses(&db).await.unwrap(), &expected);
    assert_eq!(
        stored(&store).await.state(&victim),
        "failed",
        "{victim} in the stored frontier"
    );
    server.stop(Duration::from_secs(5)).await;
}

/// What a crawl of the internal-links host left behind.
struct InternalCrawl {
    log: Vec<RequestRecord>,
    /// `_id` → (state, failure kind) of the stored frontier.
    frontier: BTreeMap<String, (String, Option<String>)>,
    pages: BTreeMap<String, PageDoc>,
    summary: serde_json::Value,
    /// The internal URLs the crawl met (linked, then the redirect target).
    internal: Vec<String>,
    port: u16,
}

/// Crawls a tiny web plus [`hostile::INTERNAL_LINKS_HOST`] (links to
/// 127.0.0.2, [::1] and localhost on the web's port, where the server also
/// answers, and a redirect to 127.0.0.2), with `--scope any` so the links
/// are followed, and with `extra` dispatcher flags.
async fn crawl_internal_links(extra: &[&str]) -> InternalCrawl {
    let dir = tempfile::tempdir().unwrap();
    let store = StoreServer::start().unwrap();
    let spec = WebSpec {
        seed: 41,
        hosts: 1,
        outside_hosts: 0,
        pages_per_host: 4,
        ..WebSpec::default()
    };
    let extras = WebExtras {
        internal: true,
        ..WebExtras::default()
    };
    let (server, mut cluster) = one_node(spec, extras, &store, dir.path()).await;
    let port = server.addr().port();
    cluster.dispatcher_args = dispatcher_args(REQUEST_TIMEOUT_MS, &[&["--scope", "any"], extra].concat());
    let run = run_crawl(&cluster, Duration::from_secs(120)).await.unwrap();
    eprintln!("crawl {extra:?} took {:?}; summary {}", run.wall, run.summary);
    verify::assert_exited_ok(&run);
    let log = server.requests();
    let got = stored(&store).await;
    // Something answers at every internal URL: a fetch there would succeed.
    for host in hostile::INTERNAL_TARGET_HOSTS {
        let status = get_status(host, port, hostile::INTERNAL_PATH).await;
        assert_eq!(status, Some(200), "GET http://{host}:{port}/internal by hand");
    }
    server.stop(Duration::from_secs(5)).await;
    InternalCrawl {
        log,
        frontier: got.frontier,
        pages: got.pages,
        summary: run.summary,
        internal: hostile::internal_urls(port),
        port,
    }
}

/// The status of a plain HTTP/1.1 GET (the test's own, not the crawler's).
async fn get_status(host: &str, port: u16, path: &str) -> Option<u16> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let connect_to = host.trim_start_matches('[').trim_end_matches(']');
    let mut s = tokio::net::TcpStream::connect((connect_to, port)).await.ok()?;
    let req = format!("GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.ok()?;
    let mut head = vec![0u8; 12];
    tokio::time::timeout(Duration::from_secs(5), s.read_exact(&mut head))
        .await
        .ok()?
        .ok()?;
    std::str::from_utf8(&head[9..12]).ok()?.parse().ok()
}

/// The log's name for an internal URL's host (`Host` without the port).
fn logged_host(url: &str) -> String {
    let rest = url.trim_start_matches("http://");
    let authority = rest.split('/').next().unwrap_or(rest);
    authority
        .rsplit_once(':')
        .map_or(authority, |(h, _)| h)
        .to_string()
}

/// Server-side request forgery: links to a loopback address other than the
/// web's, to IPv6 loopback and to a name that resolves to loopback without
/// an override, and a redirect to loopback, are never requested (not even
/// robots.txt) although something answers there; each fails as
/// `blocked_address`, for good.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn internal_addresses_are_never_fetched() {
    let c = crawl_internal_links(&[]).await;
    let mut f = Findings::default();
    for url in &c.internal {
        let host = logged_host(url);
        let n = c.log.iter().filter(|r| r.host == host).count();
        check!(f, n == 0, "{n} requests to {host} (for {url})");
        let entry = c.frontier.get(url);
        f.check(
            entry.map(|(s, k)| (s.as_str(), k.as_deref())) == Some(("failed", Some("blocked_address"))),
            || format!("{url}: stored frontier entry {entry:?}, expected failed / blocked_address"),
        );
        check!(f, !c.pages.contains_key(url), "{url} was stored as a page");
    }
    // Final at the first try: one failure each, none retried.
    let blocked = &c.summary["failed"]["blocked_address"];
    f.check(*blocked == c.internal.len(), || {
        format!(
            "summary failed.blocked_address = {blocked}, expected {}",
            c.internal.len()
        )
    });
    // The page that links to them and the redirect itself were crawled.
    let home = format!("http://{}:{}/", hostile::INTERNAL_LINKS_HOST, c.port);
    let redirect = format!(
        "http://{}:{}{}",
        hostile::INTERNAL_LINKS_HOST,
        c.port,
        hostile::INTERNAL_REDIRECT
    );
    let status = |u: &str| c.pages.get(u).map(|d| d.status);
    f.check(status(&home) == Some(200), || {
        format!("{home}: status {:?}", status(&home))
    });
    f.check(status(&redirect) == Some(302), || {
        format!("{redirect}: status {:?}", status(&redirect))
    });
    f.assert_none();
}

/// `--allow-private-networks` is the explicit opt-in: the same links are
/// then crawled like any others.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn internal_addresses_are_fetched_when_allowed() {
    let c = crawl_internal_links(&["--allow-private-networks"]).await;
    let mut f = Findings::default();
    for url in &c.internal {
        let host = logged_host(url);
        let fetched = c.log.iter().any(|r| r.host == host && url.ends_with(&r.path));
        check!(f, fetched, "{url} was not requested");
        let state = c.frontier.get(url).map(|(s, _)| s.as_str());
        check!(f, state == Some("done"), "{url}: frontier state {state:?}");
    }
    f.check(c.summary["failed"]["blocked_address"].is_null(), || {
        format!("blocked with the opt-in: {}", c.summary)
    });
    f.assert_none();
}
