//! When a map of per-domain or per-server state forgets its idle entries:
//! it is looked through only once it holds [`PRUNE_FROM`] entries and twice
//! as many as the last look left, so looking costs O(1) an insertion,
//! amortised, and a child's memory follows what it uses now, not every
//! domain or server it ever met. Used by `worker` (domains) and
//! `server_pace` (servers); each says what an idle entry is.

use std::collections::HashMap;
use std::hash::Hash;

/// Entries a map holds before it is looked through at all.
pub(crate) const PRUNE_FROM: usize = 1024;

/// The size at which a map is next looked through.
#[derive(Debug, Default)]
pub(crate) struct Pruning {
    next: usize,
}

impl Pruning {
    /// Drops the entries `keep` refuses, if the map has grown enough since
    /// the last look; returns how many were dropped.
    pub(crate) fn retain_if_grown<K: Eq + Hash, V>(
        &mut self,
        map: &mut HashMap<K, V>,
        keep: impl FnMut(&K, &mut V) -> bool,
    ) -> usize {
        if map.len() < self.next.max(PRUNE_FROM) {
            return 0;
        }
        self.retain(map, keep)
    }

    /// Drops the entries `keep` refuses now; the next look waits for the
    /// map to double.
    pub(crate) fn retain<K: Eq + Hash, V>(
        &mut self,
        map: &mut HashMap<K, V>,
        keep: impl FnMut(&K, &mut V) -> bool,
    ) -> usize {
        let before = map.len();
        map.retain(keep);
        self.next = map.len().saturating_mul(2);
        before.saturating_sub(map.len())
    }

    /// The size of the next look (tests).
    #[cfg(test)]
    pub(crate) fn next(&self) -> usize {
        self.next
    }
}
