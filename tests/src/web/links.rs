//! The outlinks of every generated page, and how each one is spelled in HTML.
//!
//! Links are produced by one function, [`SyntheticWeb::for_each_link`], that
//! both the HTML renderer and the ground-truth crawl call: the renderer turns
//! each [`LinkSpec`] into an `<a href>` with [`SyntheticWeb::write_href`], the
//! ground truth only looks at its [`Target`]. Because both consume the same
//! random draws, the two can never disagree about what a page links to.

use std::fmt::Write as _;

use super::model::{HostRef, Loc, QUERY_VARIANTS};
use super::rng::{mix, SplitMix};
use super::SyntheticWeb;

/// What a link points to, already resolved and normalised.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Target {
    /// An http URL on a host of this web (fragment is not part of the target).
    Url(HostRef, Loc),
    /// `mailto:`: never crawled.
    Mailto(usize),
    /// `javascript:void(0)`: never crawled.
    Javascript,
}

/// How the href of a [`Target::Url`] is spelled, to exercise link extraction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Style {
    /// `/p/7`
    AbsPath,
    /// `http://site3.test:PORT/p/7`
    AbsUrl,
    /// `http://SITE3.test:PORT/p/7` (normalises to lower case)
    UpperHost,
    /// `HTTP://site3.test:PORT/p/7`
    UpperScheme,
    /// `7` from `/p/` (or `p/7` from `/`), relative to the page's base directory
    RelSame,
    /// `./7`
    RelDot,
    /// `../p/7`
    RelParent,
    /// `#sec2` alone: the page itself
    FragOnly,
    /// `//site3.test:PORT/p/7` (realistic profile only)
    SchemeRel,
}

/// Attribute quoting of the href.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Quote {
    Double,
    Single,
    Bare,
}

/// One `<a>` element of a page.
#[derive(Clone, Copy, Debug)]
pub(crate) struct LinkSpec {
    pub(crate) target: Target,
    pub(crate) style: Style,
    /// `#sec{n}` suffix (dropped by normalisation).
    pub(crate) frag: Option<u8>,
    pub(crate) nofollow: bool,
    pub(crate) quote: Quote,
    /// `<A HREF=...>` instead of `<a href=...>`.
    pub(crate) upper_tag: bool,
}

/// Where a page lives and what its relative links resolve against.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PageCtx {
    pub(crate) host: HostRef,
    pub(crate) loc: Loc,
    /// `<base href>` value, if the page has one (always a same-host path).
    pub(crate) base: Option<&'static str>,
    /// Directory relative hrefs resolve against (the base's, else the page's).
    pub(crate) dir: &'static str,
}

/// Stable small integers for seeding per-page random streams.
pub(crate) fn host_code(h: HostRef) -> u64 {
    match h {
        HostRef::InScope(i) => (i as u64) << 1,
        HostRef::Outside(k) => ((k as u64) << 1) | 1,
    }
}

pub(crate) fn loc_code(loc: Loc) -> u64 {
    let (tag, a, b) = match loc {
        Loc::Home => (0, 0, 0),
        Loc::Robots => (1, 0, 0),
        Loc::Page(n) => (2, n, 0),
        Loc::Missing(n) => (3, n, 0),
        Loc::Redirect(n) => (4, n, 0),
        Loc::Chain(n) => (5, n, 0),
        Loc::Cross(h, n) => (6, h, n),
        Loc::Private(n) => (7, n, 0),
        Loc::Variant(n, k) => (8, n, k),
    };
    mix(&[tag, a as u64, b as u64])
}

impl SyntheticWeb {
    /// The context of an HTML page: which pages carry `<base href="/p/">`.
    pub(crate) fn page_ctx(&self, host: HostRef, loc: Loc) -> PageCtx {
        if self.spec.is_realistic() {
            let dir = loc.dir().unwrap_or("/");
            return PageCtx {
                host,
                loc,
                base: None,
                dir,
            };
        }
        let base = match loc {
            Loc::Home => self.rules(host).home_base.then_some("/p/"),
            Loc::Page(j) => (j % 5 == 3).then_some("/p/"),
            // Makes the base matter: without it `3` would mean /private/3.
            Loc::Private(_) => Some("/p/"),
            _ => None,
        };
        let dir = base.or(loc.dir()).unwrap_or("/");
        PageCtx { host, loc, base, dir }
    }

