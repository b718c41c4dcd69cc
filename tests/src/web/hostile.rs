//! Hostile hosts, served only with [`WebExtras::hostile`](super::WebExtras):
//! what a crawler meets outside a test lab.
//!
//! - `hostile.test`: its home page links to [`HOSTILE_LINKS`], one trap per
//!   path (a request that never answers, a body that drips, a 50 MiB body, a
//!   gzip bomb, a PDF, Latin-1 / windows-1252 / broken UTF-8 pages, redirect
//!   loops and chains, malformed links, 503 + `Retry-After`, 429), plus a
//!   normal page. It has no robots.txt (404).
//! - one host per [`RobotsCase`], whose home page links to [`ROBOTS_CASE_LINKS`]
//!   (all 200 HTML when requested).
//!
//! - with [`WebExtras::oversized`](super::WebExtras) (separately), one host
//!   per [`Oversized`] case: answers too big for a crawler's arithmetic, its
//!   store or its memory (a `Crawl-delay: 1e20`, a page that decodes past
//!   MongoDB's 16 MiB document limit, a page with 300,000 long outlinks).
//!
//! - with [`WebExtras::internal`](super::WebExtras), [`INTERNAL_LINKS_HOST`],
//!   whose pages link to internal addresses where the server also listens
//!   (`127.0.0.2`, `[::1]`, and `localhost`, which resolves to 127.0.0.1 by
//!   `/etc/hosts`): a crawler must request none of them unless told to.
//!
//! These hosts are in scope (seeds) but not part of
//! [`expected_crawl`](super::SyntheticWeb::expected_crawl): what a crawler
//! stores for a trap depends on its limits, so tests assert them one by one.
//! The robots cases do carry their ground truth: [`RobotsCase::fetched_paths`].
//!
//! Answers that change over time (`/retry-after`, `/throttle`) keep their
//! state in [`HostileState`], one per server.
//!
//! The trap hosts of [`super::traps`] (`extras.traps`, `extras.big_site`)
//! are special hosts too, served through [`HostileState`] with the
//! helpers here.

use std::collections::HashSet;
use std::fmt::Write as _;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;

use super::family::FamilyHost;
use super::html::{MOVED_HTML, NOT_FOUND_HTML};
use super::rng::{mix, SplitMix};
use super::traps::{Trap, TrapState};

/// The host with the traps.
pub const HOSTILE_HOST: &str = "hostile.test";

/// What `hostile.test/` links to, in page order.
pub const HOSTILE_LINKS: [&str; 17] = [
    "/normal",
    "/big-head",
    "/hang",
    "/drip",
    "/huge",
    "/gzip-bomb",
    "/pdf",
    "/latin1",
    "/meta-charset",
    "/bad-utf8",
    "/loop/a",
    "/chain/0",
    "/bad-links",
    "/retry-after",
    "/retry-after-date",
    "/throttle",
    "/normal#again",
];

/// `/big-head` answers with this many `x-filler` headers of
/// [`BIG_HEAD_VALUE`] bytes each after its `content-type`: 90 KiB of head,
/// past the 64 KiB a page keeps and within what the HTTP client accepts.
pub const BIG_HEAD_HEADERS: usize = 90;
pub const BIG_HEAD_VALUE: usize = 1000;
/// Size of `/huge`.
/// What `/pdf` serves (`application/pdf`): binary, not text.
pub const PDF: &[u8] =
    b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n1 0 obj << /Type /Catalog >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n";
pub const HUGE_BYTES: usize = 50 << 20;
/// `/chain/0` → ... → `/chain/{CHAIN_LEN}`, which answers 200.
pub const CHAIN_LEN: usize = 12;
/// How long `/hang` keeps a request open (or until the server stops).
pub const HANG: Duration = Duration::from_secs(600);
/// `Retry-After` of the first `/retry-after` answer, in seconds.
pub const RETRY_AFTER_SECS: u64 = 2;
/// The over-long link on `/bad-links` (a path of this many bytes).
pub const OVERLONG_LINK_LEN: usize = 3000;

/// The links of `/bad-links`, in page order; only the last one is crawlable.
pub fn bad_links() -> Vec<String> {
    let mut long = String::with_capacity(OVERLONG_LINK_LEN);
    long.push('/');
    long.extend(std::iter::repeat_n('a', OVERLONG_LINK_LEN - 1));
    vec![
        "http://[::1".into(),
        "javascript:x()".into(),
        "mailto:a@b".into(),
        "ftp://x/y".into(),
        long,
        "/after-bad-links".into(),
    ]
}

/// One robots.txt edge case, each on its own in-scope host.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RobotsCase {
    /// Empty 200: everything allowed.
    Empty,
    /// 600 KiB of comments between `Disallow: /b/` and `Disallow: /a`: a
    /// crawler that parses the first 500 KiB obeys only the first rule.
    Huge,
    /// 200 with random binary bytes: no rules.
    Binary,
    /// 301 to `/real-robots.txt`, which disallows `/private/`.
    Redirect,
    /// 401: no restrictions.
    Unauthorized,
    /// 403: no restrictions.
    Forbidden,
    /// 500: the whole site is off limits (nothing but robots.txt requested).
    ServerError,
    /// `Disallow: /*.php$`, `Allow: /fine`, `Disallow: /b/`.
    Wildcards,
    /// `Disallow: /a` and `Allow: /a`: allow wins the tie.
    Conflict,
    /// `otherbot` and `*` disallow everything, the `synthcrawler` group only `/private/`.
    Groups,
}

/// What a robots-case home page links to.
pub const ROBOTS_CASE_LINKS: [&str; 6] = ["/a", "/b/c", "/x.php", "/x.php?q=1", "/private/z", "/fine"];

impl RobotsCase {
    pub const ALL: [RobotsCase; 10] = [
        RobotsCase::Empty,
        RobotsCase::Huge,
        RobotsCase::Binary,
        RobotsCase::Redirect,
        RobotsCase::Unauthorized,
        RobotsCase::Forbidden,
        RobotsCase::ServerError,
        RobotsCase::Wildcards,
        RobotsCase::Conflict,
        RobotsCase::Groups,
    ];

