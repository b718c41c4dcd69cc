//! The child's open-file limit against its fetch slots.
//!
//! Every fetch slot holds a connection, and so does every connection the
//! HTTP client keeps idle between a domain's requests: a child given more
//! slots than it may open files fails their connects (EMFILE) as network
//! errors of the URLs, thousands at a wide crawl's start. So the soft limit
//! is raised to the hard one (as Go's runtime and nginx do), and when even
//! that is short the slots are cut to half of it, with a warning that says
//! which limit to raise: the other half is for idle connections, the
//! store's, DNS and logs.

/// Files kept for everything but connections: the store's pool, DNS
/// sockets, logs, the debug server.
const RESERVE: u64 = 512;
/// The fewest slots a short limit leaves.
const MIN_SLOTS: usize = 16;

/// The fetch slots to run with when `wanted` are asked for.
pub(crate) fn slots(wanted: usize) -> usize {
    let Some(files) = raise_soft_limit() else {
        return wanted;
    };
    let room = usize::try_from(files.saturating_sub(RESERVE) / 2).unwrap_or(usize::MAX);
    let slots = wanted.min(room.max(MIN_SLOTS));
    if slots < wanted {
        tracing::warn!(
            wanted,
            slots,
            open_files = files,
            "fewer fetch slots than --child-concurrency asks: each takes a connection and the child may open only \
             this many files (raise the hard limit: ulimit -Hn, LimitNOFILE=, limits.conf)"
        );
    }
    slots
}

/// Raises the soft open-file limit to the hard one; the soft limit then in
/// force, or `None` when it cannot be read.
fn raise_soft_limit() -> Option<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct we own; no other memory.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return None;
    }
    if limit.rlim_cur < limit.rlim_max {
        let raised = libc::rlimit {
            rlim_cur: limit.rlim_max,
            rlim_max: limit.rlim_max,
        };
        // SAFETY: setrlimit reads the struct we own. It fails for a hard
        // limit of "unlimited" (above fs.nr_open): the soft one then stays.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            limit = raised;
        }
    }
    Some(limit.rlim_cur)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_fit_the_open_file_limit() {
        let files = raise_soft_limit().expect("getrlimit works here");
        let room = usize::try_from(files.saturating_sub(RESERVE) / 2).unwrap();
        assert_eq!(slots(8), 8.min(room.max(MIN_SLOTS)));
        assert_eq!(slots(usize::MAX), room.max(MIN_SLOTS));
    }
}
