//! Property tests of link and feature extraction, which reads whatever
//! the network sends: whatever the bytes, it returns links that are
//! normalised, unique and within the page cap, never panics, and the fast
//! scanner finds what the reference extractor (`lol_html`) finds.
//!
//! These stand in for `cargo fuzz`, which needs a nightly toolchain that
//! CI does not have. proptest shrinks a failing input and saves its seed
//! in `extract_properties.proptest-regressions` beside this file, which is
//! committed, so a failure found once is replayed on every run.

use crawler_child::extract::{extract, extract_reference, ExtractOptions};
use proptest::prelude::*;
use shared::urls;
use url::Url;

fn options() -> ExtractOptions<'static> {
    ExtractOptions {
        skip_nofollow: false,
        robots_agent: "synthcrawler",
        max_links: 50,
        canonical: None,
    }
}

/// Strings made mostly of the characters URL and HTML parsers treat
/// specially, so cases reach their edge paths rather than plain text.
fn hostile_text() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        Just("<".to_string()),
        Just(">".to_string()),
        Just("\"".to_string()),
        Just("'".to_string()),
        Just("=".to_string()),
        Just("/".to_string()),
        Just("&".to_string()),
        Just("&amp;".to_string()),
        Just("&#x0;".to_string()),
        Just("&#99999999;".to_string()),
        Just("<a href=".to_string()),
        Just("<base href=".to_string()),
        Just("<title>".to_string()),
        Just("</title>".to_string()),
        Just("<script>".to_string()),
        Just("</script>".to_string()),
        Just("<!--".to_string()),
        Just("-->".to_string()),
        Just("<svg>".to_string()),
        Just("<meta name=description content=".to_string()),
        Just("<meta name=robots content=".to_string()),
        Just("<meta name=SynthCrawler content=".to_string()),
        Just("nofollow".to_string()),
        Just("none,".to_string()),
        Just("<link rel=canonical href=".to_string()),
        Just("http://".to_string()),
        Just("//".to_string()),
        Just("..".to_string()),
        Just("?".to_string()),
        Just("#".to_string()),
        Just("%".to_string()),
        Just("%zz".to_string()),
        Just("[::1]".to_string()),
        Just(":99999".to_string()),
        Just("xn--".to_string()),
        Just("\r\n".to_string()),
        Just("\0".to_string()),
        "[a-z0-9.]{0,6}",
        "\\PC{0,4}",
    ];
    prop::collection::vec(piece, 0..40).prop_map(|v| v.concat())
}

/// Cases per property: `PROPTEST_CASES`, or 512.
fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(512)
}

fn base() -> Url {
    Url::parse("http://site.test/dir/page.html").expect("a base URL")
}

proptest! {
    // 512 cases unless PROPTEST_CASES asks for more (a longer run).
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    /// Extraction takes any bytes; the links it returns are normalised,
    /// unique and within the page cap, and the fast scanner agrees with
    /// the reference extractor.
    #[test]
    fn extraction_takes_any_bytes(body in prop::collection::vec(any::<u8>(), 0..2048)) {
        let f = extract(&body, &base(), None, options());
        prop_assert!(f.links.len() <= options().max_links);
        for link in &f.links {
            let again = urls::parse(link);
            prop_assert_eq!(again.as_ref().map(Url::as_str), Ok(link.as_str()));
        }
        let mut unique = f.links.clone();
        unique.sort();
        unique.dedup();
        prop_assert_eq!(unique.len(), f.links.len());
        prop_assert_eq!(f, extract_reference(&body, &base(), None, options()));
    }

    #[test]
    fn extraction_of_tag_soup_matches_the_reference(page in hostile_text()) {
        let f = extract(page.as_bytes(), &base(), None, options());
        prop_assert_eq!(f, extract_reference(page.as_bytes(), &base(), None, options()));
    }
}
