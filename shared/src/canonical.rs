//! Canonical URLs: session ids, tracking parameters and credentials
//! removed, so one page reached through many spellings is one URL in the
//! seen-set and the frontier.
//!
//! Why: a site that puts a session id in its links (`;jsessionid=…`,
//! `?PHPSESSID=…`, ASP.NET's `/(S(…))/`) gives every visit a new URL for
//! every page, and a crawler that takes them literally fetches the same
//! pages without end. Campaign tags (`utm_source`, `fbclid`, `gclid`, …)
//! do the same on a smaller scale: a link shared on three sites is three
//! URLs for one page. [`crate::urls::normalize`] (run before this) only
//! removes differences of spelling the URL standard defines (case,
//! default ports, dot segments, fragments); these rules remove differences
//! the standard cannot know are meaningless, from a configured list
//! ([`CanonicalRules`], sent to every child in the crawl policy, so all
//! children agree on what one URL is).
//!
//! The ideas are the peers': Heritrix's `StripSessionIDs`,
//! `StripSessionCFIDs`, `StripUserinfoRule` and `FixupQueryString`
//! canonicalization rules, StormCrawler's `BasicURLNormalizer`
//! (`queryElementsToRemove`, `unmangleQueryString`) and Nutch's
//! `urlnormalizer-regex`. What [`Canonicalizer::apply`] does:
//!
//! 1. **Userinfo is removed** (`http://user:pass@host/` → `http://host/`):
//!    credentials in a link must never be crawled with, stored or logged,
//!    and the same page without them is the same page.
//! 2. **Query**: split on `&`; empty pieces are dropped (`a=1&&b=2` is
//!    `a=1&b=2` to every server); pieces whose name (the raw bytes before
//!    the first `=`, not percent-decoded, compared ASCII
//!    case-insensitively) matches a strip rule are dropped; with
//!    [`CanonicalRules::sort_query`] the rest are sorted byte-wise, because
//!    `?a=1&b=2` and `?b=2&a=1` are one page on nearly every server and
//!    links to it come in both orders; the pieces are rejoined with `&`,
//!    and a query left empty is removed with its `?`. Pieces are kept byte
//!    for byte, never decoded and re-encoded: `%26` and `&` mean different
//!    things to a server, and re-encoding would make a second spelling.
//! 3. **Path parameters**: in each path segment, the `;name=value`
//!    parameters (the part after a `;`, split on `;`) whose name matches
//!    a strip rule are removed (`/a/b.html;jsessionid=ABC` → `/a/b.html`),
//!    which is where Java servlet containers put session ids when cookies
//!    are off. ASP.NET's cookieless session segments (a whole segment
//!    `(S(…))` or `(X(…)S(…))`: `(`, one or more groups of an ASCII letter
//!    and a `(…)` holding no `)` or `/`, then `)`) are removed:
//!    `/(S(lit3py55t21z5v55vlm25s55))/page.aspx` → `/page.aspx`. Other
//!    parameters and segments stay as they are.
//! 4. **Nothing else changes**: scheme, host, port and fragment are
//!    `normalize`'s business. This runs on every link a child extracts, so a
//!    URL with no userinfo, no query and no `;` or `(` in its path is
//!    passed over after a few cheap checks, and nothing is rebuilt unless
//!    something is removed or reordered.
//! 5. It is idempotent: a canonical URL is its own canonical form, so a
//!    URL canonicalized twice (by the child, then again after a redirect)
//!    is still one key.

use serde::{Deserialize, Serialize};
use url::Url;

/// Parameter names stripped by default: session ids, then tracking tags.
pub const DEFAULT_STRIP_PARAMS: &[&str] = &[
    // Session ids (servlet containers, PHP, classic ASP, ColdFusion, generic).
    "jsessionid",
    "phpsessid",
    "aspsessionid*",
    "sid",
    "sessionid",
    "session_id",
    "sessid",
    "cfid",
    "cftoken",
    // Tracking: campaign tags and click ids of ad and mail platforms.
    "utm_*",
    "fbclid",
    "gclid",
    "gclsrc",
    "dclid",
    "gbraid",
    "wbraid",
    "msclkid",
    "yclid",
    "mc_cid",
    "mc_eid",
    "_ga",
    "_gl",
    "igshid",
    "_hsenc",
    "_hsmi",
    "mkt_tok",
];

/// The rules, as configured and sent to every child inside `CrawlPolicy`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct CanonicalRules {
    /// Parameter names removed from the query and from path parameters
    /// (`;name=value`), compared ASCII case-insensitively; a trailing `*`
    /// makes it a prefix (`utm_*`).
    pub strip_params: Vec<String>,
    /// Put query parameters in a stable (byte-wise sorted) order.
    pub sort_query: bool,
}