    pub fn host(self) -> &'static str {
        match self {
            RobotsCase::Empty => "robots-empty.test",
            RobotsCase::Huge => "robots-huge.test",
            RobotsCase::Binary => "robots-binary.test",
            RobotsCase::Redirect => "robots-redirect.test",
            RobotsCase::Unauthorized => "robots-401.test",
            RobotsCase::Forbidden => "robots-403.test",
            RobotsCase::ServerError => "robots-500.test",
            RobotsCase::Wildcards => "robots-wild.test",
            RobotsCase::Conflict => "robots-conflict.test",
            RobotsCase::Groups => "robots-groups.test",
        }
    }

    /// Whether a correct crawler (agent `synthcrawler`, robots parsed up to
    /// 500 KiB) may request `path` (path and query) on this host.
    pub fn allows(self, path: &str) -> bool {
        let p = path;
        match self {
            RobotsCase::Empty
            | RobotsCase::Binary
            | RobotsCase::Unauthorized
            | RobotsCase::Forbidden
            | RobotsCase::Conflict => true,
            RobotsCase::Huge => !p.starts_with("/b/"),
            RobotsCase::Redirect | RobotsCase::Groups => !p.starts_with("/private/"),
            RobotsCase::ServerError => false,
            RobotsCase::Wildcards => !(p.starts_with("/b/") || (p.ends_with(".php") && !p.contains('?'))),
        }
    }

    /// The page paths (not robots files) a correct crawl requests, sorted:
    /// `/` and the allowed [`ROBOTS_CASE_LINKS`].
    pub fn fetched_paths(self) -> Vec<&'static str> {
        let mut v: Vec<&str> = std::iter::once("/")
            .chain(ROBOTS_CASE_LINKS)
            .filter(|p| self.allows(p))
            .collect();
        v.sort_unstable();
        v
    }

    /// The robots files a correct crawl requests, once each.
    pub fn robots_paths(self) -> &'static [&'static str] {
        match self {
            RobotsCase::Redirect => &["/robots.txt", "/real-robots.txt"],
            _ => &["/robots.txt"],
        }
    }

    /// Status and body of `/robots.txt` (a redirect's body for
    /// [`RobotsCase::Redirect`], whose file is [`REAL_ROBOTS`]).
    pub fn robots(self) -> (u16, Bytes) {
        let text = |s: &'static str| (200, Bytes::from_static(s.as_bytes()));
        match self {
            RobotsCase::Empty => (200, Bytes::new()),
            RobotsCase::Huge => (200, huge_robots().clone()),
            RobotsCase::Binary => (200, binary_robots().clone()),
            RobotsCase::Redirect => (301, Bytes::from_static(MOVED_HTML.as_bytes())),
            RobotsCase::Unauthorized => (401, Bytes::from_static(b"unauthorized\n")),
            RobotsCase::Forbidden => (403, Bytes::from_static(b"forbidden\n")),
            RobotsCase::ServerError => (500, Bytes::from_static(b"internal error\n")),
            RobotsCase::Wildcards => text("User-agent: *\nDisallow: /*.php$\nAllow: /fine\nDisallow: /b/\n"),
            RobotsCase::Conflict => text("User-agent: *\nDisallow: /a\nAllow: /a\n"),
            RobotsCase::Groups => text(
                "User-agent: otherbot\nDisallow: /\n\nUser-agent: synthcrawler\nDisallow: /private/\n\n\
                 User-agent: *\nDisallow: /\n",
            ),
        }
    }
}

/// `robots-redirect.test`'s file, at `/real-robots.txt`.
pub const REAL_ROBOTS: &str = "User-agent: *\nDisallow: /private/\n";

/// Bytes of comment padding in `robots-huge.test`'s robots.txt.
pub const HUGE_ROBOTS_PADDING: usize = 600 * 1024;

/// `Disallow: /b/`, 600 KiB of comments, then `Disallow: /a`.
pub fn huge_robots() -> &'static Bytes {
    static BODY: OnceLock<Bytes> = OnceLock::new();
    BODY.get_or_init(|| {
        let mut s = String::with_capacity(HUGE_ROBOTS_PADDING + 256);
        s.push_str("User-agent: *\nDisallow: /b/\n");
        let line = "# padding padding padding padding padding padding padding padding padding padding\n";
        let start = s.len();
        while s.len() - start < HUGE_ROBOTS_PADDING {
            s.push_str(line);
        }
        s.push_str("Disallow: /a\n");
        Bytes::from(s)
    })
}

/// 4 KiB of deterministic random bytes.
pub fn binary_robots() -> &'static Bytes {
    static BODY: OnceLock<Bytes> = OnceLock::new();
    BODY.get_or_init(|| {
        let mut rng = SplitMix::new(mix(&[0xb1, 0x0b]));
        let v: Vec<u8> = (0..512).flat_map(|_| rng.next_u64().to_le_bytes()).collect();
        Bytes::from(v)
    })
}

/// A host served only with `extras.hostile`, `extras.oversized`,
/// `extras.internal`, `extras.traps` or `extras.big_site`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SpecialHost {
    Hostile,
    Robots(RobotsCase),
    Oversized(Oversized),
    /// [`INTERNAL_LINKS_HOST`], and the internal names it links to.
    Internal,
    /// One of [`super::traps`]'s hosts.
    Trap(Trap),
    /// One of [`super::family`]'s hosts.
    Family(FamilyHost),
}

/// Every hostile host, in in-scope order.
pub(crate) const SPECIAL_HOSTS: [SpecialHost; 11] = [
    SpecialHost::Hostile,
    SpecialHost::Robots(RobotsCase::Empty),
    SpecialHost::Robots(RobotsCase::Huge),
    SpecialHost::Robots(RobotsCase::Binary),
    SpecialHost::Robots(RobotsCase::Redirect),
    SpecialHost::Robots(RobotsCase::Unauthorized),
    SpecialHost::Robots(RobotsCase::Forbidden),
    SpecialHost::Robots(RobotsCase::ServerError),
    SpecialHost::Robots(RobotsCase::Wildcards),
    SpecialHost::Robots(RobotsCase::Conflict),
    SpecialHost::Robots(RobotsCase::Groups),
];

/// Every oversized host, in in-scope order (after the hostile ones when both are on).
pub(crate) const OVERSIZED_HOSTS: [SpecialHost; 3] = [
    SpecialHost::Oversized(Oversized::CrawlDelay),
    SpecialHost::Oversized(Oversized::WideUtf8),
    SpecialHost::Oversized(Oversized::ManyLinks),
];

