//! Traps of the open web, served only with [`WebExtras::traps`](super::WebExtras)
//! (and, separately, [`WebExtras::big_site`](super::WebExtras)): one in-scope
//! host per way an ordinary-looking site makes a naive crawler fetch without
//! end. Each host serves `/robots.txt` as [`ROBOTS_ALLOW_ALL`], so nothing but
//! the crawler's own rules keeps it out of a trap.
//!
//! The hosts come after every other special host in `in_scope_host_names()`
//! and `seed_urls()` (traps in [`Trap::ALL`] order, then the big site), so
//! the webs the existing tests build are unchanged. They are not part of
//! [`expected_crawl`](super::SyntheticWeb::expected_crawl): what a crawler
//! stores depends on its limits, so tests assert the bounds below, using
//! [`Trap::real_paths`] (what a correct crawler stores) and
//! [`Trap::is_trap_request`] (which requests in the log went into the trap).
//!
//! Fresh values (session ids, click ids, parameter orders) come from a
//! counter in the server's state ([`TrapState`]), so every answer differs,
//! as a real session-tracking server's do: only a crawler that recognises
//! the parameters, not one that compares URLs or bytes, sees one page.
//!
//! 1. [`Trap::SessionQuery`] (`trap-sid.test`): `/` and `/p/0.html` …
//!    `/p/5.html`; every page links to all six, each link with a new session
//!    id in a query: `?sid=<32 hex>`, `?PHPSESSID=<26 alnum>` or
//!    `?sessionid=<24 hex>`, in turn. Taken literally, every answer brings
//!    six URLs never seen before. A correct crawler strips the session
//!    parameter: it stores the 7 [`Trap::real_paths`], requests each once,
//!    and makes no trap request.
//! 2. [`Trap::SessionPath`] (`trap-jsession.test`): `/` and `/doc/0.html` …
//!    `/doc/5.html`, linked as `/doc/N.html;jsessionid=<32 hex>` (every
//!    other link `;JSESSIONID=`), as a servlet container does with cookies
//!    off. The server ignores path parameters and queries. Same bound: 7
//!    pages, each requested once, no request with a `;`.
//! 3. [`Trap::Tracking`] (`trap-track.test`): `/` and `/a/0` … `/a/7`, linked
//!    with new campaign tags (`utm_*`, `fbclid`, `gclid`), which the server
//!    ignores. A correct crawler strips them: 9 pages, no trap request.
//! 4. [`Trap::Calendar`] (`trap-calendar.test`): `/` links to
//!    `/calendar?month=2026-11`; every month of years 1 to 9999 is a page
//!    linking to the months before and after and to the same month a year
//!    before and after (119,988 pages, linked forever). Only `/` is real; a
//!    crawler may fetch some of the calendar, at most its per-path query
//!    budget (`--max-query-variants`, 1,000 by default) of `/calendar`
//!    requests, each URL once.
//! 5. [`Trap::Faceted`] (`trap-facets.test`): `/` links to `/search`, a
//!    faceted search over `color`, `size`, `brand`, `sort` and `page`
//!    (20,400 combinations, all 200), each answer linking to every
//!    refinement that sets or changes one facet, with its parameters in a
//!    new random order each time: a crawler that does not sort query
//!    parameters meets each combination under many URLs. Only `/` is real;
//!    `/search` requests are bounded by the per-path query budget, and a
//!    crawler that sorts parameters requests no combination twice.
//! 6. [`Trap::StackedPath`] (`trap-stack.test`): a "soft 404" server that
//!    answers 200 to every path made of the segments `a`, `b` and `c`, with
//!    relative links `a/b/`, `c/` and `../`, so each hop makes a longer
//!    path (`/a/` → `/a/a/b/` → `/a/a/b/a/b/` …). Only `/` is real; what a
//!    crawler fetches of the rest is bounded by its path rules and its
//!    depth limit: with the crawler's defaults (Heritrix's: no run of
//!    segments thrice in a row, at most 20 segments; and no segment more
//!    than three times) no requested path has more than 9 segments.
//! 7. [`Trap::BigSite`] (`trap-big.test`, only with `big_site`): no trap but
//!    an ordinary site of [`BIG_SITE_PAGES`] tiny pages, more than the
//!    crawler's default per-domain budget (10,000), as a tree of fan-out
//!    [`BIG_SITE_FANOUT`] so every page is a few hops from `/`. A correct
//!    crawler requests and stores at most its budget of pages there, all
//!    of them among [`Trap::real_paths`]. Apart because it costs a long crawl.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

use super::hostile::{not_found, page, reply, Reply, SpecialHost, HTML};
use super::model::parse_num;
use super::rng::{mix, SplitMix};

/// One trap of the open web, each on its own in-scope host.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Trap {
    /// Session ids in the query of every link (`?sid=`, `?PHPSESSID=`, `?sessionid=`).
    SessionQuery,
    /// Session ids as a path parameter (`;jsessionid=`).
    SessionPath,
    /// Campaign and click-id parameters (`utm_*`, `fbclid`, `gclid`) on every link.
    Tracking,
    /// A calendar whose months link to their neighbours, over 9999 years.
    Calendar,
    /// A faceted search: every refinement of every result page is linked.
    Faceted,
    /// A soft-404 server whose relative links stack path segments.
    StackedPath,
    /// An ordinary site larger than the per-domain page budget.
    BigSite,
}

