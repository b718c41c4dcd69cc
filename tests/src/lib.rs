//! Test support: the synthetic web and a harness that runs the real crawler.

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
pub mod relay;
pub mod tls;
pub mod verify;
pub mod web;
pub mod zmtp;