    /// Calls `f` for every `<a>` of the page, in document order.
    pub(crate) fn for_each_link(&self, ctx: &PageCtx, f: &mut impl FnMut(&LinkSpec)) {
        if self.spec.is_realistic() {
            return self.realistic_links(ctx, f);
        }
        let spec = &self.spec;
        let m = self.pages_of(ctx.host);
        let mut rng = SplitMix::new(mix(&[spec.seed, 0x11, host_code(ctx.host), loc_code(ctx.loc)]));
        let rng = &mut rng;
        match ctx.loc {
            Loc::Home => {
                for k in 0..m.min(10) {
                    self.emit(rng, ctx, Target::Url(ctx.host, Loc::Page(k)), f);
                }
                self.emit(rng, ctx, Target::Javascript, f);
            }
            Loc::Private(n) => {
                self.emit(rng, ctx, Target::Url(ctx.host, Loc::Home), f);
                if m > 0 {
                    for k in [n % m, (n * 7 + 3) % m] {
                        self.emit(rng, ctx, Target::Url(ctx.host, Loc::Page(k)), f);
                    }
                }
            }
            Loc::Page(j) if j < m => {
                // Structural links: a binary tree plus a "next" chain, so every
                // page is reachable in O(log M) hops even when robots blocks a
                // whole subtree (e.g. `Disallow: /p/1` removes /p/1 and /p/10..19).
                for k in [2 * j + 1, 2 * j + 2, j + 1] {
                    if k < m {
                        self.emit(rng, ctx, Target::Url(ctx.host, Loc::Page(k)), f);
                    }
                }
                let mut last = None;
                for _ in 0..spec.links_per_page {
                    let target = self.random_target(rng, ctx, last);
                    if let Target::Url(..) = target {
                        last = Some(target);
                    }
                    if target == Target::Url(ctx.host, ctx.loc) && rng.chance(1, 2) {
                        self.emit_self_fragment(rng, ctx, f);
                    } else {
                        self.emit(rng, ctx, target, f);
                    }
                }
            }
            _ => {}
        }
    }

    /// One random outlink of a content page `/p/j` (pages_per_host > 0).
    fn random_target(&self, rng: &mut SplitMix, ctx: &PageCtx, last: Option<Target>) -> Target {
        // Each `below` draw consumes one number whatever its bound, so bounding
        // slow hosts' pages (`pages_of`) changes no other link.
        let m = self.spec.pages_per_host;
        let own_m = self.pages_of(ctx.host);
        let hosts = self.spec.hosts;
        let outside = self.spec.outside_hosts;
        let own = Target::Url(ctx.host, Loc::Page(rng.below(own_m)));
        // Redirects whose final hop robots would block are never generated:
        // what a crawler records for them is not worth pinning down.
        let blocked = |k: usize| self.rules(ctx.host).disallows(&Loc::Page(k).path());
        match rng.below(100) {
            0..=29 => own,
            30..=39 if hosts > 0 => {
                let h = HostRef::InScope(rng.below(hosts));
                Target::Url(h, Loc::Page(rng.below(self.pages_of(h))))
            }
            40..=45 if outside > 0 => {
                Target::Url(HostRef::Outside(rng.below(outside)), Loc::Page(rng.below(m)))
            }
            46..=48 => Target::Mailto(rng.below(100)),
            49..=51 => Target::Javascript,
            52..=57 => Target::Url(ctx.host, Loc::Missing(rng.below(1000))),
            58..=63 => {
                let k = rng.below(own_m);
                if blocked(k) {
                    own
                } else {
                    Target::Url(ctx.host, Loc::Redirect(k))
                }
            }
            64..=67 => {
                let k = rng.below(own_m);
                if blocked(k) {
                    own
                } else {
                    Target::Url(ctx.host, Loc::Chain(k))
                }
            }
            68..=72 if hosts > 1 => {
                let mut h = rng.below(hosts);
                if ctx.host == HostRef::InScope(h) {
                    h = (h + 1) % hosts;
                }
                Target::Url(
                    ctx.host,
                    Loc::Cross(h, rng.below(self.pages_of(HostRef::InScope(h)))),
                )
            }
            73..=78 => Target::Url(ctx.host, Loc::Private(rng.below(50))),
            79..=84 => last.unwrap_or(own),
            85..=87 => Target::Url(ctx.host, ctx.loc),
            _ => own,
        }
    }