/// The internal-links host, when `extras.internal` is on (after the others).
pub(crate) const INTERNAL_HOSTS: [SpecialHost; 1] = [SpecialHost::Internal];

impl SpecialHost {
    pub fn name(self) -> &'static str {
        match self {
            SpecialHost::Hostile => HOSTILE_HOST,
            SpecialHost::Robots(c) => c.host(),
            SpecialHost::Oversized(c) => c.host(),
            SpecialHost::Internal => INTERNAL_LINKS_HOST,
            SpecialHost::Trap(t) => t.host(),
            SpecialHost::Family(f) => f.host(),
        }
    }

    /// From a `Host` header (any case, optional port and trailing dot), among
    /// the hosts `served`.
    pub(crate) fn parse(raw: &str, served: &[SpecialHost]) -> Option<SpecialHost> {
        let name = match raw.rsplit_once(':') {
            Some((name, port)) if !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) => name,
            _ => raw,
        };
        let name = name.strip_suffix('.').unwrap_or(name);
        let internal_target = INTERNAL_TARGET_HOSTS.iter().any(|t| t.eq_ignore_ascii_case(name));
        served
            .iter()
            .copied()
            .find(|h| h.name().eq_ignore_ascii_case(name) || (*h == SpecialHost::Internal && internal_target))
    }
}

// ---- links to internal addresses ---------------------------------------------

/// The in-scope host whose pages link to internal addresses.
pub const INTERNAL_LINKS_HOST: &str = "internal-links.test";
/// The hosts it links to, each on the web's port: a loopback address other
/// than the one the web is served on, IPv6 loopback, and a name that
/// resolves to loopback through `/etc/hosts` (no override). The server
/// listens on all of them and answers 200, so a fetch would succeed.
pub const INTERNAL_TARGET_HOSTS: [&str; 3] = ["127.0.0.2", "[::1]", "localhost"];
/// The path linked on each internal host.
pub const INTERNAL_PATH: &str = "/internal";
/// A path of [`INTERNAL_LINKS_HOST`] that redirects (302) to
/// `http://127.0.0.2:PORT{INTERNAL_REDIRECTED_PATH}`.
pub const INTERNAL_REDIRECT: &str = "/to-internal";
pub const INTERNAL_REDIRECTED_PATH: &str = "/redirected";

/// The internal URLs a crawl of [`INTERNAL_LINKS_HOST`] meets on `port`,
/// as the crawler normalises them: the linked ones, then the redirect target.
pub fn internal_urls(port: u16) -> Vec<String> {
    INTERNAL_TARGET_HOSTS
        .iter()
        .map(|h| format!("http://{h}:{port}{INTERNAL_PATH}"))
        .chain(std::iter::once(format!(
            "http://127.0.0.2:{port}{INTERNAL_REDIRECTED_PATH}"
        )))
        .collect()
}

/// The answers of [`INTERNAL_LINKS_HOST`] and of the internal hosts (any
/// path there: 200, so only the crawler's refusal keeps it from a page).
fn internal(host_header: &str, path_and_query: &str) -> Reply {
    let port = host_header
        .rsplit_once(':')
        .and_then(|(_, p)| p.parse::<u16>().ok())
        .unwrap_or(80);
    let name = SpecialHost::Internal.name();
    let on_links_host = host_header
        .get(..name.len())
        .is_some_and(|h| h.eq_ignore_ascii_case(name));
    if !on_links_host {
        return page("internal: must not be fetched", &[]);
    }
    match path_and_query {
        "/" => {
            let urls = internal_urls(port);
            let mut links: Vec<&str> = urls[..INTERNAL_TARGET_HOSTS.len()]
                .iter()
                .map(String::as_str)
                .collect();
            links.push(INTERNAL_REDIRECT);
            page(name, &links)
        }
        INTERNAL_REDIRECT => redirect(302, &internal_urls(port)[INTERNAL_TARGET_HOSTS.len()]),
        _ => not_found(),
    }
}

// ---- oversized answers -------------------------------------------------------

/// One answer too big for a crawler, each on its own in-scope host whose
/// home page links to [`Oversized::links`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Oversized {
    /// robots.txt says `Crawl-delay: 1e20` (no other rule); the home page
    /// links to [`CRAWL_DELAY_PAGES`] pages `/d/0..`, all 200. A crawler
    /// must clamp the delay (to its maximum), not overflow on it.
    CrawlDelay,
    /// `/wide`: [`WIDE_BYTES`] of HTML that is [`WIDE_HEAD`] and then 0xFF
    /// bytes, served as UTF-8. Each 0xFF decodes to U+FFFD (3 bytes), so the
    /// decoded text is about three times [`WIDE_BYTES`]: more than MongoDB's
    /// 16 MiB document limit. No robots.txt.
    WideUtf8,
    /// `/many`: `<base href="http://HOST/trap/aaa…/">` ([`MANY_LINKS_BASE_LEN`]
    /// bytes of path) and then [`MANY_LINKS`] short relative links
    /// `<a href=l0>` … in that order, so every link resolves to a URL of
    /// about 1.5 KB under `/trap/`, which robots.txt disallows: a crawler
    /// that kept them all would hold hundreds of MB of outlinks, and none
    /// of them may be requested.
    ManyLinks,
}

/// Pages `/d/0..` on the [`Oversized::CrawlDelay`] host.
pub const CRAWL_DELAY_PAGES: usize = 4;
/// The `Crawl-delay` of the [`Oversized::CrawlDelay`] host.
pub const HUGE_CRAWL_DELAY: &str = "1e20";
/// Size of `/wide` on the [`Oversized::WideUtf8`] host (about 9.5 MB).
pub const WIDE_BYTES: usize = 9_500_000;
/// What `/wide` starts with; 0xFF bytes follow.
pub const WIDE_HEAD: &str = "<!DOCTYPE html>\n<html><head><title>wide</title></head><body>\n<p>";
/// Links on `/many`.
pub const MANY_LINKS: usize = 300_000;
/// Bytes of the `<base href>` path of `/many`: `/trap/`, `a`s and a final `/`.
pub const MANY_LINKS_BASE_LEN: usize = 1500;
/// What the [`Oversized::ManyLinks`] host's robots.txt disallows (all the links of `/many`).
pub const MANY_LINKS_DISALLOWED: &str = "/trap/";

