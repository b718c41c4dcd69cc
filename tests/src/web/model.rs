//! The shape of the synthetic web: its parameters, host names, locations and
//! per-host robots rules.
//!
//! Everything here is a pure function of the [`WebSpec`] and the host index,
//! so the server, the HTML generator and the ground-truth crawl all agree by
//! construction instead of by parsing each other's output.

use std::fmt::Write as _;

/// Parameters of a generated web. Same spec (including `seed`) → same bytes.
#[derive(Clone, Debug, PartialEq)]
pub struct WebSpec {
    /// Seed of every random choice (links, filler text).
    pub seed: u64,
    /// In-scope hosts `site0.test .. site{N-1}.test`; each is a crawl seed.
    pub hosts: usize,
    /// Out-of-scope hosts `out0.test ..` that in-scope pages link to.
    pub outside_hosts: usize,
    /// Pages `/p/0 .. /p/{M-1}` on every host.
    pub pages_per_host: usize,
    /// Random links per page, on top of the structural ones that keep every page reachable.
    pub links_per_page: usize,
    /// Every k-th in-scope host (index % k == 0) has a `Crawl-delay`; 0 = none.
    pub crawl_delay_every: usize,
    /// The `Crawl-delay` value written into robots.txt.
    pub crawl_delay_secs: f64,
    /// Approximate size of a page's HTML, padded with filler paragraphs.
    /// [`Profile::Realistic`]: the mean size; each page gets its own.
    pub page_bytes: usize,
    /// How pages, links and robots.txt files are shaped ([`Profile::Small`]
    /// unless asked for: the webs the end-to-end tests build).
    pub profile: Profile,
}

/// The shape of a generated web.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Profile {
    /// Every page `page_bytes` long with `links_per_page` random links
    /// drawn to exercise the crawler's edge cases: about a quarter of the
    /// stored URLs are 404s and another quarter redirects, hrefs in every
    /// spelling, `<base>` elements, robots.txt groups and prefix rules.
    #[default]
    Small,
    /// Closer to real sites, for benchmarks ([`WebSpec::realistic`]):
    /// - page sizes spread over 5/18..32/18 of `page_bytes` (5–32 KiB for the
    ///   default 18 KiB, mean 18 KiB), a triangular draw per page;
    /// - `links_per_page` × 2/5..8/5 links per page (10–40 for the default
    ///   25): a nav bar (home and the first pages), the structural tree
    ///   links, then random ones; about 80% of them to the same host, as
    ///   root-relative, document-relative (`7`, `./7`, `../p/7`), absolute
    ///   and scheme-relative (`//host/p/7`) hrefs, some with a `#fragment`,
    ///   a few to query-string variants (`/p/3?sort=new`, which serve the
    ///   same page as `/p/3`);
    /// - about 3% of stored URLs are 404s and 1% same-host redirects;
    /// - every host has a robots.txt; one in three disallows `/private/`
    ///   (which pages link to now and then), the others nothing;
    /// - `Crawl-delay` on the hosts `crawl_delay_every` picks (3 hosts in
    ///   [`WebSpec::realistic_sized`]).
    Realistic,
}

impl Profile {
    pub fn name(self) -> &'static str {
        match self {
            Profile::Small => "small",
            Profile::Realistic => "realistic",
        }
    }
}

impl std::str::FromStr for Profile {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "small" => Ok(Profile::Small),
            "realistic" => Ok(Profile::Realistic),
            other => Err(format!("unknown profile {other:?} (small, realistic)")),
        }
    }
}

impl Default for WebSpec {
    fn default() -> Self {
        WebSpec {
            seed: 1,
            hosts: 20,
            outside_hosts: 2,
            pages_per_host: 100,
            links_per_page: 10,
            crawl_delay_every: 0,
            crawl_delay_secs: 0.2,
            page_bytes: 4000,
            profile: Profile::Small,
        }
    }
}

impl WebSpec {
    /// The realistic profile at its benchmark size: 200 hosts × 250 pages.
    pub fn realistic() -> WebSpec {
        WebSpec::realistic_sized(200, 250)
    }

