//! Which supervisor owns which domain, and each supervisor's ring of its
//! domains ready to be leased.
//!
//! One owner per domain keeps the domain's politeness in one place (its
//! child paces it). New domains go to the live supervisor with the fewest;
//! until assigning starts (while the expected supervisors are still
//! joining) they wait unowned, so the first supervisor to arrive does not
//! get them all.
//!
//! Fairness: `take` walks a supervisor's ring one URL per domain at a
//! time, so one big or slow domain cannot crowd out the others.
//!
//! Two rings: domains being crawled (a result came in the last sweep
//! period, see `domains`), and the others, which wait their first turn or
//! came back after a long pause. The first ring is served first; a pick
//! goes to the second when the first has nothing ready (every domain being
//! crawled has its URLs out), or in place of a domain that spent its
//! session: [`SESSION_LEASES`] leases in a row while being crawled, after
//! which it waits at the back of the second ring (Heritrix's queue
//! rotation after a session budget, for the same reason).
//!
//! Why: the domains being crawled must stay few enough that each one's
//! next URL comes within its politeness gap and its connection's idle
//! time. With a single ring, a crawl of 100,000 small domains under a
//! credit limit walked all of them before a domain's next URL: 19 s
//! between two requests to a domain at the median (`bench.py --web wide
//! --hosts 100000`), so its connection had closed, and a new TLS handshake
//! (85 % of the children's CPU there) was paid again. Serving the first
//! ring first with one pick in eight from the second was not enough: a
//! domain there takes about nine picks before its URLs run out, so the
//! domains being crawled grew without bound (a new one every eight picks,
//! one done every nine) and the gap with them, 3.5 s at the median in the
//! first minute to 25 s in the eighth, when connections were lost again.
//! Now new domains start as fast as the crawled ones leave room for them,
//! and a big domain gives way to a waiting one after its session.

use std::collections::VecDeque;

use super::domains::{DomainQ, Domains};
use super::SupId;

/// A supervisor, as far as domains go.
struct Sup {
    live: bool,
    /// Domains it owns (while live).
    domains: usize,
    /// Its domains that have work and room and are being crawled, in the
    /// order they are served.
    warm: VecDeque<u32>,
    /// Its other domains that have work and room, in the order they are served.
    ready: VecDeque<u32>,
    /// Picks owed to `ready`: one for each of its domains that spent its
    /// session, so one waiting domain takes the place of each.
    owed: u32,
}

/// Leases in a row a domain gets while it is being crawled before it
/// waits its turn behind the domains that wait (module doc). A domain of
/// up to this many URLs is crawled in one session, on one connection;
/// a bigger one pays a new connection (a TLS handshake: about two pages'
/// CPU) every this many pages, 2 % of them. At most 127 (its count shares
/// a byte, see `domains`).
pub(super) const SESSION_LEASES: u8 = 100;

/// Which of a supervisor's rings a domain waits in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Ring {
    /// A result of it came lately: served first.
    Warm,
    Cold,
}

/// No owner (in [`Owner`]'s low 30 bits).
const NONE: u32 = 0x3fff_ffff;
/// [`Owner`]'s bit saying the domain is in its owner's cold ring.
const IN_READY: u32 = 0x8000_0000;
/// [`Owner`]'s bit saying the domain is in its owner's warm ring.
const IN_WARM: u32 = 0x4000_0000;

/// One domain's owner and place in its rings. Written only by [`Owners`].
/// One `u32`, not an `Option<SupId>`'s 16 bytes and flags, in every
/// domain's record: the owning supervisor (or `NONE`) in the low 30
/// bits, and whether the domain sits in its owner's cold and warm rings
/// in the top two.
pub(super) struct Owner {
    bits: u32,
}

impl Owner {
    pub(super) fn new() -> Owner {
        Owner { bits: NONE }
    }

    pub(super) fn get(&self) -> Option<SupId> {
        let sup = self.bits & NONE;
        (sup != NONE).then_some(sup as SupId)
    }

    /// Whether the domain sits in one of its owner's rings.
    pub(super) fn in_ready(&self) -> bool {
        self.bits & (IN_READY | IN_WARM) != 0
    }

    fn in_ring(&self, ring: Ring) -> bool {
        self.bits & Self::flag(ring) != 0
    }

