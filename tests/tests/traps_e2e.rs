//! End-to-end against the open web's traps (`crawl_tests::web::traps`):
//! the real dispatcher, supervisor and children crawl hosts whose links
//! carry fresh session ids (in the query and as `;jsessionid=`), fresh
//! tracking parameters, an endless calendar, a faceted search and
//! relative links that stack path segments, beside an ordinary web, with
//! no depth limit to speak of: canonical URLs, trap rules and budgets
//! alone must end the crawl. A second test crawls a site larger than the
//! default per-domain budget, then resumes it with a larger budget.
//!
//! Bounds are asserted on the web server's own request log.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::hostile_e2e::one_node;
use crawl_tests::check;
use crawl_tests::harness::{all_pages, flags, StoreServer};
use crawl_tests::in_process::run_in_process;
use crawl_tests::verify::{self, Findings};
use crawl_tests::web::traps::{Trap, BIG_SITE_PAGES};
use crawl_tests::web::{RequestRecord, WebExtras, WebSpec};
use dispatcher::limits::{DEFAULT_MAX_PAGES_PER_DOMAIN, DEFAULT_MAX_QUERY_VARIANTS};

/// Far deeper than any trap host's real pages: depth must not be what
/// bounds a trap here.
const MAX_DEPTH: &str = "1000";

/// Requests to `host` other than robots.txt, as path and query.
fn page_requests<'a>(log: &'a [RequestRecord], host: &str) -> Vec<&'a str> {
    log.iter()
        .filter(|r| r.host == host && r.path != "/robots.txt")
        .map(|r| r.path.as_str())
        .collect()
}

/// A web of `hosts` hosts (and `outside_hosts` out of scope) of
/// `pages_per_host` pages each, from `seed`.
fn web(seed: u64, hosts: usize, outside_hosts: usize, pages_per_host: usize) -> WebSpec {
    WebSpec {
        seed,
        hosts,
        outside_hosts,
        pages_per_host,
        ..WebSpec::default()
    }
}

/// Parts of a URL that mark a session id or a tracking parameter.
const SESSION_MARKERS: [&str; 7] = [
    "sid=",
    "PHPSESSID=",
    "sessionid=",
    "jsessionid=",
    "utm_",
    "fbclid=",
    "gclid=",
];