    /// The realistic profile ([`Profile::Realistic`]) with other counts:
    /// 18 KiB pages on average, 25 links, 20 outside hosts, and
    /// `Crawl-delay: 0.5` on 3 hosts (every `ceil(hosts / 3)`-th from
    /// `site0`), whatever the number of hosts.
    pub fn realistic_sized(hosts: usize, pages_per_host: usize) -> WebSpec {
        WebSpec {
            seed: 1,
            hosts,
            outside_hosts: 20,
            pages_per_host,
            links_per_page: 25,
            crawl_delay_every: hosts.div_ceil(3).max(1),
            crawl_delay_secs: 0.5,
            page_bytes: 18 * 1024,
            profile: Profile::Realistic,
        }
    }

    /// Whether this web has the [`Profile::Realistic`] shape.
    pub fn is_realistic(&self) -> bool {
        self.profile == Profile::Realistic
    }
}

/// Opt-in additions to a [`WebSpec`] web. Kept out of `WebSpec` itself so
/// that code building a `WebSpec` field by field keeps compiling; the default
/// adds nothing, and `SyntheticWeb::new` / `WebServer::start` use it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct WebExtras {
    /// Adds the in-scope hosts of [`super::hostile`]: `hostile.test` (traps:
    /// hangs, drips, huge bodies, gzip bomb, charsets, redirect loops,
    /// 429/503) and one host per robots.txt edge case. They come after
    /// `siteN.test` in `host_names()` and `seed_urls()`.
    pub hostile: bool,
    /// The first `slow_hosts` in-scope hosts (`site0..`, then the hostile
    /// ones) sleep `slow_ms` before answering any request, robots.txt included.
    pub slow_hosts: usize,
    pub slow_ms: u64,
    /// Pages `/p/0..` on each slow host (0 = `pages_per_host`). Links to a
    /// slow host only name its pages, so a small slow host stays small.
    pub slow_host_pages: usize,
    /// Slow hosts answer each path after its own latency instead of
    /// `slow_ms` every time: about one path in three (robots.txt is a path
    /// like any other) at once, the others after 3/8 of `slow_ms` up to
    /// `slow_ms` (150–400 ms for 400), a deterministic function of the seed
    /// and the path.
    pub slow_varied: bool,
    /// Adds the in-scope hosts of [`super::hostile::Oversized`] (after
    /// `siteN.test` and the hostile hosts): a `Crawl-delay: 1e20`, a page that
    /// decodes past 16 MiB, a page with 300,000 long outlinks.
    pub oversized: bool,
    /// Adds [`super::hostile::INTERNAL_LINKS_HOST`] (in scope, last), whose
    /// home page links to internal addresses, and makes the server listen
    /// on them too (`127.0.0.2` and `[::1]`, same port).
    pub internal: bool,
    /// Adds one in-scope host per trap of [`super::traps::Trap::ALL`]
    /// (session ids in queries and paths, tracking parameters, a calendar,
    /// a faceted search, stacked relative paths), after every host above:
    /// what a crawler must not fetch without end.
    pub traps: bool,
    /// Adds [`super::traps::Trap::BigSite`] (after the traps): an ordinary
    /// site of more pages than the default per-domain budget. Apart from
    /// `traps` because crawling it takes 10,000 requests.
    pub big_site: bool,
    /// Adds [`super::family`]'s hosts (after the others): one site of two
    /// host names, and a neighbour, for `--scope site` and URL rules.
    pub site_family: bool,
    /// Every answer of the generated hosts but robots.txt (pages, 404s,
    /// redirects) comes this long after the request, as from a site whose
    /// pages are made per request while its robots.txt is a static file: a
    /// wide web of slow sites (`scripts/bench.py --web wide`), whose crawl
    /// is bound by politeness, not by the machine. Zero: at once. Slow
    /// hosts (`slow_hosts`) keep their own latency.
    pub response_delay_ms: u64,
    /// Pages that change between visits, and validators (`ETag`,
    /// `Last-Modified`) on every page of the generated web so that a
    /// crawler's revisits can be answered 304: see [`Changing`]. `None`
    /// leaves every response as it always was.
    pub changing: Option<Changing>,
    /// Serve HTTPS instead of plain HTTP, offering this by ALPN, with a
    /// certificate of the run's own CA (`crate::tls`; the crawler needs
    /// `--ca-file`): every URL and link is then `https://`.
    pub tls: Option<crate::tls::Offer>,
    /// With `tls`: host names (not of the web) the HTTPS server answers
    /// with a certificate of another CA, which a crawler trusting the
    /// web's CA must refuse (`crate::tls::TestCa::with_untrusted`).
    pub tls_untrusted: Vec<String>,
    /// With `tls`: the server ends each connection after this many
    /// requests (HTTP/1.1: closes it after the answer; HTTP/2: GOAWAY), as
    /// servers with a keep-alive limit do, so a client must reconnect and
    /// can resume its TLS session. `None`: connections are kept.
    pub tls_requests_per_connection: Option<u32>,
}

