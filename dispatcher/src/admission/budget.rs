//! How much of one domain, and of one path's query variants, a crawl
//! spends: counts of admitted URLs, and the budgets they are held to.
//!
//! Two budgets, both on URLs admitted (each is fetched once, so these are
//! requests a site serves):
//! - per domain (`--max-pages-per-domain`): the backstop for every trap
//!   no rule recognises, at the price of the tail of a site larger than
//!   it;
//! - per path, the distinct queries admitted for it
//!   (`--max-query-variants`): a calendar (`/cal?month=…` forever) or a
//!   faceted search (every combination of its filters and sort orders)
//!   is one path with endless queries; it spends this much of its
//!   domain's budget, not all of it.
//!
//! The counts survive forgetting a domain (`frontier::forget`) and are
//! rebuilt after a restart from the stored frontier (every stored entry
//! but the deferred ones counts, see `crate::resume`). Keys are 64-bit
//! hashes, so a domain costs about 17 bytes here and a path with queries
//! as much; two keys that collided would share one count (at 10 million
//! keys, odds of about 3 in a million): a budget reached early, never
//! passed.

use std::hash::BuildHasher;

use hashbrown::HashMap;
use store::docs::Deferral;

/// Which budget a URL is over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Over {
    Domain,
    QueryVariants,
}

impl Over {
    /// How the stored frontier records a URL deferred for this budget.
    pub(crate) fn deferral(self) -> Deferral {
        match self {
            Over::Domain => Deferral::DomainBudget,
            Over::QueryVariants => Deferral::QueryBudget,
        }
    }
}

/// What a URL's admission counts against: its domain and, when it has a
/// query, its path. Made from the normalised URL string, the same way
/// for a new URL and for one read back from the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BudgetKey {
    domain: u64,
    /// The path's key, for URLs with a query.
    path: Option<u64>,
}

/// The limits (0: none) and the counts.
pub(crate) struct Budgets {
    max_per_domain: u32,
    max_query_variants: u32,
    hasher: ahash::RandomState,
    domains: HashMap<u64, u32, Prehashed>,
    paths: HashMap<u64, u32, Prehashed>,
}

impl Budgets {
    pub(crate) fn new(max_per_domain: u32, max_query_variants: u32) -> Budgets {
        Budgets {
            max_per_domain,
            max_query_variants,
            hasher: ahash::RandomState::with_seeds(5, 6, 7, 8),
            domains: HashMap::with_hasher(Prehashed),
            paths: HashMap::with_hasher(Prehashed),
        }
    }

    /// The key of `url` (a normalised absolute URL; its domain is its
    /// authority, as `shared::urls::domain_of` makes it), or `None` for a
    /// string that is not one.
    pub(crate) fn key(&self, url: &str) -> Option<BudgetKey> {
        let (_, rest) = url.split_once("://")?;
        let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        let (authority, rest) = rest.split_at(end);
        // Userinfo is not part of the domain (canonical URLs carry none).
        let domain = authority.rsplit_once('@').map_or(authority, |(_, host)| host);
        let path = match rest.split_once('?') {
            Some((path, query)) if !query.is_empty() => Some(path),
            _ => None,
        };
        Some(BudgetKey {
            domain: self.hasher.hash_one(domain),
            path: path.map(|p| self.hasher.hash_one((domain, p))),
        })
    }

    /// Whether one more URL of `key` would pass a budget.
    pub(crate) fn over(&self, key: &BudgetKey) -> Option<Over> {
        let full = |max: u32, n: Option<&u32>| max > 0 && n.copied().unwrap_or(0) >= max;
        if full(self.max_per_domain, self.domains.get(&key.domain)) {
            return Some(Over::Domain);
        }
        if let Some(path) = key.path {
            if full(self.max_query_variants, self.paths.get(&path)) {
                return Some(Over::QueryVariants);
            }
        }
        None
    }

    /// A URL of `key` was admitted (or was found stored).
    pub(crate) fn count(&mut self, key: &BudgetKey) {
        let n = self.domains.entry(key.domain).or_insert(0);
        *n = n.saturating_add(1);
        if let Some(path) = key.path {
            let n = self.paths.entry(path).or_insert(0);
            *n = n.saturating_add(1);
        }
    }