/// Every trap host's robots.txt: everything allowed.
pub const ROBOTS_ALLOW_ALL: &str = "User-agent: *\nDisallow:\n";
/// Real pages `/p/N.html` ([`Trap::SessionQuery`]) and `/doc/N.html` ([`Trap::SessionPath`]).
pub const SESSION_PAGES: usize = 6;
/// Real pages `/a/N` of [`Trap::Tracking`].
pub const TRACKING_PAGES: usize = 8;
/// The month the [`Trap::Calendar`] home page links to.
pub const CALENDAR_START: &str = "2026-11";
/// The facets of [`Trap::Faceted`] and their values; `page` (1..=[`FACET_PAGES`]) comes after them.
pub const FACETS: [(&str, &[&str]); 4] = [
    ("color", &["red", "green", "blue", "black"]),
    ("size", &["s", "m", "l", "xl"]),
    ("brand", &["acme", "globex", "initech"]),
    ("sort", &["price", "name", "new"]),
];
/// Values of the `page` facet: `1..=FACET_PAGES`.
pub const FACET_PAGES: usize = 50;
/// The segments a [`Trap::StackedPath`] path is made of.
pub const STACK_SEGMENTS: [&str; 3] = ["a", "b", "c"];
/// The relative links of every stacked page (`/` links to `a/` only).
pub const STACK_LINKS: [&str; 3] = ["a/b/", "c/", "../"];
/// Pages `/n/0..BIG_SITE_PAGES` of [`Trap::BigSite`]: more than the
/// crawler's default budget of 10,000 pages per domain, so the budget, not
/// the site's end, stops the crawl there.
pub const BIG_SITE_PAGES: usize = 10_300;
/// `/` links to `/n/0..FANOUT`, `/n/K` to `/n/{FANOUT*K+1}..=/n/{FANOUT*K+FANOUT}`.
pub const BIG_SITE_FANOUT: usize = 10;

/// The trap hosts of `extras.traps`, in in-scope order.
pub(crate) const TRAP_HOSTS: [SpecialHost; 6] = [
    SpecialHost::Trap(Trap::SessionQuery),
    SpecialHost::Trap(Trap::SessionPath),
    SpecialHost::Trap(Trap::Tracking),
    SpecialHost::Trap(Trap::Calendar),
    SpecialHost::Trap(Trap::Faceted),
    SpecialHost::Trap(Trap::StackedPath),
];

/// The host of `extras.big_site`, after the traps.
pub(crate) const BIG_SITE_HOSTS: [SpecialHost; 1] = [SpecialHost::Trap(Trap::BigSite)];

/// Query parameter names of [`Trap::SessionQuery`]'s session ids, in turn.
const SESSION_PARAMS: [&str; 3] = ["sid", "PHPSESSID", "sessionid"];
/// The parameters of [`Trap::Faceted`], in [`FacetState`] order.
const FACET_NAMES: [&str; 5] = ["color", "size", "brand", "sort", "page"];
/// The first and last calendar month (0001-01, 9999-12), as `year * 12 + month - 1`.
const FIRST_MONTH: u32 = 12;
const LAST_MONTH: u32 = 9999 * 12 + 11;

impl Trap {
    /// The traps of `extras.traps`: all but [`Trap::BigSite`].
    pub const ALL: [Trap; 6] = [
        Trap::SessionQuery,
        Trap::SessionPath,
        Trap::Tracking,
        Trap::Calendar,
        Trap::Faceted,
        Trap::StackedPath,
    ];

    pub fn host(self) -> &'static str {
        match self {
            Trap::SessionQuery => "trap-sid.test",
            Trap::SessionPath => "trap-jsession.test",
            Trap::Tracking => "trap-track.test",
            Trap::Calendar => "trap-calendar.test",
            Trap::Faceted => "trap-facets.test",
            Trap::StackedPath => "trap-stack.test",
            Trap::BigSite => "trap-big.test",
        }
    }

    /// The canonical paths a correct crawler stores (all of them, but for
    /// [`Trap::BigSite`], of which it stores at most its budget): `/` and
    /// the real pages; only `/` where the rest is a trap.
    pub fn real_paths(self) -> Vec<String> {
        let home = std::iter::once("/".to_string());
        match self {
            Trap::SessionQuery => home
                .chain((0..SESSION_PAGES).map(|n| format!("/p/{n}.html")))
                .collect(),
            Trap::SessionPath => home
                .chain((0..SESSION_PAGES).map(|n| format!("/doc/{n}.html")))
                .collect(),
            Trap::Tracking => home
                .chain((0..TRACKING_PAGES).map(|n| format!("/a/{n}")))
                .collect(),
            Trap::Calendar | Trap::Faceted | Trap::StackedPath => home.collect(),
            Trap::BigSite => home
                .chain((0..BIG_SITE_PAGES).map(|n| format!("/n/{n}")))
                .collect(),
        }
    }

    /// Whether a request (path and query, as in the request log) went into
    /// the trap: a URL carrying a session id or tracking parameter, a
    /// calendar or search page, a stacked path. Never for robots.txt, nor on
    /// [`Trap::BigSite`], which has no trap.
    pub fn is_trap_request(self, path_and_query: &str) -> bool {
        let (path, query) = split_target(path_and_query);
        let has_param = |pred: fn(&str) -> bool| query.is_some_and(|q| params(q).any(|(k, _)| pred(k)));
        match self {
            Trap::SessionQuery => has_param(|k| SESSION_PARAMS.iter().any(|s| s.eq_ignore_ascii_case(k))),
            Trap::SessionPath => path.contains(';'),
            Trap::Tracking => has_param(is_tracking_param),
            Trap::Calendar => path == "/calendar",
            Trap::Faceted => path == "/search",
            Trap::StackedPath => stacked_segments(path).is_some(),
            Trap::BigSite => false,
        }
    }
}

