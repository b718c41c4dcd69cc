//! Test support: the synthetic web and a harness that runs the real crawler.
//!
//! The entry points every test awaits (starting the web, running a crawl,
//! connecting to and reading the store) return boxed futures, for the
//! reason [`shared::RoleFuture`] gives: an `async fn` is compiled in each
//! crate that awaits it, so each test binary compiled the web server, the
//! process harness and the MongoDB client's connection code again.

#![warn(unreachable_pub)]

pub mod dns_server;
#[cfg(test)]
mod doc_flags;
#[cfg(test)]
mod doc_paths;
pub mod harness;
pub mod host_server;
pub mod in_process;
pub mod netns;
pub mod procfs;
pub mod relay;
pub mod tls;
pub mod verify;
pub mod web;
pub mod zmtp;