/// The stored pages' URLs and statuses, and the stored frontier.
async fn stored(store: &StoreServer) -> (BTreeMap<String, i32>, Vec<verify::FrontierUrl>) {
    let db = store.client().await.unwrap().database("crawler");
    let pages = all_pages(&db, &Default::default()).await.unwrap();
    let n = pages.len();
    let pages: BTreeMap<String, i32> = pages.into_iter().map(|d| (d.url, d.status)).collect();
    assert_eq!(pages.len(), n, "a page was stored twice");
    let frontier = verify::frontier_urls(&db, &Default::default()).await.unwrap();
    (pages, frontier)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_web_of_traps_ends_by_itself_with_each_trap_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let store = StoreServer::start().unwrap();
    let spec = web(44, 3, 1, 20);
    let extras = WebExtras {
        traps: true,
        ..WebExtras::default()
    };
    let (server, mut cluster) = one_node(spec, extras, &store, dir.path()).await;
    let web = server.web();
    // No delay, a few connections per host: the traps' bounds, not the
    // pace, are under test, and the calendar and search take a thousand
    // requests each.
    cluster.dispatcher_args = flags(&format!(
        "--min-delay-ms 0 --max-domain-connections 4 --max-depth {MAX_DEPTH} --progress-secs 5"
    ));
    let run = run_in_process(&cluster, Duration::from_secs(240)).await;
    let log = server.requests();
    // Each trap host's requests, whether or not the crawl ended (a crawler
    // that cannot end is what this test is about).
    for trap in Trap::ALL {
        let reqs = page_requests(&log, trap.host());
        let into_trap = reqs.iter().filter(|p| trap.is_trap_request(p)).count();
        eprintln!(
            "{:20} {} requests ({into_trap} into the trap)",
            trap.host(),
            reqs.len()
        );
    }
    let run = run.expect("the crawl ends by itself");
    eprintln!("crawl took {:?}; summary {}", run.wall, run.summary);
    verify::assert_finished(&run);
    let (pages, frontier) = stored(&store).await;
    let mut f = Findings::default();

    // The ordinary web: exactly its ground truth.
    let expected = web.expected_crawl();
    for (u, status) in &expected.pages {
        let got = pages.get(u).copied();
        check!(
            f,
            got == Some(i32::from(*status)),
            "{u}: stored {got:?}, expected {status}"
        );
    }

    for trap in Trap::ALL {
        let host = trap.host();
        let reqs = page_requests(&log, host);
        let into_trap = reqs.iter().filter(|p| trap.is_trap_request(p)).count();
        // Every real page stored, with 200.
        for p in trap.real_paths() {
            let u = web.url_on(host, &p);
            check!(
                f,
                pages.get(&u) == Some(&200),
                "{u}: stored {:?}, expected 200",
                pages.get(&u)
            );
        }
        let bound = match trap {
            // Canonical URLs: each real page once, and nothing else.
            Trap::SessionQuery | Trap::SessionPath | Trap::Tracking => trap.real_paths().len(),
            // One path with endless queries: its query budget, plus the
            // home page and the bare path.
            Trap::Calendar | Trap::Faceted => DEFAULT_MAX_QUERY_VARIANTS as usize + 2,
            // Paths of a, b and c that repeat no run thrice and no segment
            // four times: 81 with the default rules.
            Trap::StackedPath => 200,
            Trap::BigSite => unreachable!("not among Trap::ALL"),
        };
        check!(
            f,
            reqs.len() <= bound,
            "{host}: {} requests, bound {bound}",
            reqs.len()
        );
        let distinct: BTreeSet<&str> = reqs.iter().copied().collect();
        let canonical = matches!(trap, Trap::SessionQuery | Trap::SessionPath | Trap::Tracking);
        let what = "requests carried a session id or tracking parameter";
        check!(f, !canonical || into_trap == 0, "{host}: {into_trap} {what}");
        let once = distinct.len() == reqs.len() || matches!(trap, Trap::StackedPath);
        check!(
            f,
            once,
            "{host}: {} requests for {} URLs",
            reqs.len(),
            distinct.len()
        );
    }

    // Each refusal was counted by its reason, and the budgeted ones are in
    // the stored frontier, deferred.
    let refused = &run.summary["refused"];
    for reason in ["over_query_budget", "repeated_segments"] {
        let n = &refused[reason];
        check!(
            f,
            n.as_u64().is_some_and(|n| n > 0),
            "summary refused.{reason} = {n}"
        );
    }
    let deferred_queries = frontier
        .iter()
        .filter(|d| d.state == "deferred" && d.deferred.as_deref() == Some("query_budget"))
        .count() as u64;
    let over = &refused["over_query_budget"];
    let what = "deferred entries for the query budget";
    check!(
        f,
        Some(deferred_queries) == over.as_u64(),
        "{deferred_queries} {what}, summary says {over}"
    );
    // No stored URL carries a session id or a tracking parameter.
    for d in &frontier {
        let u = d.url.as_str();
        let marked = SESSION_MARKERS
            .iter()
            .any(|p| u.to_ascii_lowercase().contains(&p.to_ascii_lowercase()));
        check!(f, !marked, "stored frontier entry {u}");
    }
    server.stop(Duration::from_secs(5)).await;
    f.assert_none();
}

