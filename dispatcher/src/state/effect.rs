//! What the state machine asks the shell to do: [`Effect`]s, carried out
//! in order after each event (`crawl.rs`); the answers of the store
//! reads among them come back as `state::inputs::Answer`.

use link::protocol::{FailureKind, ToSupervisor};
use store::docs::{ControlDoc, Deferral, UrlState};

use crate::frontier::{LookUp, Refill, Relink, SupId};
use crate::revisits::DueRead;

/// What the shell must do, in this order, after an event.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Effect {
    /// A message for supervisor `s`, sealed with its connection's key.
    Send(SupId, ToSupervisor),
    /// A newly admitted URL for the stored frontier (`seq`: its place in
    /// its domain's queue).
    Insert {
        url: String,
        domain: String,
        depth: u16,
        seq: i64,
        /// An unsure URL: the writer must say whether the store took it
        /// ([`CrawlState::confirmed`](super::CrawlState::confirmed)).
        confirm: bool,
    },
    /// A URL that finished without a page (failed, disallowed), for the
    /// stored frontier's outcomes.
    Ended {
        url: String,
        seq: i64,
        state: UrlState,
        failure: Option<FailureKind>,
    },
    /// A URL over a budget, for the stored frontier as deferred (known,
    /// not crawled; a later run with a larger budget takes it up).
    Defer {
        url: String,
        domain: String,
        depth: u16,
        seq: i64,
        why: Deferral,
    },
    /// Domains' progress for the stored frontier: (domain, the `seq`
    /// below which every URL of it is finished; see `frontier::progress`).
    Progress(Vec<(String, i64)>),
    /// Read the next URLs of a domain's queue from the store; the answer
    /// comes back as [`CrawlState::read_answered`](super::CrawlState::read_answered).
    Read(Refill),
    /// A read of the pages due for a revisit (see `crate::revisits`).
    ReadDue(DueRead),
    /// Look up URLs a joining supervisor holds in the store: (lease, URL).
    LookUp(SupId, Vec<LookUp>),
    /// Ask the store which of these URLs, whose leases ended without a
    /// result, have a stored page: (lease, URL); the answer comes back as
    /// [`CrawlState::read_answered`](super::CrawlState::read_answered) (`frontier/unanswered.rs`).
    CheckStored(Vec<(u64, String)>),
    /// Read the links of these stored pages: URLs found finished after a
    /// restart (`crate::finished`); the answer comes back as
    /// [`CrawlState::read_answered`](super::CrawlState::read_answered).
    ReadLinks(Vec<Relink>),
    /// Record a domain's halt (`Some(reason)`) or clear it, in the second
    /// store, so that a restarted dispatcher keeps it.
    RecordHalt { domain: String, reason: Option<String> },
    /// Record what an operator changed (see `crate::control`), so that a
    /// restarted dispatcher keeps it.
    RecordControl(ControlDoc),
    /// Seeds an operator added, for the seeds collection.
    StoreSeeds(Vec<String>),
    /// The supervisor with this id has no live connection any more.
    Gone(String),
}
