//! The windows: each domain's next URLs in memory, the rest of its queue
//! in the store, and the counts of what is where.
//!
//! Once `budget` URLs are queued in memory, a domain keeps a window of at
//! most `window` URLs (or its share of the budget). A URL admitted while
//! the window is full, or while older URLs of the domain wait in the
//! store, is only counted (`spilled`). When a window runs low the frontier
//! asks for a read of the domain's next URLs after its `cursor`
//! ([`super::Frontier::refills`]); the shell reads them and hands them
//! back ([`super::Frontier::refilled`]). Start-up counts each domain's
//! stored queue here too.
//!
//! Which domains may hold a window at all is `parking`'s; when a read is
//! wanted and when a domain may be leased is the frontier's, which asks
//! this part.

use std::collections::{HashMap, VecDeque};

use super::seqs::Seqs;

/// A URL queued in memory.
pub(super) struct Queued {
    pub(super) url: String,
    pub(super) depth: u16,
    /// Its place in the stored frontier (0: not in it, as a revisit).
    pub(super) seq: i64,
    /// Unix ms when it was queued (0 = unknown): for `queue_wait`.
    pub(super) queued_ms: u64,
}

/// Where a domain's next read stands. (A domain waiting for a slot is
/// `Idle` here, and parked in `parking`.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum RefillState {
    Idle,
    /// In [`Windows::wanted`].
    Wanted,
    /// Handed out by [`Windows::start_read`], not answered yet.
    Reading,
}

/// A read the shell should do: the queued URLs of `domain` with a `seq`
/// in `(after, upto]`, in `seq` order, at most `limit` of them. Every URL
/// admitted up to `upto` is already written (`upto` is at most the
/// writer's durable `seq`), so a short answer means there are no more.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refill {
    pub domain: String,
    pub after: i64,
    pub upto: i64,
    pub limit: usize,
    /// Entries up to this `seq` were stored before this run: each may be
    /// finished by a stored page (`crate::finished`), so the read looks
    /// them up. 0: none (a read past what the store held at start-up).
    pub finished_upto: i64,
    pub(super) id: u32,
}

/// One URL of a refill's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Stored {
    pub url: String,
    pub depth: u16,
    pub seq: i64,
}

/// The store's answer to a [`Refill`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ReadPage {
    /// The URLs read, in `seq` order (malformed documents left out).
    pub urls: Vec<Stored>,
    /// The read reached its limit: more may follow.
    pub full: bool,
    /// The highest `seq` the read went past, malformed segments included:
    /// the queue goes on after it.
    pub last_seq: i64,
    /// The `seq`s, in order, of those of `urls` that are finished (their
    /// page is stored, or they ended without one, in an earlier run:
    /// `crate::finished`), not to be queued.
    pub finished: Vec<i64>,
}

impl ReadPage {
    /// A page of well-formed URLs, as a store returns `limit` at most.
    #[cfg(test)]
    pub(crate) fn of(urls: Vec<Stored>, limit: usize) -> ReadPage {
        ReadPage {
            full: urls.len() >= limit,
            last_seq: urls.iter().map(|u| u.seq).max().unwrap_or(0),
            urls,
            finished: Vec::new(),
        }
    }
}

