//! One pooled HTTP client per child, and a GET that never holds more than
//! `max_body_bytes` of a response in memory.
//!
//! Redirects are not followed by reqwest: the crawler follows them itself
//! (see `pipeline`) so each hop is checked against robots.txt and paced by
//! politeness, and cross-domain hops go back to the dispatcher.
//!
//! Every request obeys the crawl's [`AddressPolicy`]: names are checked by
//! the resolver (`dns`) on the addresses it hands reqwest, IP literals here,
//! since reqwest dials those without asking the resolver.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use link::protocol::{CrawlPolicy, FailureKind};
use reqwest::header::{CONTENT_TYPE, LOCATION, RETRY_AFTER};
use reqwest::redirect::Policy;
use store::docs::{Head, PageDoc};
use url::{Host, Url};

use crate::address_policy::{self, AddressPolicy, BlockedAddress};
use crate::dns::{self, Names, Resolver};
use crate::dns_upstream::DnsFailure;
use crate::handshakes::Handshakes;
use crate::metric;
use crate::resolve::HostOverrides;
use crate::server_pace::Server;
use crate::tls_client;

/// A body's first allocation when the server sends no Content-Length
/// (chunked or compressed answers): about a realistic page.
const BODY_CAPACITY_GUESS: u64 = 32 * 1024;
/// The most a body's first allocation takes, whatever Content-Length says;
/// bigger bodies grow as they arrive.
const BODY_CAPACITY_MAX: u64 = 256 * 1024;

pub(crate) struct Http {
    client: reqwest::Client,
    max_body: u64,
    /// The resolver reqwest uses, for [`Http::admit`].
    resolver: Resolver,
    addresses: AddressPolicy,
    /// The headers every request carries besides `Host`, as stored with
    /// each page (`store::exchange`).
    request_head: Head,
    /// TLS handshakes made, counted by the TLS client (`tls_client`).
    handshakes: Arc<Handshakes>,
}

/// What came back, with the body capped.
#[derive(Debug)]
pub(crate) struct Fetched {
    pub status: u16,
    pub content_type: Option<String>,
    pub location: Option<String>,
    pub retry_after: Option<String>,
    pub body: Vec<u8>,
    /// The body was longer than the cap and was cut.
    pub truncated: bool,
    /// What an archive record needs besides the body (see `exchange`).
    pub head: ResponseHead,
}

impl Fetched {
    /// Sets the exchange's fields of `d` (`store::exchange`): the status
    /// line, the headers as received, the address dialled, when the
    /// request went out, and `request_head` (what was sent).
    pub(crate) fn record_exchange(&self, d: &mut PageDoc, request_head: &Head) {
        let head = &self.head;
        let reason = reqwest::StatusCode::from_u16(self.status)
            .ok()
            .and_then(|s| s.canonical_reason())
            .unwrap_or("");
        let status_line = format!("{} {} {reason}", http_version(head.version), self.status);
        let parts = store::exchange::ResponseParts {
            status_line: status_line.trim_end(),
            headers: head.headers.iter().map(|(n, v)| (n.as_str(), v.as_bytes())),
            ip: head.remote,
            started: bson::DateTime::from_system_time(head.started),
        };
        store::exchange::store(d, parts, request_head);
    }
}

fn http_version(v: reqwest::Version) -> &'static str {
    match v {
        reqwest::Version::HTTP_09 => "HTTP/0.9",
        reqwest::Version::HTTP_10 => "HTTP/1.0",
        reqwest::Version::HTTP_2 => "HTTP/2",
        reqwest::Version::HTTP_3 => "HTTP/3",
        _ => "HTTP/1.1",
    }
}

/// The response's head and where it came from, kept for WARC records.
#[derive(Debug)]
pub(crate) struct ResponseHead {
    pub version: reqwest::Version,
    /// As received, except that reqwest drops `Content-Encoding` and
    /// `Content-Length` when it decodes a compressed body.
    pub headers: reqwest::header::HeaderMap,
    /// The address dialled (absent only if the connection did not say).
    pub remote: Option<std::net::IpAddr>,
    /// When the request was sent.
    pub started: std::time::SystemTime,
}

