//! Leases that ended without their result (the supervisor left or
//! reconnected without them, or the lease ran out), held back until the
//! store says whether their page is stored: a child stores its page
//! before it reports, so a supervisor killed with reports in its buffers,
//! or a result lost on a dead connection, leaves pages whose URLs must not
//! be fetched again (`crate::finished`). Each such URL waits, still
//! counted in its domain's in-flight URLs (so the domain's pace and the
//! crawl's end see it), until [`Frontier::checked`]: finished, or queued
//! again at the front of its domain's queue as before. A rejoining
//! supervisor that still holds one adopts it meanwhile
//! ([`Frontier::adopt_unanswered`]).

use super::{Frontier, Queued, SupId};

/// A lease that ended without its result.
#[derive(Debug)]
pub(super) struct Unanswered {
    url: String,
    depth: u16,
    domain_id: u32,
}

impl Frontier {
    /// Holds back leases that end without a result until the store is
    /// asked ([`Frontier::take_unanswered`]); without it they are queued
    /// again at once (the frontier's own tests).
    pub(crate) fn with_stored_check(mut self) -> Frontier {
        self.check_unanswered = true;
        self
    }

    /// Parks an ended lease's URL (see the module doc); false when the
    /// frontier queues it again at once.
    pub(super) fn park_unanswered(
        &mut self,
        lease: u64,
        url: String,
        depth: u16,
        domain_id: u32,
    ) -> Option<(String, u16)> {
        if !self.check_unanswered {
            return Some((url, depth));
        }
        self.to_check.push((lease, url.clone()));
        self.unanswered.insert(
            lease,
            Unanswered {
                url,
                depth,
                domain_id,
            },
        );
        None
    }

    /// URLs of ended leases to look up in the store: (lease, URL).
    pub(crate) fn take_unanswered(&mut self) -> Vec<(u64, String)> {
        std::mem::take(&mut self.to_check)
    }

    /// The store's answer for an ended lease: with `stored`, its URL is
    /// finished and returned (URL, depth) for its links to be offered
    /// again; otherwise it is queued again. Nothing for a lease adopted
    /// meanwhile.
    pub(crate) fn checked(&mut self, lease: u64, stored: bool) -> Option<(String, u16)> {
        let u = self.unanswered.remove(&lease)?;
        let d = &mut self.domains[u.domain_id as usize];
        d.in_flight = d.in_flight.saturating_sub(1);
        if stored {
            self.window_changed(u.domain_id);
            return Some((u.url, u.depth));
        }
        d.queue.push_front(Queued {
            url: u.url,
            depth: u.depth,
            queued_ms: 0,
        });
        self.queued += 1;
        self.window_changed(u.domain_id);
        None
    }

    /// The store could not be asked: asked again later.
    pub(crate) fn check_failed(&mut self, asked: Vec<(u64, String)>) {
        let waiting: Vec<(u64, String)> = asked
            .into_iter()
            .filter(|(lease, _)| self.unanswered.contains_key(lease))
            .collect();
        self.to_check.extend(waiting);
    }

    /// A rejoining supervisor holds `lease` for `url`, which ended without
    /// its result: leased to it again under the same id. Whether it was.
    pub(super) fn adopt_unanswered(&mut self, sup: SupId, lease: u64, url: &str, expires_ms: u64) -> bool {
        if self.unanswered.get(&lease).is_none_or(|u| u.url != url) {
            return false;
        }
        let Some(u) = self.unanswered.remove(&lease) else {
            return false;
        };
        let d = &mut self.domains[u.domain_id as usize];
        d.in_flight = d.in_flight.saturating_sub(1);
        self.give_domain(u.domain_id, sup);
        self.lease_adopted(u.domain_id, sup, lease, u.url, u.depth, expires_ms);
        self.window_changed(u.domain_id);
        true
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
        assert_eq!(f.checked(first.0, true).map(|(u, _)| u), Some(first.1.clone()));
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