/// One domain's queue: its window in memory, and where the rest of it
/// stands in the store. Written only by [`Windows`], which keeps the
/// totals over all domains.
///
/// Invariants: every queued URL of the domain with a `seq` up to `cursor`
/// is in the window, out on a lease, or finished, and `spilled` counts the
/// queued ones only in the store (above the cursor, up to `last_seq`). A
/// read skips the `seq`s in `taken` (out on a lease already) and in
/// `unverified` (not known to be stored), so that no URL is queued twice.
pub(super) struct Window {
    /// The domain's next URLs, in memory.
    queue: VecDeque<Queued>,
    /// Queued URLs of this domain that are only in the store: those with
    /// a `seq` above `cursor` (and at most `last_seq`).
    spilled: u64,
    /// Every queued URL with a `seq` up to this one is in the window, out
    /// on a lease, or finished: the store's queue goes on after it.
    cursor: i64,
    /// The highest `seq` admitted to this domain.
    last_seq: i64,
    /// `seq`s above `cursor` adopted straight from the store: a later read
    /// skips them (they are out on a lease already).
    taken: Seqs,
    /// `seq`s inserted for URLs the seen-set was unsure of, until the
    /// frontier writer says whether the store took them (see
    /// [`super::Frontier::admit_unverified`]): a read that returns one
    /// skips it.
    unverified: Seqs,
    /// Of a resumed queue (start-up's summary, `crate::resume`), the
    /// URLs counted in `spilled`: an estimate. While the reads are in the
    /// URLs stored before this run (up to [`Windows::resumed_upto`]) it
    /// never drops under one (a read that finds more URLs than counted
    /// counts them in as it finds them), and what is left of it once they
    /// are past is dropped (finished URLs the estimate counted). Without
    /// this, a low estimate ran out before the reads reached the queue's
    /// last URLs, and they were never crawled. (32 bits, beside `refill`:
    /// no bigger a record.)
    resumed_left: u32,
    refill: RefillState,
}

impl Window {
    pub(super) fn new() -> Window {
        Window {
            queue: VecDeque::new(),
            spilled: 0,
            cursor: 0,
            last_seq: 0,
            taken: Seqs::default(),
            unverified: Seqs::default(),
            resumed_left: 0,
            refill: RefillState::Idle,
        }
    }

    /// URLs in the window.
    pub(super) fn in_memory(&self) -> usize {
        self.queue.len()
    }

    /// URLs of the domain queued, in memory or only in the store.
    pub(super) fn queued(&self) -> usize {
        self.queue.len() + self.spilled as usize
    }

    /// Some of the domain's queued URLs are only in the store.
    pub(super) fn has_stored(&self) -> bool {
        self.spilled > 0
    }

    /// The `seq`s of the domain's URLs only in the store: after the
    /// cursor, up to its last admitted one.
    pub(super) fn stored_range(&self) -> (i64, i64) {
        (self.cursor, self.last_seq)
    }

    /// The lowest `seq` of the domain's URLs that the window holds or
    /// counts: queued in memory, only in the store (after the cursor),
    /// adopted from the store or waiting for the writer's word. (Those
    /// out on a lease are the leases'.) See `super::progress`.
    pub(super) fn lowest_open(&self) -> Option<i64> {
        let queued = self.queue.iter().map(|q| q.seq).filter(|&s| s > 0).min();
        let stored = (self.spilled > 0).then(|| self.cursor.saturating_add(1));
        [queued, stored, self.taken.min(), self.unverified.min()]
            .into_iter()
            .flatten()
            .min()
    }

    /// The highest `seq` admitted to the domain (0: none).
    pub(super) fn last_seq(&self) -> i64 {
        self.last_seq
    }

    /// URLs are in the window, or a read of it is wanted or under way:
    /// what a slot (see `parking`) is for.
    pub(super) fn holds(&self) -> bool {
        !self.queue.is_empty() || matches!(self.refill, RefillState::Wanted | RefillState::Reading)
    }

    /// Nothing queued, read, adopted from the store or waiting for the
    /// writer's word: nothing of the domain's queue to keep.
    pub(super) fn is_empty(&self) -> bool {
        self.queue.is_empty()
            && self.spilled == 0
            && self.refill == RefillState::Idle
            && self.taken.is_empty()
            && self.unverified.is_empty()
    }

    /// Room kept for URLs (the window's buffer).
    #[cfg(test)]
    pub(super) fn capacity(&self) -> usize {
        self.queue.capacity()
    }

    /// The URLs in the window, in order.
    #[cfg(test)]
    pub(super) fn urls(&self) -> impl Iterator<Item = &str> {
        self.queue.iter().map(|q| q.url.as_str())
    }

    /// (in memory, spilled, cursor, last seq, read): for messages of tests.
    #[cfg(test)]
    pub(super) fn summary(&self) -> (usize, u64, i64, i64, RefillState) {
        (
            self.queue.len(),
            self.spilled,
            self.cursor,
            self.last_seq,
            self.refill,
        )
    }
}

