//! robots.txt per RFC 9309: fetch once per origin, keep it in the second
//! store with an expiry, obey it.
//!
//! - 2xx: parse at most 500 KiB and obey the group for our agent token.
//! - up to 5 redirects are followed (any host, as the RFC allows).
//! - 4xx: no restrictions.
//! - 5xx, timeouts, network errors: the site is treated as fully disallowed
//!   and robots is retried with backoff (1 min, doubling to at most 1 h
//!   while it keeps failing), so a site is never crawled blind.
//! - a redirect to an internal address is refused (see `http`) and counts
//!   as unreachable: the site asked us to request the operator's network.
//!
//! Each response received (every hop of a redirect) is also kept, with
//! the crawl's pages, in its `robots_txt` collection, which `pages export`
//! writes as WARC records (see `store::docs::RobotsTxtDoc`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use link::protocol::{now_ms, CrawlPolicy};
use shared::timing::{Op, TimingLog};
use store::docs::{Head, PageDoc, RobotsDoc, RobotsTxtDoc, RobotsTxtId};
use store::page_body;
use store::payload_digest::PayloadDigest;
use texting_robots::Robot;
use url::Url;

use crate::http::{FetchError, Fetched, Http};
use crate::metric;
use crate::robots_records::RobotsRecords;

/// RFC 9309 §2.5: parse at least 500 KiB; we parse exactly that much.
pub(crate) const MAX_ROBOTS_BYTES: u64 = 500 * 1024;
/// `Sitemap:` lines of one robots.txt that are offered to the frontier
/// (the rest are ignored): a site needing more lists them in an index.
pub(crate) const MAX_SITEMAP_LINES: usize = 64;
const MAX_ROBOTS_REDIRECTS: usize = 5;
/// How soon robots is retried after the server first failed to give it.
const UNAVAILABLE_RETRY: Duration = Duration::from_secs(60);
/// The longest wait between robots retries of a failing server.
const MAX_UNAVAILABLE_RETRY: Duration = Duration::from_secs(3600);

/// How long to wait before asking again after the `failures`-th failure
/// in a row to get robots.txt: doubling from [`UNAVAILABLE_RETRY`].
pub(crate) fn unavailable_retry(failures: u32) -> Duration {
    UNAVAILABLE_RETRY
        .saturating_mul(2u32.saturating_pow(failures.saturating_sub(1)))
        .min(MAX_UNAVAILABLE_RETRY)
}

/// A site's `Crawl-delay` (seconds, as the file says) as a wait, capped at
/// `max_ms`. The value comes from the network: `1e20`, `inf`, `NaN` or a
/// negative number must neither panic nor overflow (`Duration::from_secs_f32`
/// panics past its range), so anything unrepresentable counts as the cap.
pub(crate) fn crawl_delay(secs: f32, max_ms: u64) -> Option<Duration> {
    if secs.is_nan() || secs <= 0.0 {
        return None;
    }
    let max = Duration::from_millis(max_ms);
    Some(Duration::try_from_secs_f32(secs).map_or(max, |d| d.min(max)))
}

/// The rules in force for one origin.
pub(crate) enum Rules {
    AllowAll,
    /// The server could not tell us (5xx, network): crawl nothing for now.
    Unavailable,
    /// The TLS handshake failed (why): the origin's URLs fail as `tls`
    /// (final: a certificate that does not verify is not transient), not
    /// as an unavailable robots.txt tried three times.
    Untrusted(Box<str>),
    Parsed(Box<Robot>),
}

pub(crate) struct RobotsEntry {
    pub rules: Rules,
    pub crawl_delay: Option<Duration>,
    /// Its `Sitemap:` lines, as written (at most [`MAX_SITEMAP_LINES`]).
    pub sitemaps: Vec<String>,
    /// Wall-clock expiry (Unix ms).
    pub expires_ms: u64,
}

