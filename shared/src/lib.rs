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

/// The tokio runtime a crawler process runs on, with `workers` worker
/// threads (at least 1).
///
/// The dispatcher, the supervisor and `pages` take [`SHARED_WORKERS`]: two,
/// plenty for work that is mostly I/O, and short of every core of a node
/// they share with the children. A crawler child takes one
/// ([`CHILD_WORKERS`]): a node runs a child per core (Ansible's
/// `supervisor_children` is the node's vCPUs), so the children are the
/// node's parallelism, and a second thread in each only moved tasks
/// between threads and woke sleeping ones. On the realistic bench (four
/// children on two cores, synthweb) one thread took the children's CPU a
/// page from 0.215 and 0.207 ms to 0.196 and 0.192; on nginx one pair was
/// level within the machine's noise (scripts/scale-measurements.md).
/// Its blocking work (dictionary training, the system resolver) still
/// goes to tokio's blocking pool.
pub fn runtime(workers: usize) -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers.max(1))
        .enable_all()
        .build()
}

/// Worker threads of the dispatcher, the supervisor and `pages` (see
/// [`runtime`]).
pub const SHARED_WORKERS: usize = 2;
/// Worker threads of a crawler child (see [`runtime`]).
pub const CHILD_WORKERS: usize = 1;