impl Oversized {
    pub const ALL: [Oversized; 3] = [Oversized::CrawlDelay, Oversized::WideUtf8, Oversized::ManyLinks];

    pub fn host(self) -> &'static str {
        match self {
            Oversized::CrawlDelay => "crawl-delay-1e20.test",
            Oversized::WideUtf8 => "wide-utf8.test",
            Oversized::ManyLinks => "many-links.test",
        }
    }

    /// What the home page links to: every page of the host but `/` itself.
    pub fn links(self) -> Vec<String> {
        match self {
            Oversized::CrawlDelay => (0..CRAWL_DELAY_PAGES).map(|n| format!("/d/{n}")).collect(),
            Oversized::WideUtf8 => vec!["/wide".to_string()],
            Oversized::ManyLinks => vec!["/many".to_string()],
        }
    }

    /// The page paths (not robots.txt) a correct crawl requests and stores
    /// with status 200, sorted: `/` and [`Oversized::links`].
    pub fn fetched_paths(self) -> Vec<String> {
        let mut v: Vec<String> = std::iter::once("/".to_string()).chain(self.links()).collect();
        v.sort_unstable();
        v
    }

    /// robots.txt: status and body.
    fn robots(self) -> Reply {
        match self {
            Oversized::CrawlDelay => reply(
                200,
                "text/plain",
                format!("User-agent: *\nCrawl-delay: {HUGE_CRAWL_DELAY}\n"),
            ),
            Oversized::WideUtf8 => not_found(),
            Oversized::ManyLinks => reply(
                200,
                "text/plain",
                format!("User-agent: *\nDisallow: {MANY_LINKS_DISALLOWED}\n"),
            ),
        }
    }

    /// The answer to `GET path_and_query` with `Host: host_header`.
    fn respond(self, host_header: &str, path_and_query: &str) -> Reply {
        let path = path_and_query.split(['?', '#']).next().unwrap_or("");
        if path == "/robots.txt" {
            return self.robots();
        }
        if path == "/" {
            let links = self.links();
            let links: Vec<&str> = links.iter().map(String::as_str).collect();
            return page(self.host(), &links);
        }
        match (self, path) {
            (Oversized::CrawlDelay, _) if self.links().iter().any(|l| l == path) => page(path, &["/"]),
            (Oversized::WideUtf8, "/wide") => reply(200, HTML, wide_body().clone()),
            (Oversized::ManyLinks, "/many") => reply(200, HTML, many_links_body(host_header)),
            _ => not_found(),
        }
    }
}

/// `/wide`: [`WIDE_HEAD`], then 0xFF up to [`WIDE_BYTES`].
pub fn wide_body() -> &'static Bytes {
    static BODY: OnceLock<Bytes> = OnceLock::new();
    BODY.get_or_init(|| {
        let mut v = Vec::with_capacity(WIDE_BYTES);
        v.extend_from_slice(WIDE_HEAD.as_bytes());
        v.resize(WIDE_BYTES, 0xFF);
        Bytes::from(v)
    })
}

/// The `<base href>` path of `/many`: `/trap/aaa…a/`, [`MANY_LINKS_BASE_LEN`] bytes.
pub fn many_links_base_path() -> String {
    let mut p = String::with_capacity(MANY_LINKS_BASE_LEN);
    p.push_str(MANY_LINKS_DISALLOWED);
    p.extend(std::iter::repeat_n(
        'a',
        MANY_LINKS_BASE_LEN - MANY_LINKS_DISALLOWED.len() - 1,
    ));
    p.push('/');
    p
}

/// The path link `n` of `/many` resolves to.
pub fn many_links_target(n: usize) -> String {
    format!("{}l{n}", many_links_base_path())
}

/// `/many`, with its base on `host_header` (the name and port the crawler asked for).
fn many_links_body(host_header: &str) -> Bytes {
    let mut s = String::with_capacity(MANY_LINKS * 24 + MANY_LINKS_BASE_LEN + 256);
    let _ = write!(
        s,
        "<!DOCTYPE html>\n<html><head><title>many links</title>\n<base href=\"http://{host_header}{}\"></head><body>\n",
        many_links_base_path()
    );
    for n in 0..MANY_LINKS {
        let _ = writeln!(s, "<a href=l{n}>{n}</a>");
    }
    s.push_str("</body></html>\n");
    Bytes::from(s)
}

/// How the body of a [`Reply`] is produced.
#[derive(Debug)]
pub(crate) enum ReplyBody {
    Full(Bytes),
    /// [`HUGE_BYTES`] of HTML, streamed in chunks.
    Huge,
    /// One byte per second, forever.
    Drip,
    /// No answer at all: the request is held open.
    Hang,
}

#[derive(Debug)]
pub(crate) struct Reply {
    /// 0 for [`ReplyBody::Hang`].
    pub(crate) status: u16,
    pub(crate) headers: Vec<(&'static str, String)>,
    pub(crate) body: ReplyBody,
}

pub(super) const HTML: &str = "text/html; charset=utf-8";

pub(super) fn reply(status: u16, content_type: &str, body: impl Into<Bytes>) -> Reply {
    Reply {
        status,
        headers: vec![("content-type", content_type.to_string())],
        body: ReplyBody::Full(body.into()),
    }
}

/// A small HTML page: a title and one `<a href="...">` per link, written as
/// given (so an `&` in a link must come as `&amp;`).
pub(super) fn page(title: &str, links: &[&str]) -> Reply {
    let mut s = String::with_capacity(256);
    let _ = write!(
        s,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{title}</title></head><body>\n<h1>{title}</h1>\n"
    );
    for l in links {
        let _ = writeln!(s, "<p><a href=\"{l}\">{l}</a></p>");
    }
    s.push_str("</body></html>\n");
    reply(200, HTML, s)
}

fn redirect(status: u16, location: &str) -> Reply {
    let mut r = reply(status, HTML, MOVED_HTML);
    r.headers.push(("location", location.to_string()));
    r
}

pub(super) fn not_found() -> Reply {
    reply(404, HTML, NOT_FOUND_HTML)
}

/// Per-server memory of the answers that change after the first request.
#[derive(Debug, Default)]
pub(crate) struct HostileState {
    answered: Mutex<HashSet<&'static str>>,
    /// The trap hosts' fresh session ids and parameter orders.
    traps: TrapState,
}

impl HostileState {
    /// True the first time it is called for `key`.
    fn first(&self, key: &'static str) -> bool {
        self.answered
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key)
    }