/// Why a fetch produced no response.
#[derive(Debug, thiserror::Error)]
pub(crate) enum FetchError {
    #[error("timed out")]
    Timeout,
    #[error("connection failed: {0}")]
    Connect(String),
    #[error("{0}")]
    Other(String),
    /// Refused by the address policy: nothing was sent.
    #[error("{0}")]
    Blocked(BlockedAddress),
    /// The host name gave no address to dial: nothing was sent.
    #[error("{0}")]
    Dns(DnsFailure),
    /// The TLS handshake failed (the certificate did not verify, most
    /// often): nothing was sent.
    #[error("TLS handshake failed: {0}")]
    Tls(String),
    /// This node's right to crawl had run out (`link::fence`): nothing
    /// was sent.
    #[error("not fetched: this node's right to crawl has run out (it lost the dispatcher)")]
    Fenced,
    /// Recalled (a block, a pause, a new delay, a move) or stopping
    /// before its request started (`crate::recall`): nothing was sent.
    #[error("not started: handed back ({0})")]
    Recalled(&'static str),
}

impl FetchError {
    pub(crate) fn kind(&self) -> FailureKind {
        match self {
            FetchError::Timeout => FailureKind::Timeout,
            FetchError::Connect(_) => FailureKind::Connect,
            FetchError::Other(_) => FailureKind::Http,
            FetchError::Blocked(_) => FailureKind::BlockedAddress,
            FetchError::Dns(f) => f.kind(),
            FetchError::Tls(_) => FailureKind::Tls,
            FetchError::Fenced => FailureKind::Fenced,
            FetchError::Recalled(_) => FailureKind::Recalled,
        }
    }

    /// A refusal by the policy, counted; `via`: how the address was found.
    fn blocked(b: BlockedAddress, via: &'static str) -> Self {
        metric::BLOCKED_REQUESTS.at([via]).increment(1);
        FetchError::Blocked(b)
    }

    /// `tls`: where a failed handshake is counted.
    fn from_reqwest(e: reqwest::Error, tls: &Handshakes) -> Self {
        if let Some(b) = dns::blocked_cause(&e) {
            FetchError::blocked(b.clone(), "dns")
        } else if let Some(f) = dns::dns_cause(&e) {
            FetchError::Dns(f)
        } else if let Some(tls_error) = tls_cause(&e) {
            let why = tls_failure_label(tls_error);
            tls.failed(why);
            FetchError::Tls(format!("{why}: {tls_error}"))
        } else if e.is_timeout() {
            FetchError::Timeout
        } else if e.is_connect() {
            FetchError::Connect(error_chain(&e))
        } else {
            FetchError::Other(error_chain(&e))
        }
    }
}

/// The rustls error behind a failed request, if its handshake failed.
/// (rustls hands it to the connection as the inner error of an
/// `io::Error`, which reqwest's connector wraps in another `io::Error`,
/// and `io::Error::source()` skips its inner error: look inside each one.)
fn tls_cause<'a>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a rustls::Error> {
    let mut cur = Some(e);
    while let Some(err) = cur {
        if let Some(t) = err.downcast_ref::<rustls::Error>() {
            return Some(t);
        }
        cur = match err.downcast_ref::<std::io::Error>().and_then(|io| io.get_ref()) {
            Some(inner) => Some(inner as &(dyn std::error::Error + 'static)),
            None => err.source(),
        };
    }
    None
}

/// A bounded label for a TLS failure, for the metric.
fn tls_failure_label(e: &rustls::Error) -> &'static str {
    match e {
        rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer) => "unknown_issuer",
        rustls::Error::InvalidCertificate(rustls::CertificateError::NotValidForName)
        | rustls::Error::InvalidCertificate(rustls::CertificateError::NotValidForNameContext { .. }) => {
            "wrong_name"
        }
        rustls::Error::InvalidCertificate(rustls::CertificateError::Expired)
        | rustls::Error::InvalidCertificate(rustls::CertificateError::ExpiredContext { .. }) => "expired",
        rustls::Error::InvalidCertificate(_) => "bad_certificate",
        rustls::Error::AlertReceived(_) => "alert",
        _ => "other",
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(inner) = src {
        s.push_str(": ");
        s.push_str(&inner.to_string());
        src = inner.source();
    }
    s
}

impl Http {
    pub(crate) fn new(
        policy: &CrawlPolicy,
        overrides: HostOverrides,
        names: Arc<Names>,
        extra_roots: Vec<rustls::pki_types::CertificateDer<'static>>,
    ) -> anyhow::Result<Http> {
        let addresses = AddressPolicy {
            allow_private_networks: policy.allow_private_networks,
        };
        let resolver = Resolver::new(overrides, addresses, names);
        let handshakes = Arc::new(Handshakes::default());
        let tls = tls_client::config(extra_roots, handshakes.clone())?;
        let client = shared::http_client::builder()
            .user_agent(policy.user_agent.clone())
            .redirect(Policy::none())
            .connect_timeout(Duration::from_millis(policy.connect_timeout_ms))
            .timeout(Duration::from_millis(policy.request_timeout_ms))
            .pool_max_idle_per_host(4)
            .pool_idle_timeout(Duration::from_secs(30))
            .tcp_nodelay(true)
            .no_proxy()
            .dns_resolver(resolver.clone())
            .tls_backend_preconfigured(tls)
            .build()?;
        // What reqwest sends on every request: our User-Agent, its default
        // Accept, and the Accept-Encoding its gzip and brotli features add.
        let request_head = store::exchange::head(
            None,
            [
                ("user-agent", policy.user_agent.as_bytes()),
                ("accept", &b"*/*"[..]),
                ("accept-encoding", &b"gzip, br"[..]),
            ],
        );
        Ok(Http {
            client,
            request_head,
            max_body: policy.max_body_bytes,
            resolver,
            addresses,
            handshakes,
        })
    }

