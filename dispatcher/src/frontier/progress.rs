//! Each domain's progress through its stored queue: the `seq` below which
//! every URL of the domain is finished, for the frontier writer to record
//! (`store::docs::ProgressDoc`), so that a restarted dispatcher reads each
//! queue from there rather than looking up the page of every URL the
//! crawl ever admitted.
//!
//! A URL of a domain is open from its admission until its result is
//! over: queued in its window or only in the store, out on a lease,
//! ended unanswered and waiting for the store's word, waiting for a retry,
//! or stored with its links still to be offered again (the last two are
//! the state machine's, which says where they are). A domain's progress
//! is the lowest `seq` among its open URLs, or past its last admitted URL
//! when none is open. The frontier writer records it only after every
//! segment and outcome sent before it, so a record never says a URL is
//! finished whose links or failure the store does not hold yet.
//!
//! Recorded for a domain once it has had [`PROGRESS_RESULTS`] results
//! since its last record (the crawl's setting; the tests record after
//! each), and when it is forgotten with results unrecorded (all of it is
//! finished then): so the records cost the store one statement per 64
//! pages at most, and a restart looks up the pages of at most 64 finished
//! URLs a domain; a stop records every domain.

use std::collections::HashMap;

use super::domains::DomainQ;
use super::Frontier;

/// Results a domain has before its progress is recorded again (at most
/// 255: see `DomainQ::unrecorded`).
pub(crate) const PROGRESS_RESULTS: u32 = 64;

impl Frontier {
    /// The progress to record, (domain, below): of each domain with
    /// `enough` results since its last record, and of those forgotten
    /// since the last call. `open`: the lowest `seq` of each domain's URLs
    /// that the crawl holds outside the frontier (retries waiting, stored
    /// pages whose links wait to be offered again), by name.
    pub(crate) fn progress(&mut self, open: &HashMap<String, i64>, enough: u32) -> Vec<(String, i64)> {
        let enough = enough.clamp(1, 255);
        let leased = self.leases.lowest_open();
        let mut out = std::mem::take(&mut self.progress_of_forgotten);
        for (id, d) in self.domains.iter_mut() {
            if d.unrecorded() < enough || d.window.last_seq() <= 0 {
                continue;
            }
            let lowest = [
                d.window.lowest_open(),
                leased.get(&id).copied(),
                open.get(d.name()).copied(),
            ]
            .into_iter()
            .flatten()
            .min();
            let below = lowest.unwrap_or_else(|| d.window.last_seq().saturating_add(1));
            d.recorded();
            out.push((d.name().to_string(), below));
        }
        out
    }

    /// A domain forgotten (nothing of it is open): its progress is past
    /// its last URL, recorded with the next [`Frontier::progress`] if it
    /// had results since its last record.
    pub(super) fn forgotten_progress(&mut self, d: &DomainQ) {
        if d.unrecorded() > 0 && d.window.last_seq() > 0 {
            self.progress_of_forgotten
                .push((d.name().to_string(), d.window.last_seq().saturating_add(1)));
        }
    }
}
