//! Link and page-feature extraction from HTML, in one streaming pass.
//!
//! `lol_html` parses without building a DOM, so extraction costs a few
//! microseconds per kilobyte and never holds a second copy of the page.
//! Links are resolved against `<base href>` when the page has one (HTML
//! says the first `<base>` applies to the whole document, so links are
//! collected raw and resolved at the end).

use std::cell::RefCell;
use std::collections::HashSet;

use lol_html::{element, text, AsciiCompatibleEncoding, HtmlRewriter, Settings};
use url::Url;

use crate::urls::{self, Rejected};

/// Longest title/description we keep; pages sometimes stuff megabytes in.
const MAX_TEXT: usize = 1024;

/// Extraction switches.
#[derive(Debug, Clone, Copy, Default)]
pub struct ExtractOptions {
    /// Drop `<a rel="nofollow">` links (kept by default: nofollow is about
    /// ranking, not crawling).
    pub skip_nofollow: bool,
    /// Links kept, the first ones in page order (0 = no limit). A page
    /// can carry hundreds of thousands of links; each becomes an absolute
    /// URL of up to 2 KiB, so the cap bounds what one page costs.
    pub max_links: usize,
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
}

#[derive(Default)]
struct Raw {
    base: Option<String>,
    hrefs: Vec<String>,
    title: String,
    titles_seen: u32,
    description: Option<String>,
    canonical: Option<String>,
    lang: Option<String>,
}

/// Extracts links and features from `body`, decoded with `encoding`
/// (UTF-8 when `None`; invalid sequences are replaced, never an error).
pub fn extract(
    body: &[u8],
    page_url: &Url,
    encoding: Option<&'static encoding_rs::Encoding>,
    options: ExtractOptions,
) -> PageFeatures {
    let raw = RefCell::new(Raw::default());
    let encoding = encoding
        .and_then(AsciiCompatibleEncoding::new)
        .unwrap_or_else(AsciiCompatibleEncoding::utf_8);
    let settings = Settings {
        element_content_handlers: vec![
            element!("a[href], area[href]", |el| {
                if options.skip_nofollow
                    && el
                        .get_attribute("rel")
                        .is_some_and(|rel| has_token(&rel, "nofollow"))
                {
                    return Ok(());
                }
                if let Some(href) = el.get_attribute("href") {
                    raw.borrow_mut().hrefs.push(href);
                }
                Ok(())
            }),
            element!("base[href]", |el| {
                let mut raw = raw.borrow_mut();
                if raw.base.is_none() {
                    raw.base = el.get_attribute("href");
                }
                Ok(())
            }),
            element!("html[lang]", |el| {
                raw.borrow_mut().lang = el.get_attribute("lang").map(|l| clip(l.trim()));
                Ok(())
            }),
            element!("meta[name][content]", |el| {
                let is_description = el
                    .get_attribute("name")
                    .is_some_and(|n| n.trim().eq_ignore_ascii_case("description"));
                let mut raw = raw.borrow_mut();
                if is_description && raw.description.is_none() {
                    raw.description = el.get_attribute("content").map(|c| clip(c.trim()));
                }
                Ok(())
            }),
            element!("link[rel][href]", |el| {
                let canonical = el
                    .get_attribute("rel")
                    .is_some_and(|rel| has_token(&rel, "canonical"));
                let mut raw = raw.borrow_mut();
                if canonical && raw.canonical.is_none() {
                    raw.canonical = el.get_attribute("href");
                }
                Ok(())
            }),
            element!("title", |_| {
                raw.borrow_mut().titles_seen += 1;
                Ok(())
            }),
            text!("title", |t| {
                let mut raw = raw.borrow_mut();
                // Only the first <title> counts; text inside a title element
                // arrives after its start tag and before the next one's.
                if raw.titles_seen == 1 && raw.title.len() < MAX_TEXT * 4 {
                    raw.title.push_str(t.as_str());
                }
                Ok(())
            }),
        ],
        encoding,
        ..Settings::new()
    };
    let mut rewriter = HtmlRewriter::new(settings, |_: &[u8]| {});
    // Errors only come from our handlers or memory limits; whatever was
    // collected up to that point is still useful.
    let _ = rewriter.write(body);
    let _ = rewriter.end();
    finish(raw.into_inner(), page_url, options.max_links)
}

fn finish(raw: Raw, page_url: &Url, max_links: usize) -> PageFeatures {
    let base = raw
        .base
        .as_deref()
        .and_then(|b| page_url.join(b.trim()).ok())
        .unwrap_or_else(|| page_url.clone());
    let cap = if max_links == 0 { usize::MAX } else { max_links };
    let mut seen = HashSet::with_capacity(raw.hrefs.len().min(cap));
    let mut links = Vec::with_capacity(raw.hrefs.len().min(cap));
    let mut rejected = Vec::new();
    let mut over_cap = 0;
    for (i, href) in raw.hrefs.iter().enumerate() {
        if links.len() >= cap {
            over_cap = raw.hrefs.len() - i;
            break;
        }
        match urls::resolve(&base, href) {
            Ok(url) => {
                let s: String = url.into();
                if seen.insert(s.clone()) {
                    links.push(s);
                }
            }
            Err(reason) => rejected.push(reason),
        }
    }
    let title = collapse_ws(&raw.title);
    PageFeatures {
        title: (!title.is_empty()).then(|| clip(&title)),
        description: raw.description.filter(|d| !d.is_empty()),
        canonical: raw
            .canonical
            .and_then(|c| urls::resolve(&base, &c).ok())
            .map(String::from),
        lang: raw.lang.filter(|l| !l.is_empty()),
        links,
        rejected,
        over_cap,
    }
}

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
