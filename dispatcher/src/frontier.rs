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
//! This file holds admission, ownership and leases. Beside it: `window`
//! (the windows and their reads), `parking` (which domains may hold a
//! window), `adopt` (leases a rejoining supervisor
//! still holds), `rebalance` (domains moved to a supervisor that joins a
//! running crawl), `forget` (domains with nothing left), `index` (domain
//! name to id) and `seqs` (a domain's adopted and unconfirmed `seq`s).

use std::collections::{HashMap, VecDeque};

use link::protocol::WorkItem;

pub(crate) use adopt::Adoption;
use index::DomainIndex;
use seqs::Seqs;
use window::RefillState;
pub(crate) use window::{ReadPage, Refill, Stored};

pub(crate) type SupId = usize;

struct Queued {
    url: String,
    depth: u16,
    /// Unix ms when it was queued (0 = unknown): for `queue_wait`.
    queued_ms: u64,
}

struct DomainQ {
    name: Box<str>,
    /// The window: the domain's next URLs, in memory.
    queue: VecDeque<Queued>,
    /// Queued URLs of this domain that are only in the store: those with
    /// a `seq` above `cursor` (and at most `last_seq`).
    spilled: u64,
    /// Every queued URL with a `seq` up to this one is in the window, out
    /// on a lease, or finished: the store's queue goes on after it.
    cursor: i64,
    /// The highest `seq` admitted to this domain.
    last_seq: i64,
    refill: RefillState,
    /// `seq`s above `cursor` adopted straight from the store: a later read
    /// skips them (they are out on a lease already).
    taken: Seqs,
    /// `seq`s inserted for URLs the seen-set was unsure of, until the
    /// frontier writer says whether the store took them (see
    /// [`Frontier::admit_unverified`]): a read that returns one skips it.
    unverified: Seqs,
    in_flight: u32,
    owner: Option<SupId>,
    /// Whether the domain sits in its owner's ready ring.
    in_ready: bool,
    /// Whether the domain holds one of the slots for windows (see `parking`).
    active: bool,
    /// Not handed out before this time (Unix ms): 0 = free, `HALTED` = until un-halted.
    blocked_until: u64,
    /// A result arrived since the last sweep (see `forget`): the domain's
    /// owner may still be pacing it.
    recent: bool,
}

impl DomainQ {
    fn new(name: &str) -> DomainQ {
        DomainQ {
            name: name.into(),
            queue: VecDeque::new(),
            spilled: 0,
            cursor: 0,
            last_seq: 0,
            refill: RefillState::Idle,
            taken: Seqs::default(),
            unverified: Seqs::default(),
            in_flight: 0,
            owner: None,
            in_ready: false,
            active: false,
            blocked_until: 0,
            recent: false,
        }
    }
}

/// `blocked_until` of a halted domain.
const HALTED: u64 = u64::MAX;

/// A URL out at a supervisor.
pub(crate) struct Lease {
    pub url: String,
    pub depth: u16,
    pub sup: SupId,
    pub expires_ms: u64,
    domain_id: u32,
}

/// What a result is about, from the dispatcher's own lease record.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Leased {
    pub url: String,
    pub domain: String,
    pub depth: u16,
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

struct Sup {
    live: bool,
    domains: usize,
    ready: VecDeque<u32>,
    /// Leases this supervisor holds: what its credit is measured against.
    /// Kept here, beside the leases, so that every way a lease ends
    /// (result, expiry, the supervisor leaving) gives its credit back.
    held: u32,
}