/// `utm_*`, `fbclid`, `gclid` (any case).
fn is_tracking_param(name: &str) -> bool {
    name.get(..4).is_some_and(|p| p.eq_ignore_ascii_case("utm_"))
        || name.eq_ignore_ascii_case("fbclid")
        || name.eq_ignore_ascii_case("gclid")
}

/// Path and query (if any) of a request target, without its fragment.
fn split_target(path_and_query: &str) -> (&str, Option<&str>) {
    let target = path_and_query.split('#').next().unwrap_or("");
    match target.split_once('?') {
        Some((path, query)) => (path, Some(query)),
        None => (target, None),
    }
}

/// The `name=value` pieces of a query (empty pieces skipped; no `=`: empty value).
fn params(query: &str) -> impl Iterator<Item = (&str, &str)> {
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| p.split_once('=').unwrap_or((p, "")))
}

/// `N` of `{prefix}{N}{suffix}` (canonical decimal), when `N < pages`.
fn numbered(path: &str, prefix: &str, suffix: &str, pages: usize) -> Option<usize> {
    let n = parse_num(path.strip_prefix(prefix)?.strip_suffix(suffix)?)?;
    (n < pages).then_some(n)
}

// ---- calendar ----------------------------------------------------------------

/// `YYYY-MM` (years 0001..=9999) as `year * 12 + month - 1`.
fn parse_month(s: &str) -> Option<u32> {
    let b = s.as_bytes();
    let digits = |r: std::ops::Range<usize>| b.get(r).is_some_and(|d| d.iter().all(u8::is_ascii_digit));
    if b.len() != 7 || b[4] != b'-' || !digits(0..4) || !digits(5..7) {
        return None;
    }
    let year: u32 = s.get(..4)?.parse().ok()?;
    let month: u32 = s.get(5..)?.parse().ok()?;
    ((1..=9999).contains(&year) && (1..=12).contains(&month)).then(|| year * 12 + month - 1)
}

fn month_name(m: u32) -> String {
    format!("{:04}-{:02}", m / 12, m % 12 + 1)
}

/// The links of a calendar month: the month before, after, a year before
/// and a year after, those within 0001-01..=9999-12.
fn calendar_links(m: u32) -> Vec<String> {
    [
        m.checked_sub(1),
        m.checked_add(1),
        m.checked_sub(12),
        m.checked_add(12),
    ]
    .into_iter()
    .flatten()
    .filter(|m| (FIRST_MONTH..=LAST_MONTH).contains(m))
    .map(|m| format!("/calendar?month={}", month_name(m)))
    .collect()
}

// ---- faceted search ----------------------------------------------------------

/// A search page: the value index set for each of [`FACET_NAMES`] (for
/// `page`, the page number minus one).
type FacetState = [Option<usize>; 5];

fn facet_len(i: usize) -> usize {
    FACETS.get(i).map_or(FACET_PAGES, |(_, values)| values.len())
}

fn facet_value(i: usize, v: usize) -> String {
    match FACETS.get(i) {
        Some((_, values)) => values[v].to_string(),
        None => (v + 1).to_string(),
    }
}

/// The facets of a `/search` query; `None` for an unknown parameter or
/// value, or a facet given twice (404).
fn parse_facets(query: Option<&str>) -> Option<FacetState> {
    let mut state: FacetState = [None; 5];
    for (name, value) in params(query.unwrap_or("")) {
        let i = FACET_NAMES.iter().position(|n| *n == name)?;
        if state[i].is_some() {
            return None;
        }
        let v = match FACETS.get(i) {
            Some((_, values)) => values.iter().position(|x| *x == value)?,
            None => parse_num(value).filter(|p| (1..=FACET_PAGES).contains(p))? - 1,
        };
        state[i] = Some(v);
    }
    Some(state)
}

