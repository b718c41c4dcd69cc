//! What of the queues is held in memory: the frontier's side of reading
//! windows in from the store (`window`) and of the slots that bound how
//! many domains hold one (`parking`), which these operations coordinate.
//!
//! A read is wanted when a domain's window runs low while URLs of it wait
//! in the store, and only if it may hold a window: otherwise it is parked,
//! or, if its turn is over, it drains its window and then is. Start-up
//! counts each domain's stored queue here too
//! ([`Frontier::resume_spilled`]).

use super::window::Read;
use super::{Frontier, ReadPage, Refill};

impl Frontier {
    /// Keeps at most `window` URLs of a domain in memory (at least twice
    /// the per-domain in-flight maximum, so a window never starves a
    /// domain that could be crawled faster) once `budget` URLs are queued
    /// in memory. Unbounded unless set.
    pub(crate) fn with_window(mut self, window: usize, budget: usize) -> Frontier {
        let floor = 2 * self.max_inflight_per_domain as usize;
        self.windows.bound(window, budget, floor);
        self.slots.bound(self.windows.is_bounded(), budget, floor);
        self
    }

    /// Bounds the domains holding a window to `n` once memory is at the
    /// budget, whatever the budget (0: the budget over the smallest
    /// window). Call after [`Frontier::with_window`].
    pub(crate) fn with_active_bound(mut self, n: usize) -> Frontier {
        self.slots.bound_to(n);
        self
    }