pub(crate) struct Frontier {
    /// By id; the slots of forgotten domains (see `forget`) are in `free`.
    domains: Vec<DomainQ>,
    domain_ids: DomainIndex,
    free: Vec<u32>,
    /// When `forget::forget_idle` next sweeps (Unix ms), and how often.
    next_forget_ms: u64,
    forget_every_ms: u64,
    /// Domains forgotten so far.
    forgotten: u64,
    sups: Vec<Sup>,
    /// Domains with work but no live supervisor to own them.
    unassigned: Vec<u32>,
    /// Paused or halted domains (few; scanned once per tick).
    blocked: Vec<u32>,
    leases: HashMap<u64, Lease>,
    /// Domains get owners only once this is set (see `start_assigning`).
    assigning: bool,
    next_lease: u64,
    queued: usize,
    max_inflight_per_domain: u32,
    lease_ms: u64,
    /// Once `budget` URLs are queued in memory, a domain's window holds at
    /// most this many (or fewer: see `window_now`); reads fill it by half
    /// a window at least.
    window: usize,
    budget: usize,
    /// Queued URLs only in the store (the sum of the domains' `spilled`).
    spilled_total: usize,
    /// Domains whose window runs low while URLs wait in the store.
    wanted: VecDeque<u32>,
    /// Domains holding a slot, and the most that may while memory is at
    /// the budget (see `parking`).
    active: usize,
    max_active: usize,
    /// Domains waiting for a slot, longest waiting first.
    parked: VecDeque<u32>,
    /// The highest `seq` found in the store at start-up: written, whatever
    /// this process's writer has written since.
    resumed_upto: i64,
    /// Unverified URLs the writer has not confirmed yet (not `queued`).
    unconfirmed: usize,
    /// Stored entries reads found finished by their page, not yet taken
    /// ([`Frontier::take_finished`]).
    finished_found: Vec<(String, u16)>,
    /// Ended leases are held until the store says whether their page is
    /// stored (`unanswered`).
    check_unanswered: bool,
    unanswered: HashMap<u64, unanswered::Unanswered>,
    /// Of those, the ones not asked about yet: (lease, URL).
    to_check: Vec<(u64, String)>,
    /// A supervisor joined: domains are rebalanced at the next
    /// [`Frontier::rebalance`].
    rebalance_due: bool,
    /// Domains moving to another supervisor once nothing of them is in
    /// flight (`rebalance`), not leased meanwhile: few, and kept here
    /// rather than in every domain's record.
    moving: HashMap<u32, SupId>,
    /// Domains moved between supervisors so far.
    moved: u64,
    /// The latest time (Unix ms) the frontier was told of, for holds that
    /// start where no time is passed in (a move's hand-over).
    clock_ms: u64,
}

impl Frontier {
    pub(crate) fn new(max_inflight_per_domain: u32, lease_ms: u64, first_lease: u64) -> Frontier {
        Frontier {
            domains: Vec::new(),
            domain_ids: DomainIndex::new(),
            free: Vec::new(),
            next_forget_ms: 0,
            forget_every_ms: forget::DEFAULT_EVERY_MS,
            forgotten: 0,
            sups: Vec::new(),
            unassigned: Vec::new(),
            blocked: Vec::new(),
            leases: HashMap::new(),
            assigning: false,
            next_lease: first_lease,
            queued: 0,
            max_inflight_per_domain: max_inflight_per_domain.max(1),
            lease_ms,
            window: usize::MAX,
            budget: 0,
            spilled_total: 0,
            wanted: VecDeque::new(),
            active: 0,
            max_active: usize::MAX,
            parked: VecDeque::new(),
            resumed_upto: 0,
            unconfirmed: 0,
            finished_found: Vec::new(),
            check_unanswered: false,
            unanswered: HashMap::new(),
            to_check: Vec::new(),
            rebalance_due: false,
            moving: HashMap::new(),
            moved: 0,
            clock_ms: 0,
        }
    }

    pub(crate) fn queued(&self) -> usize {
        self.queued
    }

    /// URLs that could be leased right now: their domain is owned by a
    /// live supervisor, not paused or halted, and below its in-flight cap.
    /// Scans the domains: for the once-a-second gauges only.
    pub(crate) fn ready(&self) -> usize {
        self.domains
            .iter()
            .filter(|d| d.blocked_until == 0 && d.owner.is_some_and(|s| self.sups[s].live))
            .map(|d| {
                let room = self.max_inflight_per_domain.saturating_sub(d.in_flight) as usize;
                d.queue.len().min(room)
            })
            .sum()
    }

    pub(crate) fn in_flight(&self) -> usize {
        self.leases.len() + self.unanswered.len()
    }

    /// Domains held: those with URLs queued or out, or a result in the
    /// last sweep or two (see `forget`).
    pub(crate) fn domain_count(&self) -> usize {
        self.domain_ids.len()
    }

    /// Nothing queued (but in halted domains) and nothing out: the crawl is over.
    pub(crate) fn is_idle(&self) -> bool {
        self.queued == self.halted_queued()
            && self.leases.is_empty()
            && self.unconfirmed == 0
            && self.unanswered.is_empty()
    }

    fn halted_queued(&self) -> usize {
        self.blocked
            .iter()
            .map(|d| &self.domains[*d as usize])
            .filter(|d| d.blocked_until == HALTED)
            .map(|d| d.queue.len() + d.spilled as usize)
            .sum()
    }

    /// URLs admitted to their domain but only in the store for now.
    pub(crate) fn spilled(&self) -> usize {
        self.spilled_total
    }

    /// A newly admitted URL (already marked seen and written with `seq`,
    /// higher than any before): into its domain's window if the window
    /// has room and no older URL of the domain waits in the store;
    /// otherwise it stays in the store, and is counted.
    pub(crate) fn admit(&mut self, url: String, domain: &str, depth: u16, seq: i64, now_ms: u64) {
        let id = self.domain_id(domain);
        let in_memory = self.window_takes(id);
        let d = &mut self.domains[id as usize];
        d.last_seq = d.last_seq.max(seq);
        if in_memory {
            d.cursor = d.cursor.max(seq);
            self.push_at(url, domain, depth, now_ms);
            return;
        }
        d.spilled += 1;
        self.spilled_total += 1;
        self.queued += 1;
        self.ensure_owner(id);
        self.want_refill(id);
    }