/// The totals over every domain's [`Window`], the bounds on memory, and
/// the reads wanted.
///
/// Invariants: `queued` is the sum over the domains of their window's URLs
/// and their `spilled`, `spilled` the sum of their `spilled`, and
/// `unconfirmed` the sum of their `unverified`: every method that changes
/// a window changes the totals with it. A domain is listed in `wanted`
/// exactly while its window's read is `Wanted`.
pub(super) struct Windows {
    queued: usize,
    /// Queued URLs only in the store.
    spilled: usize,
    /// Unverified URLs the writer has not confirmed yet (not `queued`).
    unconfirmed: usize,
    /// Once `budget` URLs are queued in memory, a domain's window holds at
    /// most this many (or fewer: see `window_now`); reads fill it by half
    /// a window at least.
    window: usize,
    budget: usize,
    /// The smallest window: twice the per-domain in-flight maximum, so
    /// that a window never starves a domain that could be crawled faster.
    floor: usize,
    /// Domains whose window runs low while URLs wait in the store.
    wanted: VecDeque<u32>,
    /// The highest `seq` found in the store at start-up: written, whatever
    /// this process's writer has written since.
    resumed_upto: i64,
    /// Stored entries reads found finished by their page, not yet taken
    /// ([`Windows::take_finished`]).
    finished: Vec<super::Relink>,
}

/// What [`Windows::start_read`] made of a wanted domain.
pub(super) enum Read {
    /// Nothing of it is in the store any more: no read.
    Done,
    /// Its next URLs are not written yet: asked again later.
    Later,
    /// Read this.
    Now(Refill),
}

impl Windows {
    /// Unbounded: every queued URL stays in memory.
    pub(super) fn new() -> Windows {
        Windows {
            queued: 0,
            spilled: 0,
            unconfirmed: 0,
            window: usize::MAX,
            budget: 0,
            floor: 0,
            wanted: VecDeque::new(),
            resumed_upto: 0,
            finished: Vec::new(),
        }
    }

    /// Bounds windows to `window` URLs (never under `floor`) once `budget`
    /// URLs are queued in memory.
    pub(super) fn bound(&mut self, window: usize, budget: usize, floor: usize) {
        self.window = window.max(floor);
        self.budget = budget;
        self.floor = floor;
    }

    /// Whether windows are bounded at all.
    pub(super) fn is_bounded(&self) -> bool {
        self.window != usize::MAX
    }

    /// URLs queued, in memory or only in the store.
    pub(super) fn queued(&self) -> usize {
        self.queued
    }

    /// URLs queued only in the store.
    pub(super) fn spilled(&self) -> usize {
        self.spilled
    }

    /// Unverified URLs waiting for the writer's word.
    pub(super) fn unconfirmed(&self) -> usize {
        self.unconfirmed
    }

    fn in_memory(&self) -> usize {
        self.queued - self.spilled
    }

    /// Memory holds `budget` queued URLs or more: windows are bounded, and
    /// a domain needs a slot to hold one.
    pub(super) fn short(&self) -> bool {
        self.in_memory() >= self.budget
    }

    /// Whether `n` more URLs fit in memory beside those queued there now.
    pub(super) fn fits(&self, n: u64) -> bool {
        let held = self.queued.saturating_sub(self.spilled) as u64;
        held.saturating_add(n) <= self.budget as u64
    }

    /// The window a domain keeps once memory is at the budget, with
    /// `domains` held: `window`, or the budget's share of each domain if
    /// that is smaller (10,000 domains' windows of 256 held 2.56 million
    /// URLs, whatever the budget), but never under `floor`, so that a
    /// window never starves its domain. The share only shrinks as domains
    /// are met; a window already fuller just drains.
    pub(super) fn window_now(&self, domains: usize) -> usize {
        if self.window == usize::MAX {
            // No window set: memory is not bounded.
            return usize::MAX;
        }
        let share = self.budget / domains.max(1);
        self.window.min(share.max(self.floor))
    }

