//! The supervisor binary: parses the command line and the cluster secret,
//! then runs [`supervisor::run`] until the crawl ends or SIGTERM/SIGINT
//! stops it.

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use link::args::ClusterArgs;
use link::cluster_auth::{ClusterKey, SECRET_ENV, SECRET_FILE_ENV};
use shared::cli::{NetArgs, ObsArgs};
use store::StoreArgs;
use supervisor::{Config, Shutdown};

/// mimalloc instead of the system allocator, as in every crawler process
/// (see crawler-child/src/main.rs).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser, Debug)]
#[command(version, about = "Runs crawler-child processes on this node for a dispatcher")]
struct Args {
    /// The dispatcher's ZeroMQ endpoint.
    #[arg(long, env = "CRAWLER_DISPATCHER", default_value = "tcp://127.0.0.1:5555")]
    dispatcher: String,
    /// This supervisor's id (default: node name + pid).
    #[arg(long)]
    id: Option<String>,
    /// How long to keep trying to reach the dispatcher at start-up.
    #[arg(long, default_value_t = 120)]
    connect_timeout_secs: u64,
    /// The dispatcher counts as gone after this many seconds without a
    /// message from it (it sends a heartbeat every second); the supervisor
    /// then reconnects and re-introduces itself, keeping its children.
    #[arg(long, default_value_t = 15)]
    dispatcher_silence_secs: u64,
    /// Give up (drain the children and exit 1) after the dispatcher has
    /// been unreachable this many seconds.
    #[arg(long, default_value_t = 900)]
    reconnect_patience_secs: u64,
    /// Number of crawler-child processes.
    #[arg(long, default_value_t = 2)]
    children: usize,
    /// URLs each child may hold at once (the dispatcher's credit is the sum).
    #[arg(long, default_value_t = 256)]
    child_capacity: u32,
    /// The crawler-child binary (default: beside this executable).
    #[arg(long)]
    child_bin: Option<PathBuf>,
    /// A child silent (no heartbeat) for this many seconds is killed and restarted.
    #[arg(long, default_value_t = 60)]
    hang_timeout_secs: u64,
    /// A child that crashes this many times in a row (each within 30 s of
    /// its start) is not restarted again: the supervisor hands in its
    /// results, leaves the crawl (its work goes to other supervisors) and
    /// exits 1. A crash loop means a broken node, not a bad URL (a URL
    /// that kills its child 3 times is failed on its own).
    #[arg(long, default_value_t = 8)]
    max_child_crashes: u32,
    /// The children's names, nameserver and extra CAs.
    #[command(flatten)]
    net: NetArgs,
    #[command(flatten)]
    store: StoreArgs,
    #[command(flatten)]
    obs: ObsArgs,
    #[command(flatten)]
    cluster: ClusterArgs,
}

impl Args {
    /// The typed settings; `key` is the cluster secret already read.
    fn into_config(self, key: ClusterKey) -> Config {
        let mut child = self.store.to_child();
        child.extend(self.obs.to_child());
        child.extend(self.net.to_child());
        Config {
            dispatcher: self.dispatcher,
            id: self.id,
            node: self.obs.node_name(),
            connect_timeout: Duration::from_secs(self.connect_timeout_secs),
            dispatcher_silence: Duration::from_secs(self.dispatcher_silence_secs),
            reconnect_patience: Duration::from_secs(self.reconnect_patience_secs),
            children: self.children,
            child_capacity: self.child_capacity,
            child_bin: self.child_bin,
            child,
            hang_timeout: Duration::from_secs(self.hang_timeout_secs),
            max_child_crashes: self.max_child_crashes,
            debug_addr: self.obs.debug_addr,
            debug_token: self.obs.debug_token(),
            timing: self.obs.timing_config("supervisor"),
            key,
        }
    }
}

fn main() -> anyhow::Result<()> {
    shared::alloc::tune();
    shared::logging::init("supervisor");
    let args = Args::parse();
    let key = args.cluster.key(std::env::var_os(SECRET_ENV))?;
    // A bad --ca-file stops the supervisor here, with its reason, rather
    // than every child it would start.
    args.net.extra_roots()?;
    // Read once; no child (nor anything else this process starts) inherits
    // it. Still single-threaded here, so changing the environment is sound.
    std::env::remove_var(SECRET_ENV);
    std::env::remove_var(SECRET_FILE_ENV);
    let config = args.into_config(key);
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
