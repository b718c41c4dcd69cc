//! The URL frontier in memory: per-domain queues, domain ownership and
//! leases (which URLs were seen is `crate::seen`'s).
//!
//! Shaped like crawler-commons' URL Frontier: queues keyed by domain, URLs
//! handed out under leases, results put back. Every operation is O(1) per
//! URL (no scans over all domains or all URLs), because a crawler of this
//! shape once slowed down as its collections grew.
//!
//! Fairness: each supervisor has a ring of its domains that have work and
//! room; `take` walks the ring one URL per domain at a time, and a domain
//! never has more than `max_inflight_per_domain` URLs out at once, so one
//! big or slow domain cannot crowd out the others.
//!
//! Queues live in the store (`<crawl>__frontier`, read by `{domain, seq, state}`).
//! Memory holds at most `budget` queued URLs; past that, each domain keeps
//! a window of at most `window` URLs (URLFrontier and BUbiNG's workbench
//! keep the same shape), and only a bounded set of domains keep one
//! (`parking`). A URL admitted while memory is short and its
//! domain's window is full, or while older URLs of the domain wait in the
//! store, is only counted here (`spilled`). When a window runs low, the
//! frontier asks for a read of the domain's next URLs after its `cursor`
//! ([`Frontier::refills`]); the shell reads them and hands them back
//! ([`Frontier::refilled`]). The frontier does no I/O itself.
//!
//! Why a budget and not only windows: every read is a store query, cheap
//! on mongod (one index range) but 20–150 ms of nx-27017's one thread. A
//! crawl whose queues fit in memory makes no reads at all.
//!
//! The frontier is made of parts that each own their data and keep its
//! invariants, and a domain's record ([`domains::DomainQ`]) is made of
//! their pieces:
//!
//! - `domains`: the records by id and the index of their names, and
//!   forgetting the domains with nothing left (with `index`);
//! - `window`: each domain's window and the rest of its queue in the
//!   store, and the totals of what is queued where (with `seqs`);
//! - `parking`: which domains may hold a window (the slots);
//! - `blocks`: paused and halted domains;
//! - `leases`: the URLs out, each supervisor's credit and each domain's
//!   URLs in flight (with `unanswered`, leases that ended unanswered);
//! - `owners`: which supervisor owns which domain, and their rings;
//! - `servers`: which domains share a server (IP address), owned, with
//!   all of its domains, by one supervisor;
//! - `moves`: domains moving to another supervisor.
//!
//! This file composes them and holds the operations that span them:
//! admission, blocking, supervisors joining and leaving, leasing and
//! results. Beside it, operations of the same kind: `memory` (the windows'
//! reads and the slots), `adopt` (leases a rejoining supervisor still
//! holds), `rebalance` (domains moved to a supervisor that joins a
//! running crawl) and `forget` (domains with nothing left).
//!
//! Why `domains` and the parts' files import each other (a circle of
//! files, kept on purpose): a domain's record holds one piece of each part
//! (its window, owner, block, URLs in flight, slot and server), so
//! `domains` names the pieces' types; and a part's operations reach those
//! pieces through the records, so the part names `Domains`. Breaking the
//! circle means one table a part, keyed by domain: a lookup a part, up to
//! six instead of one, for every URL leased or answered, where one record
//! now holds all a URL's step needs. The parts still own their data: only
//! their own file changes their piece's fields.

use link::protocol::WorkItem;

pub(crate) use adopt::{Adoption, LookUp};
use blocks::Blocks;
use domains::Domains;
use leases::Leases;
pub(crate) use leases::{LeaseRefusal, Leased};
use moves::Moves;
use owners::Owners;
use parking::Slots;
pub(crate) use progress::PROGRESS_RESULTS;
use servers::Servers;
use window::Windows;
pub(crate) use window::{ReadPage, Refill, Stored};

pub(crate) type SupId = usize;

/// A URL found finished by its stored page, whose links are to be offered
/// again (`crate::finished`): the frontier finds them in its windows'
/// reads and in leases that ended unanswered; the state offers their links.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Relink {
    pub(crate) url: String,
    pub(crate) depth: u16,
    pub(crate) domain: String,
    /// Its place in the stored frontier (0: none, as a revisit's).
    pub(crate) seq: i64,
}

