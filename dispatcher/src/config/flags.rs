//! The dispatcher's flags: every setting of a crawl, each also an
//! environment variable and a key of the `--config` file (see
//! [`super::parse`]), and the typed settings derived from them.

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use link::args::ClusterArgs;
use link::protocol::CrawlPolicy;
use shared::cli::ObsArgs;
use shared::revisit::RevisitPolicy;
use store::StoreArgs;

use crate::admission::{self, ScopeKind};
use crate::breaker;
use crate::seen::SeenCheck;

/// The gap between two requests to one public server when
/// --min-ip-delay-ms is not given. BUbiNG paces hosts and IP addresses
/// together, its sample configuration at 4 s per host and 500 ms per
/// address; Heritrix, Nutch and StormCrawler queue by host unless told
/// otherwise, so a server of a thousand names gets a thousand queues.
/// Ours keeps BUbiNG's shape at a quarter of our 1 s per-host default:
/// a shared server sees at most four requests a second from the crawl,
/// while the many servers of the open web keep the crawl busy.
pub(crate) const DEFAULT_SERVER_DELAY_MS: u64 = 250;

#[derive(Parser, Debug)]
#[command(
    version,
    about = "Owns a crawl: seeds, frontier, de-duplication, domain assignment"
)]
pub struct Flags {
    /// ZeroMQ endpoint supervisors connect to.
    #[arg(long, env = "CRAWLER_BIND", default_value = "tcp://127.0.0.1:5555")]
    pub bind: String,
    /// Seeds file: one URL per line, `#` comments. Seeds are also read from the `seeds` collection.
    #[arg(long)]
    pub seeds: Vec<PathBuf>,
    /// Crawl name: the crawl's collections are named after it (see
    /// `store::crawl_id`), so another name on the same database is another
    /// crawl, and the same name resumes this one.
    #[arg(long, default_value = store::CrawlId::DEFAULT)]
    pub crawl_id: store::CrawlId,
    /// Links deeper than this many hops from a seed are not followed.
    #[arg(long, default_value_t = 16)]
    pub max_depth: u16,
    /// Stop admitting URLs after this many (0 = no limit).
    #[arg(long, default_value_t = 0)]
    pub max_pages: u64,
    /// Where the crawl may go: the seeds' hosts and ports (`seeds`), the
    /// seeds' sites, their registered domains with every subdomain, from
    /// the Public Suffix List (`site`), or anywhere (`any`).
    #[arg(long, value_enum, default_value_t = ScopeKind::Seeds)]
    pub scope: ScopeKind,
    /// Refuse URLs this regular expression matches (repeatable; each
    /// rule's refusals are counted in the summary's `refused_by_rule`).
    #[arg(long)]
    pub deny_url: Vec<String>,
    /// Crawl only URLs that one of these regular expressions matches
    /// (repeatable); within --scope, never beyond it.
    #[arg(long)]
    pub allow_url: Vec<String>,
    /// Refuse URLs under this SURT prefix: `http://(com,example,ads,` is
    /// ads.example.com and its subdomains over http, `(com,example,` any
    /// scheme (repeatable).
    #[arg(long)]
    pub deny_surt: Vec<String>,
    /// Crawl only URLs under one of these SURT prefixes (repeatable),
    /// within --scope.
    #[arg(long)]
    pub allow_surt: Vec<String>,
    /// Most URLs admitted per domain (host and port), 0 for no limit.
    /// Those past it are stored as deferred (a later run with a larger
    /// budget crawls them) and counted as `over_domain_budget`. Why 10,000:
    /// see dispatcher/src/limits.rs.
    #[arg(long, default_value_t = crate::limits::DEFAULT_MAX_PAGES_PER_DOMAIN)]
    pub max_pages_per_domain: u32,
    /// Most distinct queries admitted per path of a domain (a calendar or
    /// a faceted search is one path with endless queries), 0 for no
    /// limit; past it as for --max-pages-per-domain (`over_query_budget`).
    #[arg(long, default_value_t = crate::limits::DEFAULT_MAX_QUERY_VARIANTS)]
    pub max_query_variants: u32,
    /// Refuse URLs whose path has more segments than this (0: no limit;
    /// Heritrix's default).
    #[arg(long, default_value_t = admission::PathTraps::DEFAULT.max_segments)]
    pub max_path_segments: usize,
    /// Refuse URLs whose path repeats a run of segments more than this
    /// many times in a row (`/a/b/a/b/a/b/`), or has one segment more than
    /// once beyond it (0: no limit; Heritrix's default).
    #[arg(long, default_value_t = admission::PathTraps::DEFAULT.max_repeats)]
    pub max_path_repeats: usize,
    /// Parameters removed from links' queries and path parameters before
    /// the seen-check (comma-separated or repeated; `name*` is a prefix,
    /// case does not matter; `none` removes none). The default is the
    /// session ids and tracking parameters in shared/src/canonical.rs
    /// (`sid`, `jsessionid`, `phpsessid`, `utm_*`, `fbclid`, ...).
    #[arg(long, value_delimiter = ',')]
    pub strip_params: Vec<String>,
    /// Keep links' query parameters in the order pages write them (they
    /// are sorted by default, so `?a=1&b=2` and `?b=2&a=1` are one URL).
    #[arg(long)]
    pub keep_query_order: bool,
    /// Do not hand out work until this many supervisors have joined, so
    /// domains spread over all of them.
    #[arg(long, default_value_t = 1)]
    pub min_supervisors: usize,
    /// URLs of one domain out at once (across the cluster).
    #[arg(long, default_value_t = 16)]
    pub max_inflight_per_domain: u32,
    /// A leased URL not reported within this time is handed out again.
    #[arg(long, default_value_t = 300)]
    pub lease_secs: u64,
    /// Queued URLs the dispatcher keeps in memory (about 130 bytes each)
    /// before it keeps only a window of each domain's queue and leaves the
    /// rest in the store, read a window at a time: one index seek per
    /// domain (about 0.1 ms on mongod; on nx-27017 a few ms of its one
    /// thread, so a crawl there runs faster with the budget above its
    /// queue).
    #[arg(long, default_value_t = 1_000_000)]
    pub frontier_memory_urls: usize,
    /// Past --frontier-memory-urls: URLs of one domain kept in memory (or
    /// fewer: --frontier-memory-urls over the domains known, but at least
    /// twice --max-inflight-per-domain); the rest of its queue stays in
    /// the store and is read in as the window empties (a read per half
    /// window).
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..))]
    pub frontier_window: u32,
    /// Past --frontier-memory-urls: the most domains that hold a window at
    /// once (0: --frontier-memory-urls over twice
    /// --max-inflight-per-domain, at least 1,024). The others wait with
    /// their queues wholly in the store and take turns, a window each.
    #[arg(long, default_value_t = 0)]
    pub frontier_active_domains: usize,
    /// A domain with no URL queued or out and no result for this long is
    /// forgotten, so the dispatcher holds the domains with work rather
    /// than every domain met; met again, it starts afresh, perhaps at
    /// another node. Never less than the longest gap a child may keep
    /// between two requests to a domain (--min-delay-ms,
    /// --max-crawl-delay-ms, --max-domain-rps) plus 2 s, so that the
    /// domain's last-crawled time is in the second store before it moves.
    #[arg(long, default_value_t = 60_000)]
    pub forget_idle_domains_ms: u64,
    /// How a link whose 64-bit hash was seen before is judged: `hash`
    /// takes it for known (a hash collision drops a new URL: about 3 crawls
    /// in 10,000 at 100 million URLs); `store` takes it for known only if
    /// it is among the --seen-recent-urls last admitted, and otherwise
    /// inserts it, for the frontier's unique index to decide (a store
    /// write, and a lookup by `_id`, per such link).
    #[arg(long, value_enum, default_value_t = SeenCheck::Hash)]
    pub seen_check: SeenCheck,
    /// With --seen-check store: URLs kept whole (about 130 bytes each) to
    /// tell a repeated link without the store.
    #[arg(long, default_value_t = 200_000)]
    pub seen_recent_urls: usize,
    /// Links a restarted crawl holds in memory (about 200 bytes each)
    /// while it reads its stored URLs back, before it holds the rest in a
    /// temporary file and goes on leasing; they are judged once the read
    /// ends.
    #[arg(long, default_value_t = 500_000)]
    pub held_links_memory: usize,
    /// A supervisor silent this long is considered dead; its work is re-queued.
    #[arg(long, default_value_t = 15)]
    pub heartbeat_timeout_secs: u64,
    /// Seconds between progress lines on stderr (0 = none).
    #[arg(long, default_value_t = 1.0)]
    pub progress_secs: f64,
    /// Seconds between JSON monitoring lines (`monitor {...}`) on stderr (0 = none).
    #[arg(long, default_value_t = 5.0)]
    pub monitor_secs: f64,
    /// Circuit breaker: the sliding window of outcomes per domain.
    #[arg(long, default_value_t = 60)]
    pub breaker_window_secs: u64,
    /// Circuit breaker: pause a domain when more than this share of its
    /// outcomes in the window are errors (5xx, 429, 403, timeouts, connection errors).
    #[arg(long, default_value_t = 0.10)]
    pub breaker_error_share: f64,
    /// Circuit breaker: how long a tripped domain pauses.
    #[arg(long, default_value_t = 60)]
    pub breaker_pause_secs: u64,
    /// Circuit breaker: halt a domain after this many failures in a row (0 = never).
    #[arg(long, default_value_t = 50)]
    pub breaker_halt_after: u32,
    /// Clear the halt of this domain at start-up (repeatable). A running
    /// dispatcher is un-halted with `scripts/unhalt.sh` instead.
    #[arg(long)]
    pub unhalt: Vec<String>,
    /// Also write the final summary JSON to this file.
    #[arg(long)]
    pub summary_file: Option<PathBuf>,
    /// Settings file (TOML) holding any of these flags under their names
    /// (`min-delay-ms = 500`); the command line and the environment win
    /// over it. See dispatcher/src/config.rs.
    #[arg(long, env = super::CONFIG_ENV)]
    pub config: Option<PathBuf>,

    // --- crawl policy, pushed to every child ---
    /// User-Agent header. Required (the default names no one) when a seed
    /// is on the open web rather than on a reserved test name or loopback.
    #[arg(long, default_value = crate::DEFAULT_USER_AGENT)]
    pub user_agent: String,
    /// Product token matched against robots.txt User-agent lines.
    #[arg(long, default_value = "synthcrawler")]
    pub robots_agent: String,
    /// Minimum gap between two requests to one domain: from the end of
    /// one response to the next request, and between two request starts.
    #[arg(long, default_value_t = 1000)]
    pub min_delay_ms: u64,
    /// Minimum gap between two requests to one server (IP address), across
    /// all of its host names and all nodes: a server hosting many names
    /// (virtual hosting, a site of many sub-domains) sees at most one
    /// request at a time, the next starting at least this long after the
    /// last response ended. Enforced together with --min-delay-ms.
    /// Default: 250 ms for public addresses found through DNS, none for
    /// the addresses an operator named (names given to supervisors with
    /// --resolve/--hosts-file, internal addresses allowed with
    /// --allow-private-networks), which are paced by server only when
    /// this flag is given. 0: servers are not paced, only domains.
    /// See docs/open-web.md ("Per-server politeness").
    #[arg(long)]
    pub min_ip_delay_ms: Option<u64>,
    /// Requests to one domain in flight at once, for domains crawled with
    /// no delay (`--min-delay-ms 0` and no Crawl-delay). A domain with a
    /// delay gets one request at a time, the next starting at least the
    /// delay after the last response ended, so the server never sees two
    /// requests closer than the delay.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub max_domain_connections: u32,
    /// Optional ceiling on requests per second to one domain (0 = none).
    #[arg(long, default_value_t = 0.0)]
    pub max_domain_rps: f64,
    /// Upper bound for a site's Crawl-delay.
    #[arg(long, default_value_t = 30_000)]
    pub max_crawl_delay_ms: u64,
    /// How long a fetched robots.txt is trusted.
    #[arg(long, default_value_t = 86_400)]
    pub robots_ttl_secs: u64,
    #[arg(long, default_value_t = 10_000)]
    pub connect_timeout_ms: u64,
    /// Whole request, body included.
    #[arg(long, default_value_t = 30_000)]
    pub request_timeout_ms: u64,
    /// Bodies are cut (and marked truncated) beyond this size.
    #[arg(long, default_value_t = 10 * 1024 * 1024)]
    pub max_body_bytes: u64,
    #[arg(long, default_value_t = 10)]
    pub max_redirects: u32,
    /// Do not follow rel=nofollow links.
    #[arg(long)]
    pub skip_nofollow: bool,
    /// Links kept per page (the first ones, in page order); the rest are
    /// counted in the page's `outlinks_dropped`. 2,000 keeps every link of
    /// nearly all pages, long navigation and list pages included (Nutch's
    /// default of 100 cuts those), while a hostile page of a million links
    /// costs at most 2,000 × 2 KiB in a result.
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub max_outlinks_per_page: u32,
    /// Fetches one child runs at once.
    #[arg(long, default_value_t = 64)]
    pub child_concurrency: u32,
    /// Let children fetch from internal addresses: loopback, private
    /// (RFC 1918), link-local (cloud metadata), CGNAT, unique-local and the
    /// other special-purpose blocks. Off by default, so a page cannot make
    /// the crawler request the operator's own network; for intranet crawls.
    /// Names given to supervisors with --resolve/--hosts-file are trusted
    /// without it.
    #[arg(long, env = "CRAWLER_ALLOW_PRIVATE_NETWORKS")]
    pub allow_private_networks: bool,
    /// Store the bodies of non-HTML responses too (PDFs, images, feeds;
    /// each up to --max-body-bytes), compressed, so a WARC export holds
    /// them. Off by default: they are recorded (status, headers, size)
    /// without the body.
    #[arg(long)]
    pub keep_non_html_bodies: bool,
    /// When an origin's robots.txt names no sitemap, ask for
    /// /sitemap.xml (once per origin, with its first page; checked
    /// against robots.txt like any URL). Finds the sitemaps of sites that
    /// publish one without saying so, at the cost of a request per origin
    /// that most answer 404. Off by default.
    #[arg(long)]
    pub guess_sitemap: bool,
    /// Fetch every stored page again this long after it was last asked
    /// for (e.g. 1d), conditionally (If-None-Match, If-Modified-Since).
    /// The crawl then keeps running, crawling new URLs and what is due,
    /// until it is stopped (`crawlctl stop`, SIGTERM). Unset: each URL
    /// once, and the crawl ends by itself. See docs/revisits.md.
    #[arg(long, value_parser = shared::revisit::parse_duration)]
    pub revisit_after: Option<Duration>,
    /// Give each page its own interval, starting at --revisit-after: a
    /// fifth shorter after a visit that found a change, two fifths longer
    /// after one that did not, within --revisit-min and --revisit-max.
    #[arg(long, requires = "revisit_after")]
    pub revisit_adaptive: bool,
    /// The adaptive interval's floor (default: a quarter of --revisit-after).
    #[arg(long, value_parser = shared::revisit::parse_duration, requires = "revisit_adaptive")]
    pub revisit_min: Option<Duration>,
    /// The adaptive interval's ceiling (default: 8 times --revisit-after).
    #[arg(long, value_parser = shared::revisit::parse_duration, requires = "revisit_adaptive")]
    pub revisit_max: Option<Duration>,
    /// Record only revisits that found a change (no capture, and no WARC
    /// revisit record, for a 304 or an identical payload; the page's due
    /// time still moves).
    #[arg(long, requires = "revisit_after")]
    pub revisit_changes_only: bool,

    #[command(flatten)]
    pub store: StoreArgs,
    #[command(flatten)]
    pub obs: ObsArgs,
    #[command(flatten)]
    pub cluster: ClusterArgs,
}

