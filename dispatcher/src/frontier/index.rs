//! Domain name → id, without a second copy of the name.
//!
//! A `HashMap<String, u32>` kept each domain's name twice (in its queue
//! record and as the key): 24 bytes and a heap block per domain, and a
//! 32-byte entry. This table holds only the ids (4 bytes an entry) and
//! compares against the names in the domains' records, which every
//! method is given.

use hashbrown::HashTable;

use super::domains::DomainQ;

/// One hash for a name, whether looked up or re-hashed as the table grows.
fn hash(hasher: &ahash::RandomState, name: &str) -> u64 {
    hasher.hash_one(name)
}

pub(super) struct DomainIndex {
    table: HashTable<u32>,
    hasher: ahash::RandomState,
}

impl DomainIndex {
    pub(super) fn new() -> DomainIndex {
        DomainIndex {
            table: HashTable::new(),
            hasher: ahash::RandomState::new(),
        }
    }

    fn hash(&self, name: &str) -> u64 {
        hash(&self.hasher, name)
    }

    /// The id of the domain named `name`.
    pub(super) fn get(&self, name: &str, domains: &[DomainQ]) -> Option<u32> {
        self.table
            .find(self.hash(name), |&id| domains[id as usize].name() == name)
            .copied()
    }

    /// Indexes `domains[id]` by its name (not indexed yet).
    pub(super) fn insert(&mut self, id: u32, domains: &[DomainQ]) {
        let hash = self.hash(domains[id as usize].name());
        let hasher = &self.hasher;
        self.table
            .insert_unique(hash, id, |&i| self::hash(hasher, domains[i as usize].name()));
    }

    /// Drops `domains[id]` from the index (before its record goes).
    pub(super) fn remove(&mut self, id: u32, domains: &[DomainQ]) {
        let hash = self.hash(domains[id as usize].name());
        if let Ok(entry) = self.table.find_entry(hash, |&i| i == id) {
            entry.remove();
        }
    }

    /// Domains indexed.
    pub(super) fn len(&self) -> usize {
        self.table.len()
    }

    /// Gives memory back once most domains have been forgotten.
    pub(super) fn shrink(&mut self, domains: &[DomainQ]) {
        if self.table.capacity() > 4 * self.table.len() + 64 {
            let hasher = &self.hasher;
            self.table
                .shrink_to_fit(|&i| hash(hasher, domains[i as usize].name()));
        }
    }

    /// Every id indexed.
    #[cfg(test)]
    pub(super) fn ids(&self) -> impl Iterator<Item = u32> + '_ {
        self.table.iter().copied()
    }
}