    /// The answer to `GET path_and_query` on a hostile host (`host_header`:
    /// the request's `Host`, for answers that name their own origin).
    pub(crate) fn respond(&self, host: SpecialHost, host_header: &str, path_and_query: &str) -> Reply {
        match host {
            SpecialHost::Hostile => self.hostile(path_and_query),
            SpecialHost::Robots(case) => robots_case(case, path_and_query),
            SpecialHost::Oversized(case) => case.respond(host_header, path_and_query),
            SpecialHost::Internal => internal(host_header, path_and_query),
            SpecialHost::Trap(trap) => self.traps.respond(trap, path_and_query),
            SpecialHost::Family(f) => f.respond(host_header, path_and_query),
        }
    }

    fn hostile(&self, path_and_query: &str) -> Reply {
        let path = path_and_query.split('#').next().unwrap_or("");
        match path {
            "/" => page("hostile home", &HOSTILE_LINKS),
            "/normal" => page("a normal page", &["/"]),
            "/after-bad-links" => page("after bad links", &[]),
            "/big-head" => {
                let mut r = page("a big head", &[]);
                let filler = "f".repeat(BIG_HEAD_VALUE);
                r.headers
                    .extend(std::iter::repeat_n(("x-filler", filler), BIG_HEAD_HEADERS));
                r
            }
            "/hang" => Reply {
                status: 0,
                headers: Vec::new(),
                body: ReplyBody::Hang,
            },
            "/drip" => Reply {
                status: 200,
                headers: vec![("content-type", HTML.to_string())],
                body: ReplyBody::Drip,
            },
            "/huge" => Reply {
                status: 200,
                headers: vec![("content-type", HTML.to_string())],
                body: ReplyBody::Huge,
            },
            "/gzip-bomb" => {
                let mut r = reply(200, "text/html", gzip_bomb().clone());
                r.headers.push(("content-encoding", "gzip".to_string()));
                r
            }
            "/pdf" => reply(200, "application/pdf", PDF),
            "/latin1" => reply(
                200,
                "text/html; charset=ISO-8859-1",
                &b"<!DOCTYPE html>\n<html><head><title>caf\xe9</title></head><body><p>Un caf\xe9 cr\xe8me.</p></body></html>\n"[..],
            ),
            "/meta-charset" => reply(
                200,
                "text/html",
                &b"<meta charset=\"windows-1252\">\n<html><head><title>na\xefve</title></head><body><p>na\xefve \x93quotes\x94</p></body></html>\n"[..],
            ),
            "/bad-utf8" => reply(
                200,
                HTML,
                &b"<!DOCTYPE html>\n<html><head><title>bad \xff\xfe utf8</title></head><body><p>broken \xc3\x28 bytes</p></body></html>\n"[..],
            ),
            "/loop/a" => redirect(302, "/loop/b"),
            "/loop/b" => redirect(302, "/loop/a"),
            "/bad-links" => {
                let links = bad_links();
                let links: Vec<&str> = links.iter().map(String::as_str).collect();
                page("bad links", &links)
            }
            "/retry-after" => {
                if self.first("/retry-after") {
                    let mut r = reply(503, HTML, "<p>busy</p>\n");
                    r.headers.push(("retry-after", RETRY_AFTER_SECS.to_string()));
                    r
                } else {
                    page("retry after", &[])
                }
            }
            "/retry-after-date" => {
                if self.first("/retry-after-date") {
                    let mut r = reply(503, HTML, "<p>busy</p>\n");
                    // Whole seconds round up, so the wait is at least RETRY_AFTER_SECS.
                    let at = SystemTime::now() + Duration::from_secs(RETRY_AFTER_SECS) + Duration::from_millis(999);
                    r.headers.push(("retry-after", http_date(at)));
                    r
                } else {
                    page("retry after date", &[])
                }
            }
            "/throttle" => {
                if self.first("/throttle") {
                    reply(429, HTML, "<p>slow down</p>\n")
                } else {
                    page("throttle", &[])
                }
            }
            _ => {
                if let Some(n) = path.strip_prefix("/chain/").and_then(super::model::parse_num) {
                    return match n {
                        n if n < CHAIN_LEN => redirect(302, &format!("/chain/{}", n + 1)),
                        CHAIN_LEN => page("end of the chain", &[]),
                        _ => not_found(),
                    };
                }
                not_found()
            }
        }
    }
}

fn robots_case(case: RobotsCase, path_and_query: &str) -> Reply {
    let path = path_and_query.split(['?', '#']).next().unwrap_or("");
    match path {
        "/robots.txt" => {
            let (status, body) = case.robots();
            if case == RobotsCase::Redirect {
                return redirect(301, "/real-robots.txt");
            }
            reply(status, "text/plain", body)
        }
        "/real-robots.txt" if case == RobotsCase::Redirect => reply(200, "text/plain", REAL_ROBOTS),
        "/" => page(case.host(), &ROBOTS_CASE_LINKS),
        "/a" | "/b/c" | "/x.php" | "/private/z" | "/fine" => page(path, &[]),
        _ => not_found(),
    }
}

/// The first chunk of `/huge`; the rest is filler paragraphs.
pub(crate) const HUGE_HEAD: &[u8] = b"<!DOCTYPE html>\n<html><head><title>huge</title></head><body>\n";

/// A 64 KiB chunk of `<p>` filler for `/huge`.
pub(crate) fn huge_chunk() -> &'static Bytes {
    static CHUNK: OnceLock<Bytes> = OnceLock::new();
    CHUNK.get_or_init(|| {
        let line = b"<p>huge huge huge huge huge huge huge huge huge huge huge huge huge huge huge.</p>\n";
        let v: Vec<u8> = line.iter().copied().cycle().take(64 * 1024).collect();
        Bytes::from(v)
    })
}

// ---- gzip bomb --------------------------------------------------------------

