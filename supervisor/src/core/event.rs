//! What the core is told: everything a supervisor's loop waits for, and
//! what became of the actions it carried out.

use std::time::{Duration, Instant};

use link::dispatcher_link::Heard;
use link::protocol::{CrawlResult, FromChild};

#[derive(Debug)]
pub(crate) enum Event {
    /// A message from the dispatcher, opened and checked by the link. (Its
    /// Welcome comes as [`Event::LinkUp`], which knows when our Join left.)
    Dispatcher(Heard),
    /// The dispatcher welcomed our introduction on a new connection;
    /// `joined_at`: when the Join it answered was sent.
    LinkUp { joined_at: Option<Instant> },
    /// The link broke: a failed send or receive, a silent dispatcher, a
    /// refusal. It reconnects on [`super::Action::MaintainLink`].
    LinkDown,
    /// The link gave up reconnecting: the dispatcher has been unreachable
    /// for longer than the patience.
    Unreachable(String),
    /// A heartbeat left, sealed with counter `seq`.
    Sent { seq: u64 },
    /// What a [`super::Action::SendResults`] sent (each batch with the
    /// counter of its message) and what it could not (the link went down).
    ResultsSent {
        sent: Vec<(u64, Vec<CrawlResult>)>,
        unsent: Vec<Vec<CrawlResult>>,
    },
    /// What a child slot said.
    Slot(SlotEvent),
    /// [`super::Core::flush_at`] came.
    FlushDue,
    /// A beat: every [`super::Core::beat_every`].
    Tick,
    /// [`super::Core::deadline`] came.
    Deadline,
    /// The process was asked to stop (a signal, or a test).
    Shutdown,
}

/// Events from a child slot (`child.rs`) to the supervisor, told to the
/// core as [`Event::Slot`].
#[derive(Debug)]
pub(crate) enum SlotEvent {
    Message(usize, FromChild),
    /// The child died after living `lived`; the slot waits for a
    /// [`super::SlotCmd::Restart`] (or a Stop).
    Exited {
        slot: usize,
        why: String,
        lived: Duration,
    },
    /// The child exited after Stop (or none ran); the slot is finished.
    Stopped {
        slot: usize,
    },
}