    /// A URL inserted with `seq` although its hash was seen before, so that
    /// the store's unique index decides (see `crate::seen`). It waits for
    /// the frontier writer's word ([`Frontier::confirmed`]) outside the
    /// queue: a read that returns it meanwhile skips it.
    pub(crate) fn admit_unverified(&mut self, domain: &str, seq: i64) {
        let id = self.domain_id(domain);
        self.domains[id as usize].unverified.push(seq);
        self.unconfirmed += 1;
    }

    /// The writer's word on an unverified URL: `new` if the store took it
    /// (a hash collision, or a URL judged while the seen-set is rebuilt),
    /// else it was there already. A new one joins its domain's queue: in
    /// memory if the reads have gone past its `seq`, or, as [`Frontier::admit`]
    /// does, if no read of the domain is wanted or under way, none of its
    /// URLs waits in the store and the window has room (the cursor moves
    /// past it; unverified URLs it passes are placed by their own word);
    /// else counted in the store, where a read finds it (a read under way
    /// may cover it, and must then take it). Without the second case, every
    /// URL judged while the seen-set is rebuilt after a restart cost a
    /// window read: on nx-27017 a collection scan each, which held the
    /// resumed crawl to a few hundred URLs a second.
    pub(crate) fn confirmed(
        &mut self,
        url: String,
        domain: &str,
        depth: u16,
        seq: i64,
        new: bool,
        now_ms: u64,
    ) {
        let Some(id) = self.domain_ids.get(domain, &self.domains) else {
            return;
        };
        let d = &mut self.domains[id as usize];
        if !d.unverified.remove(seq) {
            return;
        }
        self.unconfirmed -= 1;
        if !new {
            return;
        }
        if seq <= d.cursor {
            self.push_at(url, domain, depth, now_ms);
            return;
        }
        let in_memory = self.window_takes(id) && self.domains[id as usize].refill == RefillState::Idle;
        let d = &mut self.domains[id as usize];
        d.last_seq = d.last_seq.max(seq);
        if in_memory {
            d.cursor = seq;
            self.push_at(url, domain, depth, now_ms);
            return;
        }
        d.spilled += 1;
        self.spilled_total += 1;
        self.queued += 1;
        self.ensure_owner(id);
        self.want_refill(id);
    }

    /// Stops handing out `domain`'s URLs until `until_ms` (circuit breaker).
    pub(crate) fn pause(&mut self, domain: &str, until_ms: u64) {
        self.block(domain, until_ms);
    }

    /// Stops handing out `domain`'s URLs until [`Frontier::unhalt`].
    pub(crate) fn halt(&mut self, domain: &str) {
        self.block(domain, HALTED);
    }

    fn block(&mut self, domain: &str, until_ms: u64) {
        let id = self.domain_id(domain);
        let d = &mut self.domains[id as usize];
        if d.blocked_until == 0 {
            self.blocked.push(id);
        }
        d.blocked_until = d.blocked_until.max(until_ms);
    }

    /// Lets a halted domain crawl again; false if it was not halted.
    pub(crate) fn unhalt(&mut self, domain: &str) -> bool {
        let Some(id) = self.domain_ids.get(domain, &self.domains) else {
            return false;
        };
        if self.domains[id as usize].blocked_until != HALTED {
            return false;
        }
        self.domains[id as usize].blocked_until = 1;
        self.release_blocked(1);
        true
    }

    /// Un-pauses domains whose pause is over.
    pub(crate) fn release_blocked(&mut self, now_ms: u64) {
        self.clock_ms = self.clock_ms.max(now_ms);
        let mut i = 0;
        while i < self.blocked.len() {
            let id = self.blocked[i];
            if self.domains[id as usize].blocked_until <= now_ms {
                self.domains[id as usize].blocked_until = 0;
                self.blocked.swap_remove(i);
                self.make_ready(id);
            } else {
                i += 1;
            }
        }
    }

    /// Names of the paused and of the halted domains.
    pub(crate) fn blocked_domains(&self) -> (Vec<&str>, Vec<&str>) {
        let (mut paused, mut halted) = (Vec::new(), Vec::new());
        for id in &self.blocked {
            let d = &self.domains[*id as usize];
            if d.blocked_until == HALTED {
                halted.push(&*d.name);
            } else {
                paused.push(&*d.name);
            }
        }
        (paused, halted)
    }

    /// Queues a URL (already marked seen) at the back of its domain's queue.
    pub(crate) fn push(&mut self, url: String, domain: &str, depth: u16) {
        self.push_at(url, domain, depth, 0);
    }