    /// `w` is below the window it may keep now.
    pub(super) fn has_room(&self, w: &Window, domains: usize) -> bool {
        w.queue.len() < self.window_now(domains)
    }

    /// `w` runs low while URLs of it wait in the store, and no read of it
    /// is wanted or under way: a read is due (if it may hold a window).
    pub(super) fn runs_low(&self, w: &Window, domains: usize) -> bool {
        let low = self.window_now(domains) / 2;
        w.spilled > 0 && w.refill == RefillState::Idle && w.queue.len() <= low
    }

    /// Queues a URL at the back of `w`.
    pub(super) fn push_back(&mut self, w: &mut Window, url: String, depth: u16, seq: i64, now_ms: u64) {
        if w.queue.capacity() == 0 {
            // Room for one: many domains never queue a second URL, and a
            // first push would make room for four (160 bytes).
            w.queue.reserve_exact(1);
        }
        w.queue.push_back(Queued {
            url,
            depth,
            seq,
            queued_ms: now_ms,
        });
        self.queued += 1;
    }

    /// Queues a URL at the front of `w`, where a lease took it from.
    pub(super) fn push_front(&mut self, w: &mut Window, url: String, depth: u16, seq: i64) {
        w.queue.push_front(Queued {
            url,
            depth,
            seq,
            queued_ms: 0,
        });
        self.queued += 1;
    }

    /// Takes `w`'s next URL out of the queue (to be leased).
    pub(super) fn pop(&mut self, w: &mut Window) -> Option<Queued> {
        let q = w.queue.pop_front()?;
        self.queued -= 1;
        Some(q)
    }

    /// A new URL of `w` with `seq`, higher than any before: queued at the
    /// back of the window if `in_memory` (the cursor moves past it), else
    /// counted in the store.
    pub(super) fn admit(
        &mut self,
        w: &mut Window,
        url: String,
        depth: u16,
        seq: i64,
        now_ms: u64,
        in_memory: bool,
    ) {
        w.last_seq = w.last_seq.max(seq);
        if in_memory {
            w.cursor = w.cursor.max(seq);
            self.push_back(w, url, depth, seq, now_ms);
            return;
        }
        w.spilled += 1;
        self.spilled += 1;
        self.queued += 1;
    }

    /// A URL inserted with `seq` whose fate the writer has yet to tell.
    pub(super) fn admit_unverified(&mut self, w: &mut Window, seq: i64) {
        w.unverified.push(seq);
        self.unconfirmed += 1;
    }

    /// The writer's word on unverified `seq` of `w`: false if it was not
    /// waiting for one.
    pub(super) fn confirm(&mut self, w: &mut Window, seq: i64) -> bool {
        if !w.unverified.remove(seq) {
            return false;
        }
        self.unconfirmed -= 1;
        true
    }

    /// Places a stored entry of `w` read at start-up: in memory (true:
    /// the cursor moves past it) if it is behind the cursor, or if none of
    /// the domain's URLs is counted in the store and memory is under the
    /// budget; else false, for the caller to count it in the store.
    pub(super) fn resume_in_memory(&mut self, w: &mut Window, seq: i64) -> bool {
        let room = self.in_memory() < self.budget;
        if seq <= w.cursor || (w.spilled == 0 && room) {
            w.cursor = w.cursor.max(seq);
            w.last_seq = w.last_seq.max(seq);
            self.resumed_upto = self.resumed_upto.max(seq);
            true
        } else {
            false
        }
    }

    /// `count` URLs of `w` up to `last_seq`, found in the store at
    /// start-up: counted there.
    pub(super) fn spill(&mut self, w: &mut Window, count: u64, last_seq: i64) {
        let n = usize::try_from(count).unwrap_or(usize::MAX);
        w.last_seq = w.last_seq.max(last_seq);
        w.spilled = w.spilled.saturating_add(count);
        self.spilled = self.spilled.saturating_add(n);
        self.queued = self.queued.saturating_add(n);
        self.resumed_upto = self.resumed_upto.max(last_seq);
    }

