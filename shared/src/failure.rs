//! Why the crawl of one URL failed, and what follows from it.
//!
//! The kind travels in the protocol (child → supervisor → dispatcher), so
//! every crate agrees on it by type instead of matching strings. Each kind
//! says how many tries a URL gets and whether the failure counts against
//! its domain's circuit breaker: the two questions the dispatcher asks of
//! every failure.

use serde::{Deserialize, Serialize};

/// Named in snake_case (as [`FailureKind::as_str`]) where serde writes
/// names: the stored frontier. The wire (bincode) sends the variant's index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    /// The URL does not parse (a peer or an old frontier sent garbage).
    BadUrl,
    /// Connect or whole-request timeout.
    Timeout,
    /// The connection could not be made (refused, reset, DNS).
    Connect,
    /// Any other HTTP-level error (protocol error, bad headers, body error).
    Http,
    /// 429 or 503: the site asked us to come back later; the domain waits.
    Throttled,
    /// robots.txt answered 5xx or not at all: the site is not crawled blind.
    RobotsUnavailable,
    RedirectLoop,
    TooManyRedirects,
    /// A same-domain redirect led to a path robots.txt forbids.
    RedirectDisallowed,
    /// The child crawling it died several times while holding it: the
    /// supervisor gives up on the URL rather than lose the child again.
    ChildCrashed,
    /// The crawler itself failed on this URL (a panic): a bug, reported and
    /// contained to the URL.
    Internal,
    /// The store refused the page for good (e.g. over its size limit); a
    /// retry would be refused the same way.
    StoreRejected,
    /// The host is, or resolves only to, an internal address (loopback,
    /// private, link-local, ...; see `address_policy`) and the crawl does
    /// not allow private networks: nothing was requested. Final: the same
    /// URL would be refused again.
    BlockedAddress,
    /// Not fetched: the node's right to crawl the domain had run out (it
    /// lost the dispatcher; see `link::fence`). Not a failure of the URL:
    /// the dispatcher queues it again without counting a try.
    Fenced,
    /// Not fetched: the dispatcher recalled the URL's domain, to move it to
    /// another node (see `frontier::rebalance` in the dispatcher). Queued
    /// again, like [`FailureKind::Fenced`].
    Recalled,
    /// Not fetched: the domain's server is not the one the lease named (a
    /// domain met for the first time, or whose address changed). The
    /// result names the server, and the dispatcher queues the URL again,
    /// like [`FailureKind::Fenced`], for the server's owner.
    Regrouped,
    /// The host name does not exist (NXDOMAIN) or has no address (no A or
    /// AAAA records): an answer, not a failure to get one. Final: the
    /// answer is kept for its negative TTL anyway.
    DnsNotFound,
    /// The name's lookup failed: SERVFAIL, REFUSED or another error answer.
    DnsFailed,
    /// The name's lookup got no answer in time.
    DnsTimeout,
    /// The TLS handshake failed: a certificate that does not verify
    /// (expired, for another name, from an authority not trusted: see
    /// `--ca-file`) or no protocol both sides speak. Final: the site's
    /// certificate will not change within a retry's few seconds.
    Tls,
}

impl FailureKind {
    /// Every kind.
    pub const ALL: [FailureKind; 20] = [
        FailureKind::BadUrl,
        FailureKind::Timeout,
        FailureKind::Connect,
        FailureKind::Http,
        FailureKind::Throttled,
        FailureKind::RobotsUnavailable,
        FailureKind::RedirectLoop,
        FailureKind::TooManyRedirects,
        FailureKind::RedirectDisallowed,
        FailureKind::ChildCrashed,
        FailureKind::Internal,
        FailureKind::StoreRejected,
        FailureKind::BlockedAddress,
        FailureKind::Fenced,
        FailureKind::Recalled,
        FailureKind::Regrouped,
        FailureKind::DnsNotFound,
        FailureKind::DnsFailed,
        FailureKind::DnsTimeout,
        FailureKind::Tls,
    ];

