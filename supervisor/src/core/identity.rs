//! Who this supervisor is, as its introductions to the dispatcher say.

use link::protocol::{Intro, ProcessInfo, WorkItem};

#[derive(Debug, Clone)]
pub(crate) struct Identity {
    pub(crate) id: String,
    /// URLs the node can hold at once: the dispatcher's credit for it.
    pub(crate) capacity: u32,
    pub(crate) process: ProcessInfo,
}

impl Identity {
    /// An introduction listing `holding`, the URLs still ours.
    pub(crate) fn intro(&self, holding: Vec<WorkItem>) -> Intro {
        Intro {
            supervisor_id: self.id.clone(),
            capacity: self.capacity,
            process: self.process.clone(),
            holding,
        }
    }
}
