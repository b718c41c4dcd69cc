//! Link and page-feature extraction from HTML, in one streaming pass.
//!
//! Two collectors find the raw values (links, `<base>`, title, description,
//! canonical, language); [`finish`] decodes their character references
//! (see `entities`) and resolves the links:
//!
//! - `scan`: a tokenizer for the HTML the web mostly serves (UTF-8, no
//!   `<svg>`/`<math>`, no `<noscript>`, no comment tricks in scripts),
//!   about three times faster than `lol_html` on realistic pages. It gives
//!   up on anything else, and
//! - `lol`: `lol_html`, a complete HTML tokenizer, takes over: every page
//!   gets exactly what `lol_html` would find (tests check both agree).
//!
//! Links are resolved against `<base href>` when the page has one (HTML
//! says the first `<base>` applies to the whole document, so links are
//! collected raw and resolved at the end), then made canonical when a
//! [`Canonicalizer`] is given, before they are de-duplicated: one page's
//! `?sid=1` and `?sid=2` links are one link.

mod entities;
mod lol;
mod scan;

use std::collections::HashSet;

use url::Url;

use entities::Context;
use shared::canonical::Canonicalizer;
use shared::urls::{self, Rejected};

/// Longest title/description we keep; pages sometimes stuff megabytes in.
const MAX_TEXT: usize = 1024;
/// Extraction switches.
#[derive(Debug, Clone, Copy, Default)]
pub struct ExtractOptions<'a> {
    /// Drop `<a rel="nofollow">` links (kept by default: nofollow is about
    /// ranking, not crawling).
    pub skip_nofollow: bool,
    /// Links kept, the first ones in page order (0 = no limit). A page
    /// can carry hundreds of thousands of links; each becomes an absolute
    /// URL of up to 2 KiB, so the cap bounds what one page costs.
    pub max_links: usize,
    /// Our robots.txt product token: `<meta name="TOKEN">` counts as
    /// `<meta name="robots">` (matched without regard to case).
    pub robots_agent: &'a str,
    /// Makes each resolved link canonical (see [`shared::canonical`]) before
    /// links are de-duplicated; `None` keeps them as resolved.
    pub canonical: Option<&'a Canonicalizer>,
}

/// What a page tells us about itself and where it links.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct PageFeatures {
    pub title: Option<String>,
    pub description: Option<String>,
    pub canonical: Option<String>,
    pub lang: Option<String>,
    /// Normalised absolute http(s) links, de-duplicated, in page order.
    pub links: Vec<String>,
    /// Links dropped, by reason, so they can be counted.
    pub rejected: Vec<Rejected>,
    /// Links not kept because of [`ExtractOptions::max_links`] (counted
    /// without being resolved: past the cap nothing more is spent on them).
    pub over_cap: usize,
    /// What its robots meta tags say (the `X-Robots-Tag` header is the
    /// caller's to add).
    pub robots: store::docs::RobotsDirectives,
}

/// What a collector found, as written in the page.
#[derive(Default, Debug, PartialEq)]
struct Raw {
    base: Option<String>,
    hrefs: Vec<String>,
    title: String,
    titles_seen: u32,
    description: Option<String>,
    canonical: Option<String>,
    lang: Option<String>,
    /// The `content` of each robots meta tag (ours by name too), as written.
    robots: Vec<String>,
}

/// Extracts links and features from `body`, decoded with `encoding`
/// (UTF-8 when `None`; invalid sequences are replaced, never an error).
pub fn extract(
    body: &[u8],
    page_url: &Url,
    encoding: Option<&'static encoding_rs::Encoding>,
    options: ExtractOptions<'_>,
) -> PageFeatures {
    let utf8 = encoding.is_none_or(|e| e == encoding_rs::UTF_8);
    let raw = utf8
        .then(|| scan::collect(body, options))
        .flatten()
        .unwrap_or_else(|| lol::collect(body, encoding, options));
    finish(raw, page_url, options)
}

