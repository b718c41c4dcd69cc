//! Which slot a domain's URLs go to: always the same one, so one child
//! alone paces each domain.

/// A fixed hash of the domain over the slots.
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

    pub(crate) fn slot_of(&self, domain: &str) -> usize {
        (self.hasher.hash_one(domain) % self.slots as u64) as usize
    }

    /// `items` grouped by their slot, keeping their order within a slot.
    pub(crate) fn split<T>(&self, items: Vec<T>, domain: impl Fn(&T) -> &str) -> Vec<Vec<T>> {
        let mut per_slot: Vec<Vec<T>> = (0..self.slots).map(|_| Vec::new()).collect();
        for item in items {
            let slot = self.slot_of(domain(&item));
            per_slot[slot].push(item);
        }
        per_slot
    }
}