    /// Queues a URL handed back unfetched (see `FailureKind::Fenced`) at
    /// the front of its domain's queue, where its lease took it from.
    pub(crate) fn push_front(&mut self, url: String, domain: &str, depth: u16) {
        let id = self.domain_id(domain);
        self.domains[id as usize].queue.push_front(Queued {
            url,
            depth,
            queued_ms: 0,
        });
        self.queued += 1;
        self.ensure_owner(id);
        self.window_changed(id);
    }

    /// [`Frontier::push`], noting the time (Unix ms) for `queue_wait`.
    pub(crate) fn push_at(&mut self, url: String, domain: &str, depth: u16, now_ms: u64) {
        let id = self.domain_id(domain);
        let queue = &mut self.domains[id as usize].queue;
        if queue.capacity() == 0 {
            // Room for one: many domains never queue a second URL, and a
            // first push would make room for four (160 bytes).
            queue.reserve_exact(1);
        }
        queue.push_back(Queued {
            url,
            depth,
            queued_ms: now_ms,
        });
        self.queued += 1;
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

    fn domain_id(&mut self, domain: &str) -> u32 {
        if let Some(id) = self.domain_ids.get(domain, &self.domains) {
            return id;
        }
        let id = match self.free.pop() {
            Some(id) => {
                self.domains[id as usize] = DomainQ::new(domain);
                id
            }
            None => {
                self.domains.push(DomainQ::new(domain));
                (self.domains.len() - 1) as u32
            }
        };
        self.domain_ids.insert(id, &self.domains);
        id
    }

    /// Gives an ownerless domain to the live supervisor with the fewest
    /// domains. One owner per domain keeps its politeness in one place.
    fn ensure_owner(&mut self, id: u32) {
        if self.domains[id as usize].owner.is_some() {
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
                self.domains[id as usize].owner = Some(s);
                self.sups[s].domains += 1;
            }
            None => self.unassigned.push(id),
        }
    }

    fn make_ready(&mut self, id: u32) {
        if self.finish_move(id) {
            return;
        }
        let d = &mut self.domains[id as usize];
        if d.in_ready
            || d.blocked_until != 0
            || d.queue.is_empty()
            || d.in_flight >= self.max_inflight_per_domain
        {
            return;
        }
        if let Some(s) = d.owner {
            d.in_ready = true;
            self.sups[s].ready.push_back(id);
        }
    }

    /// A supervisor joined; once assigning, it takes over domains nobody owns.
    pub(crate) fn add_supervisor(&mut self) -> SupId {
        let id = self.sups.len();
        self.sups.push(Sup {
            live: true,
            domains: 0,
            ready: VecDeque::new(),
            held: 0,
        });
        self.assign_unowned();
        self.want_rebalance();
        id
    }

    /// Starts giving domains to supervisors. Until then (while the expected
    /// supervisors are still joining) domains wait unowned, so the first
    /// supervisor to arrive does not get them all.
    pub(crate) fn start_assigning(&mut self) {
        self.assigning = true;
        self.assign_unowned();
    }

    fn assign_unowned(&mut self) {
        if !self.assigning {
            return;
        }
        for d in std::mem::take(&mut self.unassigned) {
            if self.domains[d as usize].owner.is_none() {
                self.ensure_owner(d);
                self.make_ready(d);
            }
        }
    }

    /// A supervisor left or died: its leased URLs go back to the front of
    /// their queues and its domains to the other supervisors.
    pub(crate) fn remove_supervisor(&mut self, sup: SupId) -> usize {
        let Some(s) = self.sups.get_mut(sup) else { return 0 };
        s.live = false;
        s.domains = 0;
        s.ready.clear();
        let lost: Vec<u64> = self
            .leases
            .iter()
            .filter(|(_, l)| l.sup == sup)
            .map(|(k, _)| *k)
            .collect();
        let n = lost.len();
        for lease in lost {
            self.requeue_lease(lease);
        }
        let owned: Vec<u32> = (0..self.domains.len() as u32)
            .filter(|d| self.domains[*d as usize].owner == Some(sup))
            .collect();
        for d in owned {
            let dq = &mut self.domains[d as usize];
            dq.owner = None;
            dq.in_ready = false;
            self.moving.remove(&d);
            self.ensure_owner(d);
            self.make_ready(d);
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
            let Some(id) = self.sups.get_mut(sup).and_then(|s| s.ready.pop_front()) else {
                break;
            };
            let d = &mut self.domains[id as usize];
            d.in_ready = false;
            if d.owner != Some(sup)
                || d.blocked_until != 0
                || self.moving.contains_key(&id)
                || d.in_flight >= self.max_inflight_per_domain
            {
                continue;
            }
            let Some(q) = d.queue.pop_front() else { continue };
            d.in_flight += 1;
            self.queued -= 1;
            self.sups[sup].held += 1;
            let lease = self.next_lease;
            self.next_lease += 1;
            let expires_ms = now_ms.saturating_add(self.lease_ms);
            if q.queued_ms != 0 {
                waits.push(now_ms.saturating_sub(q.queued_ms));
            }
            out.push(WorkItem {
                lease,
                lease_expires_ms: expires_ms,
                leased_ms: now_ms,
                url: q.url.clone(),
                domain: d.name.to_string(),
                depth: q.depth,
            });
            self.leases.insert(
                lease,
                Lease {
                    url: q.url,
                    depth: q.depth,
                    sup,
                    expires_ms,
                    domain_id: id,
                },
            );
            self.window_changed(id);
        }
        (out, waits)
    }