/// What `/gzip-bomb` starts with once inflated; spaces follow.
pub const GZIP_BOMB_HEAD: &[u8] = b"<!DOCTYPE html>\n<html><head><title>gzip bomb</title></head><body>\n<p>";
/// Deflate matches of 258 spaces in the bomb.
const BOMB_MATCHES: usize = 813_000;
/// Inflated size of `/gzip-bomb` (> 200 MiB).
pub const GZIP_BOMB_INFLATED: u64 = GZIP_BOMB_HEAD.len() as u64 + 1 + 258 * BOMB_MATCHES as u64;

/// The `/gzip-bomb` body: a gzip member of about 200 KiB that inflates to
/// [`GZIP_BOMB_INFLATED`] bytes. Built once, by hand (no compression crate):
/// a stored block with the head, then one dynamic-Huffman block with a
/// literal space and length-258/distance-1 matches coded in 2 bits each.
pub fn gzip_bomb() -> &'static Bytes {
    static BOMB: OnceLock<Bytes> = OnceLock::new();
    BOMB.get_or_init(|| Bytes::from(gzip_of_spaces(GZIP_BOMB_HEAD, BOMB_MATCHES)))
}

/// LSB-first bit writer (deflate's order).
struct Bits {
    out: Vec<u8>,
    acc: u64,
    n: u32,
}

impl Bits {
    fn put(&mut self, value: u64, bits: u32) {
        self.acc |= value << self.n;
        self.n += bits;
        while self.n >= 8 {
            self.out.push(self.acc as u8);
            self.acc >>= 8;
            self.n -= 8;
        }
    }

    /// A Huffman code, which deflate packs starting from its most significant bit.
    fn code(&mut self, code: u32, len: u32) {
        let rev = code.reverse_bits() >> (32 - len);
        self.put(u64::from(rev), len);
    }

    fn align(&mut self) {
        if self.n > 0 {
            self.put(0, 8 - self.n);
        }
    }
}

/// A gzip member of `head` followed by `1 + 258 * matches` spaces.
pub(crate) fn gzip_of_spaces(head: &[u8], matches: usize) -> Vec<u8> {
    let mut b = Bits {
        out: Vec::with_capacity(matches / 4 + head.len() + 128),
        acc: 0,
        n: 0,
    };
    // gzip header: magic, deflate, no flags, no mtime, no extra flags, OS unknown.
    b.out.extend_from_slice(&[0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff]);
    // Stored block with the head (not final).
    b.put(0, 1);
    b.put(0, 2);
    b.align();
    let len = head.len() as u16;
    b.out.extend_from_slice(&len.to_le_bytes());
    b.out.extend_from_slice(&(!len).to_le_bytes());
    b.out.extend_from_slice(head);
    // Final dynamic-Huffman block.
    b.put(1, 1);
    b.put(2, 2);
    b.put(29, 5); // HLIT: 286 literal/length codes
    b.put(1, 5); // HDIST: 2 distance codes
    b.put(14, 4); // HCLEN: 18 code-length codes
                  // Code-length code lengths in the RFC 1951 order
                  // 16 17 18 0 8 7 9 6 10 5 11 4 12 3 13 2 14 1: symbol 18 → 1 bit, 1 and 2 → 2 bits.
    for len in [0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 2] {
        b.put(len, 3);
    }
    // Canonical code-length codes: 18 = "0", 1 = "10", 2 = "11".
    let zeros = |b: &mut Bits, run: u64| {
        b.code(0, 1);
        b.put(run - 11, 7);
    };
    let len1 = |b: &mut Bits| b.code(0b10, 2);
    let len2 = |b: &mut Bits| b.code(0b11, 2);
    // Literal/length code lengths: ' ' (32) → 2, end of block (256) → 2, length 258 (285) → 1.
    zeros(&mut b, 32);
    len2(&mut b);
    zeros(&mut b, 138);
    zeros(&mut b, 85);
    len2(&mut b);
    zeros(&mut b, 28);
    len1(&mut b);
    // Distance code lengths: codes 0 (distance 1) and 1 → 1 bit each.
    len1(&mut b);
    len1(&mut b);
    // Data. Codes: 285 = "0", ' ' = "10", end of block = "11"; distance 1 = "0".
    b.code(0b10, 2);
    for _ in 0..matches {
        b.code(0, 1);
        b.code(0, 1);
    }
    b.code(0b11, 2);
    b.align();
    let spaces = 1 + 258 * matches as u64;
    let crc = crc32_spaces(crc32_update(!0, head), spaces);
    b.out.extend_from_slice(&(!crc).to_le_bytes());
    let size = head.len() as u64 + spaces;
    b.out.extend_from_slice(&(size as u32).to_le_bytes());
    b.out
}

fn crc_table() -> &'static [u32; 256] {
    static TABLE: OnceLock<[u32; 256]> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut t = [0u32; 256];
        for (i, e) in t.iter_mut().enumerate() {
            let mut c = i as u32;
            for _ in 0..8 {
                c = if c & 1 != 0 {
                    0xEDB8_8320 ^ (c >> 1)
                } else {
                    c >> 1
                };
            }
            *e = c;
        }
        t
    })
}

/// CRC-32 (IEEE) register update, without the final inversion.
pub(crate) fn crc32_update(mut crc: u32, data: &[u8]) -> u32 {
    let t = crc_table();
    for &byte in data {
        crc = t[((crc ^ u32::from(byte)) & 0xff) as usize] ^ (crc >> 8);
    }
    crc
}

/// [`crc32_update`] over `n` spaces.
fn crc32_spaces(mut crc: u32, mut n: u64) -> u32 {
    let block = [b' '; 64 * 1024];
    while n > 0 {
        let k = n.min(block.len() as u64) as usize;
        crc = crc32_update(crc, &block[..k]);
        n -= k as u64;
    }
    crc
}

// ---- HTTP dates --------------------------------------------------------------