pub(crate) struct Frontier {
    /// Every domain's record, each part's piece of it written only by
    /// that part.
    domains: Domains,
    windows: Windows,
    slots: Slots,
    blocks: Blocks,
    leases: Leases,
    owners: Owners,
    servers: Servers,
    moves: Moves,
    /// A domain is not leased more URLs while this many are in flight
    /// (adopted leases may go past it).
    max_inflight_per_domain: u32,
    /// The latest time (Unix ms) the frontier was told of, for holds that
    /// start where no time is passed in (a move's hand-over).
    clock_ms: u64,
    /// Progress of domains forgotten since it was last asked for (see
    /// `progress`).
    progress_of_forgotten: Vec<(String, i64)>,
}

impl Frontier {
    pub(crate) fn new(max_inflight_per_domain: u32, lease_ms: u64, first_lease: u64) -> Frontier {
        Frontier {
            domains: Domains::new(),
            windows: Windows::new(),
            slots: Slots::new(),
            blocks: Blocks::new(),
            leases: Leases::new(lease_ms, first_lease),
            owners: Owners::new(),
            servers: Servers::new(),
            moves: Moves::new(),
            max_inflight_per_domain: max_inflight_per_domain.max(1),
            clock_ms: 0,
            progress_of_forgotten: Vec::new(),
        }
    }

    /// Holds back leases that end without a result until the store is
    /// asked ([`Frontier::take_unanswered`]); without it they are queued
    /// again at once (the frontier's own tests).
    pub(crate) fn with_stored_check(mut self) -> Frontier {
        self.leases.check_unanswered();
        self
    }

    pub(crate) fn queued(&self) -> usize {
        self.windows.queued()
    }

    /// URLs that could be leased right now: their domain is owned by a
    /// live supervisor, not paused or halted, and below its in-flight cap.
    /// Scans the domains: for the once-a-second gauges only.
    pub(crate) fn ready(&self) -> usize {
        self.domains
            .iter()
            .map(|(_, d)| d)
            .filter(|d| !d.block.is_blocked() && d.owner.get().is_some_and(|s| self.owners.is_live(s)))
            .map(|d| {
                let room = self.max_inflight_per_domain.saturating_sub(d.in_flight.get()) as usize;
                d.window.in_memory().min(room)
            })
            .sum()
    }

    pub(crate) fn in_flight(&self) -> usize {
        self.leases.in_flight()
    }

    /// Domains held: those with URLs queued or out, or a result in the
    /// last sweep or two (see `forget`).
    pub(crate) fn domain_count(&self) -> usize {
        self.domains.held()
    }

    /// Nothing queued (but in halted domains) and nothing out: the crawl is over.
    pub(crate) fn is_idle(&self) -> bool {
        self.windows.queued() == self.halted_queued()
            && self.leases.is_empty()
            && self.windows.unconfirmed() == 0
    }

    fn halted_queued(&self) -> usize {
        self.blocks
            .ids()
            .iter()
            .map(|id| &self.domains[*id])
            .filter(|d| d.block.is_halted())
            .map(|d| d.window.queued())
            .sum()
    }

    /// URLs admitted to their domain but only in the store for now.
    pub(crate) fn spilled(&self) -> usize {
        self.windows.spilled()
    }

    /// A newly admitted URL (already marked seen and written with `seq`,
    /// higher than any before): into its domain's window if the window
    /// has room and no older URL of the domain waits in the store;
    /// otherwise it stays in the store, and is counted.
    pub(crate) fn admit(&mut self, url: String, domain: &str, depth: u16, seq: i64, now_ms: u64) {
        let id = self.domains.id(domain);
        let in_memory = self.window_takes(id);
        self.place(id, url, depth, seq, now_ms, in_memory);
    }

