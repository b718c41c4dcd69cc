//! Crawl counters, the live progress line and the final summary.

use std::collections::BTreeMap;
use std::time::Instant;

use link::protocol::{FailureKind, Outcome};
use serde::Serialize;

#[derive(Default, Serialize)]
pub(crate) struct Counts {
    /// Responses received, any status.
    pub fetched: u64,
    pub status: BTreeMap<u16, u64>,
    pub disallowed: u64,
    /// Failures that will not be retried, by kind.
    pub failed: BTreeMap<String, u64>,
    pub retried: u64,
    /// Outcomes that count against a domain's health (retried ones included).
    pub error_outcomes: u64,
    pub new_urls: u64,
    pub out_of_scope: u64,
    /// New links not admitted, by reason: operator rules, trap rules and
    /// budgets (`crate::admission`; out of scope is `out_of_scope`).
    pub refused: BTreeMap<&'static str, u64>,
    /// Links deny rules refused, by rule (`deny-url:PATTERN`, `deny-surt:PREFIX`).
    pub refused_by_rule: BTreeMap<String, u64>,
    /// Links that reached the dispatcher in another form than their
    /// canonical one (children send canonical links: this stays 0 unless
    /// one is older or misbehaves).
    pub canonicalized: u64,
    /// Deferred URLs of earlier runs this run queued (its budgets grew).
    pub deferred_taken_up: u64,
    /// Stored entries of earlier runs found finished by their page, whose
    /// links were offered again (`crate::finished`): each is a fetch a
    /// restart did not make again.
    pub relinked: u64,
    /// Links found while the stored URLs were read in after a restart
    /// whose hash was not read in yet: held back and judged once it was
    /// (`crate::seen`).
    pub held_links: u64,
    /// Of `held_links`, those held in a file because too many were held
    /// in memory (`state::held`).
    pub held_links_in_file: u64,
    /// Leases that ended without their result (a supervisor left, a lease
    /// ran out) whose page the store already held: not fetched again.
    pub finished_unanswered: u64,
    /// URLs handed back unfetched, because their holder's right to crawl
    /// had run out (it lost the dispatcher; `link::fence`) or their
    /// domain was moving to another node (`frontier::rebalance`): queued
    /// again, first, no try counted.
    pub handed_back: u64,
    /// URLs a supervisor held, or results it sent again, after it rejoined
    /// (it was given up, or reconnected), for URLs finished or handed out
    /// elsewhere meanwhile: dropped as duplicates. A page is stored once,
    /// and the links of one its children stored come from the stored page.
    pub stale_results: u64,
    pub too_deep: u64,
    pub over_page_limit: u64,
    pub bad_links: u64,
    pub leases_expired: u64,
    /// Links whose hash was seen before but not the link itself, checked
    /// against the store (`--seen-check store`), and what the store said:
    /// new (a hash collision, a URL a hash-only seen-set would have
    /// dropped) or known.
    pub unsure_links: u64,
    pub unsure_new: u64,
    pub unsure_known: u64,
    /// Body bytes received, over every response (as reported by children,
    /// each at most `--max-body-bytes`).
    pub bytes_fetched: u64,
}

pub(crate) struct Stats {
    pub started: Instant,
    pub started_at: std::time::SystemTime,
    pub counts: Counts,
    last_fetched: u64,
    last_at: Instant,
}

impl Stats {
    pub(crate) fn new() -> Self {
        let now = Instant::now();
        Stats {
            started: now,
            started_at: std::time::SystemTime::now(),
            counts: Counts::default(),
            last_fetched: 0,
            last_at: now,
        }
    }

    pub(crate) fn record(&mut self, outcome: &Outcome) {
        match outcome {
            Outcome::Fetched { status, bytes, .. } => {
                self.counts.fetched += 1;
                self.counts.bytes_fetched = self.counts.bytes_fetched.saturating_add(*bytes);
                *self.counts.status.entry(*status).or_default() += 1;
                crate::metric::DISPATCHER_RESULTS.at(["fetched"]).increment(1);
            }
            Outcome::Disallowed => {
                self.counts.disallowed += 1;
                crate::metric::DISPATCHER_RESULTS.at(["disallowed"]).increment(1);
            }
            Outcome::Failed { .. } => {
                crate::metric::DISPATCHER_RESULTS.at(["failed"]).increment(1);
            }
        }
    }

    pub(crate) fn failed_for_good(&mut self, kind: FailureKind) {
        *self.counts.failed.entry(kind.as_str().to_string()).or_default() += 1;
    }

    /// Error outcomes so far (including those retried).
    pub(crate) fn errors(&self) -> u64 {
        self.counts.error_outcomes
    }

    /// One human line: pages done, current and average rate, frontier, errors.
    pub(crate) fn progress_line(
        &mut self,
        queued: usize,
        in_flight: usize,
        supervisors: usize,
        blocked: (usize, usize),
    ) -> String {
        let now = Instant::now();
        let dt = now.duration_since(self.last_at).as_secs_f64().max(1e-3);
        let rate = (self.counts.fetched - self.last_fetched) as f64 / dt;
        self.last_fetched = self.counts.fetched;
        self.last_at = now;
        let elapsed = self.started.elapsed().as_secs_f64();
        format!(
            "[{elapsed:7.1}s] pages {:>8} | {rate:8.1} pages/s (avg {:.1}) | frontier {queued:>7} | in flight {in_flight:>5} | disallowed {} | errors {} | paused {} halted {} | supervisors {supervisors}",
            self.counts.fetched,
            self.counts.fetched as f64 / elapsed.max(1e-3),
            self.counts.disallowed,
            self.errors(),
            blocked.0,
            blocked.1,
        )
    }
}

/// The end-of-crawl report (printed as one JSON object on stdout).
#[derive(Serialize)]
pub(crate) struct Summary<'a> {
    pub crawl_id: &'a str,
    /// RFC 3339, UTC.
    pub started_at: String,
    pub finished_at: String,
    pub finish_reason: FinishReason,
    pub elapsed_secs: f64,
    pub pages_per_sec: f64,
    pub frontier_left: usize,
    pub seen_urls: usize,
    /// Domains the frontier holds at the end: those with URLs queued or
    /// out, or a result in the last minute or two (it forgets the rest).
    pub domains: usize,
    /// Domains forgotten during the crawl, once each time.
    pub domains_forgotten: u64,
    /// Domains moved between supervisors to rebalance a crawl a node joined
    /// (`frontier::rebalance`).
    pub domains_moved: u64,
    pub supervisors: usize,
    /// The dispatcher's own store work, by collection and command
    /// (`store::work`; the children log theirs as they end).
    pub store_work: serde_json::Value,
    #[serde(flatten)]
    pub counts: &'a Counts,
    /// Every setting in force (command line, environment, config file or
    /// default; secrets hidden), see `config.rs`.
    pub settings: &'a serde_json::Value,
}

/// Why a crawl ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum FinishReason {
    /// Nothing left to crawl.
    Done,
    /// Nothing left, but `--max-pages` kept URLs out.
    MaxPages,
    /// Nothing left but URLs of halted domains (`scripts/unhalt.sh`, then
    /// run again to crawl them).
    Halted,
    /// Signalled (SIGTERM, SIGINT) or told to stop; the rest stays queued
    /// in the store for a resume.
    Stopped,
}

/// A time as RFC 3339 (UTC, to the millisecond).
pub(crate) fn rfc3339(t: std::time::SystemTime) -> String {
    bson::DateTime::from_system_time(t)
        .try_to_rfc3339_string()
        .unwrap_or_default()
}