/// `Sun, 06 Nov 1994 08:49:37 GMT` (RFC 9110 IMF-fixdate), whole seconds.
pub fn http_date(t: SystemTime) -> String {
    let secs = t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    const WEEKDAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    format!(
        "{}, {:02} {} {} {:02}:{:02}:{:02} GMT",
        WEEKDAYS[days.rem_euclid(7) as usize],
        day,
        MONTHS[(month - 1) as usize],
        year,
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_dates() {
        let at = |s: u64| UNIX_EPOCH + Duration::from_secs(s);
        assert_eq!(http_date(at(784_111_777)), "Sun, 06 Nov 1994 08:49:37 GMT");
        assert_eq!(http_date(at(0)), "Thu, 01 Jan 1970 00:00:00 GMT");
        assert_eq!(http_date(at(951_782_400)), "Tue, 29 Feb 2000 00:00:00 GMT");
        assert_eq!(http_date(at(1_700_000_000)), "Tue, 14 Nov 2023 22:13:20 GMT");
    }

    #[test]
    fn crc32_matches_the_check_value() {
        assert_eq!(!crc32_update(!0, b"123456789"), 0xCBF4_3926);
        assert_eq!(
            crc32_spaces(crc32_update(!0, b"ab"), 70_000),
            crc32_update(!0, &[b"ab".as_slice(), &[b' '; 70_000]].concat())
        );
    }

    #[test]
    fn gzip_bomb_is_small_and_announces_its_size() {
        let bomb = gzip_bomb();
        assert!(bomb.len() < 256 * 1024, "{}", bomb.len());
        assert_eq!(&bomb[..3], &[0x1f, 0x8b, 8]);
        let isize = u32::from_le_bytes(bomb[bomb.len() - 4..].try_into().unwrap());
        assert_eq!(u64::from(isize), GZIP_BOMB_INFLATED % (1 << 32));
        const { assert!(GZIP_BOMB_INFLATED >= 200 << 20) };
    }

    #[test]
    fn oversized_answers() {
        let st = HostileState::default();
        let get = |case: Oversized, path: &str| st.respond(SpecialHost::Oversized(case), "h.test:81", path);
        let body = |r: Reply| match r.body {
            ReplyBody::Full(b) => b,
            other => panic!("{other:?}"),
        };
        // Crawl-delay: 1e20 does not fit a Duration (u64 seconds).
        let robots = body(get(Oversized::CrawlDelay, "/robots.txt"));
        assert_eq!(&robots[..], b"User-agent: *\nCrawl-delay: 1e20\n");
        assert!(HUGE_CRAWL_DELAY.parse::<f64>().unwrap() > u64::MAX as f64);
        for path in Oversized::CrawlDelay.fetched_paths() {
            assert_eq!(get(Oversized::CrawlDelay, &path).status, 200, "{path}");
        }
        assert_eq!(get(Oversized::CrawlDelay, "/d/4").status, 404);

        // /wide decodes to more than 16 MiB of UTF-8.
        assert_eq!(get(Oversized::WideUtf8, "/robots.txt").status, 404);
        let wide = body(get(Oversized::WideUtf8, "/wide"));
        assert_eq!(wide.len(), WIDE_BYTES);
        assert!(wide.starts_with(WIDE_HEAD.as_bytes()) && wide.ends_with(&[0xFF]));
        let decoded = String::from_utf8_lossy(&wide);
        assert!(
            decoded.len() > 16 << 20 && decoded.len() > 2 * WIDE_BYTES,
            "{}",
            decoded.len()
        );

        // /many: the links resolve under /trap/, which robots.txt disallows.
        let robots = body(get(Oversized::ManyLinks, "/robots.txt"));
        assert_eq!(&robots[..], b"User-agent: *\nDisallow: /trap/\n");
        let many = body(get(Oversized::ManyLinks, "/many"));
        let html = std::str::from_utf8(&many).unwrap();
        let base = many_links_base_path();
        assert_eq!(base.len(), MANY_LINKS_BASE_LEN);
        assert!(html.contains(&format!("<base href=\"http://h.test:81{base}\">")));
        assert_eq!(html.matches("<a href=l").count(), MANY_LINKS);
        assert!(html.contains("<a href=l0>0</a>\n<a href=l1>1</a>"));
        assert!(many.len() > 5_000_000 && many.len() < 10 << 20, "{}", many.len());
        assert!(many_links_target(7).starts_with(MANY_LINKS_DISALLOWED));
        assert!(many_links_target(MANY_LINKS - 1).ends_with("/l299999"));
        // Resolved, each link is a URL a crawler accepts (well under 2048 bytes) ...
        let url_len = "http://many-links.test:65535".len() + many_links_target(MANY_LINKS - 1).len();
        assert!(url_len < 1600, "{url_len}");
        // ... and all of them together are hundreds of MB.
        assert!(url_len * MANY_LINKS > 400_000_000);
    }

    #[test]
    fn robots_cases_agree_with_texting_robots() {
        let agent = super::super::USER_AGENT_TOKEN;
        for case in RobotsCase::ALL {
            let (status, body) = case.robots();
            let body = match case {
                RobotsCase::Redirect => Bytes::from_static(REAL_ROBOTS.as_bytes()),
                // The crawler parses the first 500 KiB only.
                RobotsCase::Huge => body.slice(..500 * 1024),
                _ => body,
            };
            let robot = match status {
                200..=299 | 301 => texting_robots::Robot::new(agent, &body).ok(),
                _ => None,
            };
            for path in std::iter::once("/").chain(ROBOTS_CASE_LINKS) {
                let allowed = match (&robot, status) {
                    (_, 500..=599) => false,
                    (Some(r), _) => r.allowed(&format!("http://{}{path}", case.host())),
                    (None, _) => true,
                };
                assert_eq!(case.allows(path), allowed, "{case:?} {path}");
            }
        }
        // The full huge file would disallow /a too: the limit matters.
        let full = texting_robots::Robot::new(agent, huge_robots()).unwrap();
        assert!(!full.allowed("/a") && !full.allowed("/b/c"));
        assert!(huge_robots().len() > 600 * 1024);
        assert_eq!(
            RobotsCase::Wildcards.fetched_paths(),
            ["/", "/a", "/fine", "/private/z", "/x.php?q=1"]
        );
        assert_eq!(RobotsCase::ServerError.fetched_paths(), Vec::<&str>::new());
    }

    #[test]
    fn hostile_answers() {
        let st = HostileState::default();
        let status = |p: &str| st.respond(SpecialHost::Hostile, HOSTILE_HOST, p).status;
        assert_eq!(status("/"), 200);
        assert_eq!(status("/hang"), 0);
        assert_eq!(status("/retry-after"), 503);
        assert_eq!(status("/retry-after"), 200);
        assert_eq!(status("/throttle"), 429);
        assert_eq!(status("/throttle"), 200);
        assert_eq!(status("/chain/0"), 302);
        assert_eq!(status("/chain/12"), 200);
        assert_eq!(status("/chain/13"), 404);
        assert_eq!(status("/nope"), 404);
        let r = st.respond(SpecialHost::Hostile, HOSTILE_HOST, "/retry-after-date");
        let date = &r.headers.iter().find(|(k, _)| *k == "retry-after").unwrap().1;
        assert!(date.ends_with(" GMT") && date.len() == 29, "{date}");
        assert_eq!(
            SpecialHost::parse("Hostile.Test:8080", &SPECIAL_HOSTS),
            Some(SpecialHost::Hostile)
        );
        assert_eq!(
            SpecialHost::parse("robots-500.test.", &SPECIAL_HOSTS),
            Some(SpecialHost::Robots(RobotsCase::ServerError))
        );
        assert_eq!(SpecialHost::parse("site0.test", &SPECIAL_HOSTS), None);
        assert_eq!(SpecialHost::parse("many-links.test", &SPECIAL_HOSTS), None);
        assert_eq!(
            SpecialHost::parse("Many-Links.test:80", &OVERSIZED_HOSTS),
            Some(SpecialHost::Oversized(Oversized::ManyLinks))
        );
        let redirect = robots_case(RobotsCase::Redirect, "/robots.txt");
        assert_eq!(redirect.status, 301);
        assert_eq!(robots_case(RobotsCase::Groups, "/x.php?q=1").status, 200);
        assert_eq!(robots_case(RobotsCase::Groups, "/zzz").status, 404);
        assert_eq!(bad_links()[4].len(), OVERLONG_LINK_LEN);
    }
}

#[cfg(test)]
mod server_tests {
    use std::net::SocketAddr;
    use std::time::Instant;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;

    use super::super::{WebExtras, WebServer, WebSpec};
    use super::*;

    async fn send(addr: SocketAddr, host: &str, path: &str) -> TcpStream {
        let mut s = TcpStream::connect(addr).await.expect("connect");
        let req = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
        s.write_all(req.as_bytes()).await.expect("write");
        s
    }

    async fn read_all(mut s: TcpStream) -> Vec<u8> {
        let mut buf = Vec::new();
        tokio::time::timeout(Duration::from_secs(20), s.read_to_end(&mut buf))
            .await
            .expect("timely")
            .expect("read");
        buf
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn serves_hostile_and_slow_hosts() {
        let spec = WebSpec {
            hosts: 2,
            pages_per_host: 5,
            ..WebSpec::default()
        };
        let extras = WebExtras {
            hostile: true,
            slow_hosts: 1,
            slow_ms: 300,
            slow_host_pages: 2,
            ..WebExtras::default()
        };
        let server = WebServer::start_with(spec.clone(), extras, "127.0.0.1:0".parse().unwrap())
            .await
            .expect("start");
        let addr = server.addr();
        let web = server.web();
        let port = addr.port();
        assert_eq!(web.seed_urls().len(), 2 + SPECIAL_HOSTS.len());
        assert_eq!(web.seed_urls()[2], format!("http://hostile.test:{port}/"));
        let names = web.host_names();
        assert_eq!(names[2], HOSTILE_HOST);
        assert_eq!(names.last().map(String::as_str), Some("out1.test"));
        assert_eq!(web.in_scope_host_names().len(), 2 + SPECIAL_HOSTS.len());
        // Only site0 is slow, and small: /p/2 exists on site1 but not on site0.
        assert!(web.slow_delay("site0.test:1").is_some());
        assert!(web.slow_delay("site1.test").is_none());
        assert!(web.slow_delay(HOSTILE_HOST).is_none());
        assert_eq!(web.respond("site0.test", "/p/2").status, 404);
        assert_eq!(web.respond("site1.test", "/p/2").status, 200);
        let exp = web.expected_crawl();
        assert!(exp
            .pages
            .keys()
            .all(|u| !u.contains("site0.test") || !u.ends_with("/p/3")));

        let t = Instant::now();
        let home = read_all(send(addr, "site0.test", "/").await).await;
        assert!(t.elapsed() >= Duration::from_millis(300));
        assert!(home.starts_with(b"HTTP/1.1 200 OK"));

        // /huge streams all 50 MiB (chunked), /hang answers nothing.
        let hang = send(addr, HOSTILE_HOST, "/hang").await;
        let huge = read_all(send(addr, HOSTILE_HOST, "/huge").await).await;
        assert!(huge.starts_with(b"HTTP/1.1 200 OK"));
        assert!(
            huge.len() >= HUGE_BYTES && huge.len() < HUGE_BYTES + HUGE_BYTES / 50,
            "{}",
            huge.len()
        );
        let mut hang = hang;
        let mut buf = [0u8; 64];
        let read = tokio::time::timeout(Duration::from_millis(500), hang.read(&mut buf)).await;
        assert!(read.is_err(), "/hang answered");

        let bomb = read_all(send(addr, HOSTILE_HOST, "/gzip-bomb").await).await;
        let text = String::from_utf8_lossy(&bomb[..200]).to_ascii_lowercase();
        assert!(text.contains("content-encoding: gzip"), "{text}");

        let redirect = read_all(send(addr, "robots-redirect.test", "/robots.txt").await).await;
        assert!(redirect.starts_with(b"HTTP/1.1 301"));
        let log = server.requests();
        let hang_rec = log.iter().find(|r| r.path == "/hang").expect("hang logged");
        assert_eq!((hang_rec.host.as_str(), hang_rec.status), (HOSTILE_HOST, 0));
        assert_eq!(hang_rec.done, None);
        // The slow host slept between arrival and answer; answered requests are done.
        let slow = log.iter().find(|r| r.host == "site0.test").expect("site0 logged");
        assert!(slow.at.duration_since(slow.arrived).unwrap() >= Duration::from_millis(300));
        assert!(slow.served_in().unwrap() >= Duration::from_millis(300));
        for r in log.iter().filter(|r| r.path != "/hang") {
            let done = r.done.unwrap_or_else(|| panic!("{r:?} not done"));
            assert!(r.arrived <= r.at && r.at <= done, "{r:?}");
        }
        // Stopping ends the held request.
        let t = Instant::now();
        server.stop(Duration::from_secs(5)).await;
        assert!(t.elapsed() < Duration::from_secs(4));
    }
}