/// Every refinement of `state` that sets or changes one facet, its
/// parameters in an order drawn from `rng` (hrefs: `&` as `&amp;`).
fn facet_links(state: &FacetState, rng: &mut SplitMix) -> Vec<String> {
    let mut out = Vec::new();
    for i in 0..FACET_NAMES.len() {
        for v in 0..facet_len(i) {
            if state[i] == Some(v) {
                continue;
            }
            let mut next = *state;
            next[i] = Some(v);
            let mut set: Vec<(usize, usize)> = next
                .iter()
                .enumerate()
                .filter_map(|(i, v)| v.map(|v| (i, v)))
                .collect();
            // Fisher-Yates.
            for k in (1..set.len()).rev() {
                set.swap(k, rng.below(k + 1));
            }
            let mut href = String::from("/search?");
            for (k, &(i, v)) in set.iter().enumerate() {
                if k > 0 {
                    href.push_str("&amp;");
                }
                let _ = write!(href, "{}={}", FACET_NAMES[i], facet_value(i, v));
            }
            out.push(href);
        }
    }
    out
}

// ---- stacked paths -----------------------------------------------------------

/// The number of segments of a stacked path (`/a/`, `/a/b/c`: segments
/// [`STACK_SEGMENTS`] only, an optional final `/`); `None` for `/` and
/// anything else.
fn stacked_segments(path: &str) -> Option<usize> {
    let rest = path.strip_prefix('/')?;
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    if rest.is_empty() {
        return None;
    }
    let mut n = 0;
    for segment in rest.split('/') {
        if !STACK_SEGMENTS.contains(&segment) {
            return None;
        }
        n += 1;
    }
    Some(n)
}

// ---- big site ----------------------------------------------------------------

/// The pages `/n/K` links to (`None`: `/`).
fn big_site_children(k: Option<usize>) -> std::ops::Range<usize> {
    match k {
        None => 0..BIG_SITE_FANOUT.min(BIG_SITE_PAGES),
        Some(k) => {
            let first = (BIG_SITE_FANOUT * k + 1).min(BIG_SITE_PAGES);
            first..(first + BIG_SITE_FANOUT).min(BIG_SITE_PAGES)
        }
    }
}

/// A big-site page, smaller than [`page`]'s (under 300 bytes): ten
/// thousand of them are a long crawl, and their bytes are not what it tests.
fn tiny_page(title: &str, children: std::ops::Range<usize>) -> Reply {
    let mut s = String::with_capacity(300);
    let _ = writeln!(s, "<html><title>{title}</title>");
    for c in children {
        let _ = writeln!(s, "<a href=\"/n/{c}\">.</a>");
    }
    reply(200, HTML, s)
}

// ---- fresh values ------------------------------------------------------------

const HEX: &[u8; 16] = b"0123456789abcdef";
const HEX_UPPER: &[u8; 16] = b"0123456789ABCDEF";
const ALNUM_LOWER: &[u8; 36] = b"abcdefghijklmnopqrstuvwxyz0123456789";
const ALNUM: &[u8; 62] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

/// `len` characters drawn from `alphabet`.
fn token(rng: &mut SplitMix, alphabet: &[u8], len: usize) -> String {
    (0..len)
        .map(|_| char::from(alphabet[rng.below(alphabet.len())]))
        .collect()
}

/// Per-server state of the trap hosts: a response counter, the seed of
/// each answer's fresh values, so no two answers carry the same ids.
#[derive(Debug, Default)]
pub(crate) struct TrapState {
    responses: AtomicU64,
}

impl TrapState {
    /// This answer's number and the generator of its fresh values.
    fn next(&self) -> (u64, SplitMix) {
        let n = self.responses.fetch_add(1, Ordering::Relaxed);
        (n, SplitMix::new(mix(&[0x7a_a95, n])))
    }

