//! A bounded set of active domains: once memory holds the budget, only so
//! many domains keep a window; the others are parked, their queues wholly
//! in the store, until a slot is free.
//!
//! Why: past the budget a domain's window shrinks to its share of the
//! budget, but never under twice the per-domain in-flight maximum (a
//! smaller window would starve the domain). With many domains that floor,
//! not the budget, set memory: 10,000 domains' windows of 32 held 320,000
//! URLs under a budget of 100,000. Now a domain needs a slot to hold a
//! window or to have one read in, and while memory is at the budget at
//! most `budget / floor` domains get one (never fewer than
//! [`MIN_ACTIVE`], so that a small budget does not crawl a few domains at
//! a time). URLFrontier and BUbiNG's workbench keep the same shape.
//!
//! A parked domain keeps its small record (cursor, last `seq`, count in
//! the store), so nothing about its queue is lost: a URL admitted to it
//! meanwhile is counted in the store like any other that spills, and the
//! read that follows its turn finds it.
//!
//! Turns: while domains wait, an active domain whose window empties gives
//! its slot back instead of reading its next window, and waits behind
//! them. So every domain with work gets a window in turn, and one big or
//! slow domain cannot keep a slot for the whole crawl. While more domains
//! hold a slot than the bound (they took theirs under the budget), new
//! URLs go to the store (`window_takes`), so that windows drain.
//!
//! Slots never come before correctness: a URL that must be in memory (a
//! lease that ended without a result, an unconfirmed URL behind the
//! cursor) takes a slot even past the bound, which holds again as windows
//! drain.

use std::collections::VecDeque;

use super::{DomainQ, Frontier, RefillState};

/// The fewest domains that may hold a window at once, whatever the budget:
/// enough to keep many nodes' children busy on domains crawled each at
/// its own polite pace.
pub(super) const MIN_ACTIVE: usize = 1_024;

impl Frontier {
    /// The most domains that may hold a window while memory is at the
    /// budget: the budget over the smallest window (see `window_now`).
    pub(super) fn active_bound(&self) -> usize {
        if self.window == usize::MAX {
            return usize::MAX;
        }
        let floor = 2 * self.max_inflight_per_domain as usize;
        (self.budget / floor).max(MIN_ACTIVE)
    }

    /// Bounds the domains holding a window to `n` once memory is at the
    /// budget, whatever the budget (0: the budget over the smallest
    /// window). Call after [`Frontier::with_window`].
    pub(crate) fn with_active_bound(mut self, n: usize) -> Frontier {
        if n > 0 {
            self.max_active = n;
        }
        self
    }

    /// Memory holds `budget` queued URLs or more: windows are bounded, and
    /// a domain needs a slot to hold one.
    pub(super) fn short(&self) -> bool {
        self.queued - self.spilled_total >= self.budget
    }

    /// Domain `id` may hold a window, or have one read in: it has a slot,
    /// or one is free. (A URL admitted while memory is under the budget
    /// goes to its window regardless: see `window_takes`.) Reads are
    /// bounded even then: a resumed crawl starts with memory empty and
    /// every domain's queue in the store, and would otherwise read a
    /// window of each.
    pub(super) fn may_hold_window(&self, id: u32) -> bool {
        self.domains[id as usize].active || self.slot_free()
    }

    /// Fewer domains hold a slot than the bound. Paused and halted domains
    /// (few) are not counted against it: their windows do not drain, and
    /// the domains parked behind them must still get their turn.
    fn slot_free(&self) -> bool {
        self.active < self.bound_now()
    }

    /// The bound, with the blocked domains on top (see `slot_free`).
    fn bound_now(&self) -> usize {
        self.max_active.saturating_add(self.blocked.len())
    }

    /// An active domain's turn is over when its window empties: parked
    /// domains wait for its slot, or `over_bound`.
    pub(super) fn turn_over(&self) -> bool {
        (!self.parked.is_empty() && self.active >= self.bound_now()) || self.over_bound()
    }

