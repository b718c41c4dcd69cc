//! Property tests of the code that reads what the network and users send:
//! URL parsing and normalisation. Whatever the input, it returns a value or
//! an error, never panics, and keeps its bounds. (Link extraction has its
//! own, in crawler-child/tests/extract_properties.rs.)
//!
//! These stand in for `cargo fuzz`, which needs a nightly toolchain that
//! CI does not have. proptest shrinks a failing input and saves its seed
//! in `properties.proptest-regressions` beside this file, to be committed,
//! so a failure found once is replayed on every run.

use proptest::prelude::*;
use shared::urls::{self, MAX_URL_LEN};
use url::Url;

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

    /// A normalised URL is http(s), has a host, no fragment, fits the
    /// length bound, and normalising it again changes nothing.
    #[test]
    fn normalised_urls_are_fixed_points(href in hostile_text()) {
        for url in [urls::resolve(&base(), &href), urls::parse(&href)].into_iter().flatten() {
            prop_assert!(matches!(url.scheme(), "http" | "https"), "{url}");
            prop_assert!(url.host_str().is_some_and(|h| !h.is_empty()), "{url}");
            prop_assert!(url.fragment().is_none(), "{url}");
            prop_assert!(url.as_str().len() <= MAX_URL_LEN + 64, "{} bytes", url.as_str().len());
            let again = urls::parse(url.as_str());
            prop_assert_eq!(again.as_ref().map(Url::as_str), Ok(url.as_str()));
        }
    }
}