impl RobotsEntry {
    /// Builds the rules from a robots.txt response (`status` 0 = unreachable).
    pub(crate) fn from_response(
        status: u16,
        body: &[u8],
        policy: &CrawlPolicy,
        fetched_ms: u64,
    ) -> RobotsEntry {
        let ttl_ms = policy.robots_ttl_secs.saturating_mul(1000);
        let (rules, ttl_ms) = match status {
            200..=299 => match Robot::new(&policy.robots_agent, body) {
                Ok(robot) => (Rules::Parsed(Box::new(robot)), ttl_ms),
                // Unparseable files restrict nothing (RFC 9309 §2.2: unknown lines are ignored).
                Err(_) => (Rules::AllowAll, ttl_ms),
            },
            400..=499 => (Rules::AllowAll, ttl_ms),
            _ => (Rules::Unavailable, UNAVAILABLE_RETRY.as_millis() as u64),
        };
        let (crawl_delay, sitemaps) = match &rules {
            Rules::Parsed(r) => (
                r.delay.and_then(|d| crawl_delay(d, policy.max_crawl_delay_ms)),
                r.sitemaps.iter().take(MAX_SITEMAP_LINES).cloned().collect(),
            ),
            _ => (None, Vec::new()),
        };
        RobotsEntry {
            rules,
            crawl_delay,
            sitemaps,
            expires_ms: fetched_ms.saturating_add(ttl_ms),
        }
    }

    pub(crate) fn allowed(&self, url: &Url) -> bool {
        match &self.rules {
            Rules::AllowAll => true,
            Rules::Unavailable | Rules::Untrusted(_) => false,
            Rules::Parsed(robot) => robot.allowed(url.as_str()),
        }
    }

    pub(crate) fn is_unavailable(&self) -> bool {
        matches!(self.rules, Rules::Unavailable)
    }

    /// Why the origin's TLS handshake failed, if that is why there are no rules.
    pub(crate) fn tls_failure(&self) -> Option<&str> {
        match &self.rules {
            Rules::Untrusted(why) => Some(why),
            _ => None,
        }
    }

    /// No rules came (unavailable or untrusted): asked again after a backoff.
    pub(crate) fn failed(&self) -> bool {
        matches!(self.rules, Rules::Unavailable | Rules::Untrusted(_))
    }

    /// The rules of an origin whose TLS handshake failed (`why`).
    fn untrusted(mut self, why: Option<&str>) -> RobotsEntry {
        if let (Some(why), Rules::Unavailable) = (why, &self.rules) {
            self.rules = Rules::Untrusted(why.into());
        }
        self
    }

    pub(crate) fn expired(&self) -> bool {
        now_ms() >= self.expires_ms
    }
}

/// Loads robots from the second store and fetches them from the web.
pub(crate) struct RobotsSource {
    pub records: RobotsRecords,
    pub policy: Arc<CrawlPolicy>,
    pub timing: TimingLog,
}

impl RobotsSource {
    /// The stored copy, if there is one that has not expired.
    pub(crate) async fn load(&self, origin: &str, domain: &str) -> Option<RobotsEntry> {
        let start = Instant::now();
        let found = self.records.load(origin).await;
        self.timing.record(
            Op::RobotsLookup,
            start.elapsed(),
            found.outcome(),
            Some(domain),
            None,
        );
        // Not found, or the store failed: fetch it from the web instead.
        // (A malformed record reads as an error: fetched again, too.)
        let d = found.found()?;
        let fetched = d.fetched_at_ms.max(0) as u64;
        let status = u16::try_from(d.status).unwrap_or(0);
        let mut entry = RobotsEntry::from_response(status, d.body.as_bytes(), &self.policy, fetched)
            .untrusted(d.tls_failure.as_deref());
        // The expiry decided when it was fetched (it carries the backoff).
        if let Some(expires) = d.expires_at_ms {
            entry.expires_ms = expires.max(0) as u64;
        }
        (!entry.expired()).then_some(entry)
    }

