//! Who this supervisor is, as its introductions to the dispatcher say.

use link::protocol::{Intro, ProcessInfo};

#[derive(Debug, Clone)]
pub(crate) struct Identity {
    pub(crate) id: String,
    /// URLs the node can hold at once: the dispatcher's credit for it.
    pub(crate) capacity: u32,
    pub(crate) process: ProcessInfo,
}

impl Identity {
    /// Our introduction (what we hold follows the Welcome:
    /// `ToDispatcher::Holding`).
    pub(crate) fn intro(&self) -> Intro {
        Intro {
            supervisor_id: self.id.clone(),
            capacity: self.capacity,
            process: self.process.clone(),
        }
    }
}
