//! The supervisor binary: parses the command line and the cluster secret,
//! then runs [`supervisor::run`] until the crawl ends or SIGTERM/SIGINT
//! stops it.

use link::cluster_auth::{SECRET_ENV, SECRET_FILE_ENV};
use supervisor::{Config, Shutdown};

/// mimalloc instead of the system allocator, as in every crawler process
/// (see crawler-child/src/main.rs).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> anyhow::Result<()> {
    shared::alloc::tune();
    shared::logging::init("supervisor");
    let config = shared::cli::or_usage(Config::from_args(
        std::env::args_os(),
        std::env::var_os(SECRET_ENV),
    ))?;
    // Read once; no child (nor anything else this process starts) inherits
    // it. Still single-threaded here, so changing the environment is sound.
    std::env::remove_var(SECRET_ENV);
    std::env::remove_var(SECRET_FILE_ENV);
    shared::shutdown::on_abandon(|| {
        tracing::error!(
            "NOT HANDED IN: the results this supervisor still held. Nothing is lost: their pages are \
             stored (a child reports a URL only after storing its page), so the next run finds those \
             URLs finished; the dispatcher hands out again what this node held once it stops hearing \
             from it (or when the leases expire)"
        )
    });
    shared::runtime()?.block_on(async { supervisor::run(config, Shutdown::on_signals()).await })
}