/// [`extract`] with `lol_html` alone: the reference the fast scanner is
/// tested against.
pub fn extract_reference(
    body: &[u8],
    page_url: &Url,
    encoding: Option<&'static encoding_rs::Encoding>,
    options: ExtractOptions<'_>,
) -> PageFeatures {
    finish(lol::collect(body, encoding, options), page_url, options)
}

/// [`extract`] with the fast scanner alone; `None` where it gives the page
/// to `lol_html` (tests measure how often, and check the two agree).
pub fn extract_fast(body: &[u8], page_url: &Url, options: ExtractOptions<'_>) -> Option<PageFeatures> {
    scan::collect(body, options).map(|raw| finish(raw, page_url, options))
}

fn finish(raw: Raw, page_url: &Url, options: ExtractOptions<'_>) -> PageFeatures {
    // Attribute values, decoded as HTML decodes them (borrowed when they
    // hold no reference, which is nearly always).
    fn attr(s: &str) -> std::borrow::Cow<'_, str> {
        entities::decode(s, Context::Attribute)
    }
    let base = raw
        .base
        .as_deref()
        .and_then(|b| page_url.join(attr(b).trim()).ok())
        .unwrap_or_else(|| page_url.clone());
    let cap = if options.max_links == 0 {
        usize::MAX
    } else {
        options.max_links
    };
    let mut robots = store::docs::RobotsDirectives::default();
    for content in &raw.robots {
        crate::robots_meta::add_meta(&mut robots, &attr(content));
    }
    // `nofollow`: none of the page's links is followed, nor resolved.
    let hrefs: &[String] = if robots.nofollow { &[] } else { &raw.hrefs };
    let mut seen = HashSet::with_capacity(hrefs.len().min(cap));
    let mut links = Vec::with_capacity(hrefs.len().min(cap));
    let mut rejected = Vec::new();
    let mut over_cap = 0;
    for (i, href) in hrefs.iter().enumerate() {
        if links.len() >= cap {
            over_cap = hrefs.len() - i;
            break;
        }
        match urls::resolve(&base, &attr(href)) {
            Ok(mut url) => {
                if let Some(canonical) = options.canonical {
                    canonical.apply(&mut url);
                }
                let s: String = url.into();
                if seen.insert(s.clone()) {
                    links.push(s);
                }
            }
            Err(reason) => rejected.push(reason),
        }
    }
    let title = collapse_ws(&entities::decode(&raw.title, Context::Text));
    PageFeatures {
        title: (!title.is_empty()).then(|| clip(&title)),
        description: raw
            .description
            .map(|d| attr(&d).into_owned())
            .filter(|d| !d.is_empty()),
        canonical: raw
            .canonical
            .and_then(|c| urls::resolve(&base, &attr(&c)).ok())
            .map(String::from),
        lang: raw.lang.map(|l| attr(&l).into_owned()).filter(|l| !l.is_empty()),
        links,
        rejected,
        over_cap,
        robots,
    }
}

/// Whether a `<meta name=...>` speaks to robots, ours included.
fn is_robots_meta(name: &str, agent: &str) -> bool {
    let name = name.trim();
    name.eq_ignore_ascii_case("robots") || (!agent.is_empty() && name.eq_ignore_ascii_case(agent))
}

/// Most robots meta tags read from one page (a page could hold millions).
const MAX_ROBOTS_METAS: usize = 16;

fn has_token(list: &str, token: &str) -> bool {
    list.split_ascii_whitespace()
        .any(|t| t.eq_ignore_ascii_case(token))
}

