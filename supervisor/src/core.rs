//! The supervisor's decisions, without I/O: which child gets which URL,
//! what happens when a child dies, when results go to the dispatcher and
//! what is sent again after a reconnect, how the right to crawl reaches
//! the children, and how the supervisor drains and leaves.
//!
//! It is driven by [`Event`]s, each with the time as a value, and answers
//! with [`Action`]s for its loop (`shell.rs`), which owns the dispatcher
//! link, the child slots and the timers, waits, and carries the actions
//! out in order. So every rule here is tested without a socket, a process
//! or a clock (`core/tests.rs`), as the dispatcher's `state.rs` is.

mod action;
mod event;
mod failure;
mod held;
mod identity;
mod placement;
pub(crate) mod restarts;
#[cfg(test)]
pub(crate) mod tests;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use link::dispatcher_link::Heard;
use link::fence;
use link::protocol::{
    CrawlResult, FailureKind, FromChild, Outcome, ProcessInfo, ToDispatcher, ToSupervisor, WorkItem,
};

pub(crate) use action::{Action, SlotCmd};
pub(crate) use event::{Event, SlotEvent};
pub(crate) use failure::Failure;
pub(crate) use identity::Identity;

use crate::outbox::Outbox;
use crate::right::Right;
use held::{Held, InFlight};
use placement::Placement;
use restarts::{Restarts, Verdict};

/// Attempts a URL gets when its child keeps dying on it.
pub(crate) const MAX_CHILD_ATTEMPTS: u32 = 3;
/// Longest a stopping supervisor waits for its child slots: each kills its
/// child after `child::STOP_GRACE`, so this only ends a slot that is
/// itself stuck. With the hand-in ([`LEAVE_WAIT`]) and the Farewell wait,
/// a stop ends a supervisor within half a minute, whatever its children do.
pub(crate) const STOP_WAIT: Duration = Duration::from_secs(18);
/// How long a result waits for others to share its message to the
/// dispatcher: every millisecond is a millisecond more each lease is held,
/// so more credit for the same rate (Little's law).
const RESULTS_FLUSH: Duration = Duration::from_millis(5);
/// How soon unsent results are tried again while the link is down or the
/// window full.
const RESULTS_RETRY: Duration = Duration::from_millis(100);
/// How long a leaving supervisor keeps handing in its last results.
const LEAVE_WAIT: Duration = Duration::from_secs(5);

/// What a core is made with.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    /// Child slots (at least 1).
    pub(crate) slots: usize,
    pub(crate) me: Identity,
    /// The dispatcher's heartbeat timeout, from its policy: what our right
    /// to crawl is measured against.
    pub(crate) heartbeat_timeout: Duration,
    /// Crashes in a row after which a slot is given up.
    pub(crate) max_crashes: u32,
}

/// Where the supervisor is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Taking work and handing in results.
    Running,
    /// The slots were told to stop; leave once all have ended, or at `by`.
    Stopping { by: Instant },
    /// Every slot ended: handing in the last results until `by`, then Bye.
    Leaving { by: Instant },
    /// Exit was asked for.
    Done,
}

pub(crate) struct Core {
    slots: usize,
    placement: Placement,
    /// Slots that ended (stopped, or given up).
    ended: Vec<bool>,
    restarts: Restarts,
    in_flight: InFlight,
    /// Results until the dispatcher acknowledges them.
    outbox: Outbox,
    /// This node's right to crawl, renewed by acknowledgements.
    right: Right,
    /// How often to send a heartbeat (see `fence::beat_every`).
    beat_every: Duration,
    me: Identity,
    /// Live children by slot, announced again after a reconnect.
    children: BTreeMap<usize, ProcessInfo>,
    /// Whether the link is welcomed (the core's view, kept by the events).
    link_up: bool,
    /// When waiting results go out; `None` while none wait, so an idle
    /// supervisor sleeps.
    flush_at: Option<Instant>,
    /// The results being sent came from [`Event::FlushDue`]: what is left
    /// after them is tried again after [`RESULTS_RETRY`].
    retry_flush: bool,
    phase: Phase,
    /// The first reason to leave with an error.
    failure: Option<Failure>,
}

