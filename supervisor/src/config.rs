//! What a supervisor runs with, typed: parsed once from the command line
//! and the cluster secret ([`Config::from_args`], in the library, so that
//! a bad flag is an error its caller gets rather than an exit); a test may
//! also build it directly.

use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use link::args::ClusterArgs;
use link::cluster_auth::ClusterKey;
use shared::cli::{ChildSettings, NetArgs, ObsArgs};
use shared::timing::TimingConfig;
use store::StoreArgs;

pub struct Config {
    /// The dispatcher's ZeroMQ endpoint.
    pub dispatcher: String,
    /// This supervisor's id (`None`: node name and pid).
    pub id: Option<String>,
    /// The node's name in introductions, logs and metrics.
    pub node: String,
    /// How long to keep trying to reach the dispatcher at start-up.
    pub connect_timeout: Duration,
    /// The dispatcher counts as gone after this long without a message
    /// from it (at least 2 s: it sends a heartbeat every second).
    pub dispatcher_silence: Duration,
    /// Leave (drain the children, exit with an error) after the dispatcher
    /// has been unreachable this long.
    pub reconnect_patience: Duration,
    /// Number of crawler-child processes (at least 1).
    pub children: usize,
    /// URLs each child may hold at once (the dispatcher's credit is the sum).
    pub child_capacity: u32,
    /// The crawler-child binary (`None`: beside this executable).
    pub child_bin: Option<PathBuf>,
    /// Every child's arguments and environment (store, observability and
    /// host overrides); secrets only in the environment.
    pub child: ChildSettings,
    /// A child silent (no heartbeat) this long is killed and restarted.
    pub hang_timeout: Duration,
    /// Crashes in a row (each soon after its start) after which a slot is
    /// given up and the supervisor leaves the crawl (at least 1).
    pub max_child_crashes: u32,
    /// Where `/debug/pprof` and `/metrics` listen.
    pub debug_addr: SocketAddr,
    /// Their bearer token; required off loopback.
    pub debug_token: shared::debug_token::DebugToken,
    /// The timing log.
    pub timing: TimingConfig,
    /// The cluster secret this supervisor proves (or the insecure key).
    pub key: ClusterKey,
}

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

impl Config {
    /// The settings of the command line `argv` (its first item is the
    /// program's name) with `secret`, the cluster secret from the
    /// environment (or `--cluster-secret-file`). A bad flag, `--help` and
    /// `--version` are a `clap::Error` inside the error; an unreadable
    /// secret or CA file, an error saying which (a bad `--ca-file` stops
    /// the supervisor here rather than every child it would start).
    pub fn from_args<I, T>(argv: I, secret: Option<OsString>) -> anyhow::Result<Config>
    where
        I: IntoIterator<Item = T>,
        T: Into<OsString> + Clone,
    {
        let args = Args::try_parse_from(argv)?;
        let key = args.cluster.key(secret)?;
        args.net.extra_roots()?;
        Ok(args.into_config(key))
    }
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