    /// A result arrived: the lease ends. `None` for an unknown (expired or
    /// duplicate) lease.
    #[cfg(test)]
    pub(crate) fn complete(&mut self, lease: u64) -> Option<Leased> {
        let l = self.leases.get(&lease)?;
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
        match self.leases.get(&lease) {
            None => return Err(LeaseRefusal::Unknown),
            Some(l) if l.sup != sup => return Err(LeaseRefusal::Foreign),
            Some(l) if l.url != url => return Err(LeaseRefusal::OtherUrl),
            Some(_) => {}
        }
        let l = self.leases.remove(&lease).ok_or(LeaseRefusal::Unknown)?;
        self.release_credit(l.sup);
        let d = &mut self.domains[l.domain_id as usize];
        d.in_flight = d.in_flight.saturating_sub(1);
        d.recent = true;
        let domain = d.name.to_string();
        self.make_ready(l.domain_id);
        Ok(Leased {
            url: l.url,
            domain,
            depth: l.depth,
        })
    }

    fn release_credit(&mut self, sup: SupId) {
        if let Some(s) = self.sups.get_mut(sup) {
            s.held = s.held.saturating_sub(1);
        }
    }

    /// Leases `sup` holds now (its credit in use).
    pub(crate) fn held(&self, sup: SupId) -> u32 {
        self.sups.get(sup).map_or(0, |s| s.held)
    }

    /// Extends the leases `sup` says it still holds by a full lease period
    /// from `now_ms` (its heartbeat). Lease ids it does not hold are
    /// ignored: a supervisor can keep only its own leases alive. Returns
    /// how many were renewed.
    pub(crate) fn renew(&mut self, sup: SupId, leases: &[u64], now_ms: u64) -> usize {
        let mut renewed = 0;
        for id in leases {
            if let Some(l) = self.leases.get_mut(id).filter(|l| l.sup == sup) {
                l.expires_ms = l.expires_ms.max(now_ms.saturating_add(self.lease_ms));
                renewed += 1;
            }
        }
        renewed
    }

    fn requeue_lease(&mut self, lease: u64) {
        let Some(l) = self.leases.remove(&lease) else {
            return;
        };
        self.release_credit(l.sup);
        // Its page may be stored: asked of the store first (`unanswered`).
        let Some((url, depth)) = self.park_unanswered(lease, l.url, l.depth, l.domain_id) else {
            return;
        };
        let d = &mut self.domains[l.domain_id as usize];
        d.in_flight = d.in_flight.saturating_sub(1);
        d.queue.push_front(Queued {
            url,
            depth,
            queued_ms: 0,
        });
        self.queued += 1;
        self.window_changed(l.domain_id);
    }

    /// Re-queues URLs whose lease ran out. Scans leases, so call it
    /// seldom (once a second is plenty for leases of minutes).
    pub(crate) fn expire(&mut self, now_ms: u64) -> usize {
        let expired: Vec<u64> = self
            .leases
            .iter()
            .filter(|(_, l)| l.expires_ms <= now_ms)
            .map(|(k, _)| *k)
            .collect();
        let n = expired.len();
        for lease in expired {
            self.requeue_lease(lease);
        }
        n
    }
}

mod adopt;
mod forget;
mod index;
mod parking;
#[cfg(test)]
mod properties;
mod rebalance;
mod seqs;
mod unanswered;
mod window;
#[cfg(test)]
mod window_tests;

#[cfg(test)]
mod tests {
    use super::*;

    fn f() -> Frontier {
        let mut f = Frontier::new(2, 1000, 1);
        f.start_assigning();
        f
    }

    /// The record every domain held costs (a `Vec` slot, besides its
    /// name and its window): 160 bytes before `Seqs` and `Box<str>`.
    #[test]
    #[cfg(target_pointer_width = "64")]
    fn a_domain_record_stays_small() {
        assert!(
            std::mem::size_of::<DomainQ>() <= 120,
            "{}",
            std::mem::size_of::<DomainQ>()
        );
    }