    /// The TLS handshakes this child made, for its gauge line.
    pub(crate) fn handshakes(&self) -> &Handshakes {
        &self.handshakes
    }

    /// The child's DNS names, for its gauges.
    pub(crate) fn dns_names(&self) -> &Names {
        self.resolver.names()
    }

    /// Whether `url` may be fetched at all, asked before robots.txt and
    /// politeness so a refused URL costs no request and no wait, and fails
    /// as `blocked_address` (or its name's DNS failure) rather than as an
    /// unreachable robots.txt. The same checks run again when the request
    /// is made (on the addresses then dialled; the answer comes from the
    /// cache then). The lookup is bounded by the resolver's deadlines.
    pub(crate) async fn admit(&self, url: &Url) -> Result<(), FetchError> {
        self.check_literal(url)?;
        if let Some(Host::Domain(name)) = url.host() {
            if let Err(e) = self.resolver.lookup(name).await {
                if let Some(b) = dns::blocked_cause(e.as_ref()) {
                    return Err(FetchError::blocked(b.clone(), "dns"));
                }
                if let Some(f) = dns::dns_cause(e.as_ref()) {
                    return Err(FetchError::Dns(f));
                }
            }
        }
        Ok(())
    }

    /// The server `url`'s requests go to (see `crate::server_pace`), or
    /// `None` when its name cannot be resolved now (the request will say
    /// why). An internal address counts as named by the operator, who
    /// allowed it (`--allow-private-networks`).
    pub(crate) async fn server_of(&self, url: &Url) -> Option<Server> {
        let (addrs, named) = match url.host()? {
            Host::Ipv4(v4) => (vec![IpAddr::from(v4)], false),
            Host::Ipv6(v6) => (vec![IpAddr::from(v6)], false),
            Host::Domain(name) => self.resolver.server(name).await?,
        };
        let first = *addrs.first()?;
        let named = named || address_policy::blocked_range(first).is_some();
        Some(Server { first, addrs, named })
    }

    /// An IP-literal host (`http://127.0.0.2/`, `http://[::1]/`; the url
    /// crate has already turned forms like `http://2130706433/` into
    /// addresses) checked against the policy: reqwest dials literals
    /// without calling the resolver.
    fn check_literal(&self, url: &Url) -> Result<(), FetchError> {
        let ip = match url.host() {
            Some(Host::Ipv4(v4)) => v4.into(),
            Some(Host::Ipv6(v6)) => v6.into(),
            Some(Host::Domain(_)) | None => return Ok(()),
        };
        let host = url.host_str().unwrap_or_default();
        self.addresses
            .check(host, ip)
            .map_err(|b| FetchError::blocked(b, "ip_literal"))
    }

    /// The headers each request carries besides `Host`, as stored.
    pub(crate) fn request_head(&self) -> &Head {
        &self.request_head
    }

    /// A page request, with `headers` besides the usual ones (a
    /// revisit's conditions; see `crate::revisit`).
    pub(crate) async fn get(
        &self,
        url: &Url,
        headers: &reqwest::header::HeaderMap,
    ) -> Result<Fetched, FetchError> {
        self.send_capped(url, self.max_body, headers).await
    }

    pub(crate) async fn get_capped(&self, url: &Url, max_body: u64) -> Result<Fetched, FetchError> {
        self.send_capped(url, max_body, &reqwest::header::HeaderMap::new())
            .await
    }

