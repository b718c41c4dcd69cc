//! Which URLs the crawl has admitted: a 64-bit hash of each (not the URL;
//! in `crate::hash_set48`, the process grew by 7.6 to 11 bytes a hash
//! from 1 to 100 million, where a `HashSet<u64>` took 24 to 48), and in
//! front of the store's unique index when a hash alone cannot be trusted.
//!
//! A hash that was never seen means a new URL, for certain. A hash seen
//! before means the URL was admitted, unless two URLs share the hash (about
//! 3 crawls in 10,000 at 100 million URLs). With `SeenCheck::Store` such a
//! URL is not dropped on the hash's word: if it is among the most recently
//! admitted URLs, kept whole (`recent`), it is known; otherwise it is
//! inserted anyway into `<crawl>__urls` (where that mode writes every
//! admitted URL), whose unique `_id` index, the exact seen-set, keeps the
//! first copy; the frontier writer then says whether the store took it
//! (`persist::confirm`, one `_id` query a batch), and only then is it
//! queued (`Frontier::admit_unverified`, `confirmed`). The check is
//! batched with the frontier's other inserts, in the spirit of IRLbot's
//! DRUM.
//!
//! A restarted dispatcher reads the stored URLs' hashes in while it
//! crawls (`crate::resume`): until then a URL whose hash it has not met
//! is [`Seen::NotYet`], held back by the caller and judged again once the
//! set is whole (the frontier's segments hold many URLs a document, so no
//! store index can judge it instead).

use std::collections::{HashSet, VecDeque};
use std::sync::Arc;

use crate::hash_set48::HashSet48;

/// How a URL whose hash was seen before is judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SeenCheck {
    /// Known: a 64-bit hash collision drops a new URL.
    Hash,
    /// Known if recently admitted; otherwise checked against the store.
    Store,
}

/// What [`SeenSet::check`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Seen {
    /// Never seen: admit it.
    New,
    /// Admitted before.
    Known,
    /// Its hash was seen, but not the URL itself: only the store can tell.
    Unsure,
    /// The stored URLs are still being read in, and its hash is not among
    /// those read so far: ask again once [`SeenSet::rebuilt`]. Not counted
    /// as admitted.
    NotYet,
}

pub(crate) struct SeenSet {
    hashes: HashSet48,
    hasher: ahash::RandomState,
    check: SeenCheck,
    /// The last `recent_cap` URLs admitted or checked, whole (oldest first).
    recent: HashSet<Arc<str>, ahash::RandomState>,
    order: VecDeque<Arc<str>>,
    recent_cap: usize,
    /// For tests: fewer hash bits, so that URLs collide.
    mask: u64,
    /// False while the stored URLs' hashes are still being read in
    /// (`crate::resume`): a hash not seen yet may still be a stored URL's.
    complete: bool,
}

impl SeenSet {
    pub(crate) fn new(check: SeenCheck, recent_cap: usize) -> SeenSet {
        SeenSet {
            hashes: HashSet48::new(),
            // Fixed keys: hashes are stable for the process.
            hasher: ahash::RandomState::with_seeds(11, 22, 33, 44),
            check,
            recent: HashSet::with_hasher(ahash::RandomState::new()),
            order: VecDeque::new(),
            recent_cap: if check == SeenCheck::Store { recent_cap } else { 0 },
            mask: u64::MAX,
            complete: true,
        }
    }

    /// The stored URLs (about `stored` of them) are read in after
    /// start-up with [`SeenSet::insert_stored`]: until [`SeenSet::rebuilt`],
    /// a URL whose hash is not known yet is [`Seen::NotYet`], never new.
    pub(crate) fn rebuilding(&mut self, stored: u64) {
        self.complete = false;
        self.hashes.reserve(usize::try_from(stored).unwrap_or(0));
    }

    /// Every stored URL was read in.
    pub(crate) fn rebuilt(&mut self) {
        self.complete = true;
    }

    /// Whether every stored URL's hash is in (no read of them is under way).
    pub(crate) fn is_complete(&self) -> bool {
        self.complete
    }

    /// Hashes of `bits` bits only, so that tests can make URLs collide.
    #[cfg(test)]
    pub(crate) fn with_hash_bits(mut self, bits: u32) -> SeenSet {
        self.mask = if bits >= 64 { u64::MAX } else { (1u64 << bits) - 1 };
        self
    }