impl Core {
    pub(crate) fn new(settings: Settings) -> Core {
        let slots = settings.slots.max(1);
        let timeout = settings.heartbeat_timeout.max(Duration::from_secs(1));
        Core {
            slots,
            placement: Placement::new(slots),
            ended: vec![false; slots],
            restarts: Restarts::new(slots, settings.max_crashes),
            in_flight: InFlight::default(),
            outbox: Outbox::default(),
            right: Right::new(timeout),
            beat_every: fence::beat_every(timeout),
            me: settings.me,
            children: BTreeMap::new(),
            link_up: false,
            flush_at: None,
            retry_flush: false,
            phase: Phase::Running,
            failure: None,
        }
    }

    /// How often the loop should send [`Event::Tick`].
    pub(crate) fn beat_every(&self) -> Duration {
        self.beat_every
    }

    /// When the loop should send [`Event::FlushDue`], if at all.
    pub(crate) fn flush_at(&self) -> Option<Instant> {
        self.flush_at
    }

    /// When the loop should send [`Event::Deadline`], if at all: the end of
    /// the wait for the slots to stop, or of the hand-in.
    pub(crate) fn deadline(&self) -> Option<Instant> {
        match self.phase {
            Phase::Stopping { by } | Phase::Leaving { by } => Some(by),
            Phase::Running | Phase::Done => None,
        }
    }

    /// Whether a request to stop would change anything (only the first is
    /// taken).
    pub(crate) fn listens_for_shutdown(&self) -> bool {
        self.phase == Phase::Running
    }

    /// Whether what slots say still matters: not once leaving, when every
    /// slot has ended (or is no longer waited for).
    pub(crate) fn listens_to_slots(&self) -> bool {
        self.is_serving()
    }

    /// Whether the core counts the link as welcomed.
    pub(crate) fn link_up(&self) -> bool {
        self.link_up
    }

    /// What to do about `event`, which happened at `now`.
    pub(crate) fn handle(&mut self, event: Event, now: Instant) -> Vec<Action> {
        let mut out = Vec::new();
        match event {
            Event::Dispatcher(msg) => self.on_dispatcher(msg, now, &mut out),
            Event::LinkUp { joined_at } => self.welcomed(joined_at, &mut out),
            Event::LinkDown => {
                self.link_up = false;
                self.check_handed_in(&mut out);
            }
            Event::Unreachable(why) => self.unreachable(why, now, &mut out),
            Event::Sent { seq } => self.right.sent(seq, now),
            Event::ResultsSent { sent, unsent } => self.results_sent(sent, unsent, now, &mut out),
            Event::Slot(ev) => self.on_slot(ev, now, &mut out),
            Event::FlushDue => self.flush_due(now, &mut out),
            Event::Tick => self.tick(now, &mut out),
            Event::Deadline => self.deadline_came(now, &mut out),
            Event::Shutdown => {
                if self.phase == Phase::Running {
                    tracing::info!("signalled; draining children");
                    self.stop(now, &mut out);
                }
            }
        }
        out
    }

    fn is_serving(&self) -> bool {
        matches!(self.phase, Phase::Running | Phase::Stopping { .. })
    }

    fn on_dispatcher(&mut self, heard: Heard, now: Instant, out: &mut Vec<Action>) {
        match self.phase {
            Phase::Done => return,
            // Handing in: only the acknowledgements that open the window matter.
            Phase::Leaving { .. } => {
                if let Heard::Message(ToSupervisor::Ack { seq }) = heard {
                    self.outbox.acked(seq);
                    self.hand_in(out);
                }
                return;
            }
            Phase::Running | Phase::Stopping { .. } => {}
        }
        let msg = match heard {
            Heard::Message(msg) => msg,
            Heard::OtherVersion if self.phase == Phase::Running => return self.stop(now, out),
            Heard::Reintroduce => return out.push(Action::Reintroduce),
            Heard::Challenge(nonce) => {
                return out.push(Action::Join {
                    nonce,
                    intro: self.me.intro(),
                })
            }
            Heard::Refused(why) => return out.push(Action::Refused(why)),
            // A Welcome comes as Event::LinkUp.
            Heard::Welcome(_) | Heard::OtherVersion => return,
        };
        match msg {
            ToSupervisor::Work(items) => self.assign(items, 0, out),
            ToSupervisor::Ack { seq } => {
                let acked = self.outbox.acked(seq);
                crate::metric::SUPERVISOR_RESULTS_ACKED
                    .get()
                    .increment(acked as u64);
                self.right.acked(seq);
                self.tell_children(out);
                if self.outbox.waiting() > 0 {
                    self.flush_at.get_or_insert(now);
                }
            }
            ToSupervisor::Recall { domains } if !domains.is_empty() => {
                // To every slot: a domain's URLs may sit in two, the one of
                // its name and the one of its server (see `placement`).
                for slot in 0..self.slots {
                    out.push(Action::ToSlot(slot, SlotCmd::Recall(domains.clone())));
                }
            }
            ToSupervisor::Recall { .. } => {}
            ToSupervisor::Stop if self.phase == Phase::Running => self.stop(now, out),
            // Heartbeats, a Farewell out of turn and a second Stop ask for nothing.
            ToSupervisor::Heartbeat | ToSupervisor::Farewell | ToSupervisor::Stop => {}
        }
    }

