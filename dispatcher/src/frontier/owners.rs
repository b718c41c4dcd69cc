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

use std::collections::VecDeque;

use super::domains::{DomainQ, Domains};
use super::SupId;

/// A supervisor, as far as domains go.
struct Sup {
    live: bool,
    /// Domains it owns (while live).
    domains: usize,
    /// Its domains that have work and room, in the order they are served.
    ready: VecDeque<u32>,
}

/// No owner (in [`Owner`]'s low 31 bits).
const NONE: u32 = 0x7fff_ffff;
/// [`Owner`]'s bit saying the domain is in its owner's ring.
const IN_READY: u32 = 0x8000_0000;

/// One domain's owner and place in its ring. Written only by [`Owners`].
/// One `u32`, not an `Option<SupId>`'s 16 bytes and a flag, in every
/// domain's record: the owning supervisor (or `NONE`) in the low 31
/// bits, and whether the domain sits in its owner's ready ring in the top
/// one.
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

    /// Whether the domain sits in its owner's ready ring.
    pub(super) fn in_ready(&self) -> bool {
        self.bits & IN_READY != 0
    }

    fn set_in_ready(&mut self, yes: bool) {
        self.bits = if yes {
            self.bits | IN_READY
        } else {
            self.bits & NONE
        };
    }

    /// Owned by `sup` (out of any ring); supervisor ids stay far below
    /// 2^31 (one per join).
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
            ready: VecDeque::new(),
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

    /// Puts domain `id` in its owner's ring, if it has one and is not
    /// there already (the caller knows it can be leased).
    pub(super) fn ready(&mut self, id: u32, o: &mut Owner) {
        if o.in_ready() {
            return;
        }
        if let Some(s) = o.get() {
            o.set_in_ready(true);
            self.sups[s].ready.push_back(id);
        }
    }

    /// The next domain in `sup`'s ring, out of it now, with its record:
    /// the caller checks that it is still `sup`'s and can be leased.
    pub(super) fn next_ready<'a>(
        &mut self,
        sup: SupId,
        domains: &'a mut Domains,
    ) -> Option<(u32, &'a mut DomainQ)> {
        let id = self.sups.get_mut(sup)?.ready.pop_front()?;
        let d = &mut domains[id];
        d.owner.set_in_ready(false);
        Some((id, d))
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
        s.ready.clear();
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

    /// (live, ring) of each supervisor: for messages of tests.
    #[cfg(test)]
    pub(super) fn rings(&self) -> Vec<(bool, VecDeque<u32>)> {
        self.sups.iter().map(|s| (s.live, s.ready.clone())).collect()
    }
}
