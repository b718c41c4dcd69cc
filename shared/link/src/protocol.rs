//! Messages between the processes, and their wire encoding.
//!
//! dispatcher ⇄ supervisor travel as single ZeroMQ frames (ROUTER/DEALER);
//! supervisor ⇄ crawler-child travel over the child's stdin/stdout with a
//! length prefix (see [`crate::framing`]). Both use bincode: compact and
//! a few hundred nanoseconds per message, which matters at thousands of
//! pages per second.
//!
//! Every URL handed out carries a lease: an id the result must echo and an
//! expiry after which the dispatcher may hand the URL to someone else. That
//! is what lets a dead supervisor or child lose no work.

use serde::{Deserialize, Serialize};

pub use shared::failure::FailureKind;

/// Bumped whenever a message changes shape; peers with another version are refused.
/// 6: the introduction is a challenge–response on the cluster secret
/// (see [`crate::cluster_auth`]). 8: a sealed message's tag is keyed
/// BLAKE3, not HMAC-SHA256. 9: the crawl policy carries the canonical URL
/// rules. 10: fencing and acknowledged results (`ToSupervisor::Ack`,
/// `ToChild::Fence`, the policy's `heartbeat_timeout_ms`, `Recall`).
/// 11: the handshake and the sealed envelope are frames of their own
/// ([`crate::envelope`]); the crawl's messages travel only sealed; a
/// lease carries its domain's delay when an operator set one.
/// 12: per-server politeness (a lease and a result name the domain's
/// server, the policy carries the per-server gaps, `Regrouped`).
/// 13: revisits (the policy's revisit rule, a revisit lease's validators).
/// 14: the policy says whether to guess `/sitemap.xml`.
/// 15: the Join's introduction no longer lists the leases held: they follow
/// the Welcome, sealed ([`ToDispatcher::Holding`]), so that a peer not yet
/// proven sends the dispatcher only small messages
/// ([`crate::socket::UNTRUSTED_MESSAGE_BYTES`]).
/// 16: DNS failures of their own kinds (`FailureKind::DnsNotFound`,
/// `DnsFailed`, `DnsTimeout`).
pub const PROTOCOL_VERSION: u32 = 16;

/// One URL to crawl, leased to whoever holds it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkItem {
    pub lease: u64,
    /// Unix milliseconds after which the dispatcher re-queues the URL.
    pub lease_expires_ms: u64,
    /// Unix milliseconds when the dispatcher leased it: the child times
    /// `start_wait` from here (0 when unknown).
    pub leased_ms: u64,
    pub url: String,
    pub domain: String,
    pub depth: u16,
    /// The domain's minimum gap between requests, when an operator set one
    /// for it (the crawl's `min_delay_ms` otherwise); robots.txt's
    /// Crawl-delay still raises it. Carried by every lease, so that the
    /// child pacing the domain follows it wherever the domain is placed.
    pub min_delay_ms: Option<u64>,
    /// The server (IP address) the dispatcher groups the domain under, when
    /// it knows one: every domain of a server is leased to one supervisor,
    /// which gives them to one child, which paces the server as a whole
    /// (see the child's `server_pace`). `None` until a child reports it.
    pub server: Option<std::net::IpAddr>,
    /// Set when the URL was fetched before and is due again: what the
    /// child needs to ask conditionally and to tell a change, without a
    /// store read.
    pub revisit: Option<Revisit>,
}

/// A revisit lease's knowledge of the URL's last capture (the dispatcher
/// reads it from the page's schedule, `store::docs::RevisitState`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Revisit {
    /// The validators the last capture was served with, sent back as
    /// `If-None-Match` and `If-Modified-Since`.
    pub etag: Option<String>,
    pub last_modified: Option<String>,
    /// The SHA-1 of the last stored payload: a 200 with the same one is
    /// unchanged content.
    pub digest: Option<[u8; 20]>,
    /// The URL's current revisit interval (see `shared::revisit`).
    pub interval_ms: u64,
    /// Unix ms of the capture holding that payload: what an unchanged
    /// capture refers to (a WARC revisit record's `WARC-Refers-To-Date`).
    pub body_at_ms: i64,
}

/// How the crawl of one URL ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Outcome {
    /// The server answered (any status); the page document is stored.
    Fetched {
        status: u16,
        /// Set when same-domain redirects were followed.
        final_url: Option<String>,
        content_type: Option<String>,
        bytes: u64,
    },
    /// robots.txt forbids it; nothing was requested.
    Disallowed,
    /// No usable answer (connect error, timeout, too many redirects, ...).
    /// `message` is at most [`MAX_FAILURE_MESSAGE`] bytes (see [`Outcome::failed`]).
    Failed { kind: FailureKind, message: String },
}