    /// Queues a new URL of domain `id` with `seq`: in its window if
    /// `in_memory`, else counted in the store (a read is wanted).
    fn place(&mut self, id: u32, url: String, depth: u16, seq: i64, now_ms: u64, in_memory: bool) {
        let d = &mut self.domains[id];
        self.windows
            .admit(&mut d.window, url, depth, seq, now_ms, in_memory);
        self.ensure_owner(id);
        if in_memory {
            self.window_changed(id);
        } else {
            self.want_refill(id);
        }
    }

    /// A URL inserted with `seq` into the exact seen-set although its hash
    /// was seen before, so that the store's unique index decides (see
    /// `crate::seen`). It waits for the frontier writer's word
    /// ([`Frontier::confirmed`]) outside the queue, holding its domain (and
    /// the crawl's end, and the domain's progress) until then.
    pub(crate) fn admit_unverified(&mut self, domain: &str, seq: i64) {
        let id = self.domains.id(domain);
        self.windows.admit_unverified(&mut self.domains[id].window, seq);
    }

    /// The writer's word on the unverified URL inserted with `seq`: it
    /// waits no more. Whether it was waiting (a new one is then admitted
    /// under a new `seq`, [`Frontier::admit`]: it is in no segment yet).
    pub(crate) fn confirmed(&mut self, domain: &str, seq: i64) -> bool {
        let Some(id) = self.domains.find(domain) else {
            return false;
        };
        self.windows.confirm(&mut self.domains[id].window, seq)
    }

    /// Stops handing out `domain`'s URLs until `until_ms` (circuit breaker).
    pub(crate) fn pause(&mut self, domain: &str, until_ms: u64) {
        let id = self.domains.id(domain);
        self.blocks.pause(id, &mut self.domains[id].block, until_ms);
    }

    /// Stops handing out `domain`'s URLs until [`Frontier::unhalt`].
    pub(crate) fn halt(&mut self, domain: &str) {
        let id = self.domains.id(domain);
        self.blocks.halt(id, &mut self.domains[id].block);
    }

    /// Lets a halted domain crawl again; false if it was not halted.
    pub(crate) fn unhalt(&mut self, domain: &str) -> bool {
        self.lift(domain, true)
    }

    /// Lets a paused or halted domain crawl again; false if it was neither.
    pub(crate) fn unblock(&mut self, domain: &str) -> bool {
        self.lift(domain, false)
    }

    fn lift(&mut self, domain: &str, only_halted: bool) -> bool {
        let Some(id) = self.domains.find(domain) else {
            return false;
        };
        let block = &mut self.domains[id].block;
        let lifted = if only_halted {
            self.blocks.unhalt(block)
        } else {
            self.blocks.lift(block)
        };
        if lifted {
            self.release_blocked(1);
        }
        lifted
    }

    /// Where URLs of `domain` (of every domain when `None`) are out: each
    /// holder with the domains it holds, for a recall of what has not
    /// started.
    pub(crate) fn held_at(&self, domain: Option<&str>) -> Vec<(SupId, Vec<String>)> {
        let only = match domain {
            Some(name) => match self.domains.find(name) {
                Some(id) => Some(id),
                None => return Vec::new(),
            },
            None => None,
        };
        self.leases
            .holders(|id| only.is_none_or(|o| o == id))
            .into_iter()
            .map(|(s, ids)| {
                let names = ids
                    .iter()
                    .map(|&id| self.domains[id].name().to_string())
                    .collect();
                (s, names)
            })
            .collect()
    }

    /// Un-pauses domains whose pause is over.
    pub(crate) fn release_blocked(&mut self, now_ms: u64) {
        self.clock_ms = self.clock_ms.max(now_ms);
        let mut at = 0;
        while let Some(id) = self.blocks.release(&mut at, now_ms, &mut self.domains) {
            self.make_ready(id);
        }
    }

    /// Names of the paused and of the halted domains.
    pub(crate) fn blocked_domains(&self) -> (Vec<&str>, Vec<&str>) {
        let (mut paused, mut halted) = (Vec::new(), Vec::new());
        for id in self.blocks.ids() {
            let d = &self.domains[*id];
            if d.block.is_halted() {
                halted.push(d.name());
            } else {
                paused.push(d.name());
            }
        }
        (paused, halted)
    }