fn collapse_ws(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn clip(s: &str) -> String {
    if s.len() <= MAX_TEXT {
        return s.to_string();
    }
    let mut end = MAX_TEXT;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page() -> Url {
        Url::parse("http://Site.test:8080/dir/page").unwrap()
    }

    fn run(html: &str) -> PageFeatures {
        extract(html.as_bytes(), &page(), None, ExtractOptions::default())
    }

    #[test]
    fn robots_meta_tags_are_read_for_robots_and_our_agent() {
        let opts = ExtractOptions {
            robots_agent: "synthcrawler",
            ..ExtractOptions::default()
        };
        let read = |html: &str| {
            let f = extract(html.as_bytes(), &page(), None, opts);
            assert_eq!(
                f,
                extract_reference(html.as_bytes(), &page(), None, opts),
                "{html}"
            );
            f
        };
        let f = read(r#"<meta name="ROBOTS" content="noindex, NOFOLLOW"><a href="/x">x</a>"#);
        assert!(f.robots.noindex && f.robots.nofollow && !f.robots.noarchive);
        assert!(f.links.is_empty(), "nofollow keeps no link");
        let f = read(r#"<meta name="SynthCrawler" content="noarchive"><a href="/x">x</a>"#);
        assert!(f.robots.noarchive && !f.robots.nofollow);
        assert_eq!(f.links, vec!["http://site.test:8080/x"]);
        // Another robot's tag is not ours.
        let f = read(r#"<meta name="otherbot" content="none"><a href="/x">x</a>"#);
        assert!(f.robots.is_empty() && f.links.len() == 1);
        // Entities are decoded as in any attribute.
        assert!(
            read(r#"<meta name="robots" content="no&#105;ndex">"#)
                .robots
                .noindex
        );
    }

    #[test]
    fn extracts_features() {
        let f = run(r#"<!doctype html><html lang="de"><head>
            <title>  Hello
               World </title>
            <meta name="Description" content=" About us ">
            <link rel="alternate canonical" href="/canon">
            </head><body><title>ignored</title></body></html>"#);
        assert_eq!(f.title.as_deref(), Some("Hello World"));
        assert_eq!(f.description.as_deref(), Some("About us"));
        assert_eq!(f.canonical.as_deref(), Some("http://site.test:8080/canon"));
        assert_eq!(f.lang.as_deref(), Some("de"));
    }

    #[test]
    fn resolves_normalises_and_dedups_links() {
        let f = run(r##"<a href="a">1</a><a href="/b#x">2</a><a href="/b">dup</a>
            <a href="HTTP://OTHER.test/c">3</a><a href="mailto:x@y.z">m</a>
            <a href="javascript:alert(1)">j</a><a href="#top">self</a>
            <area href="../d"><a rel="nofollow" href="/nf">nf</a><a>no href</a>"##);
        assert_eq!(
            f.links,
            vec![
                "http://site.test:8080/dir/a",
                "http://site.test:8080/b",
                "http://other.test/c",
                "http://site.test:8080/dir/page",
                "http://site.test:8080/d",
                "http://site.test:8080/nf",
            ]
        );
        assert_eq!(f.rejected, vec![Rejected::Scheme, Rejected::Scheme]);
    }

    #[test]
    fn character_references_are_decoded_as_a_browser_does() {
        let f = run(r#"<title>Q&amp;A</title><a href="/s?a=1&amp;b=2&#38;c=3">s</a>
            <a href="/t?x=1&copy=2">legacy</a><meta name=description content="Tom &amp; Jerry">"#);
        assert_eq!(f.title.as_deref(), Some("Q&A"));
        assert_eq!(f.description.as_deref(), Some("Tom & Jerry"));
        assert_eq!(
            f.links,
            vec![
                "http://site.test:8080/s?a=1&b=2&c=3",
                "http://site.test:8080/t?x=1&copy=2"
            ]
        );
    }

    #[test]
    fn pages_the_scanner_leaves_get_the_same_from_lol_html() {
        // Foreign content: the scanner gives the page up, lol_html reads it.
        let html = br#"<svg><a href="/in-svg"></a></svg><a href="/after">x</a>"#;
        assert_eq!(extract_fast(html, &page(), ExtractOptions::default()), None);
        let f = run(std::str::from_utf8(html).unwrap());
        assert_eq!(
            f,
            extract_reference(html, &page(), None, ExtractOptions::default())
        );
        assert_eq!(f.links.len(), 2);
    }

    #[test]
    fn base_href_applies_to_links_before_it_too() {
        let f = run(r#"<a href="x">x</a><base href="http://cdn.test/root/"><a href="y">y</a>"#);
        assert_eq!(f.links, vec!["http://cdn.test/root/x", "http://cdn.test/root/y"]);
    }

    #[test]
    fn nofollow_can_be_skipped() {
        let f = extract(
            br#"<a rel="NoFollow ugc" href="/nf">nf</a><a href="/f">f</a>"#,
            &page(),
            None,
            ExtractOptions {
                skip_nofollow: true,
                ..ExtractOptions::default()
            },
        );
        assert_eq!(f.links, vec!["http://site.test:8080/f"]);
    }

    #[test]
    fn links_are_capped_in_page_order_and_the_rest_counted() {
        // A long <base> under 100,000 short links: without the cap, 100,000
        // URLs of 1.5 KB each.
        let mut html = format!(r#"<base href="http://site.test/{}/">"#, "d".repeat(1500));
        html.push_str(r#"<a href="/dup">a</a><a href="/dup">again</a><a href="mailto:x">m</a>"#);
        for i in 0..100_000 {
            html.push_str(&format!("<a href=l{i}>"));
        }
        let f = extract(
            html.as_bytes(),
            &page(),
            None,
            ExtractOptions {
                max_links: 500,
                ..ExtractOptions::default()
            },
        );
        assert_eq!(f.links.len(), 500);
        assert_eq!(f.links[0], "http://site.test/dup");
        assert!(f.links[1].ends_with("/l0"), "{}", f.links[1]);
        assert!(f.links[499].ends_with("/l498"), "{}", f.links[499]);
        // Three raw links before the 499 kept l-links: 100,000 - 499 are cut.
        assert_eq!(f.over_cap, 100_000 - 499);
        assert_eq!(f.rejected.len(), 1);
    }

    #[test]
    fn links_are_made_canonical_before_they_are_deduplicated() {
        let html = br#"<a href="/p?sid=1&id=7">1</a><a href="/p?id=7&sid=2&utm_source=x">2</a>
            <a href="/q">q</a>"#;
        let rules = shared::canonical::CanonicalRules::default().compile().unwrap();
        let f = extract(
            html,
            &page(),
            None,
            ExtractOptions {
                canonical: Some(&rules),
                ..ExtractOptions::default()
            },
        );
        assert_eq!(
            f.links,
            vec!["http://site.test:8080/p?id=7", "http://site.test:8080/q"]
        );
        let f = extract(html, &page(), None, ExtractOptions::default());
        assert_eq!(
            f.links,
            vec![
                "http://site.test:8080/p?sid=1&id=7",
                "http://site.test:8080/p?id=7&sid=2&utm_source=x",
                "http://site.test:8080/q",
            ]
        );
    }

    #[test]
    fn survives_garbage_and_decodes_other_charsets() {
        let f = extract(
            b"\xff\xfe<a href=\"/\xe9t\xe9\">\x00<title>caf\xe9</title>",
            &page(),
            Some(encoding_rs::WINDOWS_1252),
            ExtractOptions::default(),
        );
        assert_eq!(f.title.as_deref(), Some("café"));
        assert_eq!(f.links, vec!["http://site.test:8080/%C3%A9t%C3%A9"]);
        let f = run("<a href='http://[::1'>bad</a><<<>>><a href=/ok>");
        assert_eq!(f.links, vec!["http://site.test:8080/ok"]);
        assert_eq!(f.rejected, vec![Rejected::Malformed]);
    }
}
