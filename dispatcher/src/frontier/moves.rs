//! Domains on their way to another supervisor (see `rebalance`): few, so
//! kept here rather than in every domain's record.

use std::collections::HashMap;

use super::SupId;

/// How long a moved domain waits before its new owner gets a URL of it.
pub(super) const HANDOVER_MS: u64 = 2_000;

/// The moves under way, and whether a rebalance is due.
///
/// Invariant: a domain is listed while it waits to move, and only then;
/// the frontier leases none of its URLs meanwhile, so that when its last
/// lease ends nothing of it is in flight at the old owner.
pub(super) struct Moves {
    /// A supervisor joined: domains are rebalanced at the next
    /// `Frontier::rebalance`.
    due: bool,
    /// Domain → the supervisor it moves to.
    moving: HashMap<u32, SupId>,
    /// Domains moved between supervisors so far.
    moved: u64,
}

impl Moves {
    pub(super) fn new() -> Moves {
        Moves {
            due: false,
            moving: HashMap::new(),
            moved: 0,
        }
    }

    /// Asks for a rebalance (a supervisor joined).
    pub(super) fn want(&mut self) {
        self.due = true;
    }

    /// Whether a rebalance was asked for since the last call.
    pub(super) fn take_due(&mut self) -> bool {
        std::mem::take(&mut self.due)
    }

    /// No move is under way.
    pub(super) fn is_empty(&self) -> bool {
        self.moving.is_empty()
    }

    pub(super) fn is_moving(&self, id: u32) -> bool {
        self.moving.contains_key(&id)
    }

    /// Where domain `id` moves to, if it does.
    pub(super) fn destination(&self, id: u32) -> Option<SupId> {
        self.moving.get(&id).copied()
    }

    /// Domain `id` is to move to `to`.
    pub(super) fn start(&mut self, id: u32, to: SupId) {
        self.moving.insert(id, to);
    }

    /// Domain `id` does not move after all.
    pub(super) fn cancel(&mut self, id: u32) {
        self.moving.remove(&id);
    }

    /// Domain `id` moved.
    pub(super) fn done(&mut self, id: u32) {
        self.moving.remove(&id);
        self.moved += 1;
    }

    /// Domains moved between supervisors so far.
    pub(super) fn moved(&self) -> u64 {
        self.moved
    }

    /// The domains waiting to move.
    #[cfg(test)]
    pub(super) fn ids(&self) -> impl Iterator<Item = u32> + '_ {
        self.moving.keys().copied()
    }
}