    /// Queues a URL (already marked seen) that is not in the stored
    /// frontier at the back of its domain's queue (the frontier's tests).
    #[cfg(test)]
    pub(crate) fn push(&mut self, url: String, domain: &str, depth: u16) {
        self.push_at(url, domain, depth, 0, 0);
    }

    /// Queues a URL handed back unfetched (see `FailureKind::Fenced`) at
    /// the front of its domain's queue, where its lease took it from;
    /// `seq`: its place in the stored frontier (0: none).
    pub(crate) fn push_front(&mut self, url: String, domain: &str, depth: u16, seq: i64) {
        let id = self.domains.id(domain);
        self.windows
            .push_front(&mut self.domains[id].window, url, depth, seq);
        self.ensure_owner(id);
        self.window_changed(id);
    }

    /// Queues a URL (a retry, a revisit) at the back of its domain's
    /// queue, noting the time (Unix ms) for `queue_wait`; `seq`: its place
    /// in the stored frontier (0: none).
    pub(crate) fn push_at(&mut self, url: String, domain: &str, depth: u16, seq: i64, now_ms: u64) {
        let id = self.domains.id(domain);
        self.queue_back(id, url, depth, seq, now_ms);
    }

    /// Queues a URL at the back of domain `id`'s window.
    fn queue_back(&mut self, id: u32, url: String, depth: u16, seq: i64, now_ms: u64) {
        self.windows
            .push_back(&mut self.domains[id].window, url, depth, seq, now_ms);
        self.ensure_owner(id);
        self.window_changed(id);
    }

    /// After domain `id`'s window changed: a read if it runs low, its slot
    /// (see `parking`) taken or given back, and a place in its owner's
    /// ring if it can be leased.
    fn window_changed(&mut self, id: u32) {
        self.want_refill(id);
        self.settle_slot(id);
        self.make_ready(id);
    }

    /// Gives an ownerless domain an owner, if one can be had: its
    /// server's, or the one `owners` picks (and the server goes with it).
    fn ensure_owner(&mut self, id: u32) {
        let d = &mut self.domains[id];
        if d.owner.get().is_some() {
            return;
        }
        match self.servers.owner(&d.server, &self.owners) {
            Some(s) => self.owners.give(&mut d.owner, s),
            None => {
                self.owners.ensure(id, &mut d.owner);
                if let Some(s) = d.owner.get() {
                    self.servers.set_owner(&d.server, s);
                }
            }
        }
    }

    /// A child found `domain` served from `addr` (see `servers`): from now
    /// on it is leased with the address, to the server's owner. A domain
    /// owned elsewhere moves there when it is next up for a lease (see
    /// [`Frontier::take_timed`]).
    pub(crate) fn learn_server(&mut self, domain: &str, addr: std::net::IpAddr) {
        let Some(id) = self.domains.find(domain) else {
            return;
        };
        let d = &mut self.domains[id];
        self.servers.join(&mut d.server, addr);
        if let Some(mine) = d.owner.get() {
            self.servers.claim(&d.server, mine, &self.owners);
        }
    }

    /// Servers with more than one domain held.
    pub(crate) fn shared_servers(&self) -> usize {
        self.servers.shared()
    }

    /// Puts domain `id` in its owner's ring if it can be leased: not
    /// moving, blocked or at its in-flight cap, with URLs in its window.
    /// A domain with a result lately goes in the ring served first (see
    /// `owners`).
    fn make_ready(&mut self, id: u32) {
        if self.finish_move(id) {
            return;
        }
        let d = &mut self.domains[id];
        if d.block.is_blocked()
            || d.window.in_memory() == 0
            || d.in_flight.get() >= self.max_inflight_per_domain
        {
            return;
        }
        let ring = d.ring();
        self.owners.ready(id, &mut d.owner, ring);
    }

    /// A supervisor joined; once assigning, it takes over domains nobody owns.
    pub(crate) fn add_supervisor(&mut self) -> SupId {
        let id = self.owners.add();
        self.leases.add_supervisor(id);
        self.assign_unowned();
        self.moves.want();
        id
    }