    /// More domains hold a slot than the bound (they took theirs while
    /// memory was under the budget, or for a lease that came back).
    pub(super) fn over_bound(&self) -> bool {
        self.active > self.bound_now()
    }

    /// Domain `id` waits for a slot, behind those parked before it.
    pub(super) fn park(&mut self, id: u32) {
        self.domains[id as usize].refill = RefillState::Parked;
        self.parked.push_back(id);
        self.settle_slot(id);
    }

    /// Takes or gives back domain `id`'s slot after its window or its
    /// reads changed: a domain holds one while URLs are in its window or a
    /// read of it is wanted or under way. A slot given back goes to the
    /// domains parked longest.
    pub(super) fn settle_slot(&mut self, id: u32) {
        let d = &mut self.domains[id as usize];
        let holds = d.holds_window();
        if holds && !d.active {
            d.active = true;
            self.active += 1;
        } else if !holds && d.active {
            d.active = false;
            // Its empty window keeps no room either: a domain waiting for
            // its turn kept room for its largest window (a heap profile at
            // a million known URLs: 12.8 MB of slots, room for 320,000
            // URLs, under a budget of 100,000). Growing it again costs an
            // allocation or two per window filled.
            d.queue = VecDeque::new();
            self.active -= 1;
            self.unpark();
        }
    }

    /// Gives the free slots to parked domains, longest parked first. Also
    /// called once a tick (from [`Frontier::refills`]): a domain paused or
    /// halted meanwhile frees a slot without giving its own back. Not
    /// more than the bound even when memory is under the budget: windows
    /// half drained are under it, and unparking every domain then would
    /// read them all in at once.
    pub(super) fn unpark(&mut self) {
        while self.slot_free() {
            let Some(id) = self.parked.pop_front() else { break };
            let d = &mut self.domains[id as usize];
            if d.refill != RefillState::Parked {
                continue;
            }
            d.refill = RefillState::Idle;
            self.want_refill(id);
            self.settle_slot(id);
        }
    }

    /// Domains holding a window or a read (a slot).
    pub(crate) fn active_domains(&self) -> usize {
        self.active
    }

    /// Domains waiting for a slot, their queues wholly in the store.
    pub(crate) fn parked_domains(&self) -> usize {
        self.parked.len()
    }

    /// The slots' books balance: every domain holding a window or a read
    /// has a slot, no other does (nor keeps room for a window), the count
    /// is theirs, and every parked domain is listed once.
    #[cfg(test)]
    pub(super) fn check_slots(&self) -> Result<(), String> {
        let mut flagged = 0;
        for d in &self.domains {
            let holds = d.holds_window();
            if holds != d.active {
                return Err(format!(
                    "{}: holds a window {holds}, has a slot {}",
                    d.name, d.active
                ));
            }
            if !d.active && d.queue.capacity() > 0 {
                return Err(format!(
                    "{}: no slot, but room for {} URLs",
                    d.name,
                    d.queue.capacity()
                ));
            }
            flagged += usize::from(d.active);
            if d.refill == RefillState::Parked {
                let id = self.domain_ids.get(&d.name, &self.domains);
                let listed = self.parked.iter().filter(|p| Some(**p) == id).count();
                if listed != 1 {
                    return Err(format!("{} parked, listed {listed} times", d.name));
                }
            }
        }
        let parked = self
            .domains
            .iter()
            .filter(|d| d.refill == RefillState::Parked)
            .count();
        if parked != self.parked.len() {
            return Err(format!("{parked} domains parked, {} listed", self.parked.len()));
        }
        if flagged != self.active {
            return Err(format!("{flagged} domains hold slots, {} counted", self.active));
        }
        Ok(())
    }
}

impl DomainQ {
    /// URLs are in its window, or a read of it is wanted or under way:
    /// what a slot is for.
    fn holds_window(&self) -> bool {
        !self.queue.is_empty() || matches!(self.refill, RefillState::Wanted | RefillState::Reading)
    }
}
