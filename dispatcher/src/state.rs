//! The crawl as a state machine with no I/O: the frontier, the supervisors
//! (membership, credits, heartbeats), admission of discovered URLs, leases
//! and their results, retries, the circuit breaker and halts, and the stop.
//!
//! It is driven by events (a supervisor joined, results came in, a tick,
//! a store read answered), each a method taking the time as a value, and it
//! answers with [`Effect`]s: messages to send, frontier writes, store
//! reads. The shell (`crawl.rs`) owns the ZeroMQ socket, the cluster-secret
//! handshake, the stores and the timers, and carries effects out in order;
//! what it hands back is defined here (`state/inputs.rs`), so the core
//! imports nothing from the shell. So every rule about leases can be
//! tested without a socket or a store (`state/tests/`), as in tokio's
//! mini-redis, where `Db` knows nothing of connections.
//!
//! As the frontier, the state is made of parts that each own their fields
//! and keep their invariants (each says which in its doc):
//!
//! - `intake`: the seen-set, admission and the `seq`s: which discovered
//!   URLs the crawl takes (links held while the stored URLs are read in,
//!   unsure ones, seeds waiting, deferred URLs taken up);
//! - `retries`: failures waiting for a retry, and the circuit breakers;
//! - `flow`: when leases and reads go out (the expected supervisors, the
//!   write gate, pending reads, whose turn, when progress is recorded);
//! - `resumption`: what an earlier run left (counts, finished URLs whose
//!   links are offered again).
//!
//! [`CrawlState`] keeps the frontier and the members and composes the
//! parts; the operations that span them are its own, by kind: here the
//! intake into the frontier, time, the store's answers, dispatch and the
//! end; `startup` (resuming), `outcomes` (results, retries and halts),
//! `members` (joining, adoption, leaving, heartbeats), `steer` (an
//! operator's commands) and `revisit` (pages due again).
//!
//! The parts import nothing from this file (only from `inputs` and
//! `settings`, leaves beside it). The files of `CrawlState`'s own
//! operations import it from here: one type's `impl` split across files
//! by kind, as the frontier's `memory`, `adopt`, `rebalance` and `forget`
//! are; this file reaches them only through the methods they add.

use std::collections::HashMap;
use std::time::Duration;

use link::protocol::ToSupervisor;
use shared::timing::{Op, TimingLog};

use crate::control::Controls;
use crate::frontier::{Frontier, Relink, SupId};
use crate::refusals::Refusals;
use crate::revisits::Revisits;
#[cfg(test)]
use crate::seen::SeenSet;
use crate::stats::{FinishReason, Stats};
pub(crate) use effect::Effect;
use flow::Flow;
pub(crate) use inputs::{Answer, Resumed, ScannedUrl, StoredFrontier, StoredQueue, LOOK_UP_BATCH};
use intake::{Intake, Offer};
pub(crate) use members::{Leaving, Member};
use resumption::Resumption;
use retries::Retries;
pub(crate) use settings::Settings;

/// Most URLs sent in one Work message.
const MAX_BATCH: usize = 512;

/// The crawl's state; `C` is the shell's connection handle.
pub(crate) struct CrawlState<C> {
    settings: Settings,
    frontier: Frontier,
    members: Vec<Member<C>>,
    /// Which discovered URLs are taken, under which `seq`.
    intake: Intake,
    /// Failures waiting for a retry; the circuit breakers.
    retries: Retries,
    /// When leases and reads go out.
    flow: Flow,
    /// What an earlier run left.
    resumption: Resumption,
    /// The crawl is over: a supervisor that (re)joins now is told to stop.
    stopping: bool,
    stats: Stats,
    refusals: Refusals,
    /// What an operator set: a paused crawl, blocked domains, delays (`steer`).
    controls: Controls,
    /// What is due again, when the crawl revisits (see `crate::revisits`).
    revisits: Option<Revisits>,
    timing: TimingLog,
    effects: Vec<Effect>,
}