/// Pages of `host` stored.
fn on_host(pages: &BTreeMap<String, i32>, web: &crawl_tests::web::SyntheticWeb, host: &str) -> usize {
    let prefix = web.url_on(host, "/");
    pages.keys().filter(|u| u.starts_with(&prefix)).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_site_over_the_default_budget_stops_at_it_and_a_larger_budget_resumes_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = StoreServer::start().unwrap();
    let spec = web(45, 1, 0, 10);
    let extras = WebExtras {
        big_site: true,
        ..WebExtras::default()
    };
    let (server, mut cluster) = one_node(spec, extras, &store, dir.path()).await;
    let web = server.web();
    let host = Trap::BigSite.host();
    let fast =
        format!("--min-delay-ms 0 --max-domain-connections 8 --max-depth {MAX_DEPTH} --progress-secs 5");
    cluster.dispatcher_args = flags(&fast);
    let run = run_in_process(&cluster, Duration::from_secs(300)).await.unwrap();
    eprintln!("first crawl took {:?}; summary {}", run.wall, run.summary);
    verify::assert_exited_ok(&run);
    let first = server.requests();
    let (pages, frontier) = stored(&store).await;
    let budget = DEFAULT_MAX_PAGES_PER_DOMAIN as usize;
    assert!(BIG_SITE_PAGES > budget);
    // Exactly the budget, each page requested once.
    assert_eq!(on_host(&pages, &web, host), budget);
    let reqs = page_requests(&first, host);
    let distinct: BTreeSet<&str> = reqs.iter().copied().collect();
    assert_eq!((reqs.len(), distinct.len()), (budget, budget));
    let deferred: Vec<&verify::FrontierUrl> = frontier.iter().filter(|d| d.state == "deferred").collect();
    assert!(!deferred.is_empty());
    assert!(deferred
        .iter()
        .all(|d| d.deferred.as_deref() == Some("domain_budget")));
    assert_eq!(
        run.summary["refused"]["over_domain_budget"].as_u64(),
        Some(deferred.len() as u64)
    );
    // The ordinary host is whole.
    for (u, status) in &web.expected_crawl().pages {
        assert_eq!(pages.get(u), Some(&i32::from(*status)), "{u}");
    }

    // Resumed with a budget over the site's size: the rest of it, and
    // nothing a second time.
    cluster.dispatcher_args = flags(&format!("{fast} --max-pages-per-domain 20000"));
    let run = run_in_process(&cluster, Duration::from_secs(240)).await.unwrap();
    eprintln!("resumed crawl took {:?}; summary {}", run.wall, run.summary);
    verify::assert_exited_ok(&run);
    assert_eq!(
        run.summary["deferred_taken_up"].as_u64(),
        Some(deferred.len() as u64)
    );
    let all = server.requests();
    let again: Vec<&str> = page_requests(&all[first.len()..], host);
    let (pages, _) = stored(&store).await;
    assert_eq!(
        on_host(&pages, &web, host),
        BIG_SITE_PAGES + 1,
        "every page and the home page"
    );
    assert_eq!(
        again.len(),
        BIG_SITE_PAGES + 1 - budget,
        "the resumed crawl's requests"
    );
    assert!(
        again.iter().all(|p| !distinct.contains(p)),
        "a page fetched twice"
    );
    server.stop(Duration::from_secs(5)).await;
}

/// `--scope site` takes a seed's subdomains and no other site; deny rules
/// (a regular expression, a SURT prefix for a whole subdomain) refuse what
/// they match and are counted by rule.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_site_scope_takes_subdomains_and_rules_refuse_what_they_match() {
    use crawl_tests::web::family::FamilyHost;
    let dir = tempfile::tempdir().unwrap();
    let store = StoreServer::start().unwrap();
    let spec = web(46, 1, 0, 5);
    let extras = WebExtras {
        site_family: true,
        ..WebExtras::default()
    };
    let (server, mut cluster) = one_node(spec, extras, &store, dir.path()).await;
    let web = server.web();
    // The www host alone is the seed.
    std::fs::write(
        &cluster.seeds_file,
        web.url_on(FamilyHost::Www.host(), "/") + "\n",
    )
    .unwrap();
    cluster.dispatcher_args = flags(
        "--min-delay-ms 0 --scope site --deny-url /private/ --deny-surt (test,family,shop, --progress-secs 5",
    );
    let run = run_in_process(&cluster, Duration::from_secs(120)).await.unwrap();
    eprintln!("crawl took {:?}; summary {}", run.wall, run.summary);
    verify::assert_exited_ok(&run);
    let log = server.requests();
    let requested = |h: FamilyHost| -> BTreeSet<&str> { page_requests(&log, h.host()).into_iter().collect() };
    assert_eq!(requested(FamilyHost::Www), BTreeSet::from(["/", "/about"]));
    assert_eq!(requested(FamilyHost::Blog), BTreeSet::from(["/", "/post/1"]));
    assert_eq!(requested(FamilyHost::Shop), BTreeSet::new());
    assert_eq!(requested(FamilyHost::Neighbour), BTreeSet::new());
    assert_eq!(run.summary["out_of_scope"], 1, "the neighbour");
    let by_rule = &run.summary["refused_by_rule"];
    assert_eq!(by_rule["deny-url:/private/"], 1, "{by_rule}");
    assert_eq!(by_rule["deny-surt:(test,family,shop,"], 1, "{by_rule}");
    assert_eq!(run.summary["refused"]["denied_by_rule"], 2);
    server.stop(Duration::from_secs(5)).await;
}
