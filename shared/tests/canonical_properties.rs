//! Property tests of canonical URLs (`shared::canonical`): on generated
//! URLs (http and https, random hosts and ports, paths of safe segments
//! with and without `;jsessionid=` and other path parameters, ASP.NET
//! session segments, queries mixing stripped and ordinary names) the
//! canonical form is a fixed point, keeps scheme, host and port, keeps the
//! path of ordinary URLs, and is still a normalised URL.

use proptest::prelude::*;
use shared::canonical::{CanonicalRules, Canonicalizer};
use shared::urls;
use url::Url;

/// Cases per property: `PROPTEST_CASES`, or 512.
fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(512)
}

/// Parameter names, about half of them stripped by the default rules.
fn param_name() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("jsessionid".to_string()),
        Just("JSESSIONID".to_string()),
        Just("PHPSESSID".to_string()),
        Just("ASPSESSIONIDQASDFGHJ".to_string()),
        Just("sid".to_string()),
        Just("CFID".to_string()),
        Just("utm_source".to_string()),
        Just("UTM_Medium".to_string()),
        Just("fbclid".to_string()),
        Just("gclid".to_string()),
        "[a-z][a-z0-9_]{0,6}",
        "[A-Za-z0-9._~%-]{0,5}",
    ]
}

fn param_value() -> impl Strategy<Value = String> {
    "[A-Za-z0-9._~%+-]{0,8}"
}

/// A query piece: `name=value`, a bare name, or nothing (`a=1&&b=2`).
fn query_piece() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => (param_name(), param_value()).prop_map(|(n, v)| format!("{n}={v}")),
        1 => param_name(),
        1 => Just(String::new()),
    ]
}

/// A path segment of safe characters, maybe with `;name=value` parameters,
/// maybe an ASP.NET session segment or a name with parentheses.
fn segment() -> impl Strategy<Value = String> {
    let plain = "[A-Za-z0-9._~-]{0,8}";
    prop_oneof![
        6 => plain.prop_map(|s| s.to_string()),
        2 => (plain, prop::collection::vec((param_name(), param_value()), 1..3)).prop_map(|(s, params)| {
            let params: String = params.iter().map(|(n, v)| format!(";{n}={v}")).collect();
            format!("{s}{params}")
        }),
        1 => "[A-Za-z0-9]{1,24}".prop_map(|id| format!("(S({id}))")),
        1 => ("[A-Za-z0-9]{0,6}", "[A-Za-z0-9]{1,12}").prop_map(|(a, s)| format!("(X({a})S({s}))")),
        1 => ("[A-Za-z0-9_]{1,6}", "[a-z]{0,6}").prop_map(|(a, b)| format!("{a}_({b})")),
    ]
}

/// A URL string: scheme, maybe userinfo, host, maybe a port, a path, maybe a query.
fn url_string() -> impl Strategy<Value = String> {
    (
        prop_oneof![Just("http"), Just("https")],
        prop::option::of("[a-z]{1,6}(:[a-z0-9]{0,6})?@"),
        "[a-z][a-z0-9-]{0,10}(\\.[a-z]{2,5}){1,2}",
        prop::option::of(1u16..),
        prop::collection::vec(segment(), 0..5),
        prop::option::of(prop::collection::vec(query_piece(), 0..6)),
    )
        .prop_map(|(scheme, userinfo, host, port, segments, query)| {
            let mut s = format!("{scheme}://{}{host}", userinfo.unwrap_or_default());
            if let Some(port) = port {
                s.push_str(&format!(":{port}"));
            }
            for seg in segments {
                s.push('/');
                s.push_str(&seg);
            }
            if let Some(query) = query {
                s.push('?');
                s.push_str(&query.join("&"));
            }
            s
        })
}

fn rules(sort_query: bool) -> Canonicalizer {
    CanonicalRules {
        sort_query,
        ..CanonicalRules::default()
    }
    .compile()
    .expect("the default rules compile")
}

proptest! {
    // 512 cases unless PROPTEST_CASES asks for more (a longer run).
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    /// (a) idempotent, (b) scheme, host and port kept, (c) the path of an
    /// ordinary URL kept, (d) still a normalised URL; and nothing the
    /// rules strip is left.
    #[test]
    fn canonical_urls_are_normalised_fixed_points(s in url_string(), sort_query: bool) {
        let Ok(original) = urls::parse(&s) else {
            // Only hosts the URL standard refuses (none expected) end here.
            return Err(TestCaseError::reject("not a URL"));
        };
        let c = rules(sort_query);
        let mut once = original.clone();
        c.apply(&mut once);

        let mut twice = once.clone();
        prop_assert!(!c.apply(&mut twice), "{once} changed again to {twice}");
        prop_assert_eq!(twice.as_str(), once.as_str());

        prop_assert_eq!(once.scheme(), original.scheme());
        prop_assert_eq!(once.host_str(), original.host_str());
        prop_assert_eq!(once.port(), original.port());

        let ordinary = !original.path().contains([';', '(']);
        if ordinary {
            prop_assert_eq!(once.path(), original.path());
        }

        let again = urls::parse(once.as_str());
        prop_assert_eq!(again.as_ref().map(Url::as_str), Ok(once.as_str()));

        prop_assert_eq!(once.username(), "");
        prop_assert_eq!(once.password(), None);
        for piece in once.query().unwrap_or_default().split('&') {
            let name = piece.split('=').next().unwrap_or_default().to_ascii_lowercase();
            prop_assert!(
                !matches!(name.as_str(), "jsessionid" | "phpsessid" | "sid" | "cfid" | "fbclid" | "gclid")
                    && !name.starts_with("utm_")
                    && !name.starts_with("aspsessionid"),
                "{once} keeps {piece}"
            );
        }
        prop_assert!(!once.path().to_ascii_lowercase().contains(";jsessionid"), "{once}");
        prop_assert!(!once.path().contains("(S("), "{once}");
    }

    /// `Canonicalizer::none()` changes nothing at all.
    #[test]
    fn none_is_the_identity(s in url_string()) {
        if let Ok(original) = urls::parse(&s) {
            let mut u = original.clone();
            prop_assert!(!Canonicalizer::none().apply(&mut u));
            prop_assert_eq!(u, original);
        }
    }
}
