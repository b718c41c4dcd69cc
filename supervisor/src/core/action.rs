//! What the core asks its loop to do, in order. Actions that can fail or
//! that learn something (a message's seal counter) are answered with an
//! [`super::Event`].

use std::time::Duration;

use link::cluster_auth::{Nonce, Refusal};
use link::protocol::{CrawlResult, Intro, ToDispatcher, WorkItem};

use super::Failure;

#[derive(Debug, PartialEq)]
pub(crate) enum Action {
    /// A message for the dispatcher, nothing to report back.
    Send(ToDispatcher),
    /// A heartbeat listing the leases held; answered with
    /// [`super::Event::Sent`] when it left.
    Beat { holding: Vec<u64> },
    /// One message per batch, in order, up to the first that cannot leave;
    /// answered with [`super::Event::ResultsSent`].
    SendResults(Vec<Vec<CrawlResult>>),
    /// Answer the dispatcher's Challenge with this introduction (a Join).
    Join { nonce: Nonce, intro: Intro },
    /// The dispatcher does not know us: introduce ourselves again.
    Reintroduce,
    /// The dispatcher refused our introduction: the link goes down and
    /// tries again while its patience lasts.
    Refused(Refusal),
    /// Declare a silent dispatcher gone and reconnect a link that is down;
    /// answered with [`super::Event::Unreachable`] when it gives up.
    MaintainLink,
    /// The right's end for children started from now on (the monotonic
    /// milliseconds of `link::fence`).
    Fence(u64),
    /// A command for one child slot.
    ToSlot(usize, SlotCmd),
    /// Say Bye and wait, a bounded time, for the Farewell.
    SayBye,
    /// The run is over, with this failure as its error, if any.
    Exit(Option<Failure>),
}

/// Commands from the supervisor to a child slot (`child.rs`), sent by
/// [`Action::ToSlot`] through the slot's lane (`lane.rs`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum SlotCmd {
    Work(Vec<WorkItem>),
    Stop,
    /// The node's right to crawl now ends at this instant of the host's
    /// monotonic clock (see `link::fence`).
    Fence(u64),
    /// Hand back these domains' URLs not started yet (`ToChild::Recall`).
    Recall(Vec<String>),
    /// The answer to [`super::SlotEvent::Exited`]: start a new child after this
    /// backoff.
    Restart {
        after: Duration,
    },
}