    /// The answer to `GET path_and_query` on `trap`'s host.
    pub(crate) fn respond(&self, trap: Trap, path_and_query: &str) -> Reply {
        let (path, query) = split_target(path_and_query);
        if path == "/robots.txt" {
            return reply(200, "text/plain", ROBOTS_ALLOW_ALL);
        }
        match trap {
            Trap::SessionQuery => {
                let title = match numbered(path, "/p/", ".html", SESSION_PAGES) {
                    Some(n) => format!("page {n}"),
                    None if path == "/" => trap.host().to_string(),
                    None => return not_found(),
                };
                let (n, mut rng) = self.next();
                let links: Vec<String> = (0..SESSION_PAGES)
                    .map(|p| {
                        let id = match (n as usize + p) % SESSION_PARAMS.len() {
                            0 => token(&mut rng, HEX, 32),
                            1 => token(&mut rng, ALNUM_LOWER, 26),
                            _ => token(&mut rng, HEX, 24),
                        };
                        let name = SESSION_PARAMS[(n as usize + p) % SESSION_PARAMS.len()];
                        format!("/p/{p}.html?{name}={id}")
                    })
                    .collect();
                page(&title, &refs(&links))
            }
            Trap::SessionPath => {
                // The servlet container strips its path parameter.
                let base = path.split(';').next().unwrap_or(path);
                let title = match numbered(base, "/doc/", ".html", SESSION_PAGES) {
                    Some(n) => format!("doc {n}"),
                    None if base == "/" => trap.host().to_string(),
                    None => return not_found(),
                };
                let (n, mut rng) = self.next();
                let links: Vec<String> = (0..SESSION_PAGES)
                    .map(|p| {
                        let name = if (n as usize + p).is_multiple_of(2) {
                            "jsessionid"
                        } else {
                            "JSESSIONID"
                        };
                        format!("/doc/{p}.html;{name}={}", token(&mut rng, HEX_UPPER, 32))
                    })
                    .collect();
                page(&title, &refs(&links))
            }
            Trap::Tracking => {
                let title = match numbered(path, "/a/", "", TRACKING_PAGES) {
                    Some(n) => format!("article {n}"),
                    None if path == "/" => trap.host().to_string(),
                    None => return not_found(),
                };
                let (n, mut rng) = self.next();
                let links: Vec<String> = (0..TRACKING_PAGES)
                    .map(|p| match (n as usize + p) % 3 {
                        0 => format!(
                            "/a/{p}?utm_source=news&amp;utm_medium=email&amp;utm_campaign=c{}",
                            token(&mut rng, HEX, 12)
                        ),
                        1 => format!("/a/{p}?fbclid=IwAR{}", token(&mut rng, ALNUM, 40)),
                        _ => format!("/a/{p}?gclid=Cj0K{}&amp;utm_term=x", token(&mut rng, ALNUM, 30)),
                    })
                    .collect();
                page(&title, &refs(&links))
            }
            Trap::Calendar => match path {
                "/" => page(trap.host(), &[&format!("/calendar?month={CALENDAR_START}")]),
                "/calendar" => {
                    let month = query.and_then(|q| q.strip_prefix("month=")).and_then(parse_month);
                    match month {
                        Some(m) => page(&month_name(m), &refs(&calendar_links(m))),
                        None => not_found(),
                    }
                }
                _ => not_found(),
            },
            Trap::Faceted => match path {
                "/" => page(trap.host(), &["/search"]),
                "/search" => match parse_facets(query) {
                    Some(state) => {
                        let (_, mut rng) = self.next();
                        page("search", &refs(&facet_links(&state, &mut rng)))
                    }
                    None => not_found(),
                },
                _ => not_found(),
            },
            Trap::StackedPath => match path {
                "/" => page(trap.host(), &["a/"]),
                // The path is made of a, b, c and slashes only: safe to echo.
                _ if stacked_segments(path).is_some() => page(path, &STACK_LINKS),
                _ => not_found(),
            },
            Trap::BigSite => match path {
                "/" => tiny_page("big", big_site_children(None)),
                _ => match numbered(path, "/n/", "", BIG_SITE_PAGES) {
                    Some(k) => tiny_page(&format!("n{k}"), big_site_children(Some(k))),
                    None => not_found(),
                },
            },
        }
    }
}