    /// A link to the page itself: `#secN` when there is no `<base>` (with a
    /// base, a bare fragment would resolve against the base, not the page).
    fn emit_self_fragment(&self, rng: &mut SplitMix, ctx: &PageCtx, f: &mut impl FnMut(&LinkSpec)) {
        let style = if ctx.base.is_none() {
            Style::FragOnly
        } else {
            Style::AbsPath
        };
        let link = LinkSpec {
            target: Target::Url(ctx.host, ctx.loc),
            style,
            frag: Some(rng.below(4) as u8),
            nofollow: false,
            quote: Quote::Double,
            upper_tag: false,
        };
        f(&link);
    }

    /// Picks the spelling of a link and hands it to `f`.
    fn emit(&self, rng: &mut SplitMix, ctx: &PageCtx, target: Target, f: &mut impl FnMut(&LinkSpec)) {
        let style = match target {
            Target::Url(h, loc) => pick_style(rng, ctx, h, loc),
            _ => Style::AbsPath,
        };
        let frag = (matches!(target, Target::Url(..)) && rng.chance(1, 8)).then(|| rng.below(4) as u8);
        let nofollow = rng.chance(1, 10);
        let ends_with_slash = matches!(target, Target::Url(_, Loc::Home)) && frag.is_none();
        let quote = match rng.below(10) {
            0..=6 => Quote::Double,
            7..=8 => Quote::Single,
            // `<a href=../>` is valid HTML but a classic parser trap; keep bare values simple.
            _ if ends_with_slash => Quote::Double,
            _ => Quote::Bare,
        };
        let upper_tag = rng.chance(1, 15);
        f(&LinkSpec {
            target,
            style,
            frag,
            nofollow,
            quote,
            upper_tag,
        });
    }

    /// Writes the href of `l` as it appears on the page described by `ctx`.
    pub(crate) fn write_href(&self, out: &mut String, ctx: &PageCtx, l: &LinkSpec) {
        let (h, loc) = match l.target {
            Target::Mailto(n) => {
                out.push_str("mailto:info");
                let _ = write!(out, "{n}@");
                self.write_host_name(out, ctx.host, false);
                return;
            }
            Target::Javascript => {
                out.push_str("javascript:void(0)");
                return;
            }
            Target::Url(h, loc) => (h, loc),
        };
        match l.style {
            Style::AbsPath => loc.write_path(out),
            Style::AbsUrl => {
                self.write_origin(out, h, false, false);
                loc.write_path(out);
            }
            Style::UpperHost => {
                self.write_origin(out, h, false, true);
                loc.write_path(out);
            }
            Style::UpperScheme => {
                self.write_origin(out, h, true, false);
                loc.write_path(out);
            }
            Style::RelSame | Style::RelDot => {
                if l.style == Style::RelDot {
                    out.push_str("./");
                }
                let start = out.len();
                loc.write_path(out);
                // pick_style only chooses this when the prefix matches.
                if out[start..].starts_with(ctx.dir) {
                    out.replace_range(start..start + ctx.dir.len(), "");
                }
            }
            Style::RelParent => {
                out.push_str("../");
                let start = out.len();
                loc.write_path(out);
                out.remove(start);
            }
            Style::SchemeRel => {
                self.write_scheme_relative(out, h);
                loc.write_path(out);
            }
            Style::FragOnly => {}
        }
        if let Some(n) = l.frag {
            let _ = write!(out, "#sec{n}");
        }
    }
}

/// How many links the nav bar of a realistic page has: home and the first
/// three pages (fewer on a host with fewer pages). They come first.
pub(crate) fn nav_len(pages: usize) -> usize {
    1 + pages.min(3)
}

