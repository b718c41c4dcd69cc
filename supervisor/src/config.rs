//! What a supervisor runs with, typed: the binary builds it from its
//! command line and the cluster secret; a test builds it directly.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use link::cluster_auth::ClusterKey;
use shared::cli::ChildSettings;
use shared::timing::TimingConfig;

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