    /// The dispatcher welcomed us on a new connection: it learns first
    /// what we hold (the connection joins the crawl with that), then what
    /// it never acknowledged on the old one goes again, our right runs
    /// from our Join, and it learns which children run where.
    fn welcomed(&mut self, joined_at: Option<Instant>, out: &mut Vec<Action>) {
        if !self.is_serving() {
            return;
        }
        out.push(Action::Send(ToDispatcher::Holding(self.holding())));
        self.link_up = true;
        self.outbox.reconnected();
        self.right.welcomed(joined_at);
        self.tell_children(out);
        for (slot, process) in &self.children {
            out.push(Action::Send(ToDispatcher::Child {
                slot: *slot as u32,
                process: process.clone(),
                alive: true,
            }));
        }
        out.extend(self.flush());
    }

    /// The link gave up: drain the children and leave with its error.
    fn unreachable(&mut self, why: String, now: Instant, out: &mut Vec<Action>) {
        if !self.is_serving() || self.failure.is_some() {
            return;
        }
        tracing::error!("{why}; draining children");
        self.failure = Some(Failure::Unreachable(why));
        if self.phase == Phase::Running {
            self.stop(now, out);
        }
    }

    fn results_sent(
        &mut self,
        sent: Vec<(u64, Vec<CrawlResult>)>,
        unsent: Vec<Vec<CrawlResult>>,
        now: Instant,
        out: &mut Vec<Action>,
    ) {
        for (seq, batch) in sent {
            crate::metric::SUPERVISOR_RESULTS
                .get()
                .increment(batch.len() as u64);
            // Its acknowledgement will renew our right.
            self.right.sent(seq, now);
            self.outbox.sent(seq, batch);
        }
        if !unsent.is_empty() {
            // A message that could not leave took the link down with it.
            self.outbox.unsent(unsent);
            self.link_up = false;
        }
        match self.phase {
            Phase::Leaving { .. } => self.check_handed_in(out),
            Phase::Running | Phase::Stopping { .. } => {
                if std::mem::take(&mut self.retry_flush) {
                    self.flush_at = (self.outbox.waiting() > 0).then(|| now + RESULTS_RETRY);
                }
            }
            Phase::Done => {}
        }
    }

    fn on_slot(&mut self, ev: SlotEvent, now: Instant, out: &mut Vec<Action>) {
        // Once leaving, what slots still say is not waited for.
        if !self.is_serving() {
            return;
        }
        match ev {
            SlotEvent::Message(_, FromChild::Result(r)) => {
                self.in_flight.finished(r.lease);
                if matches!(
                    r.outcome,
                    Outcome::Failed {
                        kind: FailureKind::Fenced,
                        ..
                    }
                ) {
                    crate::metric::SUPERVISOR_FENCED.get().increment(1);
                }
                self.outbox.push(r);
                self.flush_at.get_or_insert(now + RESULTS_FLUSH);
            }
            SlotEvent::Message(slot, FromChild::Ready(process)) => {
                self.children.insert(slot, process.clone());
                if self.link_up {
                    out.push(Action::Send(ToDispatcher::Child {
                        slot: slot as u32,
                        process,
                        alive: true,
                    }));
                }
            }
            SlotEvent::Message(_, FromChild::Heartbeat) => {}
            SlotEvent::Exited { slot, why, lived } => self.child_died(slot, why, lived, now, out),
            SlotEvent::Stopped { slot } => self.slot_ended(slot, now, out),
        }
    }

