//! Leases: the URLs out at supervisors, until their result, their expiry
//! or their holder leaving, and the counts that follow from them: each
//! supervisor's credit in use and each domain's URLs in flight.
//!
//! Both counts live with the leases so that every way a lease starts
//! (taken, adopted) or ends (a result, expiry, the holder leaving, the
//! store's word on one that ended unanswered) moves them, and none can
//! drift from the leases out.

use std::collections::HashMap;

use super::domains::Domains;
use super::unanswered::{Ended, Unanswered};
use super::SupId;

/// A URL out at a supervisor.
pub(super) struct Lease {
    pub(super) url: String,
    pub(super) depth: u16,
    /// Its place in the stored frontier (0: not in it).
    pub(super) seq: i64,
    pub(super) sup: SupId,
    pub(super) expires_ms: u64,
    pub(super) domain_id: u32,
}

/// What a result is about, from the dispatcher's own lease record.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Leased {
    pub url: String,
    pub domain: String,
    pub depth: u16,
    /// Its place in the stored frontier (0: not in it, as a revisit).
    pub seq: i64,
}

/// Why a result's lease was not accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LeaseRefusal {
    /// Not out (never issued, expired, or already reported).
    Unknown,
    /// Out at another supervisor.
    Foreign,
    /// Out at this supervisor, but for another URL: a result from before
    /// a restart whose lease id was issued again (lease ids start from the
    /// clock, which can go back), or a peer that lies.
    OtherUrl,
}

/// A domain's URLs in flight: out on a lease, or ended unanswered and
/// waiting for the store's word (see `unanswered`), which still count
/// against the domain's pace and the crawl's end. Written only by
/// [`Leases`].
pub(super) struct InFlight(u32);

impl InFlight {
    pub(super) fn new() -> InFlight {
        InFlight(0)
    }

    pub(super) fn get(&self) -> u32 {
        self.0
    }

    fn start(&mut self) {
        self.0 += 1;
    }

    fn end(&mut self) {
        self.0 = self.0.saturating_sub(1);
    }
}

/// The leases out, by id.
///
/// Invariants: `held[s]` is the number of leases out at supervisor `s`
/// (its credit in use), and a domain's [`InFlight`] is the number of its
/// leases out plus its unanswered ones; new lease ids are above every id
/// out, adopted ones included, so that no two leases share one.
pub(super) struct Leases {
    out: HashMap<u64, Lease>,
    /// The next lease id to issue.
    next: u64,
    lease_ms: u64,
    /// By supervisor.
    held: Vec<u32>,
    unanswered: Unanswered,
}

impl Leases {
    /// Leases of `lease_ms`, with ids from `first`.
    pub(super) fn new(lease_ms: u64, first: u64) -> Leases {
        Leases {
            out: HashMap::new(),
            next: first,
            lease_ms,
            held: Vec::new(),
            unanswered: Unanswered::new(),
        }
    }

    /// Holds back leases that end without a result until the store is
    /// asked (see `unanswered`).
    pub(super) fn check_unanswered(&mut self) {
        self.unanswered.enable();
    }

    /// Supervisor `sup` joined (ids are handed out in order).
    pub(super) fn add_supervisor(&mut self, sup: SupId) {
        debug_assert_eq!(sup, self.held.len());
        self.held.push(0);
    }

    /// When a lease starting at `now_ms` expires.
    pub(super) fn expiry(&self, now_ms: u64) -> u64 {
        now_ms.saturating_add(self.lease_ms)
    }

    /// Leases `url` of domain `domain_id` (whose count is `in_flight`) to
    /// `sup` from `now_ms`: its lease id and expiry.
    pub(super) fn issue(
        &mut self,
        sup: SupId,
        domain_id: u32,
        in_flight: &mut InFlight,
        (url, depth, seq): (String, u16, i64),
        now_ms: u64,
    ) -> (u64, u64) {
        in_flight.start();
        let (lease, expires_ms) = (self.next, self.expiry(now_ms));
        self.insert(sup, lease, domain_id, (url, depth, seq), expires_ms);
        (lease, expires_ms)
    }

