//! Leases that ended without their result (the supervisor left or
//! reconnected without them, or the lease ran out), held back until the
//! store says whether their page is stored: a child stores its page
//! before it reports, so a supervisor killed with reports in its buffers,
//! or a result lost on a dead connection, leaves pages whose URLs must not
//! be fetched again (`crate::finished`). Each such URL waits, still
//! counted in its domain's in-flight URLs (so the domain's pace and the
//! crawl's end see it), until [`super::Frontier::checked`]: finished, or queued
//! again at the front of its domain's queue as before. A rejoining
//! supervisor that still holds one adopts it meanwhile
//! (`Leases::readopt`).

use std::collections::HashMap;

/// A lease that ended without its result: its URL and domain.
#[derive(Debug)]
pub(super) struct Ended {
    pub(super) url: String,
    pub(super) depth: u16,
    pub(super) seq: i64,
    pub(super) domain_id: u32,
}

/// The leases held back, owned by `Leases`, which counts them in flight.
///
/// Invariant: every lease waiting for the store's word is in `waiting`,
/// and in `to_check` until it is handed out to be asked about (and again
/// if asking failed); once answered or adopted it is in neither.
pub(super) struct Unanswered {
    /// Ended leases are held back at all (else queued again at once: the
    /// frontier's own tests).
    enabled: bool,
    waiting: HashMap<u64, Ended>,
    /// Of those, the ones not asked about yet: (lease, URL).
    to_check: Vec<(u64, String)>,
}

impl Unanswered {
    pub(super) fn new() -> Unanswered {
        Unanswered {
            enabled: false,
            waiting: HashMap::new(),
            to_check: Vec::new(),
        }
    }

    pub(super) fn enable(&mut self) {
        self.enabled = true;
    }

    /// Holds back an ended lease's URL (see the module doc), or returns it
    /// to be queued again at once when not enabled.
    pub(super) fn hold(
        &mut self,
        lease: u64,
        (url, depth, seq): (String, u16, i64),
        domain_id: u32,
    ) -> Option<Ended> {
        let ended = Ended {
            url,
            depth,
            seq,
            domain_id,
        };
        if !self.enabled {
            return Some(ended);
        }
        self.to_check.push((lease, ended.url.clone()));
        self.waiting.insert(lease, ended);
        None
    }

    /// URLs of ended leases to look up in the store: (lease, URL).
    pub(super) fn take_to_check(&mut self) -> Vec<(u64, String)> {
        std::mem::take(&mut self.to_check)
    }

    /// The store's answer for `lease` came: it waits no more.
    pub(super) fn remove(&mut self, lease: u64) -> Option<Ended> {
        self.waiting.remove(&lease)
    }

    /// The store could not be asked about `asked`: those still waiting are
    /// asked again later.
    pub(super) fn check_failed(&mut self, asked: Vec<(u64, String)>) {
        let waiting: Vec<(u64, String)> = asked
            .into_iter()
            .filter(|(lease, _)| self.waiting.contains_key(lease))
            .collect();
        self.to_check.extend(waiting);
    }

    /// `lease`, if it waits and is for `url`: it waits no more.
    pub(super) fn take_for(&mut self, lease: u64, url: &str) -> Option<Ended> {
        if self.waiting.get(&lease).is_none_or(|u| u.url != url) {
            return None;
        }
        self.waiting.remove(&lease)
    }

    pub(super) fn len(&self) -> usize {
        self.waiting.len()
    }

    /// (domain id, `seq`) of every URL waiting.
    pub(super) fn seqs(&self) -> impl Iterator<Item = (u32, i64)> + '_ {
        self.waiting.values().map(|e| (e.domain_id, e.seq))
    }

    pub(super) fn is_empty(&self) -> bool {
        self.waiting.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::super::*;

    fn f() -> Frontier {
        let mut f = Frontier::new(2, 1000, 1).with_stored_check();
        f.start_assigning();
        f
    }

    #[test]
    fn an_expired_lease_waits_for_the_store_then_finishes_or_comes_back() {
        let mut f = f();
        let s = f.add_supervisor();
        f.push("http://a.test/1".into(), "a.test", 0);
        f.push("http://a.test/2".into(), "a.test", 0);
        let items = f.take(s, 2, 0);
        assert_eq!(items.len(), 2);
        assert_eq!(f.expire(5000), 2);
        // Neither is leasable, and the crawl is not over, until the store answers.
        assert!(f.take(s, 2, 5000).is_empty());
        assert!(!f.is_idle());
        let asked = f.take_unanswered();
        assert_eq!(asked.len(), 2);
        let (first, second) = (asked[0].clone(), asked[1].clone());
        // The first one's page is stored: finished, not queued again.
        assert_eq!(f.checked(first.0, true).map(|l| l.url), Some(first.1.clone()));
        // The second one's is not: queued again, and leased again.
        assert_eq!(f.checked(second.0, false), None);
        let again = f.take(s, 2, 5000);
        assert_eq!(
            again.iter().map(|i| i.url.clone()).collect::<Vec<_>>(),
            vec![second.1]
        );
        f.complete(again[0].lease);
        assert!(f.is_idle());
    }

    #[test]
    fn a_rejoining_supervisor_adopts_what_it_still_holds_while_it_waits() {
        let mut f = f();
        let s = f.add_supervisor();
        f.push("http://a.test/1".into(), "a.test", 0);
        let items = f.take(s, 1, 0);
        assert_eq!(f.remove_supervisor(s), 1);
        let s2 = f.add_supervisor();
        let report = f.adopt(s2, items.clone(), 10, |x| x == s);
        assert_eq!(report.adopted, 1);
        // The store's answer comes after: nothing more to do.
        let asked = f.take_unanswered();
        assert_eq!(f.checked(asked[0].0, false), None);
        assert!(f.take(s2, 1, 10).is_empty());
        assert!(f.complete(items[0].lease).is_some());
        assert!(f.is_idle());
    }
}
