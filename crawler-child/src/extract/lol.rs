//! The reference collector: `lol_html`, a complete streaming HTML
//! tokenizer (any ASCII-compatible encoding, foreign content, every
//! tokenizer state), for the pages the fast scanner leaves to it.

use std::cell::RefCell;

use lol_html::{element, text, AsciiCompatibleEncoding, HtmlRewriter, Settings};

use super::{clip, has_token, is_robots_meta, ExtractOptions, Raw, MAX_ROBOTS_METAS, MAX_TEXT};

/// Collects the raw values of `body`, decoded with `encoding` (UTF-8 when
/// `None`; invalid sequences are replaced, never an error).
pub(super) fn collect(
    body: &[u8],
    encoding: Option<&'static encoding_rs::Encoding>,
    options: ExtractOptions<'_>,
) -> Raw {
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
                let name = el.get_attribute("name").unwrap_or_default();
                let is_description = name.trim().eq_ignore_ascii_case("description");
                let mut raw = raw.borrow_mut();
                if is_description && raw.description.is_none() {
                    raw.description = el.get_attribute("content").map(|c| clip(c.trim()));
                } else if is_robots_meta(&name, options.robots_agent) && raw.robots.len() < MAX_ROBOTS_METAS {
                    raw.robots.extend(el.get_attribute("content").map(|c| clip(&c)));
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
    raw.into_inner()
}