    fn set_in_ring(&mut self, ring: Ring, yes: bool) {
        let flag = Self::flag(ring);
        self.bits = if yes { self.bits | flag } else { self.bits & !flag };
    }

    fn flag(ring: Ring) -> u32 {
        match ring {
            Ring::Warm => IN_WARM,
            Ring::Cold => IN_READY,
        }
    }

    /// Owned by `sup` (out of any ring); supervisor ids stay far below
    /// 2^30 (one per join).
    fn set(&mut self, sup: SupId) {
        self.bits = (sup as u32) & NONE;
    }

    fn clear(&mut self) {
        self.bits = NONE;
    }
}

/// The supervisors and the domains they own.
///
/// Invariants: a live supervisor's `domains` is the number of domains
/// whose [`Owner`] names it (a supervisor that left owns none: its count
/// is zero and its domains are handed on); a domain marked `in_ready` is
/// in its owner's ring. A ring may still list a domain that left it
/// (moved, handed on), which whoever pops it checks. Every domain with
/// work and no owner is in `unassigned`, which may also list domains that
/// got an owner since.
pub(super) struct Owners {
    sups: Vec<Sup>,
    /// Domains with work but no live supervisor to own them.
    unassigned: Vec<u32>,
    /// Domains get owners only once this is set.
    assigning: bool,
}

impl Owners {
    pub(super) fn new() -> Owners {
        Owners {
            sups: Vec::new(),
            unassigned: Vec::new(),
            assigning: false,
        }
    }

    /// A supervisor joined: its id.
    pub(super) fn add(&mut self) -> SupId {
        self.sups.push(Sup {
            live: true,
            domains: 0,
            warm: VecDeque::new(),
            ready: VecDeque::new(),
            owed: 0,
        });
        self.sups.len() - 1
    }

    /// Supervisors ever joined: ids run below this.
    pub(super) fn count(&self) -> usize {
        self.sups.len()
    }

    pub(super) fn is_live(&self, sup: SupId) -> bool {
        self.sups.get(sup).is_some_and(|s| s.live)
    }

    pub(super) fn is_assigning(&self) -> bool {
        self.assigning
    }

    /// Starts giving domains to supervisors: the domains that waited, to
    /// be given owners now (see [`Owners::ensure`]).
    pub(super) fn start_assigning(&mut self) {
        self.assigning = true;
    }

    /// The domains that waited for an owner, once assigning: each to be
    /// given one now, if it still has none.
    pub(super) fn take_unassigned(&mut self) -> Vec<u32> {
        if !self.assigning {
            return Vec::new();
        }
        std::mem::take(&mut self.unassigned)
    }

    /// Domains supervisor `sup` owns.
    pub(super) fn domains_of(&self, sup: SupId) -> usize {
        self.sups.get(sup).map_or(0, |s| s.domains)
    }

    /// Gives domain `id`, if ownerless, to the live supervisor with the
    /// fewest domains; it waits in `unassigned` while there is none or
    /// assigning has not started.
    pub(super) fn ensure(&mut self, id: u32, o: &mut Owner) {
        if o.get().is_some() {
            return;
        }
        if !self.assigning {
            self.unassigned.push(id);
            return;
        }
        let best = self
            .sups
            .iter()
            .enumerate()
            .filter(|(_, s)| s.live)
            .min_by_key(|(_, s)| s.domains)
            .map(|(i, _)| i);
        match best {
            Some(s) => {
                o.set(s);
                self.sups[s].domains += 1;
            }
            None => self.unassigned.push(id),
        }
    }

    /// Puts domain `id` in its owner's `ring`, if it has one and is not
    /// there already (the caller knows it can be leased). A domain may sit
    /// in both rings (it came back warm while waiting in the cold one):
    /// whichever reaches it first serves it, and the other finds it
    /// served, as it finds domains that moved.
    pub(super) fn ready(&mut self, id: u32, o: &mut Owner, ring: Ring) {
        if o.in_ring(ring) || (ring == Ring::Cold && o.in_ring(Ring::Warm)) {
            return;
        }
        if let Some(s) = o.get() {
            o.set_in_ring(ring, true);
            let sup = &mut self.sups[s];
            match ring {
                Ring::Warm => sup.warm.push_back(id),
                Ring::Cold => sup.ready.push_back(id),
            }
        }
    }