    async fn send_capped(
        &self,
        url: &Url,
        max_body: u64,
        headers: &reqwest::header::HeaderMap,
    ) -> Result<Fetched, FetchError> {
        self.check_literal(url)?;
        let started = std::time::SystemTime::now();
        let mut resp = self
            .client
            .get(url.clone())
            .headers(headers.clone())
            .send()
            .await
            .map_err(|e| FetchError::from_reqwest(e, &self.handshakes))?;
        let header = |name| {
            resp.headers()
                .get(name)
                .and_then(|v: &reqwest::header::HeaderValue| v.to_str().ok())
                .map(str::to_string)
        };
        let content_type = header(CONTENT_TYPE);
        let location = header(LOCATION);
        let retry_after = header(RETRY_AFTER);
        let status = resp.status().as_u16();
        // Sized once, from Content-Length when there is one: growing chunk by
        // chunk copied an 18 KB page two or three times. Bounded, because a
        // server can claim any length and then send nothing.
        let expected = resp.content_length().unwrap_or(BODY_CAPACITY_GUESS);
        let mut body = Vec::with_capacity(expected.min(max_body).min(BODY_CAPACITY_MAX) as usize);
        let mut truncated = false;
        while let Some(chunk) = resp
            .chunk()
            .await
            .map_err(|e| FetchError::from_reqwest(e, &self.handshakes))?
        {
            let room = max_body.saturating_sub(body.len() as u64) as usize;
            if chunk.len() > room {
                body.extend_from_slice(&chunk[..room]);
                truncated = true;
                break;
            }
            body.extend_from_slice(&chunk);
        }
        let head = ResponseHead {
            version: resp.version(),
            remote: resp.remote_addr().map(|a| a.ip()),
            headers: std::mem::take(resp.headers_mut()),
            started,
        };
        Ok(Fetched {
            status,
            content_type,
            location,
            retry_after,
            body,
            truncated,
            head,
        })
    }
}

/// True for content types we parse and store (HTML and XHTML).
pub(crate) fn is_html(content_type: Option<&str>) -> bool {
    match content_type {
        // No header: sniffing is unreliable; HTML is the common case.
        None => true,
        Some(ct) => {
            let mime = ct.split(';').next().unwrap_or_default().trim();
            mime.eq_ignore_ascii_case("text/html") || mime.eq_ignore_ascii_case("application/xhtml+xml")
        }
    }
}

/// The page's charset: from the Content-Type header, else from a
/// `<meta charset>` / `<meta http-equiv="Content-Type">` in the first
/// 1024 bytes (HTML's prescan window), if encoding_rs knows the name.
pub(crate) fn charset(content_type: Option<&str>, body: &[u8]) -> Option<&'static encoding_rs::Encoding> {
    let from_header = content_type.and_then(|ct| {
        ct.split(';').skip(1).find_map(|param| {
            let (k, v) = param.split_once('=')?;
            k.trim()
                .eq_ignore_ascii_case("charset")
                .then(|| encoding_rs::Encoding::for_label(v.trim().trim_matches('"').as_bytes()))
                .flatten()
        })
    });
    from_header.or_else(|| sniff_meta_charset(&body[..body.len().min(1024)]))
}

fn sniff_meta_charset(head: &[u8]) -> Option<&'static encoding_rs::Encoding> {
    let lower = head.to_ascii_lowercase();
    let at = lower.windows(8).position(|w| w == b"charset=")? + 8;
    let rest = &head[at..];
    let rest = rest
        .strip_prefix(b"\"")
        .or_else(|| rest.strip_prefix(b"'"))
        .unwrap_or(rest);
    let end = rest
        .iter()
        .position(|b| matches!(b, b'"' | b'\'' | b' ' | b';' | b'>' | b'/'))
        .unwrap_or(rest.len());
    encoding_rs::Encoding::for_label(&rest[..end])
}

