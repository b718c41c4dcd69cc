//! [`SyntheticWeb`]: turns `(Host, path)` into a [`Response`], on the fly.
//!
//! Nothing but robots.txt bodies is precomputed, so a web of any size costs
//! the same memory and each page costs one PRNG-driven render.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;

use super::changing::Conditions;
use super::family::FamilyHost;
use super::hostile::{self, SpecialHost};
use super::html::{MOVED_HTML, NOT_FOUND_HTML};
use super::model::{parse_host, HostRef, HostRules, Loc, WebExtras, WebSpec};
use super::rng::{mix, SplitMix};
use super::traps;

/// What the server sends for one request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(&'static str, String)>,
    pub body: Bytes,
}

/// The outcome of a request, before rendering; shared with the ground truth.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Answer {
    /// 200 with the HTML of this page.
    Html(HostRef, Loc),
    /// 200 text/plain robots.txt.
    Robots(Bytes),
    NotFound,
    /// `status` with a Location pointing at `(host, loc)`.
    Redirect {
        status: u16,
        host: HostRef,
        loc: Loc,
    },
}

/// A deterministic generated web. Immutable after construction, so it is
/// `Send + Sync` and meant to be shared in an `Arc`.
#[derive(Debug)]
pub struct SyntheticWeb {
    pub(crate) spec: WebSpec,
    pub(crate) extras: WebExtras,
    port: u16,
    /// `:PORT`, or empty for port 80 (the normalised form omits default ports).
    port_suffix: String,
    rules: Vec<HostRules>,
    outside_rules: HostRules,
    robots: Vec<Option<Bytes>>,
    outside_robots: Option<Bytes>,
    /// The hostile and oversized hosts served, in in-scope order.
    specials: Vec<SpecialHost>,
    /// When version 0 of every page began, in whole seconds since the Unix
    /// epoch (with [`WebExtras::changing`]; see [`SyntheticWeb::change_epoch`]).
    pub(crate) change_epoch: u64,
}

pub(crate) const HTML: &str = "text/html; charset=utf-8";

impl SyntheticWeb {
    /// `port` is the one embedded in absolute links and seed URLs.
    pub fn new(spec: WebSpec, port: u16) -> Self {
        Self::with_extras(spec, WebExtras::default(), port)
    }

    /// A web with opt-in additions (hostile hosts, slow hosts).
    pub fn with_extras(spec: WebSpec, extras: WebExtras, port: u16) -> Self {
        let rules: Vec<HostRules> = (0..spec.hosts)
            .map(|i| HostRules::for_in_scope(&spec, i))
            .collect();
        let robots = rules.iter().map(|r| r.robots_txt().map(Bytes::from)).collect();
        let outside_rules = HostRules::outside();
        let outside_robots = outside_rules.robots_txt().map(Bytes::from);
        let mut specials = Vec::new();
        if extras.hostile {
            specials.extend(hostile::SPECIAL_HOSTS);
        }
        if extras.oversized {
            specials.extend(hostile::OVERSIZED_HOSTS);
        }
        if extras.internal {
            specials.extend(hostile::INTERNAL_HOSTS);
        }
        if extras.traps {
            specials.extend(traps::TRAP_HOSTS);
        }
        if extras.big_site {
            specials.extend(traps::BIG_SITE_HOSTS);
        }
        if extras.site_family {
            specials.extend(FamilyHost::ALL.map(SpecialHost::Family));
        }
        let default_port = if extras.tls.is_some() { 443 } else { 80 };
        let port_suffix = if port == default_port {
            String::new()
        } else {
            format!(":{port}")
        };
        // Whole seconds, so that each Last-Modified is exactly the start of its version.
        let change_epoch = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        SyntheticWeb {
            spec,
            extras,
            port,
            port_suffix,
            rules,
            outside_rules,
            robots,
            outside_robots,
            specials,
            change_epoch,
        }
    }