impl Flags {
    pub(crate) fn breaker(&self) -> breaker::BreakerConfig {
        breaker::BreakerConfig {
            window: std::time::Duration::from_secs(self.breaker_window_secs),
            error_share: self.breaker_error_share,
            pause: std::time::Duration::from_secs(self.breaker_pause_secs),
            halt_after: self.breaker_halt_after,
            ..breaker::BreakerConfig::default()
        }
    }

    /// --forget-idle-domains-ms, raised to the longest gap a child may
    /// keep between two requests to a domain plus 2 s: the child writes
    /// the domain's last-crawled time to the second store within a second
    /// (`crawler-child/src/politeness.rs`), and a new owner's child reads
    /// it from there.
    pub(crate) fn forget_idle_domains_ms(&self) -> u64 {
        let per_request = if self.max_domain_rps > 0.0 {
            // Clamped as the children clamp a wait (an hour at most).
            (1000.0 / self.max_domain_rps).min(3_600_000.0).ceil() as u64
        } else {
            0
        };
        let gap = self.min_delay_ms.max(self.max_crawl_delay_ms).max(per_request);
        self.forget_idle_domains_ms.max(gap.saturating_add(2_000))
    }

    /// The gap between two requests to one public server: --min-ip-delay-ms,
    /// or [`DEFAULT_SERVER_DELAY_MS`].
    pub(crate) fn server_delay_ms(&self) -> u64 {
        self.min_ip_delay_ms.unwrap_or(DEFAULT_SERVER_DELAY_MS)
    }

