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

/// What a role's `run` returns (the dispatcher's, a supervisor's, a
/// child's): the role's whole life as one boxed future.
///
/// Boxed for the build, not for the run. rustc compiles an `async fn`'s
/// body in the crate that polls it, not in the one that defines it, so an
/// `async fn run` was compiled again, the whole role with every generic it
/// uses, into the role's binary and into each test crate that runs it in
/// process: the dispatcher's `main.rs` took 39 CPU s to build. Coerced to
/// `dyn Future` inside the role's crate, the body is compiled there once
/// (the binary then takes 1.5 s). It costs one allocation per run.
pub type RoleFuture = std::pin::Pin<Box<dyn std::future::Future<Output = anyhow::Result<()>> + Send>>;

/// The tokio runtime every crawler process runs on: two worker threads,
/// which is plenty for I/O-bound work and keeps one process from taking
/// every core of a node it shares with its siblings.
pub fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
}
