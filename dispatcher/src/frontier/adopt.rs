//! Adoption: a supervisor that (re)joins says which leases it still holds
//! (from before a dispatcher restart, or an earlier connection), and the
//! frontier takes back those it can vouch for, under their own lease ids,
//! so that their results count and nothing is crawled twice.

use std::collections::HashMap;

use link::protocol::WorkItem;

use super::{Frontier, Lease, Stored, SupId};

/// What [`Frontier::adopt`] did with a supervisor's held URLs.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Adoption {
    pub adopted: usize,
    pub refused: usize,
    /// Held URLs that may be queued in the store beyond their domain's
    /// window: the shell looks them up and hands what it finds to
    /// [`Frontier::adopt_stored`].
    /// (lease id, URL).
    pub look_up: Vec<(u64, String)>,
}

impl Frontier {
    /// Leases `items` to `sup` under their existing lease ids: a
    /// supervisor that (re)joined still holds them, typically from before
    /// a dispatcher restart or a reconnect. Nothing is taken on the
    /// supervisor's word but the lease id and the URL:
    ///
    /// - a lease out at `sup` already stays as it is;
    /// - a lease out at an earlier connection of the same supervisor
    ///   (`same_supervisor` says which; it reconnected) moves to `sup`,
    ///   with the domain if that connection owned it;
    /// - a lease out at anyone else is refused;
    /// - a lease this frontier does not know (it was issued before a
    ///   restart, or expired) is adopted only when its URL waits in the
    ///   window of its domain (the domain computed here from the URL); it
    ///   leaves the window, and the lease gets the queued depth. A URL
    ///   that may still be only in the store is returned in
    ///   [`Adoption::look_up`], for [`Frontier::adopt_stored`];
    /// - anything else (a URL never seen, or already finished) is refused:
    ///   the supervisor's result for it will be dropped, and the URL is
    ///   crawled again if it is ever queued (a page is stored only once).
    ///
    /// Adopted domains go to `sup` unless a live supervisor owns them, so
    /// each domain stays with the child already pacing it.
    pub(crate) fn adopt(
        &mut self,
        sup: SupId,
        items: Vec<WorkItem>,
        now_ms: u64,
        same_supervisor: impl Fn(SupId) -> bool,
    ) -> Adoption {
        let mut report = Adoption::default();
        let expires_ms = now_ms.saturating_add(self.lease_ms);
        // Unknown leases, by domain: one pass over each queue, not one per URL.
        let mut wanted: HashMap<u32, HashMap<String, u64>> = HashMap::new();
        for item in items {
            match self.leases.get(&item.lease).map(|l| l.sup) {
                Some(holder) if holder == sup => report.adopted += 1,
                Some(holder) if same_supervisor(holder) => {
                    self.transfer(item.lease, holder, sup, expires_ms);
                    report.adopted += 1;
                }
                Some(_) => report.refused += 1,
                None if self.adopt_unanswered(sup, item.lease, &item.url, expires_ms) => report.adopted += 1,
                None => {
                    let domain = shared::urls::parse(&item.url).map(|u| shared::urls::domain_of(&u));
                    let id = domain.ok().and_then(|d| self.domain_ids.get(&d, &self.domains));
                    // Lease ids near the top could overflow `next_lease`.
                    match id {
                        Some(id) if item.lease < u64::MAX / 2 => {
                            wanted.entry(id).or_default().insert(item.url, item.lease);
                        }
                        _ => report.refused += 1,
                    }
                }
            }
        }
        for (id, mut urls) in wanted {
            let mut found = Vec::new();
            let d = &mut self.domains[id as usize];
            let before = d.queue.len();
            d.queue.retain(|q| match urls.remove(&q.url) {
                Some(lease) => {
                    found.push((lease, q.url.clone(), q.depth));
                    false
                }
                None => true,
            });
            self.queued -= before - d.queue.len();
            if d.spilled > 0 {
                report
                    .look_up
                    .extend(urls.into_iter().map(|(url, lease)| (lease, url)));
            } else {
                report.refused += urls.len();
            }
            if found.is_empty() {
                continue;
            }
            self.give_domain(id, sup);
            for (lease, url, depth) in found {
                self.lease_adopted(id, sup, lease, url, depth, expires_ms);
                report.adopted += 1;
            }
            self.window_changed(id);
        }
        report
    }