impl Default for CanonicalRules {
    /// [`DEFAULT_STRIP_PARAMS`], queries sorted.
    fn default() -> Self {
        CanonicalRules {
            strip_params: DEFAULT_STRIP_PARAMS.iter().map(|s| s.to_string()).collect(),
            sort_query: true,
        }
    }
}

impl CanonicalRules {
    /// Checks the rules and prepares them for [`Canonicalizer::apply`].
    /// A name that could never match a parameter, or would match every one
    /// (`*`), is refused rather than silently ignored: the error names it.
    pub fn compile(&self) -> Result<Canonicalizer, String> {
        let mut exact = Vec::new();
        let mut prefixes = Vec::new();
        for (i, rule) in self.strip_params.iter().enumerate() {
            let bad = |why: &str| format!("canonical strip rule {} ({rule:?}) {why}", i + 1);
            let (name, prefix) = match rule.strip_suffix('*') {
                Some(head) => (head, true),
                None => (rule.as_str(), false),
            };
            if rule.is_empty() {
                return Err(bad("is empty"));
            }
            if name.is_empty() {
                return Err(bad("would remove every parameter; name a prefix before the `*`"));
            }
            if name.contains('*') {
                return Err(bad(
                    "has a `*` that is not at the end (only a trailing `*` is a wildcard)",
                ));
            }
            if let Some(c) = name.chars().find(|c| matches!(c, '=' | '&' | ';' | '#')) {
                return Err(bad(&format!(
                    "contains {c:?}, which cannot be in a parameter name"
                )));
            }
            if name.chars().any(char::is_whitespace) {
                return Err(bad("contains whitespace, which cannot be in a parameter name"));
            }
            if !name.bytes().all(|b| b.is_ascii_graphic()) {
                return Err(bad(
                    "has characters a URL carries percent-encoded; write the name as the URL does",
                ));
            }
            let name = name.to_ascii_lowercase().into_bytes().into_boxed_slice();
            if prefix {
                prefixes.push(name);
            } else {
                exact.push(name);
            }
        }
        Ok(Canonicalizer {
            exact,
            prefixes,
            sort_query: self.sort_query,
            active: true,
        })
    }
}

/// Compiled [`CanonicalRules`]: what [`Canonicalizer::apply`] runs.
#[derive(Debug, Clone)]
pub struct Canonicalizer {
    /// Lower-cased names matched whole.
    exact: Vec<Box<[u8]>>,
    /// Lower-cased prefixes (the rules that ended in `*`).
    prefixes: Vec<Box<[u8]>>,
    sort_query: bool,
    /// False for [`Canonicalizer::none`], which changes nothing at all.
    active: bool,
}

impl Canonicalizer {
    /// Changes nothing (not even userinfo or ASP.NET session segments):
    /// for extraction without canonical URLs, and the comparison in tests.
    pub fn none() -> Canonicalizer {
        Canonicalizer {
            exact: Vec::new(),
            prefixes: Vec::new(),
            sort_query: false,
            active: false,
        }
    }

    /// Rewrites `url` into its canonical form (see the module doc);
    /// returns whether anything changed.
    pub fn apply(&self, url: &mut Url) -> bool {
        if !self.active {
            return false;
        }
        let mut changed = false;
        if !url.username().is_empty() || url.password().is_some() {
            // Only URLs without a host refuse these; they have no userinfo.
            let _ = url.set_username("");
            let _ = url.set_password(None);
            changed = true;
        }
        if let Some(query) = url.query() {
            if let Some(new) = self.query(query) {
                url.set_query((!new.is_empty()).then_some(new.as_str()));
                changed = true;
            }
        }
        if !url.cannot_be_a_base() && memchr::memchr2(b';', b'(', url.path().as_bytes()).is_some() {
            if let Some(new) = self.path(url.path()) {
                url.set_path(&new);
                changed = true;
            }
        }
        changed
    }

    /// Whether a parameter named `name` (raw bytes) is stripped.
    fn strips(&self, name: &[u8]) -> bool {
        self.exact
            .iter()
            .any(|e| e.len() == name.len() && e.eq_ignore_ascii_case(name))
            || self
                .prefixes
                .iter()
                .any(|p| name.len() >= p.len() && p.eq_ignore_ascii_case(&name[..p.len()]))
    }

    /// Whether the `name=value` (or bare `name`) piece is stripped.
    fn strips_piece(&self, piece: &str) -> bool {
        let name = piece.split_once('=').map_or(piece, |(name, _)| name);
        self.strips(name.as_bytes())
    }