    /// A slot's child died: restart it after a backoff and give its URLs
    /// to its successor, or give the slot up (and so leave the crawl).
    fn child_died(&mut self, slot: usize, why: String, lived: Duration, now: Instant, out: &mut Vec<Action>) {
        self.children.remove(&slot);
        let verdict = self.restarts.lost(slot, lived);
        match verdict {
            Verdict::GiveUp { crashes } => {
                let why = format!("{crashes} crashes in a row, the last: {why}");
                tracing::error!(slot, why = %why, "CHILD SLOT GAVE UP");
                self.gave_up(slot, why, now, out);
            }
            Verdict::Restart { after, crashes } => {
                crate::metric::CHILD_RESTARTS.get().increment(1);
                tracing::warn!(slot, why = %why, "child slot lost; restarting");
                if verdict.is_looping() {
                    tracing::error!(slot, crashes, next_try_in = ?after, "CHILD SLOT IS CRASH-LOOPING");
                }
                out.push(Action::ToSlot(slot, SlotCmd::Restart { after }));
                if self.phase == Phase::Running {
                    self.reassign_lost(slot, &why, out);
                }
            }
        }
    }

    /// A slot whose children keep crashing ends, and the supervisor leaves
    /// the crawl. What it held stays in flight: our Bye makes the
    /// dispatcher re-queue it for other supervisors.
    fn gave_up(&mut self, slot: usize, why: String, now: Instant, out: &mut Vec<Action>) {
        if let Some(ended) = self.ended.get_mut(slot) {
            *ended = true;
        }
        if self.failure.is_none() {
            tracing::error!(slot, why = %why, "LEAVING THE CRAWL: a child slot keeps crashing");
            self.failure = Some(Failure::SlotCrashing { slot, why });
        }
        if self.phase == Phase::Running {
            self.stop(now, out);
        } else {
            out.push(Action::ToSlot(slot, SlotCmd::Stop));
        }
        if self.all_ended() {
            self.leave(now, out);
        }
    }

    fn slot_ended(&mut self, slot: usize, now: Instant, out: &mut Vec<Action>) {
        match self.ended.get_mut(slot) {
            Some(ended) if !*ended => *ended = true,
            // Given up already, or no such slot.
            _ => return,
        }
        if self.all_ended() {
            self.leave(now, out);
        }
    }

    fn all_ended(&self) -> bool {
        self.ended.iter().all(|e| *e)
    }

    fn flush_due(&mut self, now: Instant, out: &mut Vec<Action>) {
        if !self.is_serving() {
            return;
        }
        self.flush_at = None;
        match self.flush() {
            Some(send) => {
                self.retry_flush = true;
                out.push(send);
            }
            // Still there while the link is down or the window full: try
            // again later.
            None => self.flush_at = (self.outbox.waiting() > 0).then(|| now + RESULTS_RETRY),
        }
    }

    /// A beat: gauges, a heartbeat that renews our right and the leases we
    /// hold, and keeping the link.
    fn tick(&mut self, now: Instant, out: &mut Vec<Action>) {
        if !self.is_serving() {
            return;
        }
        crate::metric::SUPERVISOR_IN_FLIGHT
            .get()
            .set(self.in_flight.len() as f64);
        crate::metric::SUPERVISOR_RESULTS_UNACKED
            .get()
            .set(self.outbox.unacked() as f64);
        crate::metric::SUPERVISOR_RESULTS_WAITING
            .get()
            .set(self.outbox.waiting() as f64);
        crate::metric::SUPERVISOR_RIGHT_SECONDS
            .get()
            .set(self.right.left(now).as_secs_f64());
        if self.right.just_lapsed(now) {
            tracing::warn!(
                held = self.in_flight.len(),
                unreported = self.outbox.waiting() + self.outbox.unacked(),
                "RIGHT TO CRAWL RAN OUT: no word from the dispatcher; no request starts until it is back (held URLs are handed back, results kept)"
            );
        }
        if self.link_up {
            out.push(Action::Beat {
                holding: self.held_leases(),
            });
        }
        if self.failure.is_none() {
            out.push(Action::MaintainLink);
        }
    }

    fn deadline_came(&mut self, now: Instant, out: &mut Vec<Action>) {
        match self.phase {
            Phase::Stopping { .. } => {
                let ended = self.ended.iter().filter(|e| **e).count();
                tracing::warn!(
                    running = self.slots - ended,
                    slots = self.slots,
                    waited = ?STOP_WAIT,
                    "child slots still running after the stop; leaving anyway"
                );
                self.leave(now, out);
            }
            Phase::Leaving { .. } => self.finish(out),
            Phase::Running | Phase::Done => {}
        }
    }

    /// Tells every slot to stop; a slot that does not end by
    /// [`STOP_WAIT`] is left behind.
    fn stop(&mut self, now: Instant, out: &mut Vec<Action>) {
        self.phase = Phase::Stopping { by: now + STOP_WAIT };
        out.extend((0..self.slots).map(|slot| Action::ToSlot(slot, SlotCmd::Stop)));
    }

