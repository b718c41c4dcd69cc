//! Requests a web page could make a browser send: refused.
//!
//! The debug server listens on loopback, and a browser on the same machine
//! reaches loopback too: a page open anywhere on the web could `POST
//! /control/stop` (a form or `fetch` needs no answer to do harm), or
//! rebind a name of its own to 127.0.0.1 and then read what it asks for.
//! Browsers say where a request comes from, so such requests are told
//! apart from those of curl, crawlctl, cluster-profile or a Prometheus
//! scraper, which send none of this:
//!
//! - an `Origin` header other than this server's own (`http://` plus the
//!   request's `Host`), `null` included;
//! - a `Sec-Fetch-Site` header other than `same-origin` or `none` (a
//!   browser sends it on every request, even an `<img>`'s GET, which has no
//!   `Origin`);
//! - without a bearer token (the server takes anyone on loopback), a `Host`
//!   that is not an IP address or `localhost`: a name that resolves here is
//!   DNS rebinding. With a token the name is allowed (scrapers use the
//!   host's name, and a rebound page has no token to send).

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

/// Why a request was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Foreign {
    Origin,
    FetchSite,
    Host,
}

impl Foreign {
    fn as_str(self) -> &'static str {
        match self {
            Foreign::Origin => "a request from another origin",
            Foreign::FetchSite => "a request a browser made for another site",
            Foreign::Host => "a request for a host name that is not this server's address",
        }
    }
}

/// Whether names are checked in `Host`: true when the server has no token.
#[derive(Debug, Clone, Copy)]
pub(crate) struct HostChecked(pub(crate) bool);

/// Refuses foreign requests with 403 (see the module's documentation).
pub(crate) async fn refuse_foreign(State(host): State<HostChecked>, req: Request, next: Next) -> Response {
    match check(req.headers(), host.0) {
        Ok(()) => next.run(req).await,
        Err(why) => (StatusCode::FORBIDDEN, format!("forbidden: {}\n", why.as_str())).into_response(),
    }
}

pub(crate) fn check(headers: &HeaderMap, host_checked: bool) -> Result<(), Foreign> {
    let text = |name: &str| headers.get(name).map(|v| v.to_str().unwrap_or("\u{fffd}"));
    let host = text(header::HOST.as_str());
    if let Some(site) = text("sec-fetch-site") {
        if !site.eq_ignore_ascii_case("same-origin") && !site.eq_ignore_ascii_case("none") {
            return Err(Foreign::FetchSite);
        }
    }
    if let Some(origin) = text(header::ORIGIN.as_str()) {
        let own = host.map(|h| format!("http://{h}"));
        if own.is_none_or(|own| !own.eq_ignore_ascii_case(origin)) {
            return Err(Foreign::Origin);
        }
    }
    if host_checked {
        if let Some(host) = host {
            if !names_this_machine_by_address(host) {
                return Err(Foreign::Host);
            }
        }
    }
    Ok(())
}

/// `host[:port]` where host is an IP address (IPv6 in brackets) or
/// `localhost`.
fn names_this_machine_by_address(authority: &str) -> bool {
    let host = match authority.strip_prefix('[') {
        Some(rest) => match rest.split_once(']') {
            Some((v6, port)) if port.is_empty() || is_port(port) => {
                return v6.parse::<std::net::Ipv6Addr>().is_ok();
            }
            _ => return false,
        },
        None => match authority.rsplit_once(':') {
            Some((host, port)) if is_port(port) => host,
            Some(_) => return false,
            None => authority,
        },
    };
    host.eq_ignore_ascii_case("localhost") || host.parse::<std::net::Ipv4Addr>().is_ok()
}

fn is_port(s: &str) -> bool {
    s.strip_prefix(':').unwrap_or(s).parse::<u16>().is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn tools_pass_and_browsers_from_elsewhere_do_not() {
        // curl, crawlctl, Prometheus: no Origin, no Sec-Fetch-Site.
        assert_eq!(check(&headers(&[("host", "127.0.0.1:9100")]), true), Ok(()));
        assert_eq!(check(&headers(&[("host", "[::1]:9100")]), true), Ok(()));
        assert_eq!(check(&headers(&[("host", "localhost:9100")]), true), Ok(()));
        assert_eq!(check(&headers(&[]), true), Ok(()));
        // The server's own page.
        let own = [
            ("host", "127.0.0.1:9100"),
            ("origin", "http://127.0.0.1:9100"),
            ("sec-fetch-site", "same-origin"),
        ];
        assert_eq!(check(&headers(&own), true), Ok(()));
        // A page elsewhere POSTing to us.
        let form = [("host", "127.0.0.1:9100"), ("origin", "https://evil.example")];
        assert_eq!(check(&headers(&form), true), Err(Foreign::Origin));
        assert_eq!(check(&headers(&form), false), Err(Foreign::Origin));
        let null = [("host", "127.0.0.1:9100"), ("origin", "null")];
        assert_eq!(check(&headers(&null), true), Err(Foreign::Origin));
        let other_port = [("host", "127.0.0.1:9100"), ("origin", "http://127.0.0.1:8080")];
        assert_eq!(check(&headers(&other_port), true), Err(Foreign::Origin));
        // An <img> GET: no Origin, but Sec-Fetch-Site says.
        let img = [("host", "127.0.0.1:9100"), ("sec-fetch-site", "cross-site")];
        assert_eq!(check(&headers(&img), false), Err(Foreign::FetchSite));
        // DNS rebinding: the page's own name, now resolving here.
        let rebound = [
            ("host", "evil.example:9100"),
            ("origin", "http://evil.example:9100"),
        ];
        assert_eq!(check(&headers(&rebound), true), Err(Foreign::Host));
        assert_eq!(
            check(&headers(&[("host", "evil.example")]), true),
            Err(Foreign::Host)
        );
        assert_eq!(
            check(&headers(&[("host", "127.0.0.1.evil:1")]), true),
            Err(Foreign::Host)
        );
        assert_eq!(check(&headers(&[("host", "[::1]x")]), true), Err(Foreign::Host));
        // With a token, a name is fine (scrapers use the host's name).
        assert_eq!(check(&headers(&[("host", "crawler-1:9100")]), false), Ok(()));
    }
}