    /// The canonical query, or `None` when `query` already is.
    fn query(&self, query: &str) -> Option<String> {
        // One pass that allocates nothing decides whether anything changes:
        // nearly every query of a crawl is already canonical.
        let mut prev: Option<&str> = None;
        let needed = query.split('&').any(|piece| {
            let out_of_order = self.sort_query && prev.is_some_and(|p| p > piece);
            prev = Some(piece);
            piece.is_empty() || out_of_order || self.strips_piece(piece)
        });
        if !needed {
            return None;
        }
        let mut kept: Vec<&str> = query
            .split('&')
            .filter(|p| !p.is_empty() && !self.strips_piece(p))
            .collect();
        if self.sort_query {
            kept.sort();
        }
        Some(kept.join("&"))
    }

    /// The canonical path, or `None` when `path` already is.
    fn path(&self, path: &str) -> Option<String> {
        let mut out = String::with_capacity(path.len());
        let mut changed = false;
        let mut first = true;
        for segment in path.split('/') {
            let segment = self.segment(segment);
            if matches!(segment, std::borrow::Cow::Owned(_)) {
                changed = true;
            }
            // Checked after the parameters are gone, so that a segment
            // that becomes one on this pass goes now, not on the next.
            if is_aspnet_session(&segment) {
                changed = true;
                continue;
            }
            if !first {
                out.push('/');
            }
            first = false;
            out.push_str(&segment);
        }
        changed.then_some(out)
    }

    /// `segment` without its stripped `;name=value` parameters.
    fn segment<'s>(&self, segment: &'s str) -> std::borrow::Cow<'s, str> {
        let Some((head, params)) = segment.split_once(';') else {
            return segment.into();
        };
        if !params.split(';').any(|p| self.strips_piece(p)) {
            return segment.into();
        }
        let mut out = String::with_capacity(segment.len());
        out.push_str(head);
        for p in params.split(';').filter(|p| !self.strips_piece(p)) {
            out.push(';');
            out.push_str(p);
        }
        out.into()
    }
}