fn refs(links: &[String]) -> Vec<&str> {
    links.iter().map(String::as_str).collect()
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeSet, HashSet, VecDeque};

    use url::Url;

    use super::super::hostile::ReplyBody;
    use super::*;

    fn get(st: &TrapState, trap: Trap, path: &str) -> (u16, String) {
        let r = st.respond(trap, path);
        match r.body {
            ReplyBody::Full(b) => (r.status, String::from_utf8(b.to_vec()).unwrap()),
            other => panic!("{other:?}"),
        }
    }

    /// The hrefs of a page, `&amp;` decoded as an HTML extractor does.
    fn hrefs(html: &str) -> Vec<String> {
        html.split("href=\"")
            .skip(1)
            .map(|s| s.split('"').next().unwrap().replace("&amp;", "&"))
            .collect()
    }

    /// What a crawler that strips session and tracking parameters keeps.
    fn canonical(link: &str) -> String {
        let (path, query) = split_target(link);
        let path: Vec<&str> = path.split('/').map(|s| s.split(';').next().unwrap()).collect();
        let mut out = path.join("/");
        let kept: Vec<&str> = query
            .unwrap_or("")
            .split('&')
            .filter(|p| {
                let name = p.split('=').next().unwrap();
                !p.is_empty()
                    && !is_tracking_param(name)
                    && !SESSION_PARAMS.iter().any(|s| s.eq_ignore_ascii_case(name))
            })
            .collect();
        if !kept.is_empty() {
            out.push('?');
            out.push_str(&kept.join("&"));
        }
        out
    }

    #[test]
    fn robots_allow_all_on_every_trap_host() {
        let st = TrapState::default();
        for trap in Trap::ALL.into_iter().chain([Trap::BigSite]) {
            let r = st.respond(trap, "/robots.txt");
            assert_eq!(r.status, 200, "{trap:?}");
            assert!(matches!(&r.body, ReplyBody::Full(b) if &b[..] == ROBOTS_ALLOW_ALL.as_bytes()));
            let robot =
                texting_robots::Robot::new(super::super::USER_AGENT_TOKEN, ROBOTS_ALLOW_ALL.as_bytes())
                    .unwrap();
            assert!(robot.allowed("/calendar?month=2026-11") && robot.allowed("/a/b/c/"));
            assert!(!trap.is_trap_request("/robots.txt"));
            assert_eq!(get(&st, trap, "/").0, 200, "{trap:?}");
            assert_eq!(get(&st, trap, "/nope").0, 404, "{trap:?}");
            for p in trap.real_paths().iter().take(50) {
                assert_eq!(get(&st, trap, p).0, 200, "{trap:?} {p}");
                assert!(!trap.is_trap_request(p), "{trap:?} {p}");
            }
        }
        let hosts: HashSet<&str> = Trap::ALL.iter().map(|t| t.host()).collect();
        assert_eq!(hosts.len(), 6);
        assert!(!hosts.contains(Trap::BigSite.host()));
    }

    /// Session and tracking hosts: fresh ids on every answer, every link
    /// canonically one of the real pages, and the linked URL served.
    #[test]
    fn session_and_tracking_links_are_fresh_and_canonical() {
        let st = TrapState::default();
        let cases: [(Trap, &[&str]); 3] = [
            (Trap::SessionQuery, &["?sid=", "?PHPSESSID=", "?sessionid="]),
            (Trap::SessionPath, &[";jsessionid=", ";JSESSIONID="]),
            (
                Trap::Tracking,
                &[
                    "?utm_source=news&utm_medium=email&utm_campaign=",
                    "?fbclid=",
                    "?gclid=",
                ],
            ),
        ];
        for (trap, spellings) in cases {
            let real = trap.real_paths();
            let pages: BTreeSet<String> = real[1..].iter().cloned().collect();
            for path in &real {
                let (s1, a) = get(&st, trap, path);
                let (s2, b) = get(&st, trap, path);
                assert_eq!((s1, s2), (200, 200), "{trap:?} {path}");
                assert_ne!(a, b, "{trap:?} {path}: same ids twice");
                let (la, lb) = (hrefs(&a), hrefs(&b));
                assert_eq!(la.len(), pages.len(), "{trap:?} {path}");
                // Every page links to every real page but home, and only through a trap URL.
                let canon: BTreeSet<String> = la.iter().map(|l| canonical(l)).collect();
                assert_eq!(canon, pages, "{trap:?} {path}");
                for l in &la {
                    assert!(trap.is_trap_request(l), "{trap:?} {l}");
                    assert_ne!(&canonical(l), l);
                    assert!(!lb.contains(l), "{trap:?} {l} twice");
                    assert_eq!(get(&st, trap, l).0, 200, "{trap:?} {l}");
                }
                for s in spellings {
                    assert!(
                        la.iter().chain(&lb).any(|l| l.contains(s)),
                        "{trap:?} {path}: no {s}"
                    );
                }
                assert!(a.contains("&amp;") == (trap == Trap::Tracking), "{trap:?}");
            }
        }
        // A session id's shape.
        let (_, home) = get(&st, Trap::SessionQuery, "/");
        let sid = hrefs(&home)
            .into_iter()
            .find_map(|l| l.split_once("?sid=").map(|(_, id)| id.to_string()));
        let sid = sid.unwrap();
        assert!(
            sid.len() == 32 && sid.bytes().all(|b| b.is_ascii_hexdigit()),
            "{sid}"
        );
        assert_eq!(get(&st, Trap::SessionQuery, "/p/6.html").0, 404);
        assert_eq!(get(&st, Trap::SessionQuery, "/p/06.html").0, 404);
        assert_eq!(get(&st, Trap::SessionPath, "/doc/5.html;jsessionid=X?q=1").0, 200);
        assert_eq!(get(&st, Trap::Tracking, "/a/8").0, 404);
        assert!(Trap::SessionQuery.is_trap_request("/p/1.html?PhpSessId=1"));
        assert!(!Trap::SessionQuery.is_trap_request("/p/1.html?side=1"));
        assert!(!Trap::Tracking.is_trap_request("/a/1?utm=1"));
    }

    #[test]
    fn calendar_months_wrap_years_and_stop_at_the_ends() {
        let m = |s: &str| parse_month(s).unwrap();
        let months = |s: &str| -> Vec<String> {
            calendar_links(m(s))
                .iter()
                .map(|l| l.strip_prefix("/calendar?month=").unwrap().to_string())
                .collect()
        };
        assert_eq!(months("2026-12"), ["2026-11", "2027-01", "2025-12", "2027-12"]);
        assert_eq!(months("2026-01"), ["2025-12", "2026-02", "2025-01", "2027-01"]);
        assert_eq!(months("0001-01"), ["0001-02", "0002-01"]);
        assert_eq!(months("0001-12"), ["0001-11", "0002-01", "0002-12"]);
        assert_eq!(months("9999-12"), ["9999-11", "9998-12"]);
        assert_eq!(months("9999-01"), ["9998-12", "9999-02", "9998-01"]);
        for bad in [
            "0000-12",
            "2026-13",
            "2026-00",
            "2026-1",
            "+026-01",
            "2026/01",
            "20260-1",
            "２026-01",
        ] {
            assert_eq!(parse_month(bad), None, "{bad}");
        }

        let st = TrapState::default();
        let (status, home) = get(&st, Trap::Calendar, "/");
        assert_eq!(
            (status, hrefs(&home)),
            (200, vec!["/calendar?month=2026-11".to_string()])
        );
        let (status, page) = get(&st, Trap::Calendar, "/calendar?month=2026-12");
        assert_eq!(status, 200);
        assert_eq!(
            hrefs(&page),
            [
                "/calendar?month=2026-11",
                "/calendar?month=2027-01",
                "/calendar?month=2025-12",
                "/calendar?month=2027-12"
            ]
        );
        for (path, status) in [
            ("/calendar?month=0001-01", 200),
            ("/calendar?month=9999-12", 200),
            ("/calendar?month=0000-01", 404),
            ("/calendar", 404),
            ("/calendar?month=2026-11&x=1", 404),
            ("/calendar/", 404),
        ] {
            assert_eq!(get(&st, Trap::Calendar, path).0, status, "{path}");
        }
        assert!(Trap::Calendar.is_trap_request("/calendar?month=2026-11"));
        assert!(!Trap::Calendar.is_trap_request("/"));
        assert_eq!(Trap::Calendar.real_paths(), ["/"]);
        assert_eq!(LAST_MONTH - FIRST_MONTH + 1, 119_988);
    }

    #[test]
    fn facet_links_change_one_facet_in_random_orders() {
        let st = TrapState::default();
        let (_, home) = get(&st, Trap::Faceted, "/");
        assert_eq!(hrefs(&home), ["/search"]);
        let total: usize = (0..5).map(|i| facet_len(i) + 1).product();
        assert_eq!(total, 20_400);

        let mut orders_seen = HashSet::new();
        for path in [
            "/search",
            "/search?size=m&color=red",
            "/search?page=50&sort=new&brand=acme&size=xl&color=black",
        ] {
            let state = parse_facets(split_target(path).1).unwrap();
            let set = state.iter().filter(|v| v.is_some()).count();
            for _ in 0..3 {
                let (status, html) = get(&st, Trap::Faceted, path);
                assert_eq!(status, 200, "{path}");
                assert!(html.contains("&amp;") || set == 0);
                let links = hrefs(&html);
                let expected: usize = (0..5)
                    .map(|i| facet_len(i) - usize::from(state[i].is_some()))
                    .sum();
                assert_eq!(links.len(), expected, "{path}");
                let mut distinct = HashSet::new();
                for l in &links {
                    assert!(Trap::Faceted.is_trap_request(l));
                    let next = parse_facets(split_target(l).1).unwrap_or_else(|| panic!("{l}"));
                    let changed: Vec<usize> = (0..5).filter(|&i| next[i] != state[i]).collect();
                    assert_eq!(changed.len(), 1, "{path} -> {l}");
                    assert!(next[changed[0]].is_some(), "{l} removes a facet");
                    assert!(distinct.insert(next), "{l} twice");
                    orders_seen.insert((next, split_target(l).1.unwrap().to_string()));
                }
                assert_eq!(get(&st, Trap::Faceted, &links[0]).0, 200);
            }
        }
        // The same refinement comes in more than one order.
        let combos: HashSet<_> = orders_seen.iter().map(|(s, _)| *s).collect();
        assert!(
            orders_seen.len() > combos.len() + 20,
            "{} orders of {} combinations",
            orders_seen.len(),
            combos.len()
        );

        for bad in [
            "/search?color=pink",
            "/search?color=red&color=blue",
            "/search?page=0",
            "/search?page=51",
            "/search?q=x",
            "/search/",
        ] {
            assert_eq!(get(&st, Trap::Faceted, bad).0, 404, "{bad}");
        }
        assert_eq!(get(&st, Trap::Faceted, "/search?page=7&brand=initech").0, 200);
        assert!(Trap::Faceted.is_trap_request("/search"));
        assert!(!Trap::Faceted.is_trap_request("/"));
    }

    #[test]
    fn stacked_links_stack_segments() {
        let st = TrapState::default();
        let base = Url::parse("http://trap-stack.test/").unwrap();
        let (status, home) = get(&st, Trap::StackedPath, "/");
        assert_eq!((status, hrefs(&home)), (200, vec!["a/".to_string()]));
        assert_eq!(base.join("a/").unwrap().path(), "/a/");

        let hops = [
            ("/a/", ["/a/a/b/", "/a/c/", "/"]),
            ("/a/a/b/", ["/a/a/b/a/b/", "/a/a/b/c/", "/a/a/"]),
            ("/a/c/", ["/a/c/a/b/", "/a/c/c/", "/a/"]),
            ("/a/b", ["/a/a/b/", "/a/c/", "/"]),
        ];
        for (path, targets) in hops {
            let (status, html) = get(&st, Trap::StackedPath, path);
            assert_eq!(status, 200, "{path}");
            assert!(Trap::StackedPath.is_trap_request(path));
            let page = base.join(path).unwrap();
            let resolved: Vec<String> = hrefs(&html)
                .iter()
                .map(|h| page.join(h).unwrap().path().to_string())
                .collect();
            assert_eq!(resolved, targets, "{path}");
            for t in targets {
                assert_eq!(get(&st, Trap::StackedPath, t).0, 200, "{t}");
            }
        }
        // Following `a/b/` stacks two segments on every hop, without end.
        let mut url = base.join("a/").unwrap();
        for hop in 1..=30 {
            url = url.join("a/b/").unwrap();
            assert_eq!(stacked_segments(url.path()), Some(1 + 2 * hop));
            assert_eq!(get(&st, Trap::StackedPath, url.path()).0, 200);
        }
        for bad in ["/d/", "/a//b/", "/a/bb/", "//"] {
            assert_eq!(get(&st, Trap::StackedPath, bad).0, 404, "{bad}");
            assert!(!Trap::StackedPath.is_trap_request(bad));
        }
        assert!(!Trap::StackedPath.is_trap_request("/"));
        assert_eq!(Trap::StackedPath.real_paths(), ["/"]);
    }

    #[test]
    fn big_site_is_reachable_tiny_and_bounded() {
        const { assert!(BIG_SITE_PAGES > dispatcher::limits::DEFAULT_MAX_PAGES_PER_DOMAIN as usize) };
        let st = TrapState::default();
        let mut seen = HashSet::from(["/".to_string()]);
        let mut queue = VecDeque::from([("/".to_string(), 0)]);
        let mut deepest = 0;
        while let Some((path, depth)) = queue.pop_front() {
            let (status, html) = get(&st, Trap::BigSite, &path);
            assert_eq!(status, 200, "{path}");
            assert!(html.len() < 300, "{path}: {} bytes", html.len());
            deepest = deepest.max(depth);
            for l in hrefs(&html) {
                if seen.insert(l.clone()) {
                    queue.push_back((l, depth + 1));
                }
            }
        }
        let real: HashSet<String> = Trap::BigSite.real_paths().into_iter().collect();
        assert_eq!(seen, real);
        assert_eq!(seen.len(), BIG_SITE_PAGES + 1);
        assert!(deepest <= 5, "{deepest} hops");
        for path in ["/n/10300", "/n/99999", "/n/01", "/n/"] {
            assert_eq!(get(&st, Trap::BigSite, path).0, 404, "{path}");
        }
        assert!(!Trap::BigSite.is_trap_request("/n/5"));
    }
}

