//! What every crawler process needs, whatever its role: logging and the
//! per-operation timing log, typed metric families (`metric`), command-line pieces common
//! to all (`cli`), why a URL failed (`failure`: the wire and the stores
//! both carry it), the allocator's tuning, graceful shutdown, URL rules
//! (`urls`, `canonical`) and where HTTP clients are built (`http_client`).
//!
//! The wire between processes is the `link` crate and the stores are the
//! `store` crate; code that only one role uses lives in that role's crate.

#![warn(unreachable_pub)]

pub mod alloc;
pub mod canonical;
pub mod cli;
pub mod debug_token;
pub mod failure;
pub mod http_client;
pub mod live_line;
pub mod logging;
pub mod metric;
pub mod revisit;
pub mod shutdown;
pub mod timing;
pub mod urls;

/// The tokio runtime every crawler process runs on: two worker threads,
/// which is plenty for I/O-bound work and keeps one process from taking
/// every core of a node it shares with its siblings.
pub fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
}