    /// Every child has exited (or was waited for long enough): hand in the
    /// last results, for at most [`LEAVE_WAIT`].
    fn leave(&mut self, now: Instant, out: &mut Vec<Action>) {
        self.phase = Phase::Leaving { by: now + LEAVE_WAIT };
        self.flush_at = None;
        self.hand_in(out);
    }

    /// Sends what waits, as far as the window allows; once nothing waits
    /// (or nothing can be sent), finishes.
    fn hand_in(&mut self, out: &mut Vec<Action>) {
        match self.flush() {
            Some(send) => out.push(send),
            None => self.check_handed_in(out),
        }
    }

    /// While handing in: finished once nothing waits or the link is gone;
    /// otherwise the next acknowledgement opens the window again.
    fn check_handed_in(&mut self, out: &mut Vec<Action>) {
        if matches!(self.phase, Phase::Leaving { .. }) && (self.outbox.waiting() == 0 || !self.link_up) {
            self.finish(out);
        }
    }

    /// Say Bye (the dispatcher then re-queues whatever we still held) when
    /// every result is handed in, and exit.
    fn finish(&mut self, out: &mut Vec<Action>) {
        self.phase = Phase::Done;
        if self.outbox.waiting() > 0 {
            // Their pages are stored; the URLs stay queued in the stored
            // frontier and a resumed crawl finds the pages already there.
            tracing::warn!(
                unreported = self.outbox.waiting(),
                "dispatcher unreachable; results not reported"
            );
        } else {
            out.push(Action::SayBye);
        }
        out.push(Action::Exit(self.failure.take()));
    }

    /// The waiting results, in messages of bounded size and no more than
    /// the window unacknowledged, when the link can take them.
    fn flush(&mut self) -> Option<Action> {
        if self.outbox.waiting() == 0 || !self.link_up {
            return None;
        }
        let batches = self.outbox.take_batches();
        (!batches.is_empty()).then_some(Action::SendResults(batches))
    }

    /// The right moved: the shared copy new children get, and the running
    /// children (told only when it moved enough; a slot too busy to take
    /// the word now gets the next one).
    fn tell_children(&mut self, out: &mut Vec<Action>) {
        out.push(Action::Fence(self.right.until_mono_ms()));
        if let Some(until) = self.right.news_for_children() {
            out.extend((0..self.slots).map(|slot| Action::ToSlot(slot, SlotCmd::Fence(until))));
        }
    }

    /// Each URL to the slot of its server, or of its domain.
    fn assign(&mut self, items: Vec<WorkItem>, attempt: u32, out: &mut Vec<Action>) {
        for (slot, items) in self.placement.split(items).into_iter().enumerate() {
            if items.is_empty() {
                continue;
            }
            for item in &items {
                self.in_flight.hold(Held {
                    slot,
                    item: item.clone(),
                    attempt,
                });
            }
            out.push(Action::ToSlot(slot, SlotCmd::Work(items)));
        }
    }

    /// URLs of a dead child go to its successor, unless they keep killing it.
    fn reassign_lost(&mut self, slot: usize, why: &str, out: &mut Vec<Action>) {
        for Held { item, attempt, .. } in self.in_flight.take_slot(slot) {
            if attempt + 1 >= MAX_CHILD_ATTEMPTS {
                self.outbox.push(CrawlResult::without_page(
                    &item,
                    Outcome::failed(
                        FailureKind::ChildCrashed,
                        format!("crawler-child died {MAX_CHILD_ATTEMPTS} times holding it: {why}"),
                    ),
                ));
            } else {
                self.assign(vec![item], attempt + 1, out);
            }
        }
    }

    /// Every lease this supervisor holds: with its children, or finished
    /// and waiting for the dispatcher's acknowledgement. Heartbeats carry
    /// them so the dispatcher renews them.
    fn held_leases(&self) -> Vec<u64> {
        let mut held: Vec<u64> = self.in_flight.leases().collect();
        held.extend(self.outbox.results().map(|r| r.lease));
        held
    }

    /// Every URL still held, for a new connection's `Holding`: with the
    /// children, or finished and waiting in the outbox (sent or not).
    fn holding(&self) -> Vec<WorkItem> {
        let mut holding: Vec<WorkItem> = self.in_flight.items().cloned().collect();
        holding.extend(self.outbox.as_items());
        holding
    }
}
