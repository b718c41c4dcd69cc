//! The windows: each domain's next URLs in memory, the rest of its queue
//! in the store.
//!
//! Once `budget` URLs are queued in memory, a domain keeps a window of at
//! most `window` URLs (or its share of the budget). A URL admitted while
//! the window is full, or while older URLs of the domain wait in the
//! store, is only counted (`spilled`). When a window runs low the frontier
//! asks for a read of the domain's next URLs after its `cursor`
//! ([`Frontier::refills`]); the shell reads them and hands them back
//! ([`Frontier::refilled`]). Start-up counts each domain's stored queue
//! here too ([`Frontier::resume_spilled`]).

use super::{Frontier, Queued};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum RefillState {
    Idle,
    /// In `Frontier::wanted`.
    Wanted,
    /// Handed out by [`Frontier::refills`], not answered yet.
    Reading,
    /// In `Frontier::parked`: waiting for a slot (see `parking`).
    Parked,
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
    id: u32,
}

impl Refill {
    /// A refill as [`Frontier::refills`] would ask for it (the domain's id
    /// is not looked at outside the frontier).
    #[cfg(test)]
    pub(crate) fn for_test(domain: &str, after: i64, upto: i64, limit: usize) -> Refill {
        Refill {
            domain: domain.to_string(),
            after,
            upto,
            limit,
            finished_upto: 0,
            id: 0,
        }
    }
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
    /// The store returned `limit` documents: more may follow.
    pub full: bool,
    /// The highest `seq` among the documents returned, malformed ones
    /// included: the queue goes on after it.
    pub last_seq: i64,
    /// The `seq`s, in order, of those of `urls` whose page is stored:
    /// finished in an earlier run (`crate::finished`), not to be queued.
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

impl Frontier {
    /// Keeps at most `window` URLs of a domain in memory (at least twice
    /// the per-domain in-flight maximum, so a window never starves a
    /// domain that could be crawled faster) once `budget` URLs are queued
    /// in memory. Unbounded unless set.
    pub(crate) fn with_window(mut self, window: usize, budget: usize) -> Frontier {
        self.window = window.max(2 * self.max_inflight_per_domain as usize);
        self.budget = budget;
        self.max_active = self.active_bound();
        self
    }

    /// A URL found queued in the store at start-up, by a read that
    /// returns every document (in any order): kept in memory while the
    /// budget allows, and always when its domain's window already holds
    /// later URLs (it must not fall behind the cursor); otherwise counted,
    /// and read in with its domain's window.
    pub(crate) fn resume_queued(&mut self, url: String, domain: &str, depth: u16, seq: i64) {
        if self.resume_in_memory(domain, seq) {
            self.push(url, domain, depth);
        }
    }

    /// A stored entry found finished by its page at start-up, read by the
    /// same read as [`Frontier::resume_queued`]'s: not queued, but placed
    /// as a queued one would be. True when it is behind its domain's
    /// cursor now (done with); false when it is counted in the store,
    /// where its window's read meets it again (it is still `queued` there)
    /// and finds it finished: it must stay `queued` in the store until
    /// then, or that read would never find it and its count would stay.
    pub(crate) fn resume_finished(&mut self, domain: &str, seq: i64) -> bool {
        self.resume_in_memory(domain, seq)
    }

    /// Places a stored entry of `domain` read at start-up: in memory
    /// (true: the domain's cursor moves past it), or counted in the store
    /// for its window to read.
    fn resume_in_memory(&mut self, domain: &str, seq: i64) -> bool {
        let id = self.domain_id(domain);
        let room = self.queued - self.spilled_total < self.budget;
        let d = &mut self.domains[id as usize];
        if seq <= d.cursor || (d.spilled == 0 && room) {
            d.cursor = d.cursor.max(seq);
            d.last_seq = d.last_seq.max(seq);
            self.resumed_upto = self.resumed_upto.max(seq);
            true
        } else {
            self.resume_stored(domain, seq);
            false
        }
    }