    /// Fetches `<origin>/robots.txt` (the caller has waited for politeness)
    /// and keeps the rules for the robots store's next flush. `failures`: earlier failures
    /// in a row to get it, which set how long an unavailable answer is
    /// kept. Also returns each response received, for the crawl's archive
    /// (`RobotsTxtDoc`; the caller queues them with its pages).
    pub(crate) async fn fetch(
        &self,
        http: &Http,
        origin: &str,
        domain: &str,
        failures: u32,
    ) -> (RobotsEntry, Vec<RobotsTxtDoc>) {
        let start = Instant::now();
        let answer = fetch_following_redirects(http, origin).await;
        let status = answer.status;
        let outcome = match status {
            200..=299 => "ok",
            400..=499 => "absent",
            _ => "unavailable",
        };
        self.timing
            .record(Op::RobotsFetch, start.elapsed(), outcome, Some(domain), None);
        metric::ROBOTS_FETCHES.at([outcome]).increment(1);
        let fetched = now_ms();
        let mut entry = RobotsEntry::from_response(status, answer.body(), &self.policy, fetched)
            .untrusted(answer.tls_failure.as_deref());
        if entry.failed() {
            let retry = unavailable_retry(failures.saturating_add(1)).as_millis() as u64;
            entry.expires_ms = fetched.saturating_add(retry);
        }
        // Times are Unix milliseconds (see `politeness` for why not dates).
        let record = RobotsDoc {
            origin: String::new(),
            status: i32::from(status),
            body: String::from_utf8_lossy(answer.body()).into_owned(),
            fetched_at_ms: fetched as i64,
            expires_at_ms: Some(entry.expires_ms as i64),
            tls_failure: answer.tls_failure.clone(),
        };
        self.records.keep(origin, record);
        let archived = answer.archived(domain, http.request_head());
        (entry, archived)
    }
}

/// What asking for an origin's robots.txt gave.
struct Answer {
    /// The status the rules follow: 0 when no HTTP answer came, 404 for
    /// a redirect that leads nowhere usable (RFC 9309 §2.3.1.2).
    status: u16,
    /// Every response received, in order, with the URL it answered.
    responses: Vec<(Url, Fetched)>,
    /// `status` is the last response's, and its body is the file.
    last_is_file: bool,
    /// No answer came because the TLS handshake failed: why.
    tls_failure: Option<String>,
}

impl Answer {
    /// The file the rules are read from (empty when there was none).
    fn body(&self) -> &[u8] {
        match self.responses.last() {
            Some((_, last)) if self.last_is_file => &last.body,
            _ => &[],
        }
    }

    /// The responses as the crawl's archive keeps them, keyed by the URL
    /// first asked for, when that request went out, and the hop.
    fn archived(&self, domain: &str, request_head: &Head) -> Vec<RobotsTxtDoc> {
        let Some((first, first_response)) = self.responses.first() else {
            return Vec::new();
        };
        let at = bson::DateTime::from_system_time(first_response.head.started).timestamp_millis();
        self.responses
            .iter()
            .enumerate()
            .map(|(hop, (url, resp))| {
                let mut page = PageDoc::new(
                    first.to_string(),
                    domain.to_string(),
                    0,
                    i32::from(resp.status),
                    i64::try_from(resp.body.len()).unwrap_or(i64::MAX),
                );
                if url != first {
                    page.final_url = Some(url.to_string());
                }
                page.payload_sha1 = Some(PayloadDigest::of(&resp.body));
                page.truncated = resp.truncated;
                resp.record_exchange(&mut page, request_head);
                page_body::store(&mut page, &resp.body, None, None);
                RobotsTxtDoc {
                    id: RobotsTxtId {
                        url: first.to_string(),
                        at,
                        // At most MAX_ROBOTS_REDIRECTS + 1 responses.
                        hop: i32::try_from(hop).unwrap_or(i32::MAX),
                    },
                    page,
                }
            })
            .collect()
    }
}