    #[test]
    fn leases_round_robin_over_domains() {
        let mut f = f();
        let s = f.add_supervisor();
        for i in 0..5 {
            for d in ["a", "b"] {
                let url = format!("http://{d}/{i}");
                f.push(url, d, 0);
            }
        }
        assert_eq!(f.queued(), 10);
        let got = f.take(s, 10, 0);
        // Two per domain at most (max in flight), alternating domains.
        let domains: Vec<_> = got.iter().map(|w| w.domain.as_str()).collect();
        assert_eq!(domains, ["a", "b", "a", "b"]);
        assert_eq!(f.in_flight(), 4);
        // Completing one frees room for that domain only.
        assert!(f.complete(got[0].lease).is_some());
        assert!(f.complete(got[0].lease).is_none());
        let more = f.take(s, 10, 0);
        assert_eq!(more.len(), 1);
        assert_eq!(more[0].domain, "a");
        assert_eq!(more[0].url, "http://a/2");
    }

    #[test]
    fn domains_spread_over_supervisors_and_survive_one_leaving() {
        let mut f = f();
        let s1 = f.add_supervisor();
        let s2 = f.add_supervisor();
        for d in ["a", "b", "c", "d"] {
            f.push(format!("http://{d}/"), d, 0);
        }
        let t1 = f.take(s1, 10, 0);
        let t2 = f.take(s2, 10, 0);
        assert_eq!(t1.len(), 2);
        assert_eq!(t2.len(), 2);
        // s1 dies holding its leases: they go back and to s2.
        assert_eq!(f.remove_supervisor(s1), 2);
        assert_eq!(f.queued(), 2);
        let t2b = f.take(s2, 10, 0);
        let mut urls: Vec<_> = t2b.iter().map(|w| w.url.clone()).collect();
        urls.sort();
        let mut expect: Vec<_> = t1.iter().map(|w| w.url.clone()).collect();
        expect.sort();
        assert_eq!(urls, expect);
    }

    #[test]
    fn domains_wait_until_assigning_starts_then_spread() {
        let mut f = Frontier::new(2, 1000, 1);
        for d in ["a", "b", "c", "d"] {
            f.push(format!("http://{d}/"), d, 0);
        }
        let s1 = f.add_supervisor();
        assert!(f.take(s1, 10, 0).is_empty());
        let s2 = f.add_supervisor();
        f.start_assigning();
        assert_eq!(f.take(s1, 10, 0).len(), 2);
        assert_eq!(f.take(s2, 10, 0).len(), 2);
    }

    #[test]
    fn paused_and_halted_domains_keep_their_urls() {
        let mut f = f();
        let s = f.add_supervisor();
        for i in 0..3 {
            f.push(format!("http://a/{i}"), "a", 0);
            f.push(format!("http://b/{i}"), "b", 0);
        }
        f.pause("a", 1000);
        f.halt("b");
        assert!(f.take(s, 10, 0).is_empty());
        assert_eq!(f.blocked_domains(), (vec!["a"], vec!["b"]));
        assert!(!f.is_idle());
        f.release_blocked(999);
        assert!(f.take(s, 10, 999).is_empty());
        f.release_blocked(1000);
        let a = f.take(s, 10, 1000);
        assert_eq!(a.len(), 2);
        for w in &a {
            f.complete(w.lease);
        }
        let rest = f.take(s, 10, 1000);
        assert_eq!(rest.len(), 1);
        f.complete(rest[0].lease);
        // Only the halted domain's URLs are left: the crawl can end, they stay queued.
        assert!(f.is_idle());
        assert_eq!(f.queued(), 3);
        assert!(f.unhalt("b"));
        assert!(!f.unhalt("b"));
        assert!(!f.is_idle());
        assert_eq!(f.take(s, 10, 1000).len(), 2);
    }

    #[test]
    fn work_waits_for_a_supervisor_and_leases_expire() {
        let mut f = f();
        f.push("http://a/".into(), "a", 0);
        assert!(!f.is_idle());
        let s = f.add_supervisor();
        let t = f.take(s, 10, 100);
        assert_eq!(t.len(), 1);
        assert_eq!(t[0].lease_expires_ms, 1100);
        assert_eq!(f.expire(1099), 0);
        assert_eq!(f.expire(1100), 1);
        let again = f.take(s, 10, 2000);
        assert_eq!(again[0].url, "http://a/");
        assert_ne!(again[0].lease, t[0].lease);
        f.complete(again[0].lease);
        assert!(f.is_idle());
    }