/// The opt-in "changing web" of [`WebExtras::changing`], to test a
/// crawler's revisits (conditional requests, 304s, re-extraction).
///
/// Then every HTML page of the generated hosts (`siteN.test`, `outN.test`;
/// not robots.txt, redirects, 404s or the hostile and trap hosts, which
/// have their own fixed answers) carries an `ETag` and a `Last-Modified`
/// and answers `If-None-Match` / `If-Modified-Since` with 304 while it has
/// not changed. A stable subset of them, about `share_percent` percent
/// chosen by a hash of the seed, host and path, gets a new version every
/// `every` from the moment the web is built (the server's start): the body
/// gains a `<p class="rev">` paragraph, the links stay the same, so a
/// crawl finds the same URLs at every visit and the ground truth holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Changing {
    /// How often a changing page gets a new version. Used in whole seconds,
    /// rounded down and at least 1 s ([`Changing::every_secs`]):
    /// `Last-Modified` only has one-second resolution, so two versions less
    /// than a second apart could share one and an `If-Modified-Since`
    /// revisit would be wrongly told nothing changed.
    pub every: std::time::Duration,
    /// About this percentage of pages change (more than 100 counts as 100);
    /// the others keep version 0 forever, to check a crawler tells them apart.
    pub share_percent: u8,
}

impl Changing {
    /// `every` in whole seconds, at least 1 (see [`Changing::every`]).
    pub fn every_secs(&self) -> u64 {
        self.every.as_secs().max(1)
    }
}

/// A served host: in scope (`siteN.test`) or outside (`outN.test`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum HostRef {
    InScope(usize),
    Outside(usize),
}

/// A path on any host. Paths that do not parse into one of these are 404.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Loc {
    /// `/`
    Home,
    /// `/robots.txt`
    Robots,
    /// `/p/{n}`: a content page (200 when n < pages_per_host).
    Page(usize),
    /// `/missing/{n}`: always 404.
    Missing(usize),
    /// `/r/{n}`: 301 → `/p/{n}`.
    Redirect(usize),
    /// `/rr/{n}`: 302 → `/r/{n}` → `/p/{n}`.
    Chain(usize),
    /// `/x/{h}/{n}`: 302 → `http://site{h}.test:PORT/p/{n}`.
    Cross(usize, usize),
    /// `/private/{n}`: 200, but disallowed by most robots.txt files.
    Private(usize),
    /// `/p/{n}?{QUERY_VARIANTS[k]}`: a URL of its own that serves the same
    /// bytes as `/p/{n}` (as tracking and sort parameters do).
    Variant(usize, usize),
}

/// The query strings of [`Loc::Variant`] URLs. One parameter each: an `&`
/// would have to be written `&amp;` in an href, which not every extractor
/// decodes. A crawler removes the tracking one (`utm_source`) before the
/// seen-check, so its variants are their pages ([`Loc::canonical`]).
pub(crate) const QUERY_VARIANTS: [&str; 3] = ["sort=new", "ref=nav", "utm_source=newsletter"];