impl<C> CrawlState<C> {
    /// The state of a new crawl; an error names a bad allow/deny rule or
    /// canonical rule.
    pub(crate) fn new(settings: Settings, timing: TimingLog, now_ms: u64) -> Result<Self, String> {
        Ok(CrawlState {
            frontier: Frontier::new(settings.max_inflight_per_domain, settings.lease_ms, now_ms << 12)
                .with_stored_check()
                .with_window(settings.window, settings.memory_urls)
                .with_active_bound(settings.active_domains)
                .with_forgetting(settings.forget_idle_domains_ms),
            intake: Intake::new(&settings)?,
            retries: Retries::new(settings.breaker),
            flow: Flow::new(&settings, now_ms),
            resumption: Resumption::default(),
            revisits: settings.revisit.then(Revisits::default),
            settings,
            members: Vec::new(),
            stopping: false,
            stats: Stats::new(),
            refusals: Refusals::default(),
            controls: Controls::default(),
            timing,
            effects: Vec::new(),
        })
    }

    /// The seen-set to use (tests: one whose hashes collide).
    #[cfg(test)]
    pub(crate) fn with_seen(mut self, seen: SeenSet) -> Self {
        self.intake.set_seen(seen);
        self
    }

    /// What the last events asked the shell to do, oldest first.
    pub(crate) fn take_effects(&mut self) -> Vec<Effect> {
        let ended = self.frontier.take_unanswered();
        if !ended.is_empty() {
            self.effects.push(Effect::CheckStored(ended));
        }
        std::mem::take(&mut self.effects)
    }

    // ---- intake ----

    /// Offers a discovered URL to [`Intake::judge`]: one admitted goes in
    /// the frontier (an unsure one only counted there, until the store
    /// says it is new) and to the stored frontier; one over a budget is
    /// stored as deferred.
    fn offer(&mut self, url: &str, depth: u16, now_ms: u64) {
        match self.intake.judge(url, depth, &mut self.stats.counts) {
            Offer::Dropped | Offer::Held => {}
            Offer::Deferred {
                url,
                domain,
                depth,
                seq,
                why,
            } => self.effects.push(Effect::Defer {
                url,
                domain,
                depth,
                seq,
                why,
            }),
            Offer::Admitted {
                url,
                domain,
                depth,
                seq,
                unsure,
            } => {
                if unsure {
                    self.frontier.admit_unverified(&domain, seq);
                } else {
                    self.frontier.admit(url.clone(), &domain, depth, seq, now_ms);
                }
                self.effects.push(Effect::Insert {
                    url,
                    domain,
                    depth,
                    seq,
                    confirm: unsure,
                });
            }
        }
    }

    /// Queues a URL already counted as admitted under a new `seq`, in
    /// memory and for the stored frontier.
    fn queue_new(&mut self, url: String, domain: String, depth: u16, now_ms: u64) {
        let seq = self.intake.take_seq();
        self.frontier.admit(url.clone(), &domain, depth, seq, now_ms);
        self.effects.push(Effect::Insert {
            url,
            domain,
            depth,
            seq,
            confirm: false,
        });
    }

    /// The frontier writer's word on unsure URLs, by `seq`: taken by the
    /// store (new: the seen-set's hash collided), and then admitted under
    /// a new `seq` (the exact seen-set holds it, no segment does yet); or
    /// there before (known, and no longer counted against `--max-pages`).
    pub(crate) fn confirmed(&mut self, answers: Vec<(i64, bool)>, now_ms: u64) {
        for (seq, new) in answers {
            let Some((url, domain, depth)) = self.intake.take_unsure(seq) else {
                continue;
            };
            if !self.frontier.confirmed(&domain, seq) {
                continue;
            }
            if !new {
                self.stats.counts.unsure_known += 1;
                self.intake.known_after_all(&url);
                continue;
            }
            self.stats.counts.unsure_new += 1;
            self.stats.counts.new_urls += 1;
            self.queue_new(url, domain, depth, now_ms);
        }
    }

