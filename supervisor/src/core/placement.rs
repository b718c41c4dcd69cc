//! Which slot a URL goes to: always the same one for a domain, so one
//! child alone paces each domain; and, once the dispatcher knows the
//! domain's server, the same one for every domain of that server, so one
//! child alone paces the server (see `WorkItem::server`).

use std::hash::Hash;

use link::protocol::WorkItem;

/// A fixed hash of the server, or of the domain while its server is not
/// known, over the slots.
#[derive(Debug)]
pub(crate) struct Placement {
    slots: usize,
    hasher: ahash::RandomState,
}

impl Placement {
    /// `slots`: at least 1.
    pub(crate) fn new(slots: usize) -> Placement {
        Placement {
            slots: slots.max(1),
            // Fixed keys: a domain maps to the same slot for the whole run.
            hasher: ahash::RandomState::with_seeds(1, 2, 3, 4),
        }
    }

    fn slot_by(&self, key: impl Hash) -> usize {
        (self.hasher.hash_one(key) % self.slots as u64) as usize
    }

    /// The slot of a domain whose server is not known.
    pub(crate) fn slot_of(&self, domain: &str) -> usize {
        self.slot_by(domain)
    }

    /// The slot of `item`: its server's, or its domain's.
    pub(crate) fn slot_of_item(&self, item: &WorkItem) -> usize {
        match item.server {
            Some(addr) => self.slot_by(addr),
            None => self.slot_of(&item.domain),
        }
    }

    /// `items` grouped by their slot, keeping their order within a slot.
    pub(crate) fn split(&self, items: Vec<WorkItem>) -> Vec<Vec<WorkItem>> {
        let mut per_slot: Vec<Vec<WorkItem>> = (0..self.slots).map(|_| Vec::new()).collect();
        for item in items {
            let slot = self.slot_of_item(&item);
            per_slot[slot].push(item);
        }
        per_slot
    }
}
