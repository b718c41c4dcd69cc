//! What the shell hands the core: the answers of the store reads it
//! carried out for effects ([`Answer`]), and what start-up read of a
//! stored frontier ([`StoredFrontier`], [`Resumed`], [`ScannedUrl`]).
//! Defined here, in the core, so that the core imports nothing from the
//! files that do the I/O (`queue_reader`, `resume`, `finished`): they
//! build these values and import them from here.
//!
//! The counts of a [`StoredFrontier`] are estimates where a domain's
//! progress is inside its segments: see `crate::resume`.

use std::collections::{HashMap, HashSet};

use crate::frontier::{ReadPage, Refill, Relink, Stored, SupId};
use crate::revisits::{Due, DueRead};

/// URLs per look-up: a few hundred KB of `_id`s in one query.
pub(crate) const LOOK_UP_BATCH: usize = 1000;

/// A store read the shell carried out for an effect, answered (see
/// [`CrawlState::read_answered`](super::CrawlState::read_answered)).
pub(crate) enum Answer {
    Read(Refill, Result<ReadPage, String>),
    /// The held URLs of `sup` found queued in the store, of `asked`.
    Held {
        sup: SupId,
        asked: usize,
        found: Result<Vec<(u64, Stored)>, String>,
    },
    /// Which of `asked` (lease, URL) have a stored page.
    Checked {
        asked: Vec<(u64, String)>,
        stored: Result<HashSet<String>, String>,
    },
    /// The links of the stored pages of `asked`: (URL, links).
    Links {
        asked: Vec<Relink>,
        found: Result<Vec<(String, Vec<String>)>, String>,
    },
    /// The pages due for a revisit (`crate::revisits`).
    Due(DueRead, Result<Vec<Due>, String>),
}

/// A stored queued URL as start-up reads it back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Resumed {
    pub(crate) url: String,
    pub(crate) domain: String,
    pub(crate) depth: u16,
    pub(crate) seq: i64,
}

/// One domain's queue as the store holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StoredQueue {
    pub(crate) domain: String,
    /// Queued URLs (an estimate: see the module doc).
    pub(crate) count: u64,
    /// Where its reads start: the lowest `seq` of its queued segments, or
    /// its progress if that is further on.
    pub(crate) first_seq: i64,
}

/// What dispatching needs to know of a stored frontier.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct StoredFrontier {
    /// URLs in every segment: every URL the crawl admitted or deferred.
    pub(crate) urls: u64,
    pub(crate) queues: Vec<StoredQueue>,
    /// The highest `seq` stored (0 if none).
    pub(crate) last_seq: i64,
    /// Each domain's progress (`ProgressDoc::below`), for `resume::read_back`.
    pub(crate) progress: HashMap<String, i64>,
    /// The `seq`s of the URLs past their domain's progress that ended
    /// without a page (failed, disallowed): finished.
    pub(crate) ended: HashSet<i64>,
    /// Every queued URL is to be read back at start-up (`resume::read_back`):
    /// no queue is left to read window by window.
    pub(crate) whole: bool,
}

impl StoredFrontier {
    /// Queued URLs (at most).
    pub(crate) fn queued(&self) -> u64 {
        self.queues.iter().fold(0u64, |n, q| n.saturating_add(q.count))
    }

    /// URLs stored that are not queued: finished, or deferred.
    pub(crate) fn finished(&self) -> u64 {
        self.urls.saturating_sub(self.queued())
    }

    /// Whether anything is stored at all.
    pub(crate) fn is_empty(&self) -> bool {
        self.urls == 0
    }

    /// Every queued URL is to be read back at start-up (they fit in
    /// memory).
    pub(crate) fn read_whole(&mut self) {
        self.whole = true;
    }
}

/// A stored URL, as the seen-set and the budgets need it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ScannedUrl {
    pub(crate) url: String,
    /// For a deferred one (found over a budget): its domain and depth,
    /// should this run's budget take it up.
    pub(crate) deferred: Option<(String, u16)>,
}
