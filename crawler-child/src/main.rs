//! The crawler-child binary: parses the command line, then runs
//! [`crawler_child::run`] until the supervisor stops it or SIGTERM/SIGINT
//! does.

use std::time::Duration;

use crawler_child::{Config, Shutdown};

/// mimalloc instead of the system allocator: link extraction, URL
/// resolution and page documents allocate many small values per page,
/// which mimalloc serves more cheaply (`pagebench` measures extraction
/// with it). `shared::alloc::tune` keeps it from returning memory too
/// eagerly.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> anyhow::Result<()> {
    shared::alloc::tune();
    shared::logging::init("crawler-child");
    let config = shared::cli::or_usage(Config::from_args(std::env::args_os()))?;
    shared::shutdown::on_abandon(|| {
        tracing::error!(
            "NOT STORED: the pages this child still held unwritten. Their URLs were not reported, so \
             they stay leased and are crawled again (after the lease, or by the next run)"
        )
    });
    let runtime = shared::runtime()?;
    let res = runtime.block_on(async { crawler_child::run(config, Shutdown::on_signals()).await });
    // A URL stuck in synchronous code must not keep the process alive.
    runtime.shutdown_timeout(Duration::from_secs(1));
    res
}