    /// The next domain of `sup`'s rings (see the module doc), out of its
    /// ring now, with its record and the ring it came from: the caller
    /// checks that it is still `sup`'s and can be leased.
    pub(super) fn next_ready<'a>(
        &mut self,
        sup: SupId,
        domains: &'a mut Domains,
    ) -> Option<(u32, &'a mut DomainQ, Ring)> {
        let s = self.sups.get_mut(sup)?;
        if s.ready.is_empty() {
            s.owed = 0;
        }
        let (id, ring) = if s.owed == 0 && !s.warm.is_empty() {
            (s.warm.pop_front()?, Ring::Warm)
        } else {
            s.owed = s.owed.saturating_sub(1);
            (s.ready.pop_front()?, Ring::Cold)
        };
        let d = &mut domains[id];
        d.owner.set_in_ring(ring, false);
        Some((id, d, ring))
    }

    /// A domain of `sup` spent its session (it waits in the cold ring
    /// next): a domain that waited is owed its place.
    pub(super) fn session_spent(&mut self, sup: SupId) {
        if let Some(s) = self.sups.get_mut(sup) {
            s.owed = s.owed.saturating_add(1);
        }
    }

    /// Supervisor `sup` left: it owns nothing any more (its domains are
    /// handed on with [`Owners::orphan`]). False if there is no such
    /// supervisor.
    pub(super) fn leave(&mut self, sup: SupId) -> bool {
        let Some(s) = self.sups.get_mut(sup) else {
            return false;
        };
        s.live = false;
        s.domains = 0;
        s.warm.clear();
        s.ready.clear();
        s.owed = 0;
        true
    }

    /// A domain of a supervisor that left (whose count is zero already)
    /// has no owner now.
    pub(super) fn orphan(&mut self, o: &mut Owner) {
        debug_assert!(o.get().is_some_and(|s| !self.is_live(s)));
        o.clear();
    }

    /// Makes `sup` the owner of a domain unless a live supervisor owns it
    /// (a supervisor that rejoined, adopting the domain's leases).
    pub(super) fn give(&mut self, o: &mut Owner, sup: SupId) {
        let owner = o.get();
        if owner == Some(sup) || owner.is_some_and(|s| self.sups[s].live) {
            return;
        }
        o.set(sup);
        self.sups[sup].domains += 1;
    }

    /// A domain owned by `from` goes to `to` (the same supervisor on a new
    /// connection). False if `from` did not own it.
    pub(super) fn transfer(&mut self, o: &mut Owner, from: SupId, to: SupId) -> bool {
        if o.get() != Some(from) {
            return false;
        }
        o.set(to);
        self.sups[from].domains = self.sups[from].domains.saturating_sub(1);
        self.sups[to].domains += 1;
        true
    }

    /// Domain `id` moves to `to` (a rebalance): out of its owner's ring
    /// and count, into `to`'s count.
    pub(super) fn hand_over(&mut self, id: u32, o: &mut Owner, to: SupId) {
        let from = o.get();
        o.set(to);
        if let Some(from) = from {
            self.sups[from].domains = self.sups[from].domains.saturating_sub(1);
            self.sups[from].warm.retain(|&x| x != id);
            self.sups[from].ready.retain(|&x| x != id);
        }
        self.sups[to].domains += 1;
    }

    /// A domain was forgotten: its owner counts it no more.
    pub(super) fn forget(&mut self, o: &Owner) {
        if let Some(s) = o.get().and_then(|s| self.sups.get_mut(s)) {
            s.domains = s.domains.saturating_sub(1);
        }
    }

    /// Domains `gone` (ascending) were forgotten: waiting for an owner (none
    /// live, or not assigning yet), their entries must not name a reused
    /// record.
    pub(super) fn forgotten(&mut self, gone: &[u32]) {
        if !gone.is_empty() && !self.unassigned.is_empty() {
            self.unassigned.retain(|id| gone.binary_search(id).is_err());
        }
    }

    /// (live, warm ring, cold ring) of each supervisor: for messages of tests.
    #[cfg(test)]
    pub(super) fn rings(&self) -> Vec<(bool, VecDeque<u32>, VecDeque<u32>)> {
        self.sups
            .iter()
            .map(|s| (s.live, s.warm.clone(), s.ready.clone()))
            .collect()
    }
}