impl Loc {
    /// The "directory" of the path, used to decide which relative hrefs resolve
    /// to it from a given page. `None` for the two-level `/x/h/` paths.
    pub(crate) fn dir(self) -> Option<&'static str> {
        match self {
            Loc::Home | Loc::Robots => Some("/"),
            Loc::Page(_) | Loc::Variant(..) => Some("/p/"),
            Loc::Missing(_) => Some("/missing/"),
            Loc::Redirect(_) => Some("/r/"),
            Loc::Chain(_) => Some("/rr/"),
            Loc::Cross(..) => None,
            Loc::Private(_) => Some("/private/"),
        }
    }

    pub(crate) fn write_path(self, out: &mut String) {
        // Writing to a String cannot fail.
        let _ = match self {
            Loc::Home => write!(out, "/"),
            Loc::Robots => write!(out, "/robots.txt"),
            Loc::Page(n) => write!(out, "/p/{n}"),
            Loc::Missing(n) => write!(out, "/missing/{n}"),
            Loc::Redirect(n) => write!(out, "/r/{n}"),
            Loc::Chain(n) => write!(out, "/rr/{n}"),
            Loc::Cross(h, n) => write!(out, "/x/{h}/{n}"),
            Loc::Private(n) => write!(out, "/private/{n}"),
            Loc::Variant(n, k) => write!(out, "/p/{n}?{}", QUERY_VARIANTS[k % QUERY_VARIANTS.len()]),
        };
    }

    /// The location a crawler that removes tracking parameters (the
    /// default canonical rules, `shared::canonical`) stores this one as:
    /// a `utm_*` variant is its page; other variants are URLs of their own.
    pub(crate) fn canonical(self) -> Loc {
        match self {
            Loc::Variant(n, k) if QUERY_VARIANTS[k % QUERY_VARIANTS.len()].starts_with("utm_") => {
                Loc::Page(n)
            }
            other => other,
        }
    }

    pub(crate) fn path(self) -> String {
        let mut s = String::with_capacity(16);
        self.write_path(&mut s);
        s
    }

    /// Parses a request target (fragment ignored; the query too but for the
    /// exact ones of [`Loc::Variant`] on `/p/{n}`). Numbers must be in
    /// canonical decimal form so that each resource has exactly one URL.
    pub(crate) fn parse(path_and_query: &str) -> Option<Loc> {
        let target = path_and_query.split('#').next().unwrap_or("");
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        if let Some(k) = QUERY_VARIANTS.iter().position(|&q| q == query) {
            if let Some(n) = path.strip_prefix("/p/").and_then(parse_num) {
                return Some(Loc::Variant(n, k));
            }
        }
        match path {
            "/" => return Some(Loc::Home),
            "/robots.txt" => return Some(Loc::Robots),
            _ => {}
        }
        type Make = fn(usize) -> Loc;
        let prefixed: [(&str, Make); 5] = [
            ("/p/", Loc::Page),
            ("/missing/", Loc::Missing),
            ("/r/", Loc::Redirect),
            ("/rr/", Loc::Chain),
            ("/private/", Loc::Private),
        ];
        for (prefix, make) in prefixed {
            if let Some(rest) = path.strip_prefix(prefix) {
                return parse_num(rest).map(make);
            }
        }
        let rest = path.strip_prefix("/x/")?;
        let (h, n) = rest.split_once('/')?;
        Some(Loc::Cross(parse_num(h)?, parse_num(n)?))
    }
}

/// Canonical decimal only: no sign, no leading zeros, at most 9 digits.
pub(crate) fn parse_num(s: &str) -> Option<usize> {
    let ok = !s.is_empty()
        && s.len() <= 9
        && s.bytes().all(|b| b.is_ascii_digit())
        && (s == "0" || !s.starts_with('0'));
    if ok {
        s.parse().ok()
    } else {
        None
    }
}