    #[test]
    fn credit_comes_back_however_a_lease_ends() {
        let mut f = Frontier::new(100, 1000, 1);
        f.start_assigning();
        let s = f.add_supervisor();
        for i in 0..6 {
            f.push(format!("http://a/{i}"), "a", 0);
        }
        let t = f.take(s, 6, 0);
        assert_eq!(f.held(s), 6);
        // A result gives one back, once: a duplicate result gives nothing.
        assert!(f.complete(t[0].lease).is_some());
        assert!(f.complete(t[0].lease).is_none());
        assert_eq!(f.held(s), 5);
        // Expiry gives back what expired.
        assert_eq!(f.expire(1000), 5);
        assert_eq!(f.held(s), 0);
        // A late result for an expired lease gives nothing back twice.
        assert!(f.complete(t[1].lease).is_none());
        assert_eq!(f.held(s), 0);
        // The re-queued URLs are leased again, and the supervisor leaving
        // gives their credit back too.
        assert_eq!(f.take(s, 10, 2000).len(), 5);
        assert_eq!(f.held(s), 5);
        assert_eq!(f.remove_supervisor(s), 5);
        assert_eq!(f.held(s), 0);
    }

    #[test]
    fn heartbeats_renew_only_the_holders_leases() {
        let mut f = Frontier::new(100, 1000, 1);
        f.start_assigning();
        let s1 = f.add_supervisor();
        let s2 = f.add_supervisor();
        f.push("http://a/0".into(), "a", 0);
        f.push("http://b/0".into(), "b", 0);
        let t1 = f.take(s1, 10, 0);
        let t2 = f.take(s2, 10, 0);
        assert_eq!((t1.len(), t2.len()), (1, 1));
        // s1 renews its lease at 900; s2 tries to renew s1's and its own
        // unknown lease id 999 (a peer that lies changes nothing).
        assert_eq!(f.renew(s1, &[t1[0].lease], 900), 1);
        assert_eq!(f.renew(s2, &[t1[0].lease, 999], 900), 0);
        // At 1000 only s2's unrenewed lease expires.
        assert_eq!(f.expire(1000), 1);
        assert_eq!(f.held(s1), 1);
        assert_eq!(f.held(s2), 0);
        // Renewal never shortens a lease, and s1's runs to 1900.
        assert_eq!(f.renew(s1, &[t1[0].lease], 0), 1);
        assert_eq!(f.expire(1899), 0);
        assert_eq!(f.expire(1900), 1);
        assert_eq!(f.held(s1), 0);
    }

    #[test]
    fn a_restarted_dispatcher_adopts_what_a_supervisor_still_holds() {
        // The old dispatcher leased a/0, a/1 and b/0 (lease ids 500..502);
        // the new one read all of a/0..a/2 and b/0 back as queued.
        let mut f = Frontier::new(2, 1000, 1);
        for u in ["http://a/0", "http://a/1", "http://a/2", "http://b/0"] {
            f.push(u.to_string(), &u[7..8], 0);
        }
        let held: Vec<WorkItem> = [("http://a/0", 500), ("http://a/1", 501), ("http://b/0", 502)]
            .iter()
            .map(|(u, lease)| WorkItem {
                lease: *lease,
                lease_expires_ms: 0,
                leased_ms: 0,
                url: u.to_string(),
                domain: u[7..8].to_string(),
                depth: 0,
            })
            .collect();
        let s1 = f.add_supervisor();
        let adopted = |a: Adoption| a.adopted;
        assert_eq!(adopted(f.adopt(s1, held.clone(), 10, |_| false)), 3);
        // A repeated Hello changes nothing: the leases are s1's already.
        assert_eq!(
            f.adopt(s1, held, 10, |_| false),
            Adoption {
                adopted: 3,
                refused: 0,
                look_up: vec![]
            }
        );
        assert_eq!(f.queued(), 1);
        assert_eq!(f.in_flight(), 3);
        assert_eq!(f.held(s1), 3);
        // Another supervisor joins; the adopted domains stay with s1.
        let s2 = f.add_supervisor();
        f.start_assigning();
        assert!(f.take(s2, 10, 10).is_empty());
        // a has 2 in flight (the per-domain maximum): nothing more yet.
        assert!(f.take(s1, 10, 10).is_empty());
        assert_eq!(f.complete(500).map(|l| l.url), Some("http://a/0".into()));
        let next = f.take(s1, 10, 10);
        assert_eq!(next.len(), 1);
        assert_eq!(next[0].url, "http://a/2");
        assert!(next[0].lease > 502, "new leases never collide with adopted ones");
        for lease in [501, 502, next[0].lease] {
            assert!(f.complete(lease).is_some());
        }
        assert!(f.is_idle());
    }