    /// A URL found queued in the store at start-up, by a read that
    /// returns every document (in any order): kept in memory while the
    /// budget allows, and always when its domain's window already holds
    /// later URLs (it must not fall behind the cursor); otherwise counted,
    /// and read in with its domain's window.
    pub(crate) fn resume_queued(&mut self, url: String, domain: &str, depth: u16, seq: i64) {
        let id = self.domains.id(domain);
        if self.resume_in_memory(id, seq) {
            self.queue_back(id, url, depth, seq, 0);
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
        let id = self.domains.id(domain);
        self.resume_in_memory(id, seq)
    }

    /// Places a stored entry of domain `id` read at start-up: in memory
    /// (true: the domain's cursor moves past it), or counted in the store
    /// for its window to read.
    fn resume_in_memory(&mut self, id: u32, seq: i64) -> bool {
        if self.windows.resume_in_memory(&mut self.domains[id].window, seq) {
            return true;
        }
        self.spill(id, 1, seq);
        false
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
        let d = &self.domains[id];
        let blocked = self.blocks.len();
        !d.window.has_stored()
            && (!self.windows.short()
                || (self.windows.has_room(&d.window, self.domains.held())
                    && self.slots.may_hold(&d.slot, blocked)
                    && !self.slots.over_bound(blocked)))
    }

    /// Whether `n` more URLs fit in memory beside those queued there now.
    pub(crate) fn fits(&self, n: u64) -> bool {
        self.windows.fits(n)
    }

    /// A URL found queued in the store at start-up: counted, and read in
    /// with its domain's window.
    #[cfg(test)]
    pub(crate) fn resume_stored(&mut self, domain: &str, seq: i64) {
        let id = self.domains.id(domain);
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
        let id = self.domains.id(domain);
        self.windows
            .resume_spilled(&mut self.domains[id].window, count, first_seq, last_seq);
        self.ensure_owner(id);
        self.want_refill(id);
    }

    /// `count` URLs of domain `id`, up to `last_seq`, counted in the store.
    fn spill(&mut self, id: u32, count: u64, last_seq: i64) {
        self.windows.spill(&mut self.domains[id].window, count, last_seq);
        self.ensure_owner(id);
        self.want_refill(id);
    }

    /// Asks for a read of domain `id`'s next URLs if its window runs low
    /// while URLs wait in the store, and it may hold a window (see
    /// `parking`): otherwise it is parked, or, if its turn is over, it
    /// drains its window and then is.
    pub(super) fn want_refill(&mut self, id: u32) {
        let d = &self.domains[id];
        if !self.windows.runs_low(&d.window, self.domains.held()) || d.slot.is_parked() {
            return;
        }
        let blocked = self.blocks.len();
        if !self.slots.may_hold(&d.slot, blocked) {
            self.park(id);
            return;
        }
        if d.slot.is_active() && self.slots.turn_over(blocked) {
            if d.window.in_memory() == 0 {
                self.park(id);
            }
            return;
        }
        self.windows.want(&mut self.domains[id].window, id);
        self.settle_slot(id);
    }

    /// Up to `max` reads of domains' next URLs to do now. `durable`: the
    /// highest `seq` such that every URL this process admitted up to it is
    /// written; a domain whose next URLs are not written yet waits for a
    /// later call.
    pub(crate) fn refills(&mut self, durable: i64, max: usize) -> Vec<Refill> {
        self.unpark();
        let mut out = Vec::new();
        let mut later = Vec::new();
        let window = self.windows.window_now(self.domains.held());
        while out.len() < max {
            let Some(id) = self.windows.next_wanted() else {
                break;
            };
            let (name, w) = self.domains[id].name_and_window();
            match self.windows.start_read(w, id, name, durable, window) {
                Read::Done => self.settle_slot(id),
                Read::Later => later.push(id),
                Read::Now(r) => out.push(r),
            }
        }
        self.windows.want_again(later);
        out
    }

    /// The answer to `r`, in `seq` order. Returns how many URLs the domain
    /// was thought to hold in the store that are not there (a write the
    /// store refused): they are no longer counted as queued. Those found
    /// finished by their stored page leave the queue too, for
    /// [`Frontier::take_finished`].
    pub(crate) fn refilled(&mut self, r: &Refill, page: ReadPage) -> u64 {
        let Some(d) = self.domains.get_mut(r.id) else {
            return 0;
        };
        if d.name() != r.domain {
            return 0;
        }
        let Some(missing) = self.windows.refilled(&mut d.window, r, page) else {
            return 0;
        };
        self.window_changed(r.id);
        missing
    }

    /// Stored URLs the reads found finished since the last call, whose
    /// links are to be offered again.
    pub(crate) fn take_finished(&mut self) -> Vec<super::Relink> {
        self.windows.take_finished()
    }

    /// `r` could not be read; it is asked for again by a later
    /// [`Frontier::refills`].
    pub(crate) fn refill_failed(&mut self, r: &Refill) {
        if let Some(d) = self.domains.get_mut(r.id) {
            if self.windows.read_failed(&mut d.window) {
                self.window_changed(r.id);
            }
        }
    }

    /// Domain `id` waits for a slot, behind those parked before it.
    fn park(&mut self, id: u32) {
        self.slots.park(&mut self.domains[id].slot, id);
        self.settle_slot(id);
    }

    /// Takes or gives back domain `id`'s slot after its window or its
    /// reads changed: a domain holds one while URLs are in its window or a
    /// read of it is wanted or under way. A slot given back goes to the
    /// domains parked longest, and the window keeps no room.
    pub(super) fn settle_slot(&mut self, id: u32) {
        let d = &mut self.domains[id];
        if self.slots.settle(&mut d.slot, d.window.holds()) {
            self.windows.drop_room(&mut d.window);
            self.unpark();
        }
    }

    /// Gives the free slots to parked domains, longest parked first. Also
    /// called once a tick (from [`Frontier::refills`]): a domain paused or
    /// halted meanwhile frees a slot without giving its own back.
    fn unpark(&mut self) {
        while let Some(id) = self.slots.unpark(self.blocks.len(), &mut self.domains) {
            self.want_refill(id);
            self.settle_slot(id);
        }
    }

    /// Domains holding a window or a read (a slot).
    pub(crate) fn active_domains(&self) -> usize {
        self.slots.active()
    }

    /// Domains waiting for a slot, their queues wholly in the store.
    pub(crate) fn parked_domains(&self) -> usize {
        self.slots.parked()
    }

    /// The slots' books balance: every domain holding a window or a read
    /// has a slot, no other does (nor keeps room for a window), the count
    /// is theirs, and every parked domain is listed once.
    #[cfg(test)]
    pub(super) fn check_slots(&self) -> Result<(), String> {
        let mut flagged = 0;
        let mut parked = 0;
        for (_, d) in self.domains.iter() {
            let holds = d.window.holds();
            let active = d.slot.is_active();
            if holds != active {
                return Err(format!(
                    "{}: holds a window {holds}, has a slot {active}",
                    d.name()
                ));
            }
            if !active && d.window.capacity() > 0 {
                return Err(format!(
                    "{}: no slot, but room for {} URLs",
                    d.name(),
                    d.window.capacity()
                ));
            }
            flagged += usize::from(active);
            if d.slot.is_parked() {
                parked += 1;
                let id = self.domains.find(d.name());
                let listed = id.map_or(0, |id| self.slots.times_listed(id));
                if listed != 1 {
                    return Err(format!("{} parked, listed {listed} times", d.name()));
                }
            }
        }
        if parked != self.slots.parked() {
            return Err(format!("{parked} domains parked, {} listed", self.slots.parked()));
        }
        if flagged != self.slots.active() {
            return Err(format!(
                "{flagged} domains hold slots, {} counted",
                self.slots.active()
            ));
        }
        Ok(())
    }
}
