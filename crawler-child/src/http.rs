//! One pooled HTTP client per child, and a GET that never holds more than
//! `max_body_bytes` of a response in memory.
//!
//! Redirects are not followed by reqwest: the crawler follows them itself
//! (see `pipeline`) so each hop is checked against robots.txt and paced by
//! politeness, and cross-domain hops go back to the dispatcher.

use std::time::Duration;

use reqwest::header::{CONTENT_TYPE, LOCATION};
use reqwest::redirect::Policy;
use shared::protocol::CrawlPolicy;
use shared::resolve::HostOverrides;
use url::Url;

use crate::dns::Resolver;

pub struct Http {
    client: reqwest::Client,
    max_body: u64,
}

/// What came back, with the body capped.
#[derive(Debug)]
pub struct Fetched {
    pub status: u16,
    pub content_type: Option<String>,
    pub location: Option<String>,
    pub body: Vec<u8>,
    /// The body was longer than the cap and was cut.
    pub truncated: bool,
}

/// Why a fetch produced no response.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error("timed out")]
    Timeout,
    #[error("connection failed: {0}")]
    Connect(String),
    #[error("{0}")]
    Other(String),
}

impl FetchError {
    /// Bounded label for metrics and results.
    pub fn kind(&self) -> &'static str {
        match self {
            FetchError::Timeout => "timeout",
            FetchError::Connect(_) => "connect",
            FetchError::Other(_) => "http",
        }
    }

    fn from_reqwest(e: reqwest::Error) -> Self {
        if e.is_timeout() {
            FetchError::Timeout
        } else if e.is_connect() {
            FetchError::Connect(error_chain(&e))
        } else {
            FetchError::Other(error_chain(&e))
        }
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
    pub fn new(policy: &CrawlPolicy, overrides: HostOverrides) -> anyhow::Result<Http> {
        let client = reqwest::Client::builder()
            .user_agent(policy.user_agent.clone())
            .redirect(Policy::none())
            .connect_timeout(Duration::from_millis(policy.connect_timeout_ms))
            .timeout(Duration::from_millis(policy.request_timeout_ms))
            .pool_max_idle_per_host(4)
            .pool_idle_timeout(Duration::from_secs(30))
            .tcp_nodelay(true)
            .no_proxy()
            .dns_resolver(Resolver::new(overrides))
            .build()?;
        Ok(Http {
            client,
            max_body: policy.max_body_bytes,
        })
    }

    pub async fn get(&self, url: &Url) -> Result<Fetched, FetchError> {
        self.get_capped(url, self.max_body).await
    }

    pub async fn get_capped(&self, url: &Url, max_body: u64) -> Result<Fetched, FetchError> {
        let mut resp = self
            .client
            .get(url.clone())
            .send()
            .await
            .map_err(FetchError::from_reqwest)?;
        let header = |name| {
            resp.headers()
                .get(name)
                .and_then(|v: &reqwest::header::HeaderValue| v.to_str().ok())
                .map(str::to_string)
        };
        let content_type = header(CONTENT_TYPE);
        let location = header(LOCATION);
        let status = resp.status().as_u16();
        let mut body = Vec::new();
        let mut truncated = false;
        while let Some(chunk) = resp.chunk().await.map_err(FetchError::from_reqwest)? {
            let room = max_body.saturating_sub(body.len() as u64) as usize;
            if chunk.len() > room {
                body.extend_from_slice(&chunk[..room]);
                truncated = true;
                break;
            }
            body.extend_from_slice(&chunk);
        }
        Ok(Fetched {
            status,
            content_type,
            location,
            body,
            truncated,
        })
    }
}

/// True for content types we parse and store (HTML and XHTML).
pub fn is_html(content_type: Option<&str>) -> bool {
    match content_type {
        // No header: sniffing is unreliable; HTML is the common case.
        None => true,
        Some(ct) => {
            let mime = ct.split(';').next().unwrap_or_default().trim();
            mime.eq_ignore_ascii_case("text/html") || mime.eq_ignore_ascii_case("application/xhtml+xml")
        }
    }
}

/// The charset named in a Content-Type header, if encoding_rs knows it.
pub fn charset(content_type: Option<&str>) -> Option<&'static encoding_rs::Encoding> {
    let ct = content_type?;
    ct.split(';').skip(1).find_map(|param| {
        let (k, v) = param.split_once('=')?;
        k.trim()
            .eq_ignore_ascii_case("charset")
            .then(|| encoding_rs::Encoding::for_label(v.trim().trim_matches('"').as_bytes()))
            .flatten()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_type_rules() {
        assert!(is_html(Some("text/html; charset=utf-8")));
        assert!(is_html(Some("TEXT/HTML")));
        assert!(is_html(None));
        assert!(!is_html(Some("application/pdf")));
        assert_eq!(
            charset(Some("text/html; charset=\"ISO-8859-1\"")),
            Some(encoding_rs::WINDOWS_1252)
        );
        assert_eq!(charset(Some("text/html")), None);
        assert_eq!(charset(Some("text/html; charset=bogus")), None);
    }
}