/// Whether `segment` is an ASP.NET cookieless session segment: `(`, one or
/// more groups `L(…)` (`L` an ASCII letter, no `)` or `/` inside), `)`.
fn is_aspnet_session(segment: &str) -> bool {
    let Some(mut rest) = segment.strip_prefix('(').and_then(|s| s.strip_suffix(')')) else {
        return false;
    };
    if rest.is_empty() {
        return false;
    }
    while !rest.is_empty() {
        let b = rest.as_bytes();
        if b.len() < 3 || !b[0].is_ascii_alphabetic() || b[1] != b'(' {
            return false;
        }
        // The segment has no `/`; the group ends at the first `)`.
        match rest[2..].find(')') {
            Some(end) => rest = &rest[2 + end + 1..],
            None => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canon(s: &str) -> String {
        canon_with(&CanonicalRules::default().compile().unwrap(), s)
    }

    fn canon_with(c: &Canonicalizer, s: &str) -> String {
        let mut u = Url::parse(s).unwrap();
        c.apply(&mut u);
        u.to_string()
    }

    #[test]
    fn session_ids_in_the_query_of_many_spellings_are_removed() {
        for (from, to) in [
            ("http://a.test/p?id=7&PHPSESSID=abc123", "http://a.test/p?id=7"),
            ("http://a.test/p?phpsessid=abc&x=1", "http://a.test/p?x=1"),
            ("http://a.test/p?JSESSIONID=F00D&x=1", "http://a.test/p?x=1"),
            (
                "http://a.test/p?ASPSESSIONIDQASDFGHJ=KLMNOP&x=1",
                "http://a.test/p?x=1",
            ),
            ("http://a.test/p?CFID=12&CFTOKEN=34&x=1", "http://a.test/p?x=1"),
            (
                "http://a.test/p?x=1&sid=9&SessionId=q&session_id=r&sessid",
                "http://a.test/p?x=1",
            ),
        ] {
            assert_eq!(canon(from), to, "{from}");
        }
        // A name that only starts like an exact rule is kept.
        assert_eq!(
            canon("http://a.test/p?side=1&sidebar=2"),
            "http://a.test/p?side=1&sidebar=2"
        );
        // Names are compared raw, never decoded.
        assert_eq!(canon("http://a.test/p?s%69d=1"), "http://a.test/p?s%69d=1");
    }

    #[test]
    fn tracking_parameters_are_removed() {
        assert_eq!(
            canon(
                "https://a.test/post?utm_source=tw&id=3&utm_medium=social&UTM_Campaign=x&fbclid=Iw&gclid=Cj"
            ),
            "https://a.test/post?id=3"
        );
    }

    #[test]
    fn jsessionid_path_parameters_are_removed_and_others_kept() {
        assert_eq!(
            canon("http://a.test/a/b.html;jsessionid=ABC"),
            "http://a.test/a/b.html"
        );
        assert_eq!(
            canon("http://a.test/x;jsessionid=1;v=2/y"),
            "http://a.test/x;v=2/y"
        );
        assert_eq!(canon("http://a.test/x;JSESSIONID=1?q=1"), "http://a.test/x?q=1");
        assert_eq!(canon("http://a.test/x;v=2;w/y"), "http://a.test/x;v=2;w/y");
    }

    #[test]
    fn aspnet_cookieless_session_segments_are_removed() {
        assert_eq!(
            canon("http://a.test/(S(lit3py55t21z5v55vlm25s55))/page.aspx"),
            "http://a.test/page.aspx"
        );
        assert_eq!(
            canon("http://a.test/app/(X(1)S(abc))/p.aspx?x=1"),
            "http://a.test/app/p.aspx?x=1"
        );
        assert_eq!(canon("http://a.test/(S(abc))"), "http://a.test/");
        // Parentheses that are not a session segment stay.
        for kept in [
            "http://a.test/wiki/Foo_(bar)",
            "http://a.test/(S(abc)x)/p",
            "http://a.test/()/p",
            "http://a.test/(1(abc))/p",
            "http://a.test/(S(abc)/p",
        ] {
            assert_eq!(canon(kept), kept);
        }
    }

    #[test]
    fn query_is_sorted_and_empty_pieces_dropped() {
        assert_eq!(
            canon("http://a.test/p?b=2&a=1&&c&a=0"),
            "http://a.test/p?a=0&a=1&b=2&c"
        );
        let unsorted = CanonicalRules {
            sort_query: false,
            ..CanonicalRules::default()
        }
        .compile()
        .unwrap();
        assert_eq!(
            canon_with(&unsorted, "http://a.test/p?b=2&&a=1"),
            "http://a.test/p?b=2&a=1"
        );
        // Bytes are kept as they are, never decoded or re-encoded.
        assert_eq!(
            canon("http://a.test/p?z=%26&a=%2F+x"),
            "http://a.test/p?a=%2F+x&z=%26"
        );
    }

    #[test]
    fn a_query_left_empty_is_removed() {
        assert_eq!(canon("http://a.test/p?utm_source=x&sid=1"), "http://a.test/p");
        assert_eq!(canon("http://a.test/p?&&"), "http://a.test/p");
    }

    #[test]
    fn userinfo_is_removed() {
        assert_eq!(canon("http://user:secret@a.test:8080/p"), "http://a.test:8080/p");
        assert_eq!(canon("https://user@a.test/"), "https://a.test/");
    }

    #[test]
    fn custom_rules_replace_the_defaults() {
        let c = CanonicalRules {
            strip_params: vec!["ref".into(), "trk_*".into()],
            sort_query: false,
        }
        .compile()
        .unwrap();
        assert_eq!(
            canon_with(&c, "http://a.test/p;REF=1?z=1&ref=x&TRK_a=1&utm_source=y&sid=2"),
            "http://a.test/p?z=1&utm_source=y&sid=2"
        );
    }

    #[test]
    fn none_is_the_identity() {
        let none = Canonicalizer::none();
        for s in [
            "http://u:p@a.test/(S(abc))/x;jsessionid=1?b=1&a=2&&utm_source=x",
            "http://a.test/",
        ] {
            let mut u = Url::parse(s).unwrap();
            assert!(!none.apply(&mut u));
            assert_eq!(u.as_str(), s);
        }
    }

    #[test]
    fn canonical_urls_are_untouched_and_reported_unchanged() {
        let c = CanonicalRules::default().compile().unwrap();
        for s in [
            "http://a.test/p",
            "http://a.test/p?a=1&b=2",
            "http://a.test/wiki/A_(b);c=d",
        ] {
            let mut u = Url::parse(s).unwrap();
            assert!(!c.apply(&mut u), "{s}");
            assert_eq!(u.as_str(), s);
        }
        let mut u = Url::parse("http://a.test/p?sid=1").unwrap();
        assert!(c.apply(&mut u));
    }

    #[test]
    fn compile_refuses_bad_names_and_names_them() {
        for (bad, says) in [
            ("", "is empty"),
            ("*", "every parameter"),
            ("a=b", "'='"),
            ("a&b", "'&'"),
            ("a;b", "';'"),
            ("a#", "'#'"),
            ("utm source", "whitespace"),
            ("a*b", "not at the end"),
            ("séance", "percent-encoded"),
        ] {
            let rules = CanonicalRules {
                strip_params: vec!["sid".into(), bad.into()],
                sort_query: true,
            };
            let err = rules.compile().unwrap_err();
            assert!(err.contains(&format!("{bad:?}")), "{err}");
            assert!(err.contains("rule 2"), "{err}");
            assert!(err.contains(says), "{bad:?}: {err}");
        }
    }
}
