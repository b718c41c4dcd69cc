//! Why a supervisor leaves the crawl with an error (exit status 1), after
//! draining its children and handing in what it can.

use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Failure {
    /// A slot's children kept crashing: the node is broken, and its work
    /// is better done by other supervisors.
    SlotCrashing { slot: usize, why: String },
    /// The dispatcher stayed unreachable past the reconnect patience (the
    /// link's own words).
    Unreachable(String),
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::SlotCrashing { slot, why } => write!(f, "child slot {slot} keeps crashing: {why}"),
            Failure::Unreachable(why) => f.write_str(why),
        }
    }
}

impl std::error::Error for Failure {}