    // ---- time and the store ----

    /// Every few tens of milliseconds: retries and paused domains that are
    /// due, and the store reads of windows that run low (only up to
    /// `durable`, the last `seq` the frontier writer has stored; fewer than
    /// [`Settings::max_pending_reads`] beside the `reads_pending` the reader
    /// has).
    pub(crate) fn tick(&mut self, now_ms: u64, durable: i64, reads_pending: usize) {
        self.flow.reads_pending(reads_pending);
        for r in self.retries.due(now_ms) {
            self.frontier.push_at(r.url, &r.domain, r.depth, r.seq, now_ms);
        }
        self.frontier.release_blocked(now_ms);
        self.retries.forget_idle(now_ms);
        self.frontier.forget_idle(now_ms);
        self.read_queues(durable);
        self.offer_held_from_file(now_ms);
        self.want_due(now_ms);
    }

    /// Asks for the reads of windows that run low, unless the writer is
    /// behind: a store that cannot keep up with the writes gets no reads
    /// either, as nothing is leased then anyway: on a resumed crawl of many
    /// domains, reads would keep the store busy, the writer would fall
    /// further behind, and nothing would be leased for minutes.
    fn read_queues(&mut self, durable: i64) {
        if self.flow.writer_behind() {
            return;
        }
        // Once the seen-set is whole, so that known links are dropped in
        // memory; or when nothing else is left (a read of stored URLs that
        // never ends must not keep the crawl from ending).
        if self.intake.is_complete() || self.frontier.is_idle() {
            while let Some(urls) = self.resumption.next_read() {
                self.effects.push(Effect::ReadLinks(urls));
            }
        }
        for r in self.frontier.refills(durable, self.flow.read_room()) {
            self.flow.read_asked();
            self.effects.push(Effect::Read(r));
        }
    }

    /// A store read asked for by an [`Effect::Read`] or [`Effect::LookUp`].
    pub(crate) fn read_answered(&mut self, answer: Answer, now_ms: u64, durable: i64) {
        if let Answer::Read(..) = answer {
            self.flow.read_answered();
        }
        match answer {
            Answer::Read(r, Ok(page)) => {
                let missing = self.frontier.refilled(&r, page);
                // A resumed queue's estimate is settled by the windows
                // (`Window::resumed_left`): a URL counted and not found
                // was refused by the store when written.
                if missing > 0 {
                    tracing::warn!(domain = %r.domain, missing, "queued URLs not found in the store (refused when written); dropped from the queue");
                }
                for relink in self.frontier.take_finished() {
                    self.resumption.finished_one(relink);
                }
            }
            Answer::Links { asked, found } => self.links_read(asked, found, now_ms),
            Answer::Checked { asked, stored } => match stored {
                Ok(stored) => {
                    for (lease, url) in asked {
                        let finished = self.frontier.checked(lease, stored.contains(&url));
                        if let Some(l) = finished {
                            self.stats.counts.finished_unanswered += 1;
                            self.resumption.found(Relink {
                                url: l.url,
                                depth: l.depth,
                                domain: l.domain,
                                seq: l.seq,
                            });
                        }
                    }
                }
                Err(e) => {
                    tracing::warn!(urls = asked.len(), error = %e, "asking the store for the pages of ended leases failed; will retry");
                    self.frontier.check_failed(asked);
                }
            },
            Answer::Read(r, Err(e)) => {
                tracing::warn!(domain = %r.domain, error = %e, "reading a domain's queue from the store failed; will retry");
                self.frontier.refill_failed(&r);
            }
            Answer::Held { sup, asked, found } => self.adopt_stored(sup, asked, found, now_ms),
            Answer::Due(asked, found) => self.due_answered(&asked, found, now_ms),
        }
        self.read_queues(durable);
    }