/// What robots.txt an in-scope host serves, from `synthcrawler`'s point of view.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RobotsKind {
    /// No robots.txt (404): everything is allowed, `/private/` included.
    Absent,
    /// `User-agent: *` / `Disallow:` (empty): a robots.txt that allows everything.
    Open,
    /// `User-agent: *` / `Disallow: /private/`.
    Standard,
    /// Standard plus `Disallow: /p/1`, a prefix rule that also blocks /p/10.., /p/100...
    PrefixP1,
    /// `User-agent: *` disallows `/p/` but a `User-agent: synthcrawler` group
    /// only disallows `/private/`: the specific group wins, so we may crawl /p/.
    OwnGroup,
}

/// Per-host rules, derived from the host index so tests can predict them.
#[derive(Clone, Debug)]
pub(crate) struct HostRules {
    pub(crate) robots: RobotsKind,
    pub(crate) crawl_delay: Option<f64>,
    /// Adds an `otherbot` group that disallows everything (must not affect us).
    pub(crate) otherbot_group: bool,
    /// The home page carries `<base href="/p/">` and links to pages relatively.
    pub(crate) home_base: bool,
}

impl HostRules {
    pub(crate) fn for_in_scope(spec: &WebSpec, i: usize) -> HostRules {
        let crawl_delay = (spec.crawl_delay_every > 0 && i.is_multiple_of(spec.crawl_delay_every))
            .then_some(spec.crawl_delay_secs);
        if spec.is_realistic() {
            // Every host has a robots.txt; one in three disallows a folder.
            return HostRules {
                robots: if i % 3 == 1 {
                    RobotsKind::Standard
                } else {
                    RobotsKind::Open
                },
                crawl_delay,
                otherbot_group: i.is_multiple_of(4),
                home_base: false,
            };
        }
        let robots = if i == 1 {
            RobotsKind::PrefixP1
        } else if i % 7 == 3 && crawl_delay.is_none() {
            RobotsKind::Absent
        } else if i % 7 == 5 {
            RobotsKind::OwnGroup
        } else {
            RobotsKind::Standard
        };
        HostRules {
            robots,
            crawl_delay,
            otherbot_group: i.is_multiple_of(3),
            home_base: i % 4 == 2,
        }
    }

    pub(crate) fn outside() -> HostRules {
        HostRules {
            robots: RobotsKind::Standard,
            crawl_delay: None,
            otherbot_group: false,
            home_base: false,
        }
    }

    /// Whether robots.txt forbids `path` to `synthcrawler` (prefix semantics, no wildcards).
    pub(crate) fn disallows(&self, path: &str) -> bool {
        match self.robots {
            RobotsKind::Absent | RobotsKind::Open => false,
            RobotsKind::Standard | RobotsKind::OwnGroup => path.starts_with("/private/"),
            RobotsKind::PrefixP1 => path.starts_with("/private/") || path.starts_with("/p/1"),
        }
    }

    /// The robots.txt body, or `None` when the host has none.
    pub(crate) fn robots_txt(&self) -> Option<String> {
        let delay = self
            .crawl_delay
            .map(|d| format!("Crawl-delay: {d}\n"))
            .unwrap_or_default();
        let mut txt = String::from("# robots.txt of a synthetic test host\n");
        match self.robots {
            RobotsKind::Absent => return None,
            RobotsKind::Open => {
                txt.push_str("User-agent: *\nDisallow:\n");
                txt.push_str(&delay);
            }
            RobotsKind::Standard => {
                txt.push_str("User-agent: *\nDisallow: /private/\n");
                txt.push_str(&delay);
            }
            RobotsKind::PrefixP1 => {
                txt.push_str("User-agent: *\nDisallow: /private/\nDisallow: /p/1\n");
                txt.push_str(&delay);
            }
            RobotsKind::OwnGroup => {
                txt.push_str("User-agent: *\nDisallow: /p/\nDisallow: /private/\n");
                txt.push_str(&delay);
                txt.push_str("\nUser-agent: synthcrawler\nDisallow: /private/\n");
                txt.push_str(&delay);
            }
        }
        if self.otherbot_group {
            txt.push_str("\nUser-agent: otherbot\nDisallow: /\n");
        }
        Some(txt)
    }
}