    pub fn spec(&self) -> &WebSpec {
        &self.spec
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn extras(&self) -> &WebExtras {
        &self.extras
    }

    /// Every served name: `site0.test..`, the hostile hosts (when on), then `out0.test..`.
    pub fn host_names(&self) -> Vec<String> {
        let mut names = self.in_scope_host_names();
        names.extend((0..self.spec.outside_hosts).map(|k| self.host_name(HostRef::Outside(k))));
        names
    }

    /// The in-scope names, in in-scope index order: `site0.test..`, then the
    /// hostile hosts (when on). The seeds are their home pages.
    pub fn in_scope_host_names(&self) -> Vec<String> {
        (0..self.spec.hosts)
            .map(|i| self.host_name(HostRef::InScope(i)))
            .chain(self.special_hosts().iter().map(|h| h.name().to_string()))
            .collect()
    }

    /// `http://NAME:PORT/` for every in-scope host.
    pub fn seed_urls(&self) -> Vec<String> {
        (0..self.spec.hosts)
            .map(|i| self.url(HostRef::InScope(i), Loc::Home))
            .chain(self.special_hosts().iter().map(|h| self.url_on(h.name(), "/")))
            .collect()
    }

    /// `http://{host}:PORT{path}`, the normalised URL of `path` on a served name.
    pub fn url_on(&self, host: &str, path: &str) -> String {
        format!("{}://{host}{}{path}", self.scheme(), self.port_suffix)
    }

    /// `https` with [`WebExtras::tls`], else `http`.
    pub fn scheme(&self) -> &'static str {
        if self.extras.tls.is_some() {
            "https"
        } else {
            "http"
        }
    }

    /// The hostile and oversized hosts served, in in-scope order (empty
    /// unless `extras.hostile` or `extras.oversized`).
    pub(crate) fn special_hosts(&self) -> &[SpecialHost] {
        &self.specials
    }

    /// The hostile or oversized host a `Host` header names, if it is served.
    pub(crate) fn special_host(&self, host: &str) -> Option<SpecialHost> {
        if self.specials.is_empty() {
            return None;
        }
        SpecialHost::parse(host, &self.specials)
    }

    /// Index of an in-scope host (`siteN` → N, hostile hosts after them).
    fn in_scope_index(&self, host: &str) -> Option<usize> {
        if let Some(HostRef::InScope(i)) = parse_host(host, self.spec.hosts, self.spec.outside_hosts) {
            return Some(i);
        }
        let special = self.special_host(host)?;
        let k = self.specials.iter().position(|&s| s == special)?;
        Some(self.spec.hosts + k)
    }

    /// How long the server sleeps, at most, before answering a request to
    /// `host` (a `Host` header): `slow_ms` for the first `slow_hosts` in-scope hosts.
    pub fn slow_delay(&self, host: &str) -> Option<Duration> {
        if self.extras.slow_hosts == 0 || self.extras.slow_ms == 0 {
            return None;
        }
        let i = self.in_scope_index(host)?;
        (i < self.extras.slow_hosts).then(|| Duration::from_millis(self.extras.slow_ms))
    }