    /// Records lease `lease`, adopted from `sup` (which held it already),
    /// of domain `domain_id`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn adopt(
        &mut self,
        sup: SupId,
        lease: u64,
        domain_id: u32,
        in_flight: &mut InFlight,
        (url, depth, seq): (String, u16, i64),
        expires_ms: u64,
    ) {
        in_flight.start();
        self.insert(sup, lease, domain_id, (url, depth, seq), expires_ms);
    }

    /// Records a lease out at `sup`, issued here or adopted; the next id
    /// to issue stays above it.
    fn insert(
        &mut self,
        sup: SupId,
        lease: u64,
        domain_id: u32,
        (url, depth, seq): (String, u16, i64),
        expires_ms: u64,
    ) {
        self.held[sup] += 1;
        // New leases must not collide with adopted ones.
        self.next = self.next.max(lease.saturating_add(1));
        self.out.insert(
            lease,
            Lease {
                url,
                depth,
                seq,
                sup,
                expires_ms,
                domain_id,
            },
        );
    }

    /// The supervisor `lease` is out at.
    pub(super) fn holder(&self, lease: u64) -> Option<SupId> {
        self.out.get(&lease).map(|l| l.sup)
    }

    pub(super) fn is_out(&self, lease: u64) -> bool {
        self.out.contains_key(&lease)
    }

    /// Ends `lease` on a result from `sup` about `url`, refused unless the
    /// lease is out at `sup` for `url` (see `Frontier::complete_for`).
    pub(super) fn complete(
        &mut self,
        sup: SupId,
        lease: u64,
        url: &str,
        domains: &mut Domains,
    ) -> Result<Lease, LeaseRefusal> {
        match self.out.get(&lease) {
            None => return Err(LeaseRefusal::Unknown),
            Some(l) if l.sup != sup => return Err(LeaseRefusal::Foreign),
            Some(l) if l.url != url => return Err(LeaseRefusal::OtherUrl),
            Some(_) => {}
        }
        let l = self.out.remove(&lease).ok_or(LeaseRefusal::Unknown)?;
        self.release_credit(l.sup);
        domains[l.domain_id].in_flight.end();
        Ok(l)
    }

    fn release_credit(&mut self, sup: SupId) {
        if let Some(h) = self.held.get_mut(sup) {
            *h = h.saturating_sub(1);
        }
    }

    /// Ends `lease` without its result (expired, or its holder left): the
    /// URL to queue again, or `None` if the lease was not out or it waits
    /// for the store's word first (see `unanswered`).
    pub(super) fn end_unanswered(&mut self, lease: u64, domains: &mut Domains) -> Option<Ended> {
        let l = self.out.remove(&lease)?;
        self.release_credit(l.sup);
        // Its page may be stored: asked of the store first.
        let ended = self
            .unanswered
            .hold(lease, (l.url, l.depth, l.seq), l.domain_id)?;
        domains[ended.domain_id].in_flight.end();
        Some(ended)
    }

    /// The store's answer for an ended lease: it is over, and its URL
    /// (stored or to queue again) is returned; nothing for a lease adopted
    /// meanwhile.
    pub(super) fn checked(&mut self, lease: u64, domains: &mut Domains) -> Option<Ended> {
        let u = self.unanswered.remove(lease)?;
        domains[u.domain_id].in_flight.end();
        Some(u)
    }

    /// URLs of ended leases to look up in the store: (lease, URL).
    pub(super) fn take_unanswered(&mut self) -> Vec<(u64, String)> {
        self.unanswered.take_to_check()
    }

    /// The store could not be asked: asked again later.
    pub(super) fn check_failed(&mut self, asked: Vec<(u64, String)>) {
        self.unanswered.check_failed(asked);
    }

    /// A rejoining supervisor holds `lease` for `url`, which ended without
    /// its result: leased to it again under the same id (still in flight
    /// on its domain). Its domain, if it was.
    pub(super) fn readopt(&mut self, sup: SupId, lease: u64, url: &str, expires_ms: u64) -> Option<u32> {
        let u = self.unanswered.take_for(lease, url)?;
        self.insert(sup, lease, u.domain_id, (u.url, u.depth, u.seq), expires_ms);
        Some(u.domain_id)
    }

    /// Moves `lease` to `to` (the same supervisor on a new connection),
    /// expiring no earlier than `expires_ms`: (its former holder, its
    /// domain).
    pub(super) fn transfer(&mut self, lease: u64, to: SupId, expires_ms: u64) -> Option<(SupId, u32)> {
        let l = self.out.get_mut(&lease)?;
        let from = l.sup;
        l.sup = to;
        l.expires_ms = l.expires_ms.max(expires_ms);
        let id = l.domain_id;
        self.release_credit(from);
        self.held[to] += 1;
        Some((from, id))
    }

    /// Extends the leases `sup` says it still holds by a full lease period
    /// from `now_ms`; the others are ignored. How many were renewed.
    pub(super) fn renew(&mut self, sup: SupId, leases: &[u64], now_ms: u64) -> usize {
        let mut renewed = 0;
        for id in leases {
            if let Some(l) = self.out.get_mut(id).filter(|l| l.sup == sup) {
                l.expires_ms = l.expires_ms.max(now_ms.saturating_add(self.lease_ms));
                renewed += 1;
            }
        }
        renewed
    }

    /// The leases out that expire by `now_ms`. Scans the leases.
    pub(super) fn expired(&self, now_ms: u64) -> Vec<u64> {
        self.out
            .iter()
            .filter(|(_, l)| l.expires_ms <= now_ms)
            .map(|(k, _)| *k)
            .collect()
    }

    /// The leases out at `sup`. Scans the leases.
    pub(super) fn of(&self, sup: SupId) -> Vec<u64> {
        self.out
            .iter()
            .filter(|(_, l)| l.sup == sup)
            .map(|(k, _)| *k)
            .collect()
    }

    /// Which supervisors hold leases of which domains (those `pick` keeps),
    /// by domain id. Scans the leases.
    pub(super) fn holders(&self, mut pick: impl FnMut(u32) -> bool) -> Vec<(SupId, Vec<u32>)> {
        let mut by_sup: std::collections::BTreeMap<SupId, std::collections::BTreeSet<u32>> =
            std::collections::BTreeMap::new();
        for l in self.out.values().filter(|l| pick(l.domain_id)) {
            by_sup.entry(l.sup).or_default().insert(l.domain_id);
        }
        by_sup
            .into_iter()
            .map(|(s, ids)| (s, ids.into_iter().collect()))
            .collect()
    }

    /// The lowest `seq` of each domain's URLs out or waiting for the
    /// store's word (see `super::progress`), by domain id. Scans the leases.
    pub(super) fn lowest_open(&self) -> std::collections::HashMap<u32, i64> {
        let mut low: HashMap<u32, i64> = HashMap::new();
        let out = self.out.values().map(|l| (l.domain_id, l.seq));
        for (id, seq) in out.chain(self.unanswered.seqs()).filter(|(_, s)| *s > 0) {
            low.entry(id).and_modify(|m| *m = (*m).min(seq)).or_insert(seq);
        }
        low
    }

    /// Leases `sup` holds now (its credit in use).
    pub(super) fn held(&self, sup: SupId) -> u32 {
        self.held.get(sup).copied().unwrap_or(0)
    }

    /// URLs out, or ended and waiting for the store's word.
    pub(super) fn in_flight(&self) -> usize {
        self.out.len() + self.unanswered.len()
    }

    /// Nothing out, nor waiting for the store's word.
    pub(super) fn is_empty(&self) -> bool {
        self.out.is_empty() && self.unanswered.is_empty()
    }

    /// The leases out, by id (for the checks of the books).
    #[cfg(test)]
    pub(super) fn iter(&self) -> impl Iterator<Item = (&u64, &Lease)> {
        self.out.iter()
    }

    #[cfg(test)]
    pub(super) fn get(&self, lease: u64) -> Option<&Lease> {
        self.out.get(&lease)
    }

    /// The next lease id to issue.
    #[cfg(test)]
    pub(super) fn next_id(&self) -> u64 {
        self.next
    }
}