    /// A URL of `key` counted by [`Budgets::count`] turned out to be
    /// stored before (the store's unique index said so): it counts once,
    /// as the stored URL it is.
    pub(crate) fn uncount(&mut self, key: &BudgetKey) {
        if let Some(n) = self.domains.get_mut(&key.domain) {
            *n = n.saturating_sub(1);
        }
        if let Some(n) = key.path.and_then(|p| self.paths.get_mut(&p)) {
            *n = n.saturating_sub(1);
        }
    }

    /// Domains and paths counted: (domains, paths with queries).
    #[cfg(test)]
    pub(crate) fn counted(&self) -> (usize, usize) {
        (self.domains.len(), self.paths.len())
    }
}

/// The keys are hashes already: used as they are.
#[derive(Clone, Copy, Default)]
pub(crate) struct Prehashed;

impl BuildHasher for Prehashed {
    type Hasher = PrehashedHasher;
    fn build_hasher(&self) -> PrehashedHasher {
        PrehashedHasher(0)
    }
}

pub(crate) struct PrehashedHasher(u64);

impl std::hash::Hasher for PrehashedHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        // Only `u64` keys are hashed here; anything else still gets a hash.
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_domain_takes_its_budget_and_no_more() {
        let mut b = Budgets::new(3, 0);
        let keys: Vec<BudgetKey> = (0..5)
            .map(|i| b.key(&format!("http://a.test:81/p/{i}")).unwrap())
            .collect();
        for k in &keys[..3] {
            assert_eq!(b.over(k), None);
            b.count(k);
        }
        assert_eq!(b.over(&keys[3]), Some(Over::Domain));
        // Another domain, and the same host on another port, are apart.
        let other = b.key("http://b.test/p/0").unwrap();
        assert_eq!(b.over(&other), None);
        let port = b.key("http://a.test:82/p/0").unwrap();
        assert_eq!(b.over(&port), None);
    }

    #[test]
    fn query_variants_of_one_path_are_bounded() {
        let mut b = Budgets::new(0, 2);
        let k = |b: &Budgets, u: &str| b.key(u).unwrap();
        for u in ["http://a.test/cal?m=1", "http://a.test/cal?m=2"] {
            let key = k(&b, u);
            assert_eq!(b.over(&key), None);
            b.count(&key);
        }
        assert_eq!(b.over(&k(&b, "http://a.test/cal?m=3")), Some(Over::QueryVariants));
        // The path itself, another path, the same path on another host: not counted against it.
        assert_eq!(b.over(&k(&b, "http://a.test/cal")), None);
        assert_eq!(b.over(&k(&b, "http://a.test/cal?")), None);
        assert_eq!(b.over(&k(&b, "http://a.test/other?m=3")), None);
        assert_eq!(b.over(&k(&b, "http://b.test/cal?m=3")), None);
        assert_eq!(b.counted(), (1, 1));
    }

    #[test]
    fn keys_ignore_userinfo_and_need_an_absolute_url() {
        let b = Budgets::new(1, 1);
        assert_eq!(b.key("http://u:p@a.test/x?q"), b.key("http://a.test/x?q"));
        assert_eq!(b.key("http://a.test"), b.key("http://a.test/"));
        assert_eq!(b.key("not a url"), None);
    }

    #[test]
    fn a_url_counted_twice_is_uncounted_once() {
        let mut b = Budgets::new(2, 1);
        let key = b.key("http://a.test/x?q=1").unwrap();
        b.count(&key);
        b.count(&key);
        assert_eq!(b.over(&key), Some(Over::Domain));
        b.uncount(&key);
        assert_eq!(b.over(&key), Some(Over::QueryVariants));
        b.uncount(&key);
        b.uncount(&key);
        assert_eq!(b.over(&key), None);
    }

    #[test]
    fn zero_is_no_budget() {
        let mut b = Budgets::new(0, 0);
        let key = b.key("http://a.test/x?q=1").unwrap();
        for _ in 0..1000 {
            b.count(&key);
        }
        assert_eq!(b.over(&key), None);
    }
}