    /// How long the server sleeps before answering `GET path_and_query` on
    /// `host`: [`SyntheticWeb::slow_delay`], or with `extras.slow_varied` a
    /// latency of its own for each path (see [`WebExtras::slow_varied`]);
    /// on other hosts, [`WebExtras::response_delay_ms`] for all but robots.txt.
    pub fn latency(&self, host: &str, path_and_query: &str) -> Option<Duration> {
        let Some(max) = self.slow_delay(host) else {
            return self.response_delay(host, path_and_query);
        };
        if !self.extras.slow_varied {
            return Some(max);
        }
        // FNV-1a of the path, mixed with the seed.
        let h = path_and_query.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
        });
        let mut rng = SplitMix::new(mix(&[self.spec.seed, 0x1a7e, h]));
        if rng.chance(1, 3) {
            return None;
        }
        let max_ms = max.as_millis() as usize;
        let min_ms = max_ms * 3 / 8;
        Some(Duration::from_millis(
            (min_ms + rng.below(max_ms - min_ms + 1)) as u64,
        ))
    }

    /// [`WebExtras::response_delay_ms`] for a request to a generated host
    /// (in scope or outside) other than its robots.txt.
    fn response_delay(&self, host: &str, path_and_query: &str) -> Option<Duration> {
        let ms = self.extras.response_delay_ms;
        if ms == 0 {
            return None;
        }
        let robots = path_and_query == "/robots.txt" || path_and_query.starts_with("/robots.txt?");
        let generated = parse_host(host, self.spec.hosts, self.spec.outside_hosts).is_some();
        (!robots && generated).then(|| Duration::from_millis(ms))
    }

    /// Pages `/p/0..` served by a host: fewer on slow hosts when
    /// `slow_host_pages` is set.
    pub(crate) fn pages_of(&self, host: HostRef) -> usize {
        match host {
            HostRef::InScope(i) if i < self.extras.slow_hosts && self.extras.slow_host_pages > 0 => {
                self.extras.slow_host_pages
            }
            _ => self.spec.pages_per_host,
        }
    }

    /// The robots.txt a host serves (`None`: 404). `host` as in a Host header.
    pub fn robots_txt(&self, host: &str) -> Option<String> {
        let h = parse_host(host, self.spec.hosts, self.spec.outside_hosts)?;
        self.rules(h).robots_txt()
    }

    /// The `Crawl-delay` a host's robots.txt announces, for politeness checks.
    pub fn crawl_delay(&self, host: &str) -> Option<f64> {
        let h = parse_host(host, self.spec.hosts, self.spec.outside_hosts)?;
        self.rules(h).crawl_delay
    }

    /// The response to `GET path_and_query` with `Host: host` (port ignored).
    pub fn respond(&self, host: &str, path_and_query: &str) -> Response {
        self.respond_conditional(host, path_and_query, Conditions::default())
    }

    /// [`SyntheticWeb::respond`] to a request that carries conditional
    /// headers: with [`WebExtras::changing`], a page that has not changed
    /// since the version they name answers 304 (without it, they are ignored).
    pub fn respond_conditional(&self, host: &str, path_and_query: &str, cond: Conditions<'_>) -> Response {
        self.respond_at(host, path_and_query, cond, SystemTime::now())
    }

    /// [`SyntheticWeb::respond_conditional`] as if the time were `now`: the
    /// tests' clock, to see pages change without sleeping.
    pub(crate) fn respond_at(
        &self,
        host: &str,
        path_and_query: &str,
        cond: Conditions<'_>,
        now: SystemTime,
    ) -> Response {
        let answer = parse_host(host, self.spec.hosts, self.spec.outside_hosts)
            .and_then(|h| Some(self.answer(h, Loc::parse(path_and_query)?)))
            .unwrap_or(Answer::NotFound);
        match answer {
            Answer::Html(h, loc) => match self.extras.changing {
                Some(ch) => self.respond_changing(ch, h, loc, cond, now),
                None => Response {
                    status: 200,
                    headers: vec![("content-type", HTML.to_string())],
                    body: self.render_page(h, loc),
                },
            },
            Answer::Robots(body) => Response {
                status: 200,
                headers: vec![("content-type", "text/plain; charset=utf-8".to_string())],
                body,
            },
            Answer::NotFound => Response {
                status: 404,
                headers: vec![("content-type", HTML.to_string())],
                body: Bytes::from_static(NOT_FOUND_HTML.as_bytes()),
            },
            Answer::Redirect {
                status,
                host: to,
                loc,
            } => {
                let from = parse_host(host, self.spec.hosts, self.spec.outside_hosts);
                // Same-host redirects use a relative Location, cross-host an absolute one.
                let location = if from == Some(to) {
                    loc.path()
                } else {
                    self.url(to, loc)
                };
                Response {
                    status,
                    headers: vec![("content-type", HTML.to_string()), ("location", location)],
                    body: Bytes::from_static(MOVED_HTML.as_bytes()),
                }
            }
        }
    }

    /// The single source of truth for what each location does.
    pub(crate) fn answer(&self, host: HostRef, loc: Loc) -> Answer {
        let m = self.pages_of(host);
        match loc {
            Loc::Home | Loc::Private(_) => Answer::Html(host, loc),
            Loc::Page(n) if n < m => Answer::Html(host, loc),
            // The same page under another URL.
            Loc::Variant(n, _) if n < m => Answer::Html(host, Loc::Page(n)),
            Loc::Robots => match self.robots_body(host) {
                Some(body) => Answer::Robots(body),
                None => Answer::NotFound,
            },
            Loc::Redirect(n) if n < m => Answer::Redirect {
                status: 301,
                host,
                loc: Loc::Page(n),
            },
            Loc::Chain(n) if n < m => Answer::Redirect {
                status: 302,
                host,
                loc: Loc::Redirect(n),
            },
            Loc::Cross(h, n) if h < self.spec.hosts && n < self.pages_of(HostRef::InScope(h)) => {
                Answer::Redirect {
                    status: 302,
                    host: HostRef::InScope(h),
                    loc: Loc::Page(n),
                }
            }
            _ => Answer::NotFound,
        }
    }

    fn robots_body(&self, host: HostRef) -> Option<Bytes> {
        match host {
            HostRef::InScope(i) => self.robots.get(i).cloned().flatten(),
            HostRef::Outside(_) => self.outside_robots.clone(),
        }
    }

    pub(crate) fn rules(&self, host: HostRef) -> &HostRules {
        match host {
            HostRef::InScope(i) => self.rules.get(i).unwrap_or(&self.outside_rules),
            HostRef::Outside(_) => &self.outside_rules,
        }
    }

    /// The generated hosts (not the hostile ones): in scope, then outside.
    #[cfg(test)]
    pub(crate) fn all_hosts(&self) -> impl Iterator<Item = HostRef> {
        let outside = self.spec.outside_hosts;
        (0..self.spec.hosts)
            .map(HostRef::InScope)
            .chain((0..outside).map(HostRef::Outside))
    }

    pub(crate) fn write_host_name(&self, out: &mut String, h: HostRef, upper: bool) {
        use std::fmt::Write as _;
        let (prefix, n) = match (h, upper) {
            (HostRef::InScope(i), false) => ("site", i),
            (HostRef::InScope(i), true) => ("SITE", i),
            (HostRef::Outside(k), false) => ("out", k),
            (HostRef::Outside(k), true) => ("OUT", k),
        };
        let _ = write!(out, "{prefix}{n}.test");
    }

    pub(crate) fn host_name(&self, h: HostRef) -> String {
        let mut s = String::with_capacity(16);
        self.write_host_name(&mut s, h, false);
        s
    }

    /// `http://site3.test:PORT`, optionally with an upper-case scheme or host.
    pub(crate) fn write_origin(&self, out: &mut String, h: HostRef, upper_scheme: bool, upper_host: bool) {
        let scheme = match (self.extras.tls.is_some(), upper_scheme) {
            (false, false) => "http://",
            (false, true) => "HTTP://",
            (true, false) => "https://",
            (true, true) => "HTTPS://",
        };
        out.push_str(scheme);
        self.write_host_name(out, h, upper_host);
        out.push_str(&self.port_suffix);
    }

    /// `//site3.test:PORT`: a scheme-relative href's authority.
    pub(crate) fn write_scheme_relative(&self, out: &mut String, h: HostRef) {
        out.push_str("//");
        self.write_host_name(out, h, false);
        out.push_str(&self.port_suffix);
    }

    /// The normalised absolute URL of a location.
    pub(crate) fn url(&self, h: HostRef, loc: Loc) -> String {
        let mut s = String::with_capacity(40);
        self.write_origin(&mut s, h, false, false);
        loc.write_path(&mut s);
        s
    }
}