/// Parses a `Host` header value (`site3.test:8080`, any case, optional
/// trailing dot) into a host of this web, without allocating.
pub(crate) fn parse_host(raw: &str, hosts: usize, outside: usize) -> Option<HostRef> {
    let name = match raw.rsplit_once(':') {
        Some((name, port)) if !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => raw,
    };
    let name = name.strip_suffix('.').unwrap_or(name);
    let stem_len = name.len().checked_sub(5)?;
    let (stem, tld) = (name.get(..stem_len)?, name.get(stem_len..)?);
    if !tld.eq_ignore_ascii_case(".test") {
        return None;
    }
    let split = |prefix: &str| -> Option<usize> {
        let head = stem.get(..prefix.len())?;
        if head.eq_ignore_ascii_case(prefix) {
            parse_num(stem.get(prefix.len()..)?)
        } else {
            None
        }
    };
    if let Some(i) = split("site") {
        return (i < hosts).then_some(HostRef::InScope(i));
    }
    split("out").filter(|&k| k < outside).map(HostRef::Outside)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_paths_canonically() {
        assert_eq!(Loc::parse("/"), Some(Loc::Home));
        assert_eq!(Loc::parse("/?q=1"), Some(Loc::Home));
        assert_eq!(Loc::parse("/p/17"), Some(Loc::Page(17)));
        assert_eq!(Loc::parse("/p/07"), None);
        assert_eq!(Loc::parse("/p/"), None);
        assert_eq!(Loc::parse("/p/1/"), None);
        assert_eq!(Loc::parse("/rr/3"), Some(Loc::Chain(3)));
        assert_eq!(Loc::parse("/r/3"), Some(Loc::Redirect(3)));
        assert_eq!(Loc::parse("/x/2/9"), Some(Loc::Cross(2, 9)));
        assert_eq!(Loc::parse("/x/2"), None);
        assert_eq!(Loc::parse("/private/4#a"), Some(Loc::Private(4)));
        assert_eq!(Loc::parse("/robots.txt"), Some(Loc::Robots));
        assert_eq!(Loc::parse("/p/99999999999999999999"), None);
        assert_eq!(Loc::parse(""), None);
        assert_eq!(Loc::parse("/é"), None);
        for loc in [Loc::Home, Loc::Page(5), Loc::Cross(1, 2), Loc::Private(0)] {
            assert_eq!(Loc::parse(&loc.path()), Some(loc));
        }
    }

    #[test]
    fn parses_hosts() {
        assert_eq!(parse_host("site3.test:80", 5, 1), Some(HostRef::InScope(3)));
        assert_eq!(parse_host("SITE3.Test", 5, 1), Some(HostRef::InScope(3)));
        assert_eq!(parse_host("site3.test.", 5, 1), Some(HostRef::InScope(3)));
        assert_eq!(parse_host("site5.test", 5, 1), None);
        assert_eq!(parse_host("out0.test:1", 5, 1), Some(HostRef::Outside(0)));
        assert_eq!(parse_host("out1.test", 5, 1), None);
        assert_eq!(parse_host("é.test", 5, 1), None);
        assert_eq!(parse_host("séte1.test", 5, 1), None);
        assert_eq!(parse_host("", 5, 1), None);
        assert_eq!(parse_host(":", 5, 1), None);
        assert_eq!(parse_host("127.0.0.1:3000", 5, 1), None);
    }

    #[test]
    fn prefix_rule_blocks_longer_paths() {
        let spec = WebSpec::default();
        let r = HostRules::for_in_scope(&spec, 1);
        assert_eq!(r.robots, RobotsKind::PrefixP1);
        for (p, blocked) in [
            ("/p/1", true),
            ("/p/10", true),
            ("/p/199", true),
            ("/p/2", false),
            ("/p/21", false),
            ("/private/0", true),
            ("/", false),
        ] {
            assert_eq!(r.disallows(p), blocked, "{p}");
        }
    }
}