    /// Starts giving domains to supervisors. Until then (while the expected
    /// supervisors are still joining) domains wait unowned, so the first
    /// supervisor to arrive does not get them all.
    pub(crate) fn start_assigning(&mut self) {
        self.owners.start_assigning();
        self.assign_unowned();
    }

    fn assign_unowned(&mut self) {
        for id in self.owners.take_unassigned() {
            if self.domains[id].owner.get().is_none() {
                self.ensure_owner(id);
                self.make_ready(id);
            }
        }
    }

    /// A supervisor left or died: its leased URLs go back to the front of
    /// their queues and its domains to the other supervisors.
    pub(crate) fn remove_supervisor(&mut self, sup: SupId) -> usize {
        if !self.owners.leave(sup) {
            return 0;
        }
        let lost = self.leases.of(sup);
        let n = lost.len();
        for lease in lost {
            self.requeue_lease(lease);
        }
        let owned: Vec<u32> = self
            .domains
            .iter()
            .filter(|(_, d)| d.owner.get() == Some(sup))
            .map(|(id, _)| id)
            .collect();
        for id in owned {
            self.owners.orphan(&mut self.domains[id].owner);
            self.moves.cancel(id);
            self.ensure_owner(id);
            self.make_ready(id);
        }
        n
    }

    /// Hands out up to `n` URLs of `sup`'s domains, round-robin over them.
    #[cfg(test)]
    pub(crate) fn take(&mut self, sup: SupId, n: usize, now_ms: u64) -> Vec<WorkItem> {
        self.take_timed(sup, n, now_ms).0
    }

    /// Hands out up to `n` URLs of `sup`'s domains, round-robin over them,
    /// with how long (ms) each URL waited in its queue
    /// (those queued with a known time).
    pub(crate) fn take_timed(&mut self, sup: SupId, n: usize, now_ms: u64) -> (Vec<WorkItem>, Vec<u64>) {
        // Not sized to `n`: most calls (one per supervisor with credit, at
        // every dispatch) find nothing ready, and a buffer for `n` items
        // cost 2% of the dispatcher's CPU past its memory budget.
        let mut out = Vec::new();
        let mut waits = Vec::new();
        self.clock_ms = self.clock_ms.max(now_ms);
        while out.len() < n {
            let Some((id, d, ring)) = self.owners.next_ready(sup, &mut self.domains) else {
                break;
            };
            if d.owner.get() != Some(sup)
                || d.block.is_blocked()
                || self.moves.is_moving(id)
                || d.in_flight.get() >= self.max_inflight_per_domain
            {
                continue;
            }
            // A domain is leased only by its server's owner: one that
            // learnt its server (or whose server changed owner) moves there.
            if let Some(to) = self.servers.owner(&d.server, &self.owners).filter(|&s| s != sup) {
                self.start_move(id, to);
                continue;
            }
            let Some(q) = self.windows.pop(&mut d.window) else {
                continue;
            };
            let (lease, expires_ms) =
                self.leases
                    .issue(sup, id, &mut d.in_flight, (q.url.clone(), q.depth, q.seq), now_ms);
            if d.count_lease(ring) {
                self.owners.session_spent(sup);
            }
            if q.queued_ms != 0 {
                waits.push(now_ms.saturating_sub(q.queued_ms));
            }
            let server = self.servers.addr(&d.server);
            out.push(WorkItem {
                lease,
                lease_expires_ms: expires_ms,
                leased_ms: now_ms,
                url: q.url,
                domain: d.name().to_string(),
                depth: q.depth,
                min_delay_ms: None,
                server,
                revisit: None,
            });
            self.window_changed(id);
        }
        (out, waits)
    }

    /// A result arrived: the lease ends. `None` for an unknown (expired or
    /// duplicate) lease.
    #[cfg(test)]
    pub(crate) fn complete(&mut self, lease: u64) -> Option<Leased> {
        let l = self.leases.get(lease)?;
        let (sup, url) = (l.sup, l.url.clone());
        self.complete_for(sup, lease, &url).ok()
    }