/// How long a 429/503 asks us to wait: `Retry-After` in seconds or as an
/// HTTP date. `None` when absent or unparseable.
pub(crate) fn retry_after(value: Option<&str>) -> Option<std::time::Duration> {
    let v = value?.trim();
    if let Ok(secs) = v.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let when = httpdate::parse_http_date(v).ok()?;
    Some(
        when.duration_since(std::time::SystemTime::now())
            .unwrap_or_default(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn http(allow_private_networks: bool) -> Http {
        let policy = CrawlPolicy {
            allow_private_networks,
            ..crate::robots::tests::policy()
        };
        Http::new(&policy, HostOverrides::default(), Names::system(), Vec::new()).unwrap()
    }

    fn u(s: &str) -> Url {
        Url::parse(s).unwrap()
    }

    /// Internal addresses are refused whether they come as literals (which
    /// reqwest dials without asking the resolver) or from DNS (`localhost`,
    /// via /etc/hosts, through reqwest's own resolver call), while a
    /// listener there would have answered; the opt-in lets them through.
    #[tokio::test]
    async fn internal_addresses_are_refused_before_anything_is_sent() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let h = http(false);
        for url in [
            format!("http://127.0.0.1:{port}/x"),
            format!("http://127.1:{port}/x"),
            format!("http://2130706433:{port}/x"),
            format!("http://[::ffff:127.0.0.1]:{port}/x"),
            format!("http://[::1]:{port}/x"),
            "http://169.254.169.254/latest/meta-data/".to_string(),
            "http://10.0.0.1/".to_string(),
            format!("http://localhost:{port}/x"),
        ] {
            let err = h.get(&u(&url), &Default::default()).await.unwrap_err();
            assert!(matches!(err, FetchError::Blocked(_)), "{url}: {err}");
            assert_eq!(err.kind(), FailureKind::BlockedAddress);
            let err = h.admit(&u(&url)).await.unwrap_err();
            assert!(matches!(err, FetchError::Blocked(_)), "{url}: {err}");
        }
        assert!(listener.accept().is_err(), "a connection was made");
        // A public literal is admitted (checking it sends nothing).
        assert!(h.admit(&u("http://8.8.8.8/")).await.is_ok());

        let open = http(true);
        assert!(open
            .admit(&u(&format!("http://localhost:{port}/x")))
            .await
            .is_ok());
        let err = open
            .get(&u(&format!("http://127.0.0.1:{port}/x")), &Default::default())
            .await;
        // Connected (and got no HTTP answer from a listener that never reads).
        assert!(!matches!(err, Err(FetchError::Blocked(_))), "{err:?}");
        assert!(listener.accept().is_ok(), "no connection with the opt-in");
    }

    /// A server that answers a ClientHello with something other than TLS:
    /// the handshake fails, and the URL fails as `tls`, counted by why.
    #[tokio::test]
    async fn a_failed_handshake_is_a_tls_failure() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            while let Ok((mut conn, _)) = listener.accept().await {
                let mut buf = [0u8; 512];
                let _ = conn.read(&mut buf).await;
                let _ = conn
                    .write_all(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n")
                    .await;
            }
        });
        let h = http(true);
        let url = u(&format!("https://127.0.0.1:{port}/robots.txt"));
        let err = h.get(&url, &Default::default()).await.unwrap_err();
        assert!(matches!(err, FetchError::Tls(_)), "{err:?}");
        assert_eq!(err.kind(), FailureKind::Tls);
        assert_eq!(h.handshakes().failures().values().sum::<u64>(), 1);
    }

    #[test]
    fn content_type_rules() {
        assert!(is_html(Some("text/html; charset=utf-8")));
        assert!(is_html(Some("TEXT/HTML")));
        assert!(is_html(None));
        assert!(!is_html(Some("application/pdf")));
    }

    #[test]
    fn charset_from_header_then_meta() {
        let latin1 = charset(Some("text/html; charset=\"ISO-8859-1\""), b"");
        assert_eq!(latin1, Some(encoding_rs::WINDOWS_1252));
        assert_eq!(charset(Some("text/html"), b"<p>"), None);
        assert_eq!(charset(Some("text/html; charset=bogus"), b""), None);
        let meta = b"<html><head><META CHARSET='Shift_JIS'>";
        assert_eq!(charset(Some("text/html"), meta), Some(encoding_rs::SHIFT_JIS));
        let equiv = br#"<meta http-equiv="Content-Type" content="text/html; charset=windows-1251">"#;
        assert_eq!(charset(None, equiv), Some(encoding_rs::WINDOWS_1251));
        let header_wins = charset(Some("text/html; charset=utf-8"), meta);
        assert_eq!(header_wins, Some(encoding_rs::UTF_8));
        // Only the first 1024 bytes are looked at.
        let mut late = vec![b' '; 2000];
        late.extend_from_slice(b"<meta charset=koi8-r>");
        assert_eq!(charset(None, &late), None);
    }

    #[test]
    fn retry_after_in_seconds_or_as_a_date() {
        assert_eq!(retry_after(Some(" 120 ")), Some(Duration::from_secs(120)));
        let soon = httpdate::fmt_http_date(std::time::SystemTime::now() + Duration::from_secs(30));
        let d = retry_after(Some(&soon)).unwrap();
        assert!(
            d > Duration::from_secs(28) && d <= Duration::from_secs(30),
            "{d:?}"
        );
        assert_eq!(
            retry_after(Some("Sun, 06 Nov 1994 08:49:37 GMT")),
            Some(Duration::ZERO)
        );
        assert_eq!(retry_after(Some("soon")), None);
        assert_eq!(retry_after(None), None);
    }
}
