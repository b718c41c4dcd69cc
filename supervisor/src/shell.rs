//! The supervisor's I/O: waits for whatever comes next (a dispatcher
//! message, a slot's event, a timer, the shutdown), hands it to the
//! [`Core`] and carries out the actions it answers with, in order. It
//! decides nothing itself.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use link::dispatcher_link::{DispatcherLink, Heard};
use link::fence::Fence;
use link::protocol::ToDispatcher;
use shared::shutdown::Shutdown;
use tokio::sync::mpsc;

use crate::core::{Action, Core, Event};
use crate::core::{SlotCmd, SlotEvent};
use crate::lane::Lanes;

/// How long a slot may take to make room for a stop or a restart: a slot
/// that does not is left to the core's deadlines.
const CONTROL_SEND: Duration = Duration::from_secs(1);
/// How long a leaving supervisor waits for the dispatcher's Farewell.
const FAREWELL_WAIT: Duration = Duration::from_secs(5);

pub(crate) struct Shell {
    pub(crate) core: Core,
    pub(crate) link: DispatcherLink,
    /// Commands to each child slot (control overtakes work: `crate::lane`).
    pub(crate) slots: Vec<Lanes>,
    /// Events from every slot.
    pub(crate) events: mpsc::Receiver<SlotEvent>,
    /// The right's end as the slots pass it to new children.
    pub(crate) fence: Fence,
}

impl Shell {
    /// Runs until the core says exit; its failure, if any, is the error.
    pub(crate) async fn serve(mut self, mut shutdown: Shutdown) -> anyhow::Result<()> {
        // Beats often enough that acknowledgements keep our right fresh.
        let mut beat = tokio::time::interval(self.core.beat_every());
        beat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let flush_at = self.core.flush_at();
            let deadline = self.core.deadline();
            let event = tokio::select! {
                () = sleep_until_some(deadline) => Event::Deadline,
                () = shutdown.requested(), if self.core.listens_for_shutdown() => Event::Shutdown,
                msg = self.link.recv() => match msg {
                    Some(Heard::Welcome(_)) => Event::LinkUp {
                        joined_at: self.link.answered_at(),
                    },
                    Some(msg) => Event::Dispatcher(msg),
                    // The link broke; `link_state` below says so.
                    None => Event::LinkDown,
                },
                ev = self.events.recv(), if self.core.listens_to_slots() => match ev {
                    Some(ev) => Event::Slot(ev),
                    None => anyhow::bail!("all child slots ended"),
                },
                () = sleep_until_some(flush_at) => Event::FlushDue,
                _ = beat.tick() => Event::Tick,
            };
            if let Some(outcome) = self.feed(event).await {
                return outcome;
            }
        }
    }

    /// Hands `event` to the core and carries out what it answers; the
    /// answers to an action are handled before the next action. `Some`
    /// once the core says exit.
    pub(crate) async fn feed(&mut self, event: Event) -> Option<anyhow::Result<()>> {
        let mut todo: VecDeque<Action> = self.core.handle(event, Instant::now()).into();
        while let Some(action) = todo.pop_front() {
            if let Action::Exit(failure) = action {
                return Some(failure.map_or(Ok(()), |f| Err(f.into())));
            }
            let answers = self.perform(action).await.into_iter().chain(self.link_state());
            let mut next = Vec::new();
            for answer in answers {
                next.extend(self.core.handle(answer, Instant::now()));
            }
            for action in next.into_iter().rev() {
                todo.push_front(action);
            }
        }
        None
    }

    /// A link that went down while the core counts it up (a failed send or
    /// receive, a refusal, a silent dispatcher): the core must know.
    fn link_state(&self) -> Option<Event> {
        (self.core.link_up() && !self.link.is_up()).then_some(Event::LinkDown)
    }

    /// Carries out one action; what it learnt, for the core.
    async fn perform(&mut self, action: Action) -> Option<Event> {
        match action {
            Action::Send(msg) => {
                self.link.send(&msg).await;
                None
            }
            Action::Beat { holding } => {
                let sent = self.link.send(&ToDispatcher::Heartbeat { holding }).await;
                sent.then(|| Event::Sent {
                    seq: self.link.last_seq(),
                })
            }
            Action::SendResults(batches) => Some(self.send_results(batches).await),
            Action::Join { nonce, intro } => {
                self.link.answer(nonce, &intro).await;
                None
            }
            Action::Reintroduce => {
                self.link.reintroduce().await;
                None
            }
            Action::Refused(why) => {
                self.link.refused(why);
                None
            }
            Action::MaintainLink => self
                .link
                .maintain()
                .await
                .err()
                .map(|e| Event::Unreachable(format!("{e:#}"))),
            Action::Fence(until) => {
                self.fence.set(until);
                None
            }
            Action::ToSlot(slot, cmd) => {
                self.to_slot(slot, cmd).await;
                None
            }
            Action::SayBye => {
                // The Farewell comes after everything sent before the Bye was read.
                if self.link.send(&ToDispatcher::Bye).await {
                    self.link.await_farewell(FAREWELL_WAIT).await;
                }
                None
            }
            // Handled by `feed`.
            Action::Exit(_) => None,
        }
    }

    /// One message per batch, in order, up to the first that cannot leave.
    async fn send_results(&mut self, batches: Vec<Vec<link::protocol::CrawlResult>>) -> Event {
        let mut sent = Vec::with_capacity(batches.len());
        let mut batches = batches.into_iter();
        while let Some(results) = batches.next() {
            let msg = ToDispatcher::Results(results);
            let ok = self.link.send(&msg).await;
            let ToDispatcher::Results(results) = msg else {
                unreachable!("built just above as Results");
            };
            if ok {
                sent.push((self.link.last_seq(), results));
                continue;
            }
            let mut unsent = vec![results];
            unsent.extend(batches);
            return Event::ResultsSent { sent, unsent };
        }
        Event::ResultsSent {
            sent,
            unsent: Vec::new(),
        }
    }

    /// Work and recalls wait for room in their lane (a slot reads both
    /// whenever it is not stopping a child, which is bounded; recalls
    /// overtake work); stops and restarts wait at most [`CONTROL_SEND`]; a
    /// fence the slot has no room for now is dropped, as the next one
    /// supersedes it.
    async fn to_slot(&self, slot: usize, cmd: SlotCmd) {
        let Some(tx) = self.slots.get(slot) else {
            return;
        };
        match cmd {
            SlotCmd::Work(_) | SlotCmd::Recall(_) => {
                let _ = tx.send(cmd).await;
            }
            SlotCmd::Stop | SlotCmd::Restart { .. } => {
                let _ = tokio::time::timeout(CONTROL_SEND, tx.send(cmd)).await;
            }
            SlotCmd::Fence(_) => {
                let _ = tx.try_send(cmd);
            }
        }
    }
}

/// Sleeps until `at`, or for ever when it is `None` (a disabled timer).
async fn sleep_until_some(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}