#[cfg(test)]
mod server_tests {
    use std::time::Duration;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;

    use super::super::{WebExtras, WebServer, WebSpec};
    use super::*;

    async fn status_of(addr: std::net::SocketAddr, host: &str, path: &str) -> u16 {
        let mut s = TcpStream::connect(addr).await.expect("connect");
        let req = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
        s.write_all(req.as_bytes()).await.expect("write");
        let mut buf = Vec::new();
        tokio::time::timeout(Duration::from_secs(20), s.read_to_end(&mut buf))
            .await
            .expect("timely")
            .expect("read");
        let head = String::from_utf8_lossy(&buf[..buf.len().min(12)]).to_string();
        head.strip_prefix("HTTP/1.1 ")
            .and_then(|s| s.get(..3))
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("{head}"))
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn serves_trap_hosts_after_the_others() {
        let spec = WebSpec {
            hosts: 2,
            pages_per_host: 5,
            ..WebSpec::default()
        };
        let extras = WebExtras {
            hostile: true,
            traps: true,
            big_site: true,
            ..WebExtras::default()
        };
        let server = WebServer::start_with(spec.clone(), extras, "127.0.0.1:0".parse().unwrap())
            .await
            .expect("start");
        let addr = server.addr();
        let web = server.web();
        let port = addr.port();
        let seeds = web.seed_urls();
        let names = web.in_scope_host_names();
        let specials = super::super::hostile::SPECIAL_HOSTS.len();
        assert_eq!(seeds.len(), 2 + specials + Trap::ALL.len() + 1);
        // Traps after the hostile hosts, in Trap::ALL order, then the big site.
        for (k, trap) in Trap::ALL.into_iter().chain([Trap::BigSite]).enumerate() {
            assert_eq!(names[2 + specials + k], trap.host());
            assert_eq!(seeds[2 + specials + k], format!("http://{}:{port}/", trap.host()));
        }
        for trap in Trap::ALL.into_iter().chain([Trap::BigSite]) {
            let host = format!("{}:{port}", trap.host());
            assert_eq!(status_of(addr, &host, "/").await, 200, "{trap:?}");
            assert_eq!(status_of(addr, &host, "/robots.txt").await, 200, "{trap:?}");
        }
        assert_eq!(status_of(addr, "trap-sid.test", "/p/2.html?sid=abc").await, 200);
        assert_eq!(
            status_of(addr, "trap-jsession.test", "/doc/2.html;jsessionid=AB").await,
            200
        );
        let log = server.requests();
        let sid = log
            .iter()
            .find(|r| r.path == "/p/2.html?sid=abc")
            .expect("logged");
        assert_eq!((sid.host.as_str(), sid.status), ("trap-sid.test", 200));
        assert!(Trap::SessionQuery.is_trap_request(&sid.path));
        server.stop(Duration::from_secs(5)).await;

        // Off (the default): no trap host, and their names are not served.
        let plain = WebServer::start_with(spec, WebExtras::default(), "127.0.0.1:0".parse().unwrap())
            .await
            .expect("start");
        let web = plain.web();
        assert_eq!(web.seed_urls().len(), 2);
        assert!(web.special_host("trap-sid.test").is_none());
        assert_eq!(status_of(plain.addr(), "trap-big.test", "/").await, 404);
        plain.stop(Duration::from_secs(5)).await;
    }
}
