//! Code shared by the dispatcher, the supervisors and the crawler children.
//!
//! Each module holds one concept: the wire protocol, URL rules, canonical
//! URLs (`canonical`), which addresses may be fetched, link and feature
//! extraction, how a page keeps its links (`page_links`), store access and
//! the store's work per command (`store_work`), host-name overrides,
//! command-line settings common to all processes, the per-operation timing
//! log, the diagnostics
//! log (`logging`), where HTTP clients are built (`http_client`), the HELP
//! text of every metric, and the compact set of 64-bit hashes behind the
//! dispatcher's seen-set (`hash_set48`).

pub mod address_policy;
pub mod alloc;
pub mod canonical;
pub mod cli;
pub mod extract;
pub mod hash_set48;
pub mod http_client;
pub mod limits;
pub mod logging;
pub mod metric_help;
pub mod resolve;
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
