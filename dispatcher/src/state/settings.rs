//! What the crawl is allowed to do, as the state machine takes it: the
//! shell translates the command line into [`Settings`] (`crawl.rs`), the
//! tests write their own.

use shared::canonical::CanonicalRules;

use crate::admission::AdmissionSettings;
use crate::breaker::BreakerConfig;
use crate::seen::SeenCheck;

/// What the crawl is allowed to do, from the command line.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub(crate) max_depth: u16,
    /// 0: no limit.
    pub(crate) max_pages: u64,
    /// Where the crawl may go, trap rules and budgets.
    pub(crate) admission: AdmissionSettings,
    /// How links are made canonical before the seen-check (the children
    /// do it first; the dispatcher's word is the last).
    pub(crate) canonical: CanonicalRules,
    /// Supervisors to wait for before the first lease.
    pub(crate) min_supervisors: usize,
    pub(crate) heartbeat_timeout_ms: u64,
    pub(crate) max_inflight_per_domain: u32,
    pub(crate) lease_ms: u64,
    /// Past `memory_urls` queued URLs, each domain keeps `window` in memory.
    pub(crate) window: usize,
    pub(crate) memory_urls: usize,
    /// Past `memory_urls`, the most domains holding a window (0: derived
    /// from the budget; see `frontier::parking`).
    pub(crate) active_domains: usize,
    /// A domain with nothing left is forgotten this long after its last
    /// result (up to twice as long).
    pub(crate) forget_idle_domains_ms: u64,
    pub(crate) breaker: BreakerConfig,
    /// How a URL whose hash was seen before is judged (see `crate::seen`).
    pub(crate) seen_check: SeenCheck,
    /// With `SeenCheck::Store`: URLs kept whole to answer without the store.
    pub(crate) seen_recent_urls: usize,
    /// Links held in memory while the stored URLs are read in, before the
    /// rest go to a file (`state::held`).
    pub(crate) held_links_memory: usize,
    /// Frontier writes waiting past which leases are counted against the
    /// writes they will bring (`persist::MAX_WRITE_BACKLOG`).
    pub(crate) max_write_backlog: usize,
    /// Reads of domains' queues asked for and not answered yet, at most:
    /// what the queue reader can have under way and queued for its next
    /// round (`queue_reader::MAX_PENDING`). A tick asks for up to 64 every
    /// few tens of milliseconds whatever the store's pace: on a slow store
    /// with many domains, thousands would wait in the reader, be answered
    /// minutes later, and keep the store from the frontier writer's
    /// batches all that time.
    pub(crate) max_pending_reads: usize,
    /// Stored pages are fetched again when due (`--revisit-after`), and
    /// the crawl runs until stopped.
    pub(crate) revisit: bool,
    /// Results a domain has before its progress is recorded again
    /// (`frontier::progress`; tests: fewer).
    pub(crate) progress_results: u32,
}
