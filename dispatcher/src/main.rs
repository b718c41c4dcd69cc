//! The dispatcher binary: parses the command line (and `--config` file)
//! and the cluster secret, then runs [`dispatcher::run`] until the crawl is
//! done or SIGTERM/SIGINT stops it.

use dispatcher::{config, Shutdown};

/// mimalloc instead of the system allocator, as in every crawler process
/// (the frontier's URL strings and the results' outlinks are many small
/// allocations; see crawler-child/src/main.rs).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> anyhow::Result<()> {
    // Not `shared::alloc::tune()`: see there why the dispatcher keeps
    // mimalloc's own purge delay.
    let huge_pages = shared::alloc::without_huge_pages();
    shared::logging::init("dispatcher");
    if let Err(e) = huge_pages {
        tracing::warn!(error = %e, "could not turn transparent huge pages off; memory use will be higher");
    }
    let secret = std::env::var_os(link::cluster_auth::SECRET_ENV);
    let config = shared::cli::or_usage(config::load(std::env::args_os().collect(), secret))?;
    if config.key.is_insecure() {
        tracing::warn!(
            bind = %config.flags.bind,
            "--insecure-cluster: anyone who can reach the bind address can join the crawl, report results and get the debug token sent to it"
        );
    }
    // Read once; nothing this process starts inherits it. Still
    // single-threaded here, so changing the environment is sound.
    std::env::remove_var(link::cluster_auth::SECRET_ENV);
    // The event loop runs as a task on the runtime's workers, not on this
    // thread (`block_on` would poll it here): every message, read answer
    // and confirmation the workers hand it would then wake another thread,
    // a cost that grows with the number of small events
    // (scripts/bench-dispatcher.sh measures it).
    let rt = shared::runtime()?;
    rt.block_on(async move { tokio::spawn(dispatcher::run(config, Shutdown::on_signals())).await? })
}
