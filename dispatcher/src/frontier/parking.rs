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

use super::domains::Domains;

/// The fewest domains that may hold a window at once, whatever the budget:
/// enough to keep many nodes' children busy on domains crawled each at
/// its own polite pace.
pub(super) const MIN_ACTIVE: usize = 1_024;

/// One domain's place in the slots. Written only by [`Slots`], which
/// counts and lists what it says.
pub(super) struct Slot {
    /// The domain holds a slot: a window in memory, or a read of one.
    active: bool,
    /// The domain waits for a slot (listed in [`Slots::parked`]).
    parked: bool,
}

impl Slot {
    pub(super) fn new() -> Slot {
        Slot {
            active: false,
            parked: false,
        }
    }

    /// The domain holds a slot.
    pub(super) fn is_active(&self) -> bool {
        self.active
    }

    /// The domain waits for a slot.
    pub(super) fn is_parked(&self) -> bool {
        self.parked
    }
}

/// The slots: how many domains hold one, the bound, and the domains
/// waiting for one.
///
/// Invariants: `active` is the number of domains whose [`Slot`] is
/// active, and `parked` lists each domain whose [`Slot`] is parked once,
/// in the order they parked. Only this type flips a slot, and it moves the
/// count and the list with it.
pub(super) struct Slots {
    /// Domains holding a slot.
    active: usize,
    /// The most that may while memory is at the budget.
    max_active: usize,
    /// Domains waiting for a slot, longest waiting first.
    parked: VecDeque<u32>,
}

impl Slots {
    /// Unbounded, until [`Slots::bound`].
    pub(super) fn new() -> Slots {
        Slots {
            active: 0,
            max_active: usize::MAX,
            parked: VecDeque::new(),
        }
    }

    /// The most domains that may hold a window while memory is at the
    /// budget: the budget over the smallest window (see
    /// `Windows::window_now`), never under [`MIN_ACTIVE`]; unbounded if
    /// windows are not.
    pub(super) fn bound(&mut self, windowed: bool, budget: usize, floor: usize) {
        self.max_active = if windowed {
            (budget / floor).max(MIN_ACTIVE)
        } else {
            usize::MAX
        };
    }

    /// Bounds the domains holding a window to `n` (0: as
    /// [`Slots::bound`] set it).
    pub(super) fn bound_to(&mut self, n: usize) {
        if n > 0 {
            self.max_active = n;
        }
    }

    /// A domain with slot `s` may hold a window, or have one read in: it
    /// has a slot, or one is free. `blocked`: the domains paused or halted
    /// (see [`Slots::slot_free`]).
    pub(super) fn may_hold(&self, s: &Slot, blocked: usize) -> bool {
        s.active || self.slot_free(blocked)
    }

    /// Fewer domains hold a slot than the bound. Paused and halted domains
    /// (few) are not counted against it: their windows do not drain, and
    /// the domains parked behind them must still get their turn.
    fn slot_free(&self, blocked: usize) -> bool {
        self.active < self.bound_now(blocked)
    }

    /// The bound, with the blocked domains on top (see `slot_free`).
    fn bound_now(&self, blocked: usize) -> usize {
        self.max_active.saturating_add(blocked)
    }

    /// An active domain's turn is over when its window empties: parked
    /// domains wait for its slot, or `over_bound`.
    pub(super) fn turn_over(&self, blocked: usize) -> bool {
        (!self.parked.is_empty() && self.active >= self.bound_now(blocked)) || self.over_bound(blocked)
    }

    /// More domains hold a slot than the bound (they took theirs while
    /// memory was under the budget, or for a lease that came back).
    pub(super) fn over_bound(&self, blocked: usize) -> bool {
        self.active > self.bound_now(blocked)
    }

    /// Domain `id`, with slot `s`, waits for a slot, behind those parked
    /// before it.
    pub(super) fn park(&mut self, s: &mut Slot, id: u32) {
        debug_assert!(!s.parked);
        s.parked = true;
        self.parked.push_back(id);
    }

    /// Takes or gives back a domain's slot `s` after its window or its
    /// reads changed: a domain holds one while it `holds` a window (URLs
    /// in it, or a read of it wanted or under way). True when it gave its
    /// slot back: it keeps no room for a window then, and the slot is for
    /// the domains parked longest.
    pub(super) fn settle(&mut self, s: &mut Slot, holds: bool) -> bool {
        if holds && !s.active {
            s.active = true;
            self.active += 1;
        } else if !holds && s.active {
            s.active = false;
            self.active -= 1;
            return true;
        }
        false
    }

    /// The domain parked longest, no longer parked, while a slot is free
    /// (`blocked` as for [`Slots::may_hold`]). Not more than the bound
    /// even when memory is under the budget: windows half drained are
    /// under it, and unparking every domain then would read them all in at
    /// once.
    pub(super) fn unpark(&mut self, blocked: usize, domains: &mut Domains) -> Option<u32> {
        while self.slot_free(blocked) {
            let id = self.parked.pop_front()?;
            let s = &mut domains[id].slot;
            if !s.parked {
                continue;
            }
            s.parked = false;
            return Some(id);
        }
        None
    }

    /// Domains holding a slot.
    pub(super) fn active(&self) -> usize {
        self.active
    }

    /// Domains waiting for a slot.
    pub(super) fn parked(&self) -> usize {
        self.parked.len()
    }

    /// How often domain `id` is listed as parked.
    #[cfg(test)]
    pub(super) fn times_listed(&self, id: u32) -> usize {
        self.parked.iter().filter(|p| **p == id).count()
    }
}