/// Longest failure message carried; error texts can quote whole URLs or
/// server answers, and a message must stay small.
pub const MAX_FAILURE_MESSAGE: usize = 1024;

impl Outcome {
    /// A failure, its message clipped to [`MAX_FAILURE_MESSAGE`] bytes.
    pub fn failed(kind: FailureKind, message: impl Into<String>) -> Outcome {
        let mut message = message.into();
        if message.len() > MAX_FAILURE_MESSAGE {
            let mut end = MAX_FAILURE_MESSAGE;
            while !message.is_char_boundary(end) {
                end -= 1;
            }
            message.truncate(end);
        }
        Outcome::Failed { kind, message }
    }
}

/// The result of one [`WorkItem`].
///
/// `S` is how its strings are held: owned (`String`, the default) where a
/// result is built and relayed, borrowed (`&str`) where the dispatcher
/// reads it. A result's URL and domain are replaced by its lease's, and
/// its links are only looked at, so borrowing them from the message
/// saves one allocation per link: reading results was the dispatcher's
/// largest cost (13% of its CPU past the memory budget, 8 points of it in
/// `malloc`). The bytes on the wire are the same either way.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CrawlResult<S = String> {
    pub lease: u64,
    pub url: S,
    pub domain: S,
    pub depth: u16,
    pub outcome: Outcome,
    /// Normalised absolute links found (or a cross-domain redirect target).
    pub outlinks: Vec<S>,
    /// Unix milliseconds when the child sent it: the dispatcher times
    /// `result_wait` from here (0 when unknown).
    pub sent_ms: u64,
    /// The server the domain resolved to, when the child hands the URL
    /// back to be grouped with that server's other domains
    /// (`FailureKind::Regrouped`); `None` otherwise.
    pub server: Option<std::net::IpAddr>,
}

impl CrawlResult {
    /// The result for `item`, not stamped yet (`sent_ms` 0: the sender
    /// stamps it as it sends).
    pub fn of(item: &WorkItem, outcome: Outcome, outlinks: Vec<String>) -> Self {
        CrawlResult {
            lease: item.lease,
            url: item.url.clone(),
            domain: item.domain.clone(),
            depth: item.depth,
            outcome,
            outlinks,
            sent_ms: 0,
            server: None,
        }
    }

    /// The result for `item` when it ends without a page (failed, or
    /// handed back), stamped as sent now.
    pub fn without_page(item: &WorkItem, outcome: Outcome) -> Self {
        CrawlResult {
            sent_ms: now_ms(),
            ..CrawlResult::of(item, outcome, Vec::new())
        }
    }
}

/// Crawl policy, set once on the dispatcher and pushed to every child, so a
/// crawl cannot run with children that disagree about politeness.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CrawlPolicy {
    pub crawl_id: String,
    pub user_agent: String,
    /// Product token matched against robots.txt `User-agent` lines.
    pub robots_agent: String,
    pub min_delay_ms: u64,
    /// Minimum gap between two requests to one server (IP address), across
    /// all of its host names, for public addresses found through DNS
    /// (0 = servers are not paced, only domains).
    pub server_delay_ms: u64,
    /// The same for addresses the operator named: host names mapped with
    /// `--resolve`/`--hosts-file`, and internal addresses allowed with
    /// `--allow-private-networks` (test webs, intranets).
    pub named_server_delay_ms: u64,
    /// Requests to one domain in flight at once (1 = one after another).
    pub max_domain_connections: u32,
    /// Requests per second ceiling per domain (0 = none).
    pub max_domain_rps: f64,
    pub max_crawl_delay_ms: u64,
    pub robots_ttl_secs: u64,
    pub connect_timeout_ms: u64,
    pub request_timeout_ms: u64,
    pub max_body_bytes: u64,
    pub max_redirects: u32,
    pub skip_nofollow: bool,
    /// Links kept per page, in page order; the rest are counted as dropped.
    /// Bounds a result's size (at most this many URLs of at most 2 KiB).
    pub max_outlinks_per_page: u32,
    /// Fetches a child runs at once (across its domains).
    pub child_concurrency: u32,
    /// Let children connect to internal addresses (loopback, private,
    /// link-local, ...; see the child's `address_policy`). Off by default: a
    /// page must not make the crawler request the operator's own network.
    pub allow_private_networks: bool,
    /// Store the bodies of responses that are not HTML (PDFs, images,
    /// feeds), compressed, for a faithful archive. Off by default: a crawl
    /// for text would fill the store with media it never reads.
    pub keep_non_html_bodies: bool,
    /// Offer `/sitemap.xml` with an origin's first page when its
    /// robots.txt names no sitemap.
    pub guess_sitemap: bool,
    /// How links are made canonical (session ids, tracking parameters and
    /// userinfo removed; see [`shared::canonical`]). In the policy so every
    /// child turns one page's many spellings into the same URL: the
    /// dispatcher de-duplicates on what the children send.
    pub canonical: shared::canonical::CanonicalRules,
    /// The dispatcher gives a supervisor up after this long without a
    /// message from it; a supervisor's right to crawl runs out a margin
    /// earlier (see [`crate::fence`]).
    pub heartbeat_timeout_ms: u64,
    /// Pages are fetched again when due (`--revisit-after`); `None`: each
    /// URL once, and the crawl ends when nothing is left.
    /// Boxed: the policy rides in messages whose other variants are small.
    pub revisit: Option<Box<shared::revisit::RevisitPolicy>>,
}

