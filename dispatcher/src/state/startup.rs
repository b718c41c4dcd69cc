//! Start-up: what an earlier run left, taken over (see `crate::resume`
//! for how the shell reads it): domains halted before, the stored
//! frontier's summary or every queued URL, the stored URLs for the
//! seen-set, and the seeds. The counts are [`Resumption`]'s and the
//! seen-set and the `seq`s [`Intake`]'s; this file drives them with the
//! frontier.
//!
//! [`Resumption`]: super::resumption::Resumption
//! [`Intake`]: super::intake::Intake

use super::{CrawlState, Resumed, ScannedUrl, StoredFrontier};
use crate::frontier::Relink;

/// Held links offered again from their file a tick (every 50 ms): up to
/// a million a second, a few milliseconds of the loop each time when they
/// are known.
const HELD_SLICE: usize = 50_000;

impl<C> CrawlState<C> {
    /// A domain halted in an earlier run.
    pub(crate) fn halted_before(&mut self, domain: &str) {
        self.frontier.halt(domain);
    }

    /// One queued URL of the stored frontier, read back at start-up (when
    /// they all fit in memory). `finished`: its page is stored or it ended
    /// without one (`crate::finished`), so it is not queued; a stored
    /// page's links are offered again.
    pub(crate) fn resume(&mut self, d: Resumed, finished: bool) {
        if finished {
            // Placed as a queued one would be: behind its domain's cursor
            // (done with: its links are offered again now), or counted in
            // the store, where its window's read meets it again and finds
            // it finished then.
            if self.frontier.resume_finished(&d.domain, d.seq) {
                self.resumption.found(Relink {
                    url: d.url,
                    depth: d.depth,
                    domain: d.domain,
                    seq: d.seq,
                });
            }
            return;
        }
        self.resumption.queued_one();
        self.frontier.resume_queued(d.url, &d.domain, d.depth, d.seq);
    }

    /// Resumes from a summary of the stored frontier (`crate::resume`):
    /// each domain's queue is read from the store window by window (or
    /// every queued URL read back at once, [`CrawlState::resume`], when
    /// they fit in memory), and the stored URLs' hashes arrive later
    /// ([`CrawlState::seen_stored`]); until [`CrawlState::seen_rebuilt`]
    /// a link whose hash is not known yet is held back.
    pub(crate) fn resume_summary(&mut self, s: &StoredFrontier) {
        self.intake.resume_summary(s);
        self.resumption.summary(s);
        if s.whole {
            // Counted as each is read back.
            return;
        }
        // Each domain's reads go up to the frontier's highest `seq` (the
        // summary does not give each domain's own): no URL of the domain
        // lies between the two, so the reads find the same URLs.
        for q in &s.queues {
            self.frontier
                .resume_spilled(&q.domain, q.count, q.first_seq, s.last_seq);
        }
    }

    /// Whether every queued URL of a stored frontier fits the frontier's
    /// memory budget, so that start-up reads them all back at once
    /// ([`StoredFrontier::read_whole`]) rather than window by window.
    pub(crate) fn queues_fit(&self, s: &StoredFrontier) -> bool {
        self.frontier.fits(s.queued())
    }

    /// Stored URLs read in for the seen-set; each but the deferred ones
    /// counts against its budgets as when it was admitted. A deferred one
    /// that is not over its budget already is kept to be taken up once
    /// every stored URL is counted (counts only grow, so one over its
    /// budget now stays over), unless the stored frontier also holds it
    /// queued (an earlier run took it up: its queued copy comes later in
    /// the scan's order, which is the order of admission).
    pub(crate) fn seen_stored(&mut self, urls: Vec<ScannedUrl>) {
        self.intake.seen_stored(urls);
    }

    /// Every stored URL was read in: the seen-set judges alone again, the
    /// links held back meanwhile and the seeds that waited for it are
    /// offered, and deferred URLs that the budgets now let in are queued
    /// again.
    pub(crate) fn seen_rebuilt(&mut self, now_ms: u64) {
        let (held, seeds) = self.intake.rebuilt();
        for (url, depth) in held {
            self.offer(&url, depth, now_ms);
        }
        for s in seeds {
            self.offer(&s, 0, now_ms);
        }
        // Each under a new `seq`, in the order they were stored.
        for (url, domain, depth) in self.intake.take_up_deferred(&mut self.stats.counts) {
            self.queue_new(url, domain, depth, now_ms);
        }
    }

    /// Offers again a slice of the links held in a file while the stored
    /// URLs were read in (none before they are all read), unless the
    /// store's writer is behind: a slice's new URLs are its inserts.
    pub(crate) fn offer_held_from_file(&mut self, now_ms: u64) {
        if self.flow.writer_behind() {
            return;
        }
        for (url, depth) in self.intake.held_from_file(HELD_SLICE) {
            self.offer(&url, depth, now_ms);
        }
    }

    /// The read of stored URLs ended early (it retries every page until
    /// the store answers, so only when its task died): the seen-set is
    /// taken as whole, with an error in the log, so that the crawl goes on;
    /// a stored URL it did not read may be crawled again (its page is
    /// stored once all the same).
    pub(crate) fn seen_scan_failed(&mut self, now_ms: u64) {
        self.intake.forget_deferred();
        self.seen_rebuilt(now_ms);
    }

    /// (finished, queued) URLs resumed from the store.
    pub(crate) fn resumed(&self) -> (u64, u64) {
        self.resumption.resumed()
    }

    /// The seeds, after the stored frontier: their domains are the scope
    /// (with `scope_to_seeds`), and those not seen before are admitted.
    ///
    /// While the stored URLs' hashes are still being read in, the seeds
    /// wait for them ([`CrawlState::seen_rebuilt`]); the crawl is not done
    /// before. A resumed crawl's seeds are nearly all stored already, and
    /// until then none can be judged.
    pub(crate) fn seed(&mut self, seeds: &[String], now_ms: u64) {
        if !self.intake.seed(seeds) {
            return;
        }
        for s in seeds {
            self.offer(s, 0, now_ms);
        }
    }

    /// Seeds waiting for the seen-set (see [`CrawlState::seed`]).
    pub(crate) fn waiting_seeds(&self) -> usize {
        self.intake.waiting_seeds()
    }
}
