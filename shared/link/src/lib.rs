//! The cluster link: everything that crosses the wire between dispatcher,
//! supervisors and crawler children.
//!
//! One crate because the wire is one concept that three roles share: the
//! typed, versioned messages ([`protocol`]) and their length-prefixed
//! framing on a child's pipes ([`framing`]), the rule that stops a node
//! cut off from the dispatcher ([`fence`]), the cluster secret's handshake
//! and per-message seals ([`cluster_auth`], [`args`]), the frames that carry them
//! ([`envelope`]), what a peer can make either end's ZeroMQ socket hold
//! ([`socket`]), and the supervisor's end of the ZeroMQ connection
//! ([`dispatcher_link`]). Why a URL failed (`FailureKind`) travels in the
//! messages but lives in `shared::failure`, as the stores keep it too.

#![warn(unreachable_pub)]

pub mod args;
pub mod cluster_auth;
pub mod dispatcher_link;
pub mod envelope;
pub mod fence;
pub mod framing;
pub mod metric;
pub mod protocol;
pub mod socket;