    /// A domain's whole stored queue at start-up, `count` URLs from
    /// `first_seq` to `last_seq`: counted, and read from `first_seq` on if
    /// nothing of the domain is queued yet.
    pub(super) fn resume_spilled(&mut self, w: &mut Window, count: u64, first_seq: i64, last_seq: i64) {
        if w.spilled == 0 && w.queue.is_empty() {
            w.cursor = w.cursor.max(first_seq.saturating_sub(1));
        }
        self.spill(w, count, last_seq);
        let estimate = u32::try_from(count).unwrap_or(u32::MAX);
        w.resumed_left = w.resumed_left.saturating_add(estimate);
    }

    /// Stored URL `seq` of `w`, read into the window, adopted or found
    /// finished: no longer counted in the store. A URL of a resumed queue
    /// the estimate did not count is counted in instead (see
    /// [`Window::resumed_left`]).
    fn unspill(&mut self, w: &mut Window, seq: i64) {
        if seq <= self.resumed_upto && w.resumed_left > 0 {
            let last_counted = w.resumed_left == 1 && seq < w.last_seq.min(self.resumed_upto);
            if last_counted {
                // More may follow: one stays counted for them.
                self.queued += 1;
                return;
            }
            w.resumed_left -= 1;
        }
        w.spilled -= 1;
        self.spilled -= 1;
    }

    /// Once the reads of `w` are past the URLs stored before this run, or
    /// past all of its URLs, what is left of its resumed queue's estimate
    /// was not there (those URLs were finished).
    fn settle_resumed(&mut self, w: &mut Window) {
        let past = w.cursor >= self.resumed_upto || w.cursor >= w.last_seq;
        if past && w.resumed_left > 0 {
            let excess = std::mem::take(&mut w.resumed_left);
            w.spilled -= u64::from(excess);
            self.spilled -= excess as usize;
            self.queued -= excess as usize;
        }
    }

    /// A read of domain `id`'s window is wanted.
    pub(super) fn want(&mut self, w: &mut Window, id: u32) {
        w.refill = RefillState::Wanted;
        self.wanted.push_back(id);
    }

    /// The domain longest waiting for a read.
    pub(super) fn next_wanted(&mut self) -> Option<u32> {
        self.wanted.pop_front()
    }

    /// Domains whose reads must wait, wanted again.
    pub(super) fn want_again(&mut self, later: Vec<u32>) {
        self.wanted.extend(later);
    }

    /// Turns wanted domain `id` (named `name`) into a read of at most a
    /// `window` less what its window holds. `durable`: the highest `seq`
    /// such that every URL this process admitted up to it is written.
    pub(super) fn start_read(
        &self,
        w: &mut Window,
        id: u32,
        name: &str,
        durable: i64,
        window: usize,
    ) -> Read {
        if w.spilled == 0 {
            w.refill = RefillState::Idle;
            return Read::Done;
        }
        let durable = durable.max(self.resumed_upto);
        let upto = durable.min(w.last_seq);
        if upto <= w.cursor {
            return Read::Later;
        }
        w.refill = RefillState::Reading;
        Read::Now(Refill {
            domain: name.to_string(),
            after: w.cursor,
            upto,
            limit: window.saturating_sub(w.queue.len()).max(1),
            finished_upto: if w.cursor < self.resumed_upto {
                self.resumed_upto
            } else {
                0
            },
            id,
        })
    }