/// Asks for `<origin>/robots.txt`, following up to five redirects.
async fn fetch_following_redirects(http: &Http, origin: &str) -> Answer {
    let mut answer = Answer {
        status: 0,
        responses: Vec::new(),
        last_is_file: false,
        tls_failure: None,
    };
    let Ok(mut url) = Url::parse(origin).and_then(|o| o.join("/robots.txt")) else {
        return answer;
    };
    for _ in 0..=MAX_ROBOTS_REDIRECTS {
        let resp = match http.get_capped(&url, MAX_ROBOTS_BYTES).await {
            Ok(resp) => resp,
            Err(e) => {
                if let FetchError::Tls(why) = e {
                    answer.tls_failure = Some(why);
                }
                answer.status = 0;
                return answer;
            }
        };
        let status = resp.status;
        let next = (300..400)
            .contains(&status)
            .then(|| resp.location.as_deref().and_then(|l| url.join(l).ok()));
        answer.responses.push((url.clone(), resp));
        match next {
            Some(Some(next)) => url = next,
            // A redirect without a usable target: treat like "no robots".
            Some(None) => {
                answer.status = 404;
                return answer;
            }
            None => {
                answer.status = status;
                answer.last_is_file = true;
                return answer;
            }
        }
    }
    // RFC 9309 §2.3.1.2: more than five redirects may be treated as 404.
    answer.status = 404;
    answer
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A small policy for unit tests (the fetcher's too).
    pub(crate) fn policy() -> CrawlPolicy {
        CrawlPolicy {
            server_delay_ms: 0,
            named_server_delay_ms: 0,
            crawl_id: "t".into(),
            user_agent: "synthcrawler/0.1".into(),
            robots_agent: "synthcrawler".into(),
            min_delay_ms: 0,
            max_domain_connections: 1,
            max_domain_rps: 0.0,
            max_crawl_delay_ms: 2_000,
            robots_ttl_secs: 3600,
            connect_timeout_ms: 1000,
            request_timeout_ms: 1000,
            max_body_bytes: 1 << 20,
            max_redirects: 10,
            skip_nofollow: false,
            max_outlinks_per_page: 100,
            child_concurrency: 8,
            allow_private_networks: false,
            keep_non_html_bodies: false,
            guess_sitemap: false,
            canonical: Default::default(),
            heartbeat_timeout_ms: 15_000,
            revisit: None,
        }
    }

    fn u(s: &str) -> Url {
        Url::parse(s).unwrap()
    }

    #[test]
    fn status_classes_follow_rfc_9309() {
        let p = policy();
        let body = b"User-agent: *\nDisallow: /private/\nCrawl-delay: 30\n";
        let ok = RobotsEntry::from_response(200, body, &p, now_ms());
        assert!(!ok.allowed(&u("http://a.test/private/x")));
        assert!(ok.allowed(&u("http://a.test/public")));
        // Crawl-delay is capped by the policy maximum.
        assert_eq!(ok.crawl_delay, Some(Duration::from_secs(2)));
        let missing = RobotsEntry::from_response(404, body, &p, now_ms());
        assert!(missing.allowed(&u("http://a.test/private/x")));
        let forbidden = RobotsEntry::from_response(403, b"", &p, now_ms());
        assert!(forbidden.allowed(&u("http://a.test/x")));
        let broken = RobotsEntry::from_response(503, b"", &p, now_ms());
        assert!(!broken.allowed(&u("http://a.test/")));
        assert!(broken.is_unavailable());
        let unreachable = RobotsEntry::from_response(0, b"", &p, now_ms());
        assert!(!unreachable.allowed(&u("http://a.test/")));
    }

    #[test]
    fn hostile_crawl_delays_are_clamped_not_fatal() {
        let cap = Some(Duration::from_secs(2));
        for delay in ["1e20", "inf", "99999999999", "3.4e38"] {
            let body = format!("User-agent: *\nCrawl-delay: {delay}\nDisallow: /x\n");
            let e = RobotsEntry::from_response(200, body.as_bytes(), &policy(), now_ms());
            assert_eq!(e.crawl_delay, cap, "Crawl-delay: {delay}");
        }
        for delay in ["-5", "0", "NaN", "abc"] {
            let body = format!("User-agent: *\nCrawl-delay: {delay}\n");
            let e = RobotsEntry::from_response(200, body.as_bytes(), &policy(), now_ms());
            assert_eq!(e.crawl_delay, None, "Crawl-delay: {delay}");
        }
        assert_eq!(crawl_delay(0.25, 2000), Some(Duration::from_millis(250)));
        assert_eq!(crawl_delay(f32::INFINITY, 2000), cap);
        assert_eq!(crawl_delay(f32::NAN, 2000), None);
        // A TTL from a hostile or mistaken setting saturates, never wraps.
        let p = CrawlPolicy {
            robots_ttl_secs: u64::MAX,
            ..policy()
        };
        assert_eq!(
            RobotsEntry::from_response(404, b"", &p, now_ms()).expires_ms,
            u64::MAX
        );
    }

    #[test]
    fn our_group_wins_and_longest_match_wins() {
        let body =
            b"User-agent: otherbot\nDisallow: /\n\nUser-agent: synthcrawler\nDisallow: /a\nAllow: /a/b\n";
        let e = RobotsEntry::from_response(200, body, &policy(), now_ms());
        assert!(e.allowed(&u("http://a.test/x")));
        assert!(!e.allowed(&u("http://a.test/a/c")));
        assert!(e.allowed(&u("http://a.test/a/b/c")));
    }

    #[test]
    fn robots_retries_back_off_while_the_server_keeps_failing() {
        assert_eq!(unavailable_retry(1), Duration::from_secs(60));
        assert_eq!(unavailable_retry(2), Duration::from_secs(120));
        assert_eq!(unavailable_retry(4), Duration::from_secs(480));
        assert_eq!(unavailable_retry(7), Duration::from_secs(3600));
        assert_eq!(unavailable_retry(u32::MAX), Duration::from_secs(3600));
    }

    #[test]
    fn binary_garbage_and_expiry() {
        let e = RobotsEntry::from_response(200, &[0xff, 0x00, 0xfe, 0x80], &policy(), now_ms());
        assert!(e.allowed(&u("http://a.test/x")));
        let old = RobotsEntry::from_response(200, b"", &policy(), 0);
        assert!(old.expired());
    }

    /// robots.txt comes from the network: any body, any status, any
    /// `Crawl-delay` value and any path must give rules, never a panic,
    /// and a delay within the cap (in place of `cargo fuzz`, which CI's
    /// stable toolchain cannot run).
    mod properties {
        use proptest::prelude::*;

        use super::*;

        /// Cases per property: `PROPTEST_CASES`, or 512.
        fn cases() -> u32 {
            std::env::var("PROPTEST_CASES")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(512)
        }

        fn robots_line() -> impl Strategy<Value = String> {
            let value = prop_oneof![
                "[ -~]{0,12}",
                "\\PC{0,8}",
                any::<f64>().prop_map(|f| f.to_string()),
                any::<i64>().prop_map(|i| i.to_string()),
                Just("1e39".to_string()),
                Just("-inf".to_string()),
                Just("NaN".to_string()),
            ];
            let field = prop_oneof![
                Just("User-agent"),
                Just("user-AGENT"),
                Just("Allow"),
                Just("Disallow"),
                Just("Crawl-delay"),
                Just("Sitemap"),
                Just("#"),
                Just(""),
            ];
            (field, value, prop_oneof![Just(": "), Just(":"), Just(" ")])
                .prop_map(|(f, v, sep)| format!("{f}{sep}{v}"))
        }

        proptest! {
            // 512 cases unless PROPTEST_CASES asks for more (a longer run).
            #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

            #[test]
            fn any_robots_file_gives_rules_and_a_bounded_delay(
                lines in prop::collection::vec(robots_line(), 0..24),
                eol in prop_oneof![Just("\n"), Just("\r\n"), Just("\r")],
                status in prop_oneof![Just(0u16), Just(200), Just(204), Just(301), Just(404), Just(500), any::<u16>()],
                path in "/[ -~]{0,40}",
                max_ms in 0u64..10_000_000,
            ) {
                let body = lines.join(eol);
                let p = CrawlPolicy { max_crawl_delay_ms: max_ms, ..policy() };
                let e = RobotsEntry::from_response(status, body.as_bytes(), &p, now_ms());
                prop_assert!(e.crawl_delay.is_none_or(|d| d <= Duration::from_millis(max_ms)));
                let url = Url::parse("http://site.test/").and_then(|b| b.join(&path));
                if let Ok(url) = url {
                    let allowed = e.allowed(&url);
                    match status {
                        400..=499 => prop_assert!(allowed),
                        200..=299 => {}
                        _ => prop_assert!(!allowed),
                    }
                }
            }

            #[test]
            fn any_delay_value_is_clamped(secs: f32, max_ms: u64) {
                if let Some(d) = crawl_delay(secs, max_ms) {
                    prop_assert!(d <= Duration::from_millis(max_ms));
                    prop_assert!(secs > 0.0);
                }
            }
        }
    }
}
