//! What the crawl takes over from an earlier run: how many stored URLs
//! were finished and how many queued, and the URLs found finished by
//! their stored page whose links are offered again (`state/relink.rs`;
//! also those of leases that ended unanswered).
//!
//! Invariants:
//! - `resumed` is (finished, queued) URLs of the stored frontier: set by
//!   the summary, and a URL moves from one to the other as it is read
//!   back ([`Resumption::queued_one`], [`Resumption::finished_one`]);
//!   neither goes below 0.
//! - A URL found finished is in `relinks` until its links were read and
//!   offered; until then its domain's progress stays below it.

use std::collections::HashMap;

use super::inputs::StoredFrontier;
use super::relink::Relinks;
use crate::frontier::Relink;

#[derive(Debug, Default)]
pub(crate) struct Resumption {
    /// (finished, queued) entries read back from the stored frontier.
    resumed: (u64, u64),
    /// Entries found finished by their stored page, whose links are
    /// offered again.
    relinks: Relinks,
}

impl Resumption {
    /// The summary of the stored frontier: with `whole`, every URL is
    /// counted finished until read back as queued.
    pub(crate) fn summary(&mut self, s: &StoredFrontier) {
        self.resumed = if s.whole {
            // Counted as each is read back.
            (s.urls, 0)
        } else {
            (s.finished(), s.queued())
        };
    }

    /// A URL read back at start-up is queued.
    pub(crate) fn queued_one(&mut self) {
        self.resumed.0 = self.resumed.0.saturating_sub(1);
        self.resumed.1 += 1;
    }

    /// A URL counted queued was found finished by its page when its
    /// window was read: its links are offered again.
    pub(crate) fn finished_one(&mut self, r: Relink) {
        self.resumed.0 += 1;
        self.resumed.1 = self.resumed.1.saturating_sub(1);
        self.relinks.found(r);
    }

    /// A URL found finished (at start-up, or a lease that ended
    /// unanswered): its links are offered again.
    pub(crate) fn found(&mut self, r: Relink) {
        self.relinks.found(r);
    }

    /// (finished, queued) URLs resumed from the store.
    pub(crate) fn resumed(&self) -> (u64, u64) {
        self.resumed
    }

    /// The next batch of links to read, if one may be read now.
    pub(crate) fn next_read(&mut self) -> Option<Vec<Relink>> {
        self.relinks.next_read()
    }

    /// A read of links came back; `failed`: its URLs are read again.
    pub(crate) fn answered(&mut self, asked: &[Relink], failed: bool) {
        self.relinks.answered(asked, failed);
    }

    /// No link waits to be read or is being read.
    pub(crate) fn is_idle(&self) -> bool {
        self.relinks.is_idle()
    }

    /// The lowest `seq` of each domain's URLs whose links wait, by name.
    pub(crate) fn lowest_open(&self, open: &mut HashMap<String, i64>) {
        self.relinks.lowest_open(open);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::inputs::StoredQueue;

    fn relink(seq: i64) -> Relink {
        Relink {
            url: format!("http://a.test/{seq}"),
            depth: 1,
            domain: "a.test".into(),
            seq,
        }
    }

    #[test]
    fn urls_move_between_finished_and_queued_as_they_are_read() {
        let mut r = Resumption::default();
        let mut s = StoredFrontier {
            urls: 10,
            queues: vec![StoredQueue {
                domain: "a.test".into(),
                count: 4,
                first_seq: 1,
            }],
            last_seq: 10,
            ..StoredFrontier::default()
        };
        r.summary(&s);
        assert_eq!(r.resumed(), (6, 4));
        r.finished_one(relink(3));
        assert_eq!(r.resumed(), (7, 3));
        assert!(!r.is_idle());
        s.read_whole();
        r.summary(&s);
        assert_eq!(r.resumed(), (10, 0));
        r.queued_one();
        assert_eq!(r.resumed(), (9, 1));
    }

    #[test]
    fn a_finished_url_holds_its_domain_back_until_its_links_are_read() {
        let mut r = Resumption::default();
        r.found(relink(5));
        let mut open = HashMap::new();
        r.lowest_open(&mut open);
        assert_eq!(open.get("a.test"), Some(&5));
        let batch = r.next_read().unwrap();
        r.answered(&batch, false);
        assert!(r.is_idle());
        let mut open = HashMap::new();
        r.lowest_open(&mut open);
        assert!(open.is_empty());
    }
}