    /// Bounded label for metrics, logs and the stored frontier.
    pub fn as_str(self) -> &'static str {
        match self {
            FailureKind::BadUrl => "bad_url",
            FailureKind::Timeout => "timeout",
            FailureKind::Connect => "connect",
            FailureKind::Http => "http",
            FailureKind::Throttled => "throttled",
            FailureKind::RobotsUnavailable => "robots_unavailable",
            FailureKind::RedirectLoop => "redirect_loop",
            FailureKind::TooManyRedirects => "too_many_redirects",
            FailureKind::RedirectDisallowed => "redirect_disallowed",
            FailureKind::ChildCrashed => "child_crashed",
            FailureKind::Internal => "internal",
            FailureKind::StoreRejected => "store_rejected",
            FailureKind::BlockedAddress => "blocked_address",
            FailureKind::Fenced => "fenced",
            FailureKind::Recalled => "recalled",
            FailureKind::Regrouped => "regrouped",
            FailureKind::DnsNotFound => "dns_not_found",
            FailureKind::DnsFailed => "dns_failed",
            FailureKind::DnsTimeout => "dns_timeout",
            FailureKind::Tls => "tls",
        }
    }

    /// How many tries a URL gets in all when it fails this way (1 = it is
    /// failed at once: a retry cannot change the answer).
    pub fn max_attempts(self) -> u32 {
        match self {
            // The site asked us to come back later; the domain already waits.
            FailureKind::Throttled => 10,
            // Never tried: the dispatcher queues it again (see `Fenced`).
            FailureKind::Fenced | FailureKind::Recalled | FailureKind::Regrouped => u32::MAX,
            FailureKind::Timeout
            | FailureKind::Connect
            | FailureKind::Http
            | FailureKind::RobotsUnavailable
            | FailureKind::ChildCrashed
            | FailureKind::DnsFailed
            | FailureKind::DnsTimeout => 3,
            FailureKind::BadUrl
            | FailureKind::RedirectLoop
            | FailureKind::TooManyRedirects
            | FailureKind::RedirectDisallowed
            | FailureKind::Internal
            | FailureKind::StoreRejected
            | FailureKind::BlockedAddress
            | FailureKind::DnsNotFound
            | FailureKind::Tls => 1,
        }
    }

    /// Whether the URL was handed back unfetched (not a failure of it):
    /// the dispatcher queues it again, first, without counting a try.
    pub fn is_handed_back(self) -> bool {
        matches!(
            self,
            FailureKind::Fenced | FailureKind::Recalled | FailureKind::Regrouped
        )
    }

    /// Whether the failure says something about the site's health (and so
    /// counts towards pausing or halting its domain), rather than about one
    /// URL or about us.
    pub fn counts_against_domain(self) -> bool {
        matches!(
            self,
            FailureKind::Timeout
                | FailureKind::Connect
                | FailureKind::Http
                | FailureKind::Throttled
                | FailureKind::RobotsUnavailable
                | FailureKind::DnsNotFound
                | FailureKind::DnsFailed
                | FailureKind::DnsTimeout
                | FailureKind::Tls
        )
    }
}

impl std::fmt::Display for FailureKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_a_retry_cannot_fix_is_tried_once() {
        for k in [
            FailureKind::BadUrl,
            FailureKind::RedirectLoop,
            FailureKind::Internal,
            FailureKind::StoreRejected,
            FailureKind::BlockedAddress,
        ] {
            assert_eq!(k.max_attempts(), 1, "{k}");
            assert!(!k.counts_against_domain(), "{k}");
        }
        assert!(FailureKind::Timeout.max_attempts() > 1);
        assert!(FailureKind::Timeout.counts_against_domain());
        assert!(!FailureKind::ChildCrashed.counts_against_domain());
    }
}