    /// Whether a new URL of domain `id` goes into its window rather than
    /// the store: none of the domain's URLs waits in the store, and memory
    /// is under the budget, or the window has room and a slot and no more
    /// domains hold a slot than the bound (for [`Frontier::admit`] and
    /// [`Frontier::confirmed`]). Without the last: on the 1M dispatcher
    /// bench, the 10,000 seeds' domains all took slots under the budget
    /// (100,000), then each grew its window to the floor (32), and memory
    /// held 257,000 URLs until the end; now their windows drain, the
    /// domains give their slots back and take turns (see `parking`).
    pub(super) fn window_takes(&self, id: u32) -> bool {
        let d = &self.domains[id as usize];
        d.spilled == 0
            && (!self.short()
                || (d.queue.len() < self.window_now() && self.may_hold_window(id) && !self.over_bound()))
    }

    /// The window a domain keeps once memory is at the budget: `window`,
    /// or the budget's share of each known domain if that is smaller
    /// (10,000 domains' windows of 256 held 2.56 million URLs, whatever
    /// the budget), but never under twice the per-domain in-flight
    /// maximum, so that a window never starves its domain. The share only
    /// shrinks as domains are met; a window already fuller just drains.
    pub(super) fn window_now(&self) -> usize {
        if self.window == usize::MAX {
            // No window set: memory is not bounded.
            return usize::MAX;
        }
        let share = self.budget / self.domain_ids.len().max(1);
        let floor = 2 * self.max_inflight_per_domain as usize;
        self.window.min(share.max(floor))
    }

    /// Whether `n` more URLs fit in memory beside those queued there now.
    pub(crate) fn fits(&self, n: u64) -> bool {
        let held = self.queued.saturating_sub(self.spilled_total) as u64;
        held.saturating_add(n) <= self.budget as u64
    }

    /// A URL found queued in the store at start-up: counted, and read in
    /// with its domain's window.
    pub(crate) fn resume_stored(&mut self, domain: &str, seq: i64) {
        let id = self.domain_id(domain);
        self.spill(id, 1, seq);
    }

    /// A domain's whole stored queue at start-up, `count` URLs from
    /// `first_seq` to `last_seq` (`crate::resume`): counted, and read in
    /// window by window from `first_seq` on, past the domain's finished
    /// entries.
    pub(crate) fn resume_spilled(&mut self, domain: &str, count: u64, first_seq: i64, last_seq: i64) {
        if count == 0 {
            return;
        }
        let id = self.domain_id(domain);
        let d = &mut self.domains[id as usize];
        if d.spilled == 0 && d.queue.is_empty() {
            d.cursor = d.cursor.max(first_seq.saturating_sub(1));
        }
        self.spill(id, count, last_seq);
    }

    pub(super) fn spill(&mut self, id: u32, count: u64, last_seq: i64) {
        let n = usize::try_from(count).unwrap_or(usize::MAX);
        let d = &mut self.domains[id as usize];
        d.last_seq = d.last_seq.max(last_seq);
        d.spilled = d.spilled.saturating_add(count);
        self.spilled_total = self.spilled_total.saturating_add(n);
        self.queued = self.queued.saturating_add(n);
        self.resumed_upto = self.resumed_upto.max(last_seq);
        self.ensure_owner(id);
        self.want_refill(id);
    }

    /// Asks for a read of domain `id`'s next URLs if its window runs low
    /// while URLs wait in the store, and it may hold a window (see
    /// `parking`): otherwise it is parked, or, if its turn is over, it
    /// drains its window and then is.
    pub(super) fn want_refill(&mut self, id: u32) {
        let low = self.window_now() / 2;
        let d = &self.domains[id as usize];
        if d.spilled == 0 || d.refill != RefillState::Idle || d.queue.len() > low {
            return;
        }
        if !self.may_hold_window(id) {
            self.park(id);
            return;
        }
        if d.active && self.turn_over() {
            if d.queue.is_empty() {
                self.park(id);
            }
            return;
        }
        self.domains[id as usize].refill = RefillState::Wanted;
        self.wanted.push_back(id);
        self.settle_slot(id);
    }