    /// A result from `sup` for `lease`: the lease ends, and what was leased
    /// (URL, domain, depth) comes back from the lease record, which is what
    /// the result is about, whatever the message says. A lease this
    /// frontier does not have out is [`LeaseRefusal::Unknown`]; one out at
    /// another supervisor is [`LeaseRefusal::Foreign`] and stays with its
    /// holder (a peer cannot end, or learn about, another's lease). A
    /// result about another `url` than the lease's is
    /// [`LeaseRefusal::OtherUrl`] and leaves the lease out: otherwise a URL
    /// could be marked done that was never fetched.
    pub(crate) fn complete_for(&mut self, sup: SupId, lease: u64, url: &str) -> Result<Leased, LeaseRefusal> {
        let l = self.leases.complete(sup, lease, url, &mut self.domains)?;
        let d = &mut self.domains[l.domain_id];
        d.note_result();
        let domain = d.name().to_string();
        self.make_ready(l.domain_id);
        Ok(Leased {
            url: l.url,
            domain,
            depth: l.depth,
            seq: l.seq,
        })
    }

    /// Leases `sup` holds now (its credit in use).
    pub(crate) fn held(&self, sup: SupId) -> u32 {
        self.leases.held(sup)
    }

    /// Extends the leases `sup` says it still holds by a full lease period
    /// from `now_ms` (its heartbeat). Lease ids it does not hold are
    /// ignored: a supervisor can keep only its own leases alive. Returns
    /// how many were renewed.
    pub(crate) fn renew(&mut self, sup: SupId, leases: &[u64], now_ms: u64) -> usize {
        self.leases.renew(sup, leases, now_ms)
    }

    /// Ends `lease` without its result: its URL goes back to the front of
    /// its domain's queue, unless it waits for the store's word first
    /// (see `unanswered`).
    fn requeue_lease(&mut self, lease: u64) {
        let Some(e) = self.leases.end_unanswered(lease, &mut self.domains) else {
            return;
        };
        self.windows
            .push_front(&mut self.domains[e.domain_id].window, e.url, e.depth, e.seq);
        self.window_changed(e.domain_id);
    }

    /// Re-queues URLs whose lease ran out. Scans leases, so call it
    /// seldom (once a second is plenty for leases of minutes).
    pub(crate) fn expire(&mut self, now_ms: u64) -> usize {
        let expired = self.leases.expired(now_ms);
        let n = expired.len();
        for lease in expired {
            self.requeue_lease(lease);
        }
        n
    }

    /// URLs of ended leases to look up in the store: (lease, URL).
    pub(crate) fn take_unanswered(&mut self) -> Vec<(u64, String)> {
        self.leases.take_unanswered()
    }

    /// The store's answer for an ended lease: with `stored`, its URL is
    /// finished and returned for its links to be offered again;
    /// otherwise it is queued again. Nothing for a lease adopted
    /// meanwhile.
    pub(crate) fn checked(&mut self, lease: u64, stored: bool) -> Option<Leased> {
        let u = self.leases.checked(lease, &mut self.domains)?;
        if stored {
            let d = &mut self.domains[u.domain_id];
            d.note_result();
            let domain = d.name().to_string();
            self.window_changed(u.domain_id);
            return Some(Leased {
                url: u.url,
                domain,
                depth: u.depth,
                seq: u.seq,
            });
        }
        self.windows
            .push_front(&mut self.domains[u.domain_id].window, u.url, u.depth, u.seq);
        self.window_changed(u.domain_id);
        None
    }

    /// The store could not be asked: asked again later.
    pub(crate) fn check_failed(&mut self, asked: Vec<(u64, String)>) {
        self.leases.check_failed(asked);
    }
}

mod adopt;
mod blocks;
mod domains;
mod forget;
mod index;
mod leases;
mod memory;
mod moves;
mod owners;
mod parking;
mod progress;
#[cfg(test)]
mod properties;
mod rebalance;
mod seqs;
mod servers;
#[cfg(test)]
mod tests;
mod unanswered;
mod window;
#[cfg(test)]
mod window_tests;
