//! Domains not handed out for now: paused until a time (the circuit
//! breaker, a moved domain's hand-over) or halted until un-halted.
//!
//! Few domains are blocked at once, so they are listed and the list is
//! scanned once a tick for pauses that are over, rather than every domain.

use super::domains::Domains;

/// `until` of a halted domain.
const HALTED: u64 = u64::MAX;

/// One domain's block. Written only by [`Blocks`], which lists the
/// blocked domains.
pub(super) struct Block {
    /// Not handed out before this time (Unix ms): 0 = free, `HALTED` =
    /// until un-halted.
    until: u64,
}

impl Block {
    pub(super) fn new() -> Block {
        Block { until: 0 }
    }

    /// Paused or halted.
    pub(super) fn is_blocked(&self) -> bool {
        self.until != 0
    }

    pub(super) fn is_halted(&self) -> bool {
        self.until == HALTED
    }
}

/// The blocked domains.
///
/// Invariant: a domain is listed, once, exactly while its [`Block`] is
/// blocked, so that the once-a-tick scan finds every pause that ends.
pub(super) struct Blocks {
    listed: Vec<u32>,
}

impl Blocks {
    pub(super) fn new() -> Blocks {
        Blocks { listed: Vec::new() }
    }

    /// Blocks domain `id`, whose block is `b`, until `until_ms` at least
    /// (a later block stands).
    pub(super) fn pause(&mut self, id: u32, b: &mut Block, until_ms: u64) {
        if b.until == 0 {
            self.listed.push(id);
        }
        b.until = b.until.max(until_ms);
    }

    /// Blocks domain `id` until it is un-halted.
    pub(super) fn halt(&mut self, id: u32, b: &mut Block) {
        self.pause(id, b, HALTED);
    }

    /// Turns a halt into a pause that is already over (the next
    /// [`Blocks::release`] frees it); false if `b` was not halted.
    pub(super) fn unhalt(&mut self, b: &mut Block) -> bool {
        b.until == HALTED && self.lift(b)
    }

    /// Turns any block into a pause that is already over (the next
    /// [`Blocks::release`] frees it); false if `b` was not blocked.
    pub(super) fn lift(&mut self, b: &mut Block) -> bool {
        if b.until == 0 {
            return false;
        }
        b.until = 1;
        true
    }

    /// The next listed domain, from position `*at` on, whose pause is
    /// over at `now_ms`: unblocked and no longer listed. `*at` moves past
    /// those still blocked, so that a caller looping until `None` scans
    /// the list once, and sees domains blocked meanwhile too.
    pub(super) fn release(&mut self, at: &mut usize, now_ms: u64, domains: &mut Domains) -> Option<u32> {
        while let Some(&id) = self.listed.get(*at) {
            let b = &mut domains[id].block;
            if b.until <= now_ms {
                b.until = 0;
                self.listed.swap_remove(*at);
                return Some(id);
            }
            *at += 1;
        }
        None
    }

    /// The blocked domains, in no particular order.
    pub(super) fn ids(&self) -> &[u32] {
        &self.listed
    }

    /// Domains blocked.
    pub(super) fn len(&self) -> usize {
        self.listed.len()
    }
}