    fn hash(&self, url: &str) -> u64 {
        self.hasher.hash_one(url) & self.mask
    }

    /// A key for `url` in sets of the caller's: its hash here.
    pub(crate) fn key(&self, url: &str) -> u64 {
        self.hash(url)
    }

    /// A URL the store holds (read back at start-up).
    pub(crate) fn insert_stored(&mut self, url: &str) {
        self.hashes.insert(self.hash(url));
    }

    /// Whether `url` was admitted before; a [`Seen::New`] URL counts as
    /// admitted from now on.
    pub(crate) fn check(&mut self, url: &str) -> Seen {
        let hash = self.hash(url);
        if !self.complete && !self.hashes.contains(hash) {
            return Seen::NotYet;
        }
        if self.hashes.insert(hash) {
            self.remember(url);
            return Seen::New;
        }
        match self.check {
            SeenCheck::Hash => Seen::Known,
            SeenCheck::Store if self.recent.contains(url) => Seen::Known,
            SeenCheck::Store => Seen::Unsure,
        }
    }

    /// `url` is in the store's frontier now (admitted or checked): known
    /// without asking the store again while it is among the recent ones.
    pub(crate) fn remember(&mut self, url: &str) {
        if self.recent_cap == 0 || self.recent.contains(url) {
            return;
        }
        if self.order.len() >= self.recent_cap {
            if let Some(old) = self.order.pop_front() {
                self.recent.remove(&old);
            }
        }
        let url: Arc<str> = Arc::from(url);
        self.recent.insert(url.clone());
        self.order.push_back(url);
    }

    /// Distinct hashes: the URLs known, but for collisions.
    pub(crate) fn len(&self) -> usize {
        self.hashes.len()
    }

    /// Heap bytes the hashes take (the part of the dispatcher's memory
    /// that grows with every URL; the recent URLs are bounded).
    pub(crate) fn bytes(&self) -> usize {
        self.hashes.bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_url_once_then_known() {
        let mut s = SeenSet::new(SeenCheck::Hash, 10);
        assert_eq!(s.check("http://a/0"), Seen::New);
        assert_eq!(s.check("http://a/0"), Seen::Known);
        s.insert_stored("http://a/1");
        assert_eq!(s.check("http://a/1"), Seen::Known);
        assert_eq!(s.len(), 2);
    }

    #[test]
    fn with_the_store_check_a_colliding_url_is_unsure_never_known() {
        // One hash bit: every URL collides with one of two.
        let mut s = SeenSet::new(SeenCheck::Store, 2).with_hash_bits(1);
        let urls: Vec<String> = (0..50).map(|i| format!("http://a/{i}")).collect();
        let mut new = 0;
        for u in &urls {
            match s.check(u) {
                Seen::New => new += 1,
                Seen::Unsure => s.remember(u),
                Seen::Known | Seen::NotYet => panic!("{u} taken for known"),
            }
        }
        assert!(new <= 2);
        // The two most recent are known; the rest must be asked again.
        assert_eq!(s.check(&urls[49]), Seen::Known);
        assert_eq!(s.check(&urls[48]), Seen::Known);
        assert_eq!(s.check(&urls[10]), Seen::Unsure);
        // Hash only: a collision is taken for known (the risk the store check removes).
        let mut h = SeenSet::new(SeenCheck::Hash, 2).with_hash_bits(1);
        let known = urls.iter().filter(|u| h.check(u) == Seen::Known).count();
        assert!(known >= 48);
    }

    #[test]
    fn while_stored_urls_are_read_in_an_unknown_hash_is_not_judged_yet() {
        for check in [SeenCheck::Hash, SeenCheck::Store] {
            let mut s = SeenSet::new(check, 10);
            s.rebuilding(2);
            s.insert_stored("http://a/stored");
            // As ever: known on the hash's word, or asked of the store.
            let stored = if check == SeenCheck::Hash {
                Seen::Known
            } else {
                Seen::Unsure
            };
            assert_eq!(s.check("http://a/stored"), stored);
            // Maybe stored, not read in yet: judged later, and not counted.
            assert_eq!(s.check("http://a/1"), Seen::NotYet);
            assert_eq!(s.check("http://a/1"), Seen::NotYet);
            s.insert_stored("http://a/2");
            s.rebuilt();
            assert_eq!(s.check("http://a/1"), Seen::New, "{check:?}");
            assert_eq!(s.check("http://a/2"), stored, "{check:?}");
        }
    }
}