    /// The answer to `r`, a read of `w`, in `seq` order; `None` if `w` is
    /// not being read. Returns how many URLs the domain was thought to
    /// hold in the store that are not there (a write the store refused;
    /// a resumed queue's estimate is settled apart): they are no longer
    /// counted as queued. Those found finished by their stored page leave
    /// the queue too, for [`Windows::take_finished`].
    pub(super) fn refilled(&mut self, w: &mut Window, r: &Refill, page: ReadPage) -> Option<u64> {
        if w.refill != RefillState::Reading {
            return None;
        }
        w.refill = RefillState::Idle;
        for u in page.urls {
            // Only what the read asked for, once: a store that answers
            // more, or out of order, cannot queue a URL twice.
            if u.seq <= w.cursor || u.seq > r.upto {
                continue;
            }
            if w.taken.remove(u.seq) {
                w.cursor = u.seq;
                continue;
            }
            // Not confirmed yet: `confirm` places it.
            if w.spilled == 0 || w.unverified.contains(u.seq) {
                continue;
            }
            w.cursor = u.seq;
            self.unspill(w, u.seq);
            if page.finished.binary_search(&u.seq).is_ok() {
                // Its page is stored: it leaves the queue, finished.
                self.queued -= 1;
                self.finished.push(super::Relink {
                    url: u.url,
                    depth: u.depth,
                    domain: r.domain.clone(),
                    seq: u.seq,
                });
                continue;
            }
            w.queue.push_back(Queued {
                url: u.url,
                depth: u.depth,
                seq: u.seq,
                queued_ms: 0,
            });
        }
        let mut missing = 0;
        if page.full {
            // Past malformed documents too: they would be read again and again.
            w.cursor = w.cursor.max(page.last_seq.min(r.upto));
        } else {
            // Nothing more is queued up to `upto`.
            w.cursor = w.cursor.max(r.upto);
        }
        self.settle_resumed(w);
        // Past the domain's last URL, nothing of it is left in the store:
        // what is still counted there is not there (a write the store
        // refused).
        if w.cursor >= w.last_seq {
            missing = std::mem::take(&mut w.spilled);
            self.queued -= missing as usize;
            self.spilled -= missing as usize;
        }
        // Adopted URLs the reads went past (finished meanwhile).
        w.taken.keep_above(w.cursor);
        Some(missing)
    }

    /// The read under way of `w` failed: whether there was one (it is
    /// asked for again later).
    pub(super) fn read_failed(&mut self, w: &mut Window) -> bool {
        if w.refill != RefillState::Reading {
            return false;
        }
        w.refill = RefillState::Idle;
        true
    }

    /// Stored entries the reads found finished by their page since the
    /// last call: (URL, depth).
    pub(super) fn take_finished(&mut self) -> Vec<super::Relink> {
        std::mem::take(&mut self.finished)
    }

    /// Gives back the room `w` keeps for URLs, once it holds none and has
    /// no slot: a domain waiting for its turn kept room for its largest
    /// window (a heap profile at a million known URLs: 12.8 MB of slots,
    /// room for 320,000 URLs, under a budget of 100,000). Growing it again
    /// costs an allocation or two per window filled.
    pub(super) fn drop_room(&mut self, w: &mut Window) {
        debug_assert!(w.queue.is_empty());
        w.queue = VecDeque::new();
    }

    /// Takes the URLs of `held` (URL → lease id) out of `w`'s window:
    /// those found, as (lease, URL, depth, seq); the rest stay in `held`.
    pub(super) fn take_held(
        &mut self,
        w: &mut Window,
        held: &mut HashMap<String, u64>,
    ) -> Vec<(u64, String, u16, i64)> {
        let mut found = Vec::new();
        let before = w.queue.len();
        w.queue.retain(|q| match held.remove(&q.url) {
            Some(lease) => {
                found.push((lease, q.url.clone(), q.depth, q.seq));
                false
            }
            None => true,
        });
        self.queued -= before - w.queue.len();
        found
    }

    /// Takes stored URL `u` of `w` out of the queue: counted in the store
    /// (a later read skips it) or read into the window meanwhile. Its
    /// queued depth, or `None` if it is not queued.
    pub(super) fn take_stored(&mut self, w: &mut Window, u: &Stored) -> Option<u16> {
        let depth = if u.seq > w.cursor && w.spilled > 0 && !w.taken.contains(u.seq) {
            // Still only in the store: a later read skips it.
            w.taken.push(u.seq);
            self.unspill(w, u.seq);
            u.depth
        } else if let Some(i) = w.queue.iter().position(|q| q.url == u.url) {
            // Read into the window meanwhile.
            w.queue.remove(i).map_or(u.depth, |q| q.depth)
        } else {
            return None;
        };
        self.queued -= 1;
        Some(depth)
    }
}