    /// Up to `max` reads of domains' next URLs to do now. `durable`: the
    /// highest `seq` such that every URL this process admitted up to it is
    /// written; a domain whose next URLs are not written yet waits for a
    /// later call.
    pub(crate) fn refills(&mut self, durable: i64, max: usize) -> Vec<Refill> {
        self.unpark();
        let durable = durable.max(self.resumed_upto);
        let mut out = Vec::new();
        let mut later = Vec::new();
        let window = self.window_now();
        while out.len() < max {
            let Some(id) = self.wanted.pop_front() else { break };
            let d = &mut self.domains[id as usize];
            if d.spilled == 0 {
                d.refill = RefillState::Idle;
                self.settle_slot(id);
                continue;
            }
            let upto = durable.min(d.last_seq);
            if upto <= d.cursor {
                later.push(id);
                continue;
            }
            d.refill = RefillState::Reading;
            out.push(Refill {
                domain: d.name.to_string(),
                after: d.cursor,
                upto,
                limit: window.saturating_sub(d.queue.len()).max(1),
                finished_upto: if d.cursor < self.resumed_upto {
                    self.resumed_upto
                } else {
                    0
                },
                id,
            });
        }
        self.wanted.extend(later);
        out
    }

    /// The answer to `r`, in `seq` order. Returns how many URLs the domain
    /// was thought to hold in the store that are not there (a write the
    /// store refused): they are no longer counted as queued. Those found
    /// finished by their stored page leave the queue too, for
    /// [`Frontier::take_finished`].
    pub(crate) fn refilled(&mut self, r: &Refill, page: ReadPage) -> u64 {
        let Some(d) = self.domains.get_mut(r.id as usize) else {
            return 0;
        };
        if d.refill != RefillState::Reading || *d.name != *r.domain {
            return 0;
        }
        d.refill = RefillState::Idle;
        for u in page.urls {
            // Only what the read asked for, once: a store that answers
            // more, or out of order, cannot queue a URL twice.
            if u.seq <= d.cursor || u.seq > r.upto {
                continue;
            }
            if d.taken.remove(u.seq) {
                d.cursor = u.seq;
                continue;
            }
            // Not confirmed yet: `confirmed` places it.
            if d.spilled == 0 || d.unverified.contains(u.seq) {
                continue;
            }
            d.cursor = u.seq;
            d.spilled -= 1;
            self.spilled_total -= 1;
            if page.finished.binary_search(&u.seq).is_ok() {
                // Its page is stored: it leaves the queue, finished.
                self.queued -= 1;
                self.finished_found.push((u.url, u.depth));
                continue;
            }
            d.queue.push_back(Queued {
                url: u.url,
                depth: u.depth,
                queued_ms: 0,
            });
        }
        let mut missing = 0;
        if page.full {
            // Past malformed documents too: they would be read again and again.
            d.cursor = d.cursor.max(page.last_seq.min(r.upto));
        } else {
            // Nothing more is queued up to `upto`.
            d.cursor = d.cursor.max(r.upto);
        }
        if !page.full && r.upto >= d.last_seq {
            missing = std::mem::take(&mut d.spilled);
            self.queued -= missing as usize;
            self.spilled_total -= missing as usize;
        }
        // Adopted URLs the reads went past (finished meanwhile).
        let cursor = d.cursor;
        d.taken.keep_above(cursor);
        self.window_changed(r.id);
        missing
    }

    /// Stored entries the reads found finished by their page since the
    /// last call: (URL, depth).
    pub(crate) fn take_finished(&mut self) -> Vec<(String, u16)> {
        std::mem::take(&mut self.finished_found)
    }

    /// `r` could not be read; it is asked for again by a later
    /// [`Frontier::refills`].
    pub(crate) fn refill_failed(&mut self, r: &Refill) {
        if let Some(d) = self.domains.get_mut(r.id as usize) {
            if d.refill == RefillState::Reading {
                d.refill = RefillState::Idle;
                self.window_changed(r.id);
            }
        }
    }
}