/// The realistic profile's links ([`super::model::Profile::Realistic`]).
impl SyntheticWeb {
    /// The links of a realistic page, in document order: the nav bar, then
    /// (content pages) the structural tree links and random ones up to the
    /// page's own link count, (home) the first 20 pages and 5 random links,
    /// (private pages) two content pages.
    fn realistic_links(&self, ctx: &PageCtx, f: &mut impl FnMut(&LinkSpec)) {
        let spec = &self.spec;
        let m = self.pages_of(ctx.host);
        let mut rng = SplitMix::new(mix(&[spec.seed, 0x44, host_code(ctx.host), loc_code(ctx.loc)]));
        let rng = &mut rng;
        let nav = || std::iter::once(Loc::Home).chain((0..m.min(3)).map(Loc::Page));
        match ctx.loc {
            Loc::Home => {
                for loc in nav().chain((0..m.min(20)).map(Loc::Page)) {
                    self.emit_realistic(rng, ctx, Target::Url(ctx.host, loc), false, f);
                }
                for _ in 0..5 {
                    let target = self.realistic_target(rng, ctx);
                    self.emit_realistic(rng, ctx, target, false, f);
                }
            }
            Loc::Private(n) => {
                for loc in nav() {
                    self.emit_realistic(rng, ctx, Target::Url(ctx.host, loc), false, f);
                }
                if m > 0 {
                    for k in [n % m, (n * 7 + 3) % m] {
                        self.emit_realistic(rng, ctx, Target::Url(ctx.host, Loc::Page(k)), false, f);
                    }
                }
            }
            Loc::Page(j) if j < m => {
                let count = self.realistic_link_count(rng);
                let mut emitted = 0;
                let structural = [2 * j + 1, 2 * j + 2, j + 1];
                let fixed = nav().chain(structural.into_iter().filter(|&k| k < m).map(Loc::Page));
                for loc in fixed {
                    self.emit_realistic(rng, ctx, Target::Url(ctx.host, loc), false, f);
                    emitted += 1;
                }
                while emitted < count {
                    let target = self.realistic_target(rng, ctx);
                    // A link to the page itself is an in-page anchor.
                    let own = target == Target::Url(ctx.host, ctx.loc);
                    self.emit_realistic(rng, ctx, target, own, f);
                    emitted += 1;
                }
            }
            _ => {}
        }
    }

    /// A content page's number of links: uniform in 2/5..=8/5 of
    /// `links_per_page` (10..=40 for 25).
    fn realistic_link_count(&self, rng: &mut SplitMix) -> usize {
        let lo = self.spec.links_per_page * 2 / 5;
        let hi = (self.spec.links_per_page * 8 / 5).max(lo);
        lo + rng.below(hi - lo + 1)
    }

    /// One random link of a realistic page, per mille: 635 a page of the
    /// same host, 200 a page of another in-scope host, 40 an outside host,
    /// 30 one of the host's few missing pages (404), 25 a query-string
    /// variant of one of its first pages, 20 one of its few `/private/`
    /// pages, 20 the page itself, 5 one of its few redirects, 10 mailto or
    /// javascript. The pools of 404s, redirects, private pages and variants
    /// are small (a few percent of the host's pages), as on real sites.
    fn realistic_target(&self, rng: &mut SplitMix, ctx: &PageCtx) -> Target {
        let m = self.spec.pages_per_host;
        let own_m = self.pages_of(ctx.host);
        let hosts = self.spec.hosts;
        let outside = self.spec.outside_hosts;
        let own = |rng: &mut SplitMix| {
            if own_m == 0 {
                Target::Url(ctx.host, Loc::Home)
            } else {
                Target::Url(ctx.host, Loc::Page(rng.below(own_m)))
            }
        };
        let pool = |n: usize| (own_m / n).max(1);
        match rng.below(1000) {
            0..=634 => own(rng),
            635..=834 if hosts > 1 => {
                let mut h = rng.below(hosts);
                if ctx.host == HostRef::InScope(h) {
                    h = (h + 1) % hosts;
                }
                let h = HostRef::InScope(h);
                match self.pages_of(h) {
                    0 => Target::Url(h, Loc::Home),
                    n => Target::Url(h, Loc::Page(rng.below(n))),
                }
            }
            835..=874 if outside > 0 && m > 0 => {
                Target::Url(HostRef::Outside(rng.below(outside)), Loc::Page(rng.below(m)))
            }
            875..=904 => Target::Url(ctx.host, Loc::Missing(rng.below(pool(25)))),
            905..=929 if own_m > 0 => Target::Url(
                ctx.host,
                Loc::Variant(rng.below(own_m.min(5)), rng.below(QUERY_VARIANTS.len())),
            ),
            930..=949 => Target::Url(ctx.host, Loc::Private(rng.below(pool(25)))),
            950..=969 => Target::Url(ctx.host, ctx.loc),
            970..=974 if own_m > 0 => {
                let k = rng.below(pool(80));
                if self.rules(ctx.host).disallows(&Loc::Page(k).path()) {
                    own(rng)
                } else {
                    Target::Url(ctx.host, Loc::Redirect(k))
                }
            }
            975..=979 => Target::Mailto(rng.below(10)),
            980..=984 => Target::Javascript,
            _ => own(rng),
        }
    }