/// Where a process serves `/debug/pprof` and `/metrics`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProcessInfo {
    pub role: String,
    pub node: String,
    pub pid: u32,
    pub debug_addr: Option<String>,
}

/// Who a supervisor is, sent in its Join
/// ([`crate::envelope::FrameToDispatcher::Join`]) as encoded bytes: the
/// proof covers these exact bytes, and the dispatcher decodes them only
/// once the proof checks out. Small, as everything a peer sends before it
/// is proven must be: the leases it holds follow the Welcome
/// ([`ToDispatcher::Holding`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Intro {
    pub supervisor_id: String,
    /// URLs the supervisor can hold at once; the dispatcher never
    /// leases it more (credit-based backpressure).
    pub capacity: u32,
    pub process: ProcessInfo,
}

/// Supervisor → dispatcher, always sealed (see [`crate::envelope`]). `S`:
/// how results hold their strings (see [`CrawlResult`]); the dispatcher
/// reads `ToDispatcher<&str>`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum ToDispatcher<S = String> {
    /// Finished URLs; each one frees one credit.
    Results(Vec<CrawlResult<S>>),
    /// A child (re)started or stopped; carries its debug address.
    Child {
        slot: u32,
        process: ProcessInfo,
        alive: bool,
    },
    /// Every second. `holding` lists the leases the supervisor still holds
    /// (with its children or waiting to be reported): the dispatcher renews
    /// them, so a URL held back by a long Crawl-delay or Retry-After is not
    /// handed out a second time while its holder is alive.
    Heartbeat { holding: Vec<u64> },
    /// Children have exited; the supervisor is leaving.
    Bye,
    /// The first message of every connection, right after the Welcome:
    /// the URLs this supervisor still holds from before (its children are
    /// crawling them, or their results wait to be sent; empty at its
    /// start). A restarted dispatcher adopts these leases instead of
    /// handing the URLs out a second time (see `adopt` in the
    /// dispatcher: only URLs it knows, with its own domain and depth);
    /// the connection joins the crawl only with it.
    Holding(Vec<WorkItem>),
}

/// Dispatcher → supervisor, always sealed (see [`crate::envelope`], which
/// also has the handshake's frames).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum ToSupervisor {
    Work(Vec<WorkItem>),
    Heartbeat,
    /// The crawl is over: drain, stop children, say Bye, exit.
    Stop,
    /// Answer to Bye: the supervisor may exit now. (ZeroMQ has no linger
    /// here, so a supervisor that exited right after Bye could lose it.)
    Farewell,
    /// "I have read your messages up to the one sealed with counter `seq`"
    /// (on this connection): the answer to each Heartbeat and Results.
    /// Results up to it are in the dispatcher's hands; until then the
    /// supervisor keeps them and sends them again on its next connection.
    /// It also renews the supervisor's right to crawl from when that
    /// message was sent (see [`crate::fence`]).
    Ack {
        seq: u64,
    },
    /// Hand these domains' URLs back unless their fetch has started (as
    /// `Recalled` failures): the dispatcher moves the domains to another
    /// supervisor once nothing of them is in flight (`frontier::rebalance`
    /// in the dispatcher), and a child's queue of a paced domain could
    /// otherwise hold them for a long time.
    Recall {
        domains: Vec<String>,
    },
}

