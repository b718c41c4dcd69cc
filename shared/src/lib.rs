//! Code shared by the dispatcher, the supervisors and the crawler children.
//!
//! Each module holds one concept: the wire protocol, URL rules, link and
//! feature extraction, store access, host-name overrides, command-line
//! settings common to all processes and the per-operation timing log.

pub mod cli;
pub mod extract;
pub mod framing;
pub mod protocol;
pub mod resolve;
pub mod shutdown;
pub mod store;
pub mod timing;
pub mod urls;
