//! URL rules: normalisation and the keys the crawl is organised by.
//!
//! Every URL that enters the frontier goes through [`normalize`], so two
//! spellings of one resource (`HTTP://Example.COM:80/a#x` and
//! `http://example.com/a`) de-duplicate to one entry.

use url::Url;

/// Longest URL we accept; longer ones are almost always traps (session ids,
/// calendars) and MongoDB indexes dislike huge keys.
pub const MAX_URL_LEN: usize = 2048;

/// Why a link was dropped instead of crawled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rejected {
    /// Did not parse as a URL (even relative to the page).
    Malformed,
    /// Not http or https (mailto:, javascript:, ftp:, data: ...).
    Scheme,
    /// Longer than [`MAX_URL_LEN`].
    TooLong,
    /// No host (e.g. `http:///x`).
    NoHost,
}

impl Rejected {
    /// Bounded label value for metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Rejected::Malformed => "malformed",
            Rejected::Scheme => "scheme",
            Rejected::TooLong => "too_long",
            Rejected::NoHost => "no_host",
        }
    }
}

/// Resolves `href` against `base` and normalises the result.
pub fn resolve(base: &Url, href: &str) -> Result<Url, Rejected> {
    let href = href.trim();
    if href.len() > MAX_URL_LEN {
        return Err(Rejected::TooLong);
    }
    let url = base.join(href).map_err(|_| Rejected::Malformed)?;
    normalize(url)
}

/// Parses an absolute URL (a seed, a URL from the wire) and normalises it.
pub fn parse(s: &str) -> Result<Url, Rejected> {
    let s = s.trim();
    if s.len() > MAX_URL_LEN {
        return Err(Rejected::TooLong);
    }
    normalize(Url::parse(s).map_err(|_| Rejected::Malformed)?)
}

/// Normalises an already parsed URL: only http(s), a host is required, the
/// fragment is dropped. The `url` crate already lower-cases scheme and host,
/// drops default ports and resolves dot segments.
pub fn normalize(mut url: Url) -> Result<Url, Rejected> {
    match url.scheme() {
        "http" | "https" => {}
        _ => return Err(Rejected::Scheme),
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(Rejected::NoHost);
    }
    url.set_fragment(None);
    if url.query() == Some("") {
        url.set_query(None);
    }
    if url.as_str().len() > MAX_URL_LEN {
        return Err(Rejected::TooLong);
    }
    Ok(url)
}

/// The politeness and assignment key: host plus port when it is not the
/// scheme's default. One domain is owned by one supervisor and one child, so
/// its request rate is decided in one place.
pub fn domain_of(url: &Url) -> String {
    let host = url.host_str().unwrap_or_default();
    match url.port() {
        Some(port) => format!("{host}:{port}"),
        None => host.to_string(),
    }
}

/// The robots.txt key (RFC 9309 scopes robots to scheme, host and port).
pub fn origin_of(url: &Url) -> String {
    url.origin().ascii_serialization()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> Url {
        Url::parse("http://example.com/dir/page.html").unwrap()
    }

    #[test]
    fn normalises_case_ports_fragments_and_dots() {
        let u = parse("HTTP://Example.COM:80/a/../b/./c?x=1#frag").unwrap();
        assert_eq!(u.as_str(), "http://example.com/b/c?x=1");
        let u = parse("https://example.com:443").unwrap();
        assert_eq!(u.as_str(), "https://example.com/");
        let u = parse("http://example.com:8080/?").unwrap();
        assert_eq!(u.as_str(), "http://example.com:8080/");
    }

    #[test]
    fn resolves_relative_links() {
        assert_eq!(
            resolve(&base(), "other.html").unwrap().as_str(),
            "http://example.com/dir/other.html"
        );
        assert_eq!(
            resolve(&base(), "../up#x").unwrap().as_str(),
            "http://example.com/up"
        );
        assert_eq!(
            resolve(&base(), "//cdn.example.org/x").unwrap().as_str(),
            "http://cdn.example.org/x"
        );
        assert_eq!(
            resolve(&base(), "  /abs  ").unwrap().as_str(),
            "http://example.com/abs"
        );
    }

    #[test]
    fn rejects_bad_links_with_a_reason() {
        assert_eq!(resolve(&base(), "mailto:a@b.c"), Err(Rejected::Scheme));
        assert_eq!(resolve(&base(), "javascript:void(0)"), Err(Rejected::Scheme));
        assert_eq!(resolve(&base(), "http://[::1"), Err(Rejected::Malformed));
        let long = format!("/{}", "a".repeat(MAX_URL_LEN + 1));
        assert_eq!(resolve(&base(), &long), Err(Rejected::TooLong));
        assert_eq!(parse("not a url"), Err(Rejected::Malformed));
        assert_eq!(parse("file:///etc/passwd"), Err(Rejected::Scheme));
    }

    #[test]
    fn domain_and_origin_keys() {
        let u = parse("http://Site1.test:8080/p/1").unwrap();
        assert_eq!(domain_of(&u), "site1.test:8080");
        assert_eq!(origin_of(&u), "http://site1.test:8080");
        let u = parse("https://example.com/x").unwrap();
        assert_eq!(domain_of(&u), "example.com");
        assert_eq!(origin_of(&u), "https://example.com");
    }
}