    #[test]
    fn a_result_counts_only_from_the_holder_and_is_about_the_leased_url() {
        let mut f = f();
        let s1 = f.add_supervisor();
        let s2 = f.add_supervisor();
        f.push("http://a/0".into(), "a", 3);
        f.push("http://b/0".into(), "b", 0);
        let t1 = f.take(s1, 10, 0);
        assert_eq!(t1.len(), 1);
        // s2 reports on s1's lease: refused, and the lease stays s1's.
        let url = t1[0].url.as_str();
        assert_eq!(f.complete_for(s2, t1[0].lease, url), Err(LeaseRefusal::Foreign));
        assert_eq!(f.held(s1), 1);
        assert_eq!(f.complete_for(s1, 999_999, url), Err(LeaseRefusal::Unknown));
        // The holder's result about another URL (a lease id issued again
        // after a restart, or a lie) is refused, and the lease stays out.
        assert_eq!(
            f.complete_for(s1, t1[0].lease, "http://b/0"),
            Err(LeaseRefusal::OtherUrl)
        );
        assert_eq!(f.held(s1), 1);
        // The holder's result is about what was leased, from the record.
        let leased = f.complete_for(s1, t1[0].lease, url).unwrap();
        assert_eq!(leased.url, t1[0].url);
        assert_eq!(leased.domain, t1[0].domain);
        assert_eq!(leased.depth, t1[0].depth);
        assert_eq!(f.held(s1), 0);
        assert_eq!(f.complete_for(s1, t1[0].lease, url), Err(LeaseRefusal::Unknown));
    }

    fn held_item(url: &str, domain: &str, lease: u64, depth: u16) -> WorkItem {
        WorkItem {
            lease,
            lease_expires_ms: 0,
            leased_ms: 0,
            url: url.into(),
            domain: domain.into(),
            depth,
        }
    }

    #[test]
    fn adoption_takes_only_queued_urls_with_their_own_domain_and_depth() {
        // A restarted dispatcher: http://a.test/0 is queued at depth 2.
        let mut f = Frontier::new(4, 1000, 1 << 20);
        f.push("http://a.test/0".into(), "a.test", 2);
        let s1 = f.add_supervisor();
        let claimed = vec![
            // Queued here: adopted, but with depth 2 and domain a.test
            // whatever the claim says.
            held_item("http://a.test/0", "evil.test", 500, 0),
            // Never seen here (nor its domain): refused.
            held_item("http://evil.test/", "evil.test", 501, 0),
            // A known domain, but not a queued URL: refused.
            held_item("http://a.test/forged", "a.test", 502, 0),
            // Not a URL at all.
            held_item("not a url", "a.test", 503, 0),
        ];
        assert_eq!(
            f.adopt(s1, claimed, 10, |_| false),
            Adoption {
                adopted: 1,
                refused: 3,
                look_up: vec![]
            }
        );
        assert_eq!(f.queued(), 0);
        assert_eq!(f.held(s1), 1);
        let leased = f.complete_for(s1, 500, "http://a.test/0").unwrap();
        assert_eq!(
            leased,
            Leased {
                url: "http://a.test/0".into(),
                domain: "a.test".into(),
                depth: 2
            }
        );
        for (lease, url) in [
            (501, "http://evil.test/"),
            (502, "http://a.test/forged"),
            (503, "not a url"),
        ] {
            assert_eq!(f.complete_for(s1, lease, url), Err(LeaseRefusal::Unknown));
        }
    }

    #[test]
    fn adoption_moves_leases_of_an_earlier_connection_but_never_anothers() {
        let mut f = f();
        let old = f.add_supervisor();
        let other = f.add_supervisor();
        f.push("http://a.test/0".into(), "a.test", 0);
        f.push("http://b.test/0".into(), "b.test", 0);
        let mine = f.take(old, 10, 0);
        let theirs = f.take(other, 10, 0);
        assert_eq!((mine.len(), theirs.len()), (1, 1));
        // The same supervisor reconnects as `new`, listing its lease and,
        // by mistake or malice, the other supervisor's.
        let new = f.add_supervisor();
        let claimed = vec![mine[0].clone(), theirs[0].clone()];
        assert_eq!(
            f.adopt(new, claimed, 10, |s| s == old),
            Adoption {
                adopted: 1,
                refused: 1,
                look_up: vec![]
            }
        );
        assert_eq!((f.held(old), f.held(new), f.held(other)), (0, 1, 1));
        assert_eq!(
            f.complete_for(old, mine[0].lease, &mine[0].url),
            Err(LeaseRefusal::Foreign)
        );
        assert!(f.complete_for(new, mine[0].lease, &mine[0].url).is_ok());
        assert!(f.complete_for(other, theirs[0].lease, &theirs[0].url).is_ok());
        // The old connection owned a.test; the new one does now, and the
        // old one leaving hands nothing back twice.
        assert_eq!(f.remove_supervisor(old), 0);
        f.push("http://a.test/1".into(), "a.test", 0);
        assert_eq!(f.take(new, 10, 0).len(), 1);
    }
}
