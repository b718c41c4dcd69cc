//! Robots directives a page gives about itself: `<meta name="robots">`
//! (or `<meta name="AGENT">` for our `--robots-agent`) and the
//! `X-Robots-Tag` header, whose values may be prefixed by an agent
//! (`otherbot: noindex`), applying then only to that agent.
//!
//! Directives are read as search engines read them: comma-separated,
//! case-insensitive, `none` meaning `noindex, nofollow`; unknown ones are
//! ignored. They only ever add restrictions: `index` or `follow` next to
//! `noindex` do not cancel it.

use store::docs::RobotsDirectives;

/// Directives that may follow an agent prefix in `X-Robots-Tag` (so a
/// value's first `word:` is an agent unless it is one of these).
const KNOWN: [&str; 14] = [
    "all",
    "none",
    "index",
    "noindex",
    "follow",
    "nofollow",
    "noarchive",
    "nocache",
    "nosnippet",
    "notranslate",
    "noimageindex",
    "unavailable_after",
    "max-snippet",
    "max-image-preview",
];

/// Adds what one meta tag's `content` says.
pub(crate) fn add_meta(d: &mut RobotsDirectives, content: &str) {
    for token in content.split(',') {
        add_token(d, token);
    }
}

/// Adds what one `X-Robots-Tag` header value says to `agent` (our
/// robots.txt product token): values for another agent are skipped.
pub(crate) fn add_header(d: &mut RobotsDirectives, value: &str, agent: &str) {
    let value = value.trim();
    if let Some((first, rest)) = value.split_once(':') {
        let first = first.trim();
        let is_directive = KNOWN.iter().any(|k| first.eq_ignore_ascii_case(k));
        if !is_directive && !first.contains([',', ' ']) {
            if first.eq_ignore_ascii_case(agent) {
                add_meta(d, rest);
            }
            return;
        }
    }
    add_meta(d, value);
}

fn add_token(d: &mut RobotsDirectives, token: &str) {
    let token = token.trim();
    let is = |name: &str| token.eq_ignore_ascii_case(name);
    if is("none") {
        d.noindex = true;
        d.nofollow = true;
    } else if is("noindex") {
        d.noindex = true;
    } else if is("nofollow") {
        d.nofollow = true;
    } else if is("noarchive") || is("nocache") {
        d.noarchive = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(content: &str) -> RobotsDirectives {
        let mut d = RobotsDirectives::default();
        add_meta(&mut d, content);
        d
    }

    fn header(values: &[&str]) -> RobotsDirectives {
        let mut d = RobotsDirectives::default();
        for v in values {
            add_header(&mut d, v, "synthcrawler");
        }
        d
    }

    const NOINDEX: RobotsDirectives = RobotsDirectives {
        noindex: true,
        nofollow: false,
        noarchive: false,
    };

    #[test]
    fn meta_content_is_read_as_search_engines_read_it() {
        assert!(meta("").is_empty());
        assert!(meta("index, follow, all, max-snippet:20").is_empty());
        assert_eq!(meta("NOINDEX"), NOINDEX);
        assert_eq!(meta(" noindex ,follow"), NOINDEX);
        let none = meta("none");
        assert!(none.noindex && none.nofollow && !none.noarchive);
        let all = meta("noindex,nofollow,noarchive");
        assert!(all.noindex && all.nofollow && all.noarchive);
        assert!(meta("nocache").noarchive);
        // `index` does not undo `noindex`.
        assert_eq!(meta("noindex, index"), NOINDEX);
    }

    #[test]
    fn header_values_for_another_agent_are_skipped() {
        assert_eq!(header(&["noindex"]), NOINDEX);
        assert!(header(&["otherbot: noindex, nofollow"]).is_empty());
        assert!(header(&["SynthCrawler: nofollow"]).nofollow);
        assert_eq!(
            header(&["unavailable_after: 25 Jun 2010 15:00:00 PST, noindex"]),
            NOINDEX
        );
        let both = header(&["otherbot: noarchive", "noindex", "synthcrawler: noarchive"]);
        assert!(both.noindex && both.noarchive && !both.nofollow);
        // Junk is ignored, never an error.
        assert!(header(&[":::", "no index", ",,,"]).is_empty());
    }
}
