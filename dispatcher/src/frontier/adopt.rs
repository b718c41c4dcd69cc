//! Adoption: a supervisor that (re)joins says which leases it still holds
//! (from before a dispatcher restart, or an earlier connection), and the
//! frontier takes back those it can vouch for, under their own lease ids,
//! so that their results count and nothing is crawled twice.

use std::collections::HashMap;

use link::protocol::WorkItem;

use super::{Frontier, Stored, SupId};

/// What [`Frontier::adopt`] did with a supervisor's held URLs.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Adoption {
    pub adopted: usize,
    pub refused: usize,
    /// Held URLs that may be queued in the store beyond their domain's
    /// window: the shell looks them up and hands what it finds to
    /// [`Frontier::adopt_stored`].
    pub look_up: Vec<LookUp>,
}

impl Adoption {
    /// Held URLs to look up in the store.
    pub(crate) fn to_look_up(&self) -> usize {
        self.look_up.iter().map(|l| l.held.len()).sum()
    }
}

/// Held URLs of one domain to look up in its queue in the store: those
/// with a `seq` in `(after, upto]` (past its window's cursor, up to its
/// last admitted URL).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LookUp {
    pub domain: String,
    pub after: i64,
    pub upto: i64,
    /// (lease id, URL).
    pub held: Vec<(u64, String)>,
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
        let expires_ms = self.leases.expiry(now_ms);
        // Unknown leases, by domain: one pass over each queue, not one per URL.
        let mut wanted: HashMap<u32, HashMap<String, u64>> = HashMap::new();
        for item in items {
            match self.leases.holder(item.lease) {
                Some(holder) if holder == sup => report.adopted += 1,
                Some(holder) if same_supervisor(holder) => {
                    self.transfer(item.lease, sup, expires_ms);
                    report.adopted += 1;
                }
                Some(_) => report.refused += 1,
                None if self.adopt_unanswered(sup, item.lease, &item.url, expires_ms) => report.adopted += 1,
                None => {
                    let domain = shared::urls::parse(&item.url).map(|u| shared::urls::domain_of(&u));
                    let id = domain.ok().and_then(|d| self.domains.find(&d));
                    // Lease ids near the top could overflow the next lease id.
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
            let d = &mut self.domains[id];
            let found = self.windows.take_held(&mut d.window, &mut urls);
            if d.window.has_stored() && !urls.is_empty() {
                let (after, upto) = d.window.stored_range();
                report.look_up.push(LookUp {
                    domain: d.name().to_string(),
                    after,
                    upto,
                    held: urls.into_iter().map(|(url, lease)| (lease, url)).collect(),
                });
            } else {
                report.refused += urls.len();
            }
            if found.is_empty() {
                continue;
            }
            self.give_domain(id, sup);
            for (lease, url, depth, seq) in found {
                self.lease_adopted(id, sup, lease, (url, depth, seq), expires_ms);
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
        let expires_ms = self.leases.expiry(now_ms);
        let live = self.owners.is_live(sup);
        let n = found.len();
        for (lease, u) in found {
            let domain = shared::urls::parse(&u.url).map(|p| shared::urls::domain_of(&p));
            let id = domain.ok().and_then(|d| self.domains.find(&d));
            let Some(id) = id.filter(|_| live && !self.leases.is_out(lease) && lease < u64::MAX / 2) else {
                report.refused += 1;
                continue;
            };
            let Some(depth) = self.windows.take_stored(&mut self.domains[id].window, &u) else {
                report.refused += 1;
                continue;
            };
            self.give_domain(id, sup);
            self.lease_adopted(id, sup, lease, (u.url, depth, u.seq), expires_ms);
            report.adopted += 1;
            self.window_changed(id);
        }
        report.refused += asked.saturating_sub(n);
        report
    }

    /// Records an adopted lease of domain `id` at `sup`.
    fn lease_adopted(&mut self, id: u32, sup: SupId, lease: u64, url: (String, u16, i64), expires_ms: u64) {
        let in_flight = &mut self.domains[id].in_flight;
        self.leases.adopt(sup, lease, id, in_flight, url, expires_ms);
    }

    /// Moves `lease` to `to` (the same supervisor on a new connection),
    /// with its domain if the lease's former holder owned it.
    fn transfer(&mut self, lease: u64, to: SupId, expires_ms: u64) {
        let Some((from, id)) = self.leases.transfer(lease, to, expires_ms) else {
            return;
        };
        if self.owners.transfer(&mut self.domains[id].owner, from, to) {
            self.make_ready(id);
        }
    }

    /// Makes `sup` the owner of domain `id` unless a live supervisor owns it.
    fn give_domain(&mut self, id: u32, sup: SupId) {
        self.owners.give(&mut self.domains[id].owner, sup);
    }

    /// A rejoining supervisor holds `lease` for `url`, which ended without
    /// its result (see `unanswered`): leased to it again under the same
    /// id. Whether it was.
    fn adopt_unanswered(&mut self, sup: SupId, lease: u64, url: &str, expires_ms: u64) -> bool {
        let Some(id) = self.leases.readopt(sup, lease, url, expires_ms) else {
            return false;
        };
        self.give_domain(id, sup);
        self.window_changed(id);
        true
    }
}
