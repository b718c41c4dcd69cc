//! The crawler-child binary: parses the command line, then runs
//! [`crawler_child::run`] until the supervisor stops it or SIGTERM/SIGINT
//! does.

use std::time::Duration;

use clap::Parser;
use crawler_child::{Config, HostOverrides, Shutdown};
use shared::cli::{NetArgs, ObsArgs};
use store::StoreArgs;

/// mimalloc instead of the system allocator: link extraction, URL
/// resolution and page documents allocate many small values per page,
/// which mimalloc serves more cheaply (`pagebench` measures extraction
/// with it). `shared::alloc::tune` keeps it from returning memory too
/// eagerly.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser, Debug)]
#[command(
    version,
    about = "Crawler child process: started by a supervisor, speaks on stdin/stdout"
)]
struct Args {
    #[command(flatten)]
    store: StoreArgs,
    #[command(flatten)]
    obs: ObsArgs,
    #[command(flatten)]
    net: NetArgs,
}

impl Args {
    fn into_config(self) -> anyhow::Result<Config> {
        Ok(Config {
            hosts: HostOverrides::from_args(&self.net.resolve, &self.net.hosts_file)?,
            dns_server: self.net.dns_server,
            extra_roots: self.net.extra_roots()?,
            store: self.store,
            obs: self.obs,
        })
    }
}

fn main() -> anyhow::Result<()> {
    shared::alloc::tune();
    shared::logging::init("crawler-child");
    let config = Args::parse().into_config()?;
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