    /// The canonical URL rules (`--strip-params`, `--keep-query-order`).
    pub(crate) fn canonical(&self) -> shared::canonical::CanonicalRules {
        let strip_params = match self.strip_params.as_slice() {
            [] => shared::canonical::CanonicalRules::default().strip_params,
            [none] if none.eq_ignore_ascii_case("none") => Vec::new(),
            given => given.to_vec(),
        };
        shared::canonical::CanonicalRules {
            strip_params,
            sort_query: !self.keep_query_order,
        }
    }

    /// Scope, operator rules, trap rules and budgets.
    pub(crate) fn admission(&self) -> admission::AdmissionSettings {
        admission::AdmissionSettings {
            scope: self.scope,
            rules: admission::RuleSpecs {
                allow_url: self.allow_url.clone(),
                deny_url: self.deny_url.clone(),
                allow_surt: self.allow_surt.clone(),
                deny_surt: self.deny_surt.clone(),
            },
            traps: admission::PathTraps {
                max_segments: self.max_path_segments,
                max_repeats: self.max_path_repeats,
            },
            max_pages_per_domain: self.max_pages_per_domain,
            max_query_variants: self.max_query_variants,
        }
    }

    pub(crate) fn policy(&self) -> CrawlPolicy {
        CrawlPolicy {
            server_delay_ms: self.server_delay_ms(),
            named_server_delay_ms: self.min_ip_delay_ms.unwrap_or(0),
            crawl_id: self.crawl_id.to_string(),
            user_agent: self.user_agent.clone(),
            robots_agent: self.robots_agent.clone(),
            min_delay_ms: self.min_delay_ms,
            max_domain_connections: self.max_domain_connections,
            max_domain_rps: self.max_domain_rps,
            max_crawl_delay_ms: self.max_crawl_delay_ms,
            robots_ttl_secs: self.robots_ttl_secs,
            connect_timeout_ms: self.connect_timeout_ms,
            request_timeout_ms: self.request_timeout_ms,
            max_body_bytes: self.max_body_bytes,
            max_redirects: self.max_redirects,
            skip_nofollow: self.skip_nofollow,
            max_outlinks_per_page: self.max_outlinks_per_page,
            child_concurrency: self.child_concurrency,
            allow_private_networks: self.allow_private_networks,
            keep_non_html_bodies: self.keep_non_html_bodies,
            guess_sitemap: self.guess_sitemap,
            canonical: self.canonical(),
            heartbeat_timeout_ms: self.heartbeat_timeout_secs.saturating_mul(1000),
            revisit: self.revisit().map(Box::new),
        }
    }

    /// The revisit rule (`--revisit-*`), unchecked ([`RevisitPolicy::check`]
    /// is `crate::config::load`'s).
    pub(crate) fn revisit(&self) -> Option<RevisitPolicy> {
        let after = self.revisit_after?;
        let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        let every = RevisitPolicy::every(after);
        Some(RevisitPolicy {
            adaptive: self.revisit_adaptive,
            min_ms: match (self.revisit_adaptive, self.revisit_min) {
                (false, _) => every.min_ms,
                (true, Some(min)) => ms(min),
                (true, None) => (every.after_ms / 4).max(1000),
            },
            max_ms: match (self.revisit_adaptive, self.revisit_max) {
                (false, _) => every.max_ms,
                (true, Some(max)) => ms(max),
                (true, None) => every.after_ms.saturating_mul(8),
            },
            record_unchanged: !self.revisit_changes_only,
            ..every
        })
    }
}
