//! The URLs this node's children hold: which slot each went to, and how
//! many children died holding it (so a URL that kills its children is
//! failed instead of passed on for ever).

use std::collections::HashMap;

use link::protocol::WorkItem;

/// A URL given to a slot's child.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Held {
    pub(crate) slot: usize,
    pub(crate) item: WorkItem,
    /// Children that died holding it before this one.
    pub(crate) attempt: u32,
}

/// The held URLs, by lease.
#[derive(Debug, Default)]
pub(crate) struct InFlight {
    by_lease: HashMap<u64, Held>,
}

impl InFlight {
    pub(crate) fn hold(&mut self, held: Held) {
        self.by_lease.insert(held.item.lease, held);
    }

    /// A result came back for `lease`: its child no longer holds it.
    pub(crate) fn finished(&mut self, lease: u64) {
        self.by_lease.remove(&lease);
    }

    /// Takes everything `slot`'s child held, by lease (an order that does
    /// not depend on the map's).
    pub(crate) fn take_slot(&mut self, slot: usize) -> Vec<Held> {
        let mut leases: Vec<u64> = self
            .by_lease
            .iter()
            .filter(|(_, h)| h.slot == slot)
            .map(|(lease, _)| *lease)
            .collect();
        leases.sort_unstable();
        leases
            .into_iter()
            .filter_map(|lease| self.by_lease.remove(&lease))
            .collect()
    }

    pub(crate) fn leases(&self) -> impl Iterator<Item = u64> + '_ {
        self.by_lease.keys().copied()
    }

    pub(crate) fn items(&self) -> impl Iterator<Item = &WorkItem> {
        self.by_lease.values().map(|h| &h.item)
    }

    pub(crate) fn len(&self) -> usize {
        self.by_lease.len()
    }
}