    /// Leases URLs to every live supervisor with credit left, once the
    /// expected supervisors have joined, and as far as the writes the
    /// leases will bring fit once the frontier writer is behind (see
    /// `state/write_gate.rs`).
    pub(crate) fn dispatch(&mut self, now_ms: u64, write_backlog: usize) {
        self.flow.writer_at(write_backlog);
        if self.stopping {
            // The supervisors were told to stop: nothing new goes out.
            return;
        }
        if !self.flow.started() {
            let live = self.members.iter().filter(|m| m.live).count();
            if live < self.settings.min_supervisors.max(1) {
                return;
            }
            self.flow.start();
            self.frontier.start_assigning();
        }
        if self.controls.paused {
            // Leases out finish; nothing new goes out until resumed.
            return;
        }
        if self.intake.holds_too_many() {
            // The stored URLs are still being read in: no more links to
            // hold until they are (see `CrawlState::offer`).
            return;
        }
        let mut room = self.flow.lease_room(write_backlog, self.frontier.in_flight());
        let (n, start) = (self.members.len(), self.flow.first_member());
        for i in 0..n {
            if room == 0 {
                // Resumed by a later dispatch as the writer catches up.
                return;
            }
            let s = (start + i) % n;
            if !self.members[s].live {
                continue;
            }
            let credit = self.members[s].capacity.saturating_sub(self.frontier.held(s)) as usize;
            if credit == 0 {
                continue;
            }
            let (mut items, waits) = self
                .frontier
                .take_timed(s, credit.min(MAX_BATCH).min(room), now_ms);
            if items.is_empty() {
                continue;
            }
            if !self.controls.delays.is_empty() {
                for item in &mut items {
                    item.min_delay_ms = self.delay_of(&item.domain);
                }
            }
            self.lease_revisits(&mut items);
            room = room.saturating_sub(items.len());
            self.flow.served(s, n);
            for wait in waits {
                self.timing
                    .record(Op::QueueWait, Duration::from_millis(wait), "ok", None, None);
            }
            self.effects.push(Effect::Send(s, ToSupervisor::Work(items)));
        }
    }

    /// Once a second: supervisors silent for too long are given up, the
    /// others get a heartbeat, expired leases go back to the queue, and
    /// domains are rebalanced after a supervisor joined.
    pub(crate) fn housekeeping(&mut self, now_ms: u64) {
        for (s, domains) in self.frontier.rebalance() {
            self.effects
                .push(Effect::Send(s, ToSupervisor::Recall { domains }));
        }
        for s in 0..self.members.len() {
            if !self.members[s].live {
                continue;
            }
            let silent = now_ms.saturating_sub(self.members[s].last_heard_ms);
            if silent > self.settings.heartbeat_timeout_ms {
                self.leave(s, Leaving::MissedHeartbeats);
                continue;
            }
            self.effects.push(Effect::Send(s, ToSupervisor::Heartbeat));
        }
        let expired = self.frontier.expire(now_ms);
        if expired > 0 {
            self.stats.counts.leases_expired += expired as u64;
            tracing::warn!(expired, "leases expired; URLs re-queued");
        }
        if self.flow.progress_due(now_ms) {
            self.record_progress(false);
        }
    }

    /// Domains' progress for the stored frontier (see
    /// `frontier::progress`): of those with enough results since their
    /// last record, or, with `all` (the crawl stops), of every one with a
    /// result. Not while the stored URLs are being read in: a link held
    /// back then is not in the stored frontier yet, and the page it came
    /// from must stay open to find it again after a restart.
    pub(crate) fn record_progress(&mut self, all: bool) {
        if !self.intake.is_complete() || self.intake.holds_links() {
            return;
        }
        let mut open: HashMap<String, i64> = HashMap::new();
        self.retries.lowest_open(&mut open);
        self.resumption.lowest_open(&mut open);
        let enough = if all { 1 } else { self.settings.progress_results };
        let progress = self.frontier.progress(&open, enough);
        if !progress.is_empty() {
            self.effects.push(Effect::Progress(progress));
        }
    }

    // ---- the end ----