    /// The second half of [`Frontier::adopt`]: of the `asked` URLs of
    /// [`Adoption::look_up`], `found` are the ones the store holds as
    /// queued, with their lease ids. Each is adopted if it is still
    /// queued here (beyond its window, or read into it meanwhile) and
    /// `sup` is still live; the rest are refused.
    pub(crate) fn adopt_stored(
        &mut self,
        sup: SupId,
        asked: usize,
        found: Vec<(u64, Stored)>,
        now_ms: u64,
    ) -> Adoption {
        let mut report = Adoption::default();
        let expires_ms = now_ms.saturating_add(self.lease_ms);
        let live = self.sups.get(sup).is_some_and(|s| s.live);
        let n = found.len();
        for (lease, u) in found {
            let domain = shared::urls::parse(&u.url).map(|p| shared::urls::domain_of(&p));
            let id = domain.ok().and_then(|d| self.domain_ids.get(&d, &self.domains));
            let Some(id) = id.filter(|_| live && !self.leases.contains_key(&lease) && lease < u64::MAX / 2)
            else {
                report.refused += 1;
                continue;
            };
            let d = &mut self.domains[id as usize];
            let depth = if u.seq > d.cursor && d.spilled > 0 && !d.taken.contains(u.seq) {
                // Still only in the store: a later read skips it.
                d.taken.push(u.seq);
                d.spilled -= 1;
                self.spilled_total -= 1;
                u.depth
            } else if let Some(i) = d.queue.iter().position(|q| q.url == u.url) {
                // Read into the window meanwhile.
                d.queue.remove(i).map_or(u.depth, |q| q.depth)
            } else {
                report.refused += 1;
                continue;
            };
            self.queued -= 1;
            self.give_domain(id, sup);
            self.lease_adopted(id, sup, lease, u.url, depth, expires_ms);
            report.adopted += 1;
            self.window_changed(id);
        }
        report.refused += asked.saturating_sub(n);
        report
    }

    /// Records an adopted lease of domain `id` at `sup`.
    pub(super) fn lease_adopted(
        &mut self,
        id: u32,
        sup: SupId,
        lease: u64,
        url: String,
        depth: u16,
        expires_ms: u64,
    ) {
        self.domains[id as usize].in_flight += 1;
        self.sups[sup].held += 1;
        // New leases must not collide with adopted ones.
        self.next_lease = self.next_lease.max(lease.saturating_add(1));
        self.leases.insert(
            lease,
            Lease {
                url,
                depth,
                sup,
                expires_ms,
                domain_id: id,
            },
        );
    }

    /// Moves `lease` from supervisor `from` to `to` (the same supervisor on
    /// a new connection), with its domain if `from` owned it.
    fn transfer(&mut self, lease: u64, from: SupId, to: SupId, expires_ms: u64) {
        let Some(l) = self.leases.get_mut(&lease) else {
            return;
        };
        l.sup = to;
        l.expires_ms = l.expires_ms.max(expires_ms);
        let id = l.domain_id;
        self.release_credit(from);
        self.sups[to].held += 1;
        if self.domains[id as usize].owner == Some(from) {
            let d = &mut self.domains[id as usize];
            d.owner = Some(to);
            d.in_ready = false;
            self.sups[from].domains = self.sups[from].domains.saturating_sub(1);
            self.sups[to].domains += 1;
            self.make_ready(id);
        }
    }

    /// Makes `sup` the owner of domain `id` unless a live supervisor owns it.
    pub(super) fn give_domain(&mut self, id: u32, sup: SupId) {
        let owner = self.domains[id as usize].owner;
        if owner == Some(sup) || owner.is_some_and(|o| self.sups[o].live) {
            return;
        }
        let d = &mut self.domains[id as usize];
        d.owner = Some(sup);
        d.in_ready = false;
        self.sups[sup].domains += 1;
    }
}