/// Supervisor → crawler-child.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum ToChild {
    Configure(CrawlPolicy),
    Work(Vec<WorkItem>),
    /// Finish what you hold, flush, exit 0.
    Stop,
    /// Requests may start until this instant of the host's monotonic clock
    /// ([`crate::fence::mono_ms`]); after it, held URLs come back as
    /// `Fenced` failures, not fetched.
    Fence {
        until_mono_ms: u64,
    },
    /// See [`ToSupervisor::Recall`].
    Recall {
        domains: Vec<String>,
    },
}

/// Crawler-child → supervisor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum FromChild {
    Ready(ProcessInfo),
    Result(CrawlResult),
    Heartbeat,
}

/// Why a message could not be decoded.
#[derive(Debug, thiserror::Error)]
#[error("undecodable message: {0}")]
pub struct DecodeError(#[from] bincode::Error);

/// Upper bound on one decoded message, so a corrupt length cannot make us
/// allocate gigabytes. A single result is well below it (outlinks are
/// capped per page and each is at most 2 KiB); senders split batches of
/// results to [`RESULTS_MESSAGE_BYTES`].
pub const MAX_MESSAGE_BYTES: u64 = 64 * 1024 * 1024;

/// Target size of one `Results` message: batches are split at this size.
/// Small, because the receiver keeps what its biggest message needed: the
/// `zeromq` crate reads each peer's messages into a buffer that keeps the
/// capacity of the largest one (`SocketOptions::read_buffer` says so), so
/// the dispatcher holds about this much per supervisor for as long as it
/// is connected. At 8 MiB, a supervisor that flushed a backlog after a
/// dispatcher restart left at least 8 MiB held for it (20 connections
/// that each carried one 8 MiB message held 341 MiB, against 27 MiB
/// with messages of 256 KiB; the README has how it was measured). At
/// 256 KiB, 50 supervisors still left 21 MB of read buffers held in the
/// dispatcher (a heap profile at a million known URLs: over a quarter of
/// its heap). At 64 KiB a message still carries about 25 results of
/// realistic pages (dozens of links each): the realistic bench crawled
/// as fast as with 256 KiB (scripts/scale-measurements.md, "The
/// dispatcher alone").
pub const RESULTS_MESSAGE_BYTES: u64 = 64 * 1024;

/// Encoded size of a message (what [`encode`] would produce).
pub fn encoded_len<T: Serialize>(msg: &T) -> u64 {
    bincode::serialized_size(msg).unwrap_or(u64::MAX)
}

/// Splits results into batches of at most [`RESULTS_MESSAGE_BYTES`] encoded
/// bytes each (a single larger result travels alone), keeping their order.
pub fn split_results(results: Vec<CrawlResult>) -> Vec<Vec<CrawlResult>> {
    let mut batches = Vec::new();
    let mut batch = Vec::new();
    let mut size = 0u64;
    for r in results {
        let len = encoded_len(&r);
        if !batch.is_empty() && size.saturating_add(len) > RESULTS_MESSAGE_BYTES {
            batches.push(std::mem::take(&mut batch));
            size = 0;
        }
        size = size.saturating_add(len);
        batch.push(r);
    }
    if !batch.is_empty() {
        batches.push(batch);
    }
    batches
}

pub fn encode<T: Serialize>(msg: &T) -> Vec<u8> {
    // Serialising plain structs into a Vec cannot fail.
    bincode::serialize(msg).expect("bincode serialisation of protocol message")
}

/// Decodes one message; `T` may borrow its strings from `bytes` (see
/// [`CrawlResult`]).
pub fn decode<'a, T: Deserialize<'a>>(bytes: &'a [u8]) -> Result<T, DecodeError> {
    use bincode::Options;
    Ok(bincode::DefaultOptions::new()
        .with_fixint_encoding()
        .allow_trailing_bytes()
        .with_limit(MAX_MESSAGE_BYTES)
        .deserialize(bytes)?)
}

/// Milliseconds since the Unix epoch (leases and store timestamps).
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item() -> WorkItem {
        WorkItem {
            server: None,
            lease: 7,
            lease_expires_ms: 1_700_000_000_000,
            leased_ms: 1_699_999_000_000,
            url: "http://a.test/x".into(),
            domain: "a.test".into(),
            depth: 3,
            min_delay_ms: None,
            revisit: None,
        }
    }

    #[test]
    fn messages_round_trip() {
        let msgs = vec![
            ToSupervisor::Work(vec![item(), item()]),
            ToSupervisor::Stop,
            ToSupervisor::Heartbeat,
        ];
        for m in msgs {
            assert_eq!(decode::<ToSupervisor>(&encode(&m)).unwrap(), m);
        }
        let r = ToDispatcher::Results(vec![CrawlResult {
            server: None,
            lease: 7,
            url: "http://a.test/x".into(),
            domain: "a.test".into(),
            depth: 3,
            outcome: Outcome::Fetched {
                status: 200,
                final_url: None,
                content_type: Some("text/html".into()),
                bytes: 1234,
            },
            outlinks: vec!["http://a.test/y".into()],
            sent_ms: 1_700_000_000_001,
        }]);
        assert_eq!(decode::<ToDispatcher>(&encode(&r)).unwrap(), r);
    }

    /// The dispatcher reads results with borrowed strings: the same bytes
    /// decode to the same result, its strings pointing into the message.
    #[test]
    fn results_read_with_borrowed_strings_are_the_results_sent() {
        let sent = result_with_links(3);
        let wire = encode(&ToDispatcher::Results(vec![sent.clone()]));
        let Ok(ToDispatcher::Results(read)) = decode::<ToDispatcher<&str>>(&wire) else {
            panic!("not read as results");
        };
        let [r] = &read[..] else {
            panic!("{} results", read.len())
        };
        assert_eq!(
            (r.lease, r.url, r.domain, r.depth),
            (sent.lease, &*sent.url, &*sent.domain, sent.depth)
        );
        assert_eq!((&r.outcome, r.sent_ms), (&sent.outcome, sent.sent_ms));
        assert_eq!(
            r.outlinks,
            sent.outlinks.iter().map(String::as_str).collect::<Vec<_>>()
        );
        let within = |s: &str| wire.as_ptr_range().contains(&s.as_ptr());
        assert!(
            within(r.url) && r.outlinks.iter().all(|l| within(l)),
            "strings were copied"
        );
        // A string that is not UTF-8 is refused, as when read owned.
        let bad = wire.iter().position(|&b| b == b'h').map(|i| {
            let mut w = wire.clone();
            w[i] = 0xff;
            w
        });
        assert!(decode::<ToDispatcher<&str>>(&bad.unwrap()).is_err());
    }

    fn result_with_links(n: usize) -> CrawlResult {
        CrawlResult {
            server: None,
            lease: 1,
            url: "http://a.test/".into(),
            domain: "a.test".into(),
            depth: 0,
            outcome: Outcome::Disallowed,
            outlinks: (0..n).map(|i| format!("http://a.test/{i:01000}")).collect(),
            sent_ms: 0,
        }
    }

    #[test]
    fn results_are_split_under_the_message_target() {
        // 40 results of ~25 KB each: no batch over the target, order kept.
        let results: Vec<_> = (0..40u64)
            .map(|i| CrawlResult {
                lease: i,
                ..result_with_links(25)
            })
            .collect();
        let batches = split_results(results);
        assert!(batches.len() >= 16, "{} batches", batches.len());
        let mut next = 0;
        for b in &batches {
            assert!(encoded_len(&ToDispatcher::Results(b.clone())) <= RESULTS_MESSAGE_BYTES + 64);
            for r in b {
                assert_eq!(r.lease, next);
                next += 1;
            }
        }
        assert_eq!(next, 40);
        // One result bigger than the target travels alone.
        let big = split_results(vec![result_with_links(1000), result_with_links(1)]);
        assert_eq!(big.len(), 2);
    }

    #[test]
    fn failure_messages_are_clipped_on_a_char_boundary() {
        let Outcome::Failed { message, .. } = Outcome::failed(FailureKind::Http, "é".repeat(2000)) else {
            panic!("not a failure");
        };
        assert!(message.len() <= MAX_FAILURE_MESSAGE);
        assert!(message.len() >= MAX_FAILURE_MESSAGE - 1);
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(decode::<ToDispatcher>(&[0xff; 3]).is_err());
        assert!(decode::<ToChild>(&[]).is_err());
        // A length field claiming 2^60 bytes must not allocate.
        let mut evil = vec![1, 0, 0, 0];
        evil.extend_from_slice(&(1u64 << 60).to_le_bytes());
        assert!(decode::<ToChild>(&evil).is_err());
    }
}