    /// Nothing queued, out, waiting for a retry, or seeds or links waiting
    /// for the stored URLs to be read in (deferred URLs a larger budget
    /// lets in are found there too). Only once the expected supervisors
    /// have joined, so each of them is told to stop, even when a resumed
    /// crawl finds nothing left to do.
    pub(crate) fn done(&self) -> bool {
        self.flow.started()
            && self.frontier.is_idle()
            && self.retries.waiting() == 0
            && self.intake.is_settled()
            && self.resumption.is_idle()
            && self.revisits.is_none()
    }

    /// URLs queued, out or waiting for a retry (not seeds waiting for the
    /// seen-set: nearly all of them are stored already).
    pub(crate) fn left(&self) -> usize {
        self.frontier.queued() + self.frontier.in_flight() + self.retries.waiting()
    }

    pub(crate) fn finish_reason(&self, signalled: bool) -> FinishReason {
        if signalled {
            FinishReason::Stopped
        } else if self.left() > 0 && !self.frontier.blocked_domains().1.is_empty() {
            FinishReason::Halted
        } else if self.stats.counts.over_page_limit > 0 {
            FinishReason::MaxPages
        } else {
            FinishReason::Done
        }
    }

    /// The crawl stops: every live supervisor is told to, and one that
    /// joins from now on too. The connections told, to wait for their Byes.
    pub(crate) fn stop(&mut self) -> Vec<SupId> {
        let first = !self.stopping;
        self.stopping = true;
        let live: Vec<SupId> = (0..self.members.len())
            .filter(|&s| self.members[s].live)
            .collect();
        if first {
            for &s in &live {
                self.effects.push(Effect::Send(s, ToSupervisor::Stop));
            }
        }
        live
    }

    /// Whether supervisor `s`, or a later connection of it (same id, after
    /// a reconnect), has said Bye.
    pub(crate) fn said_bye(&self, s: SupId) -> bool {
        let Some(id) = self.members.get(s).map(|m| &m.id) else {
            return true;
        };
        self.members.iter().any(|o| o.said_bye && o.id == *id)
    }

    /// A heartbeat to every live supervisor that has not said Bye, while
    /// the dispatcher is busy stopping (a supervisor that hears nothing
    /// takes us for dead and reconnects).
    pub(crate) fn beat_to_live(&mut self) {
        for s in 0..self.members.len() {
            if self.members[s].live && !self.said_bye(s) {
                self.effects.push(Effect::Send(s, ToSupervisor::Heartbeat));
            }
        }
    }

    // ---- what the shell reports ----

    pub(crate) fn frontier(&self) -> &Frontier {
        &self.frontier
    }

    pub(crate) fn stats(&self) -> &Stats {
        &self.stats
    }

    /// URLs known (distinct hashes).
    pub(crate) fn seen_count(&self) -> usize {
        self.intake.seen_count()
    }

    /// Heap bytes of the seen-set's hashes.
    pub(crate) fn seen_bytes(&self) -> usize {
        self.intake.seen_bytes()
    }

    /// The live progress line (its rate is since the last one).
    pub(crate) fn progress_line(&mut self) -> String {
        let live = self.members.iter().filter(|m| m.live).count();
        let (paused, halted) = self.frontier.blocked_domains();
        let blocked = (paused.len(), halted.len());
        let (queued, in_flight) = (self.frontier.queued(), self.frontier.in_flight());
        let mut line = self.stats.progress_line(queued, in_flight, live, blocked);
        if let Some((revisits, started)) = self.revisit_counts() {
            line.push_str(&format!(
                " | revisits {revisits} queued or out, {started} started"
            ));
        }
        if self.controls.paused {
            // Said first: a crawl that stands still must say why.
            format!("PAUSED by an operator (crawlctl resume) {line}")
        } else {
            line
        }
    }
}

mod effect;
mod flow;
mod held;
mod inputs;
mod intake;
mod members;
mod outcomes;
mod relink;
mod resumption;
mod retries;
mod revisit;
mod settings;
mod startup;
mod steer;
#[cfg(test)]
mod tests;
mod write_gate;
