//! dispatcher: owns the crawl. Loads seeds and the stored frontier, gives
//! each domain to one supervisor, leases URLs to supervisors over ZeroMQ as
//! their credit allows, takes results back, schedules new URLs, and ends
//! the crawl when nothing is queued or in flight.
//!
//! A library, so that a test can run a dispatcher in-process: [`run`] with
//! a [`Config`] and a [`Shutdown`]. The binary (`main.rs`) only parses the
//! command line and the cluster secret and calls it.

#![warn(unreachable_pub)]

mod admission;
mod breaker;
mod cluster;
pub mod config;
mod control;
mod crawl;
mod finished;
mod frontier;
pub mod hash_set48;
pub mod limits;
mod metric;
mod monitor;
mod persist;
mod queue_reader;
mod refusals;
mod resume;
mod revisits;
mod seeds;
mod seen;
mod state;
mod stats;

pub use config::Config;
/// The control requests `crawlctl` sends (see `control/request.rs`).
pub use control::request as control_request;
pub use shared::shutdown::Shutdown;

const ROLE: &str = "dispatcher";
/// The user agent of crawls of the built-in synthetic web; a crawl of the
/// open web must name its operator instead (see `seeds::on_the_open_web`).
pub(crate) const DEFAULT_USER_AGENT: &str = "synthcrawler/0.1 (+https://example.invalid/crawler)";

/// Runs a crawl until it is done or `shutdown` asks it to stop, then
/// writes its summary. Stopped or crashed, it resumes with the same
/// config.
/// Boxed: see [`shared::RoleFuture`].
pub fn run(config: Config, shutdown: Shutdown) -> shared::RoleFuture {
    Box::pin(crawl::run(config, shutdown))
}