    /// Picks the spelling of a realistic link and hands it to `f`;
    /// `anchor`: always with a `#fragment`.
    fn emit_realistic(
        &self,
        rng: &mut SplitMix,
        ctx: &PageCtx,
        target: Target,
        anchor: bool,
        f: &mut impl FnMut(&LinkSpec),
    ) {
        let url = matches!(target, Target::Url(..));
        let style = match target {
            Target::Url(h, loc) => pick_realistic_style(rng, ctx, h, loc),
            _ => Style::AbsPath,
        };
        let frag = (url && (anchor || rng.chance(1, 10))).then(|| rng.below(4) as u8);
        f(&LinkSpec {
            target,
            style,
            frag,
            nofollow: rng.chance(1, 25),
            quote: if rng.chance(1, 10) {
                Quote::Single
            } else {
                Quote::Double
            },
            upper_tag: false,
        });
    }
}

/// A realistic spelling: other hosts absolute (3/4) or scheme-relative;
/// same host root-relative (45%), document-relative (30%: `7`, `./7`,
/// `../p/7` where they apply), absolute (15%), scheme-relative (5%).
/// Never a bare `#frag` or `?query`: those resolve against the page's own
/// URL, and a query-string variant serves its page's bytes.
fn pick_realistic_style(rng: &mut SplitMix, ctx: &PageCtx, host: HostRef, loc: Loc) -> Style {
    let r = rng.below(100);
    if host != ctx.host {
        return if r < 75 { Style::AbsUrl } else { Style::SchemeRel };
    }
    let rel_same = loc != Loc::Home && (ctx.dir == "/" || loc.dir() == Some(ctx.dir));
    let rel_parent = ctx.dir != "/";
    match r {
        45..=64 if rel_same => Style::RelSame,
        65..=69 if rel_same => Style::RelDot,
        70..=74 if rel_parent => Style::RelParent,
        45..=74 if rel_parent => Style::RelParent,
        75..=89 => Style::AbsUrl,
        90..=94 => Style::SchemeRel,
        _ => Style::AbsPath,
    }
}

/// Chooses a spelling that, resolved against the page, yields `(host, loc)`.
fn pick_style(rng: &mut SplitMix, ctx: &PageCtx, host: HostRef, loc: Loc) -> Style {
    let r = rng.below(20);
    if host != ctx.host {
        return match r {
            0..=11 => Style::AbsUrl,
            12..=17 => Style::UpperHost,
            _ => Style::UpperScheme,
        };
    }
    // Home from "/" would be the empty href; leave that out.
    let rel_same = loc != Loc::Home && (ctx.dir == "/" || loc.dir() == Some(ctx.dir));
    let rel_parent = ctx.dir != "/";
    match r {
        0..=5 => Style::AbsPath,
        6..=7 => Style::AbsUrl,
        8 => Style::UpperHost,
        9..=13 if rel_same => Style::RelSame,
        14..=15 if rel_same => Style::RelDot,
        16..=19 if rel_parent => Style::RelParent,
        _ if rel_parent => Style::RelParent,
        _ if rel_same => Style::RelSame,
        _ => Style::AbsPath,
    }
}
