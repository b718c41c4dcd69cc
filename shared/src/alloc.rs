//! The allocator every crawler process runs on: mimalloc, kept from handing
//! memory back to the kernel the moment it is free.
//!
//! A crawler allocates and frees the same few megabytes over and over
//! (bodies, compressed pages, BSON, extracted links). With mimalloc's
//! default purge delay, freed pages were handed back to the kernel and
//! faulted in again moments later: about 2,000 page faults a second in
//! each child on the realistic bench, each one a zeroed page (the kernel's
//! `clear_page` showed in the child's profile). Holding free memory for
//! [`PURGE_DELAY_MS`] before returning it took that to about 300 a second
//! (`perf stat -e page-faults` on the children). Memory that stays unused
//! longer (after a burst) still goes back.
//!
//! Each binary declares `#[global_allocator] static ALLOCATOR: MiMalloc`;
//! the supervisor and the child call [`tune`] first thing in `main`.
//! `MIMALLOC_PURGE_DELAY` in the environment still wins.
//!
//! The dispatcher does not: it churns little memory on a crawl of
//! realistic pages, and what it holds is what `--frontier-memory-urls`
//! bounds; with mimalloc's own delay it holds fewer bytes a known URL and
//! a lower peak at the same speed (scripts/scale-measurements.md,
//! "Figures behind the code's comments").

use std::ffi::c_long;

/// How long freed memory stays with the process before mimalloc hands it
/// back to the kernel.
pub const PURGE_DELAY_MS: c_long = 10_000;

/// `mi_option_purge_delay` in mimalloc v3's `mi_option_t` (the sys crate
/// names no constant for it); the test below checks it against the
/// option's documented default.
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Applies this module's settings; call first thing in `main`.
pub fn tune() {
    // mimalloc reads its environment when the process loads, so a setting
    // there is already in force and must not be overwritten.
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_some() {
        return;
    }
    // SAFETY: sets a number in mimalloc's option table; the option index
    // is in range (checked by the test below), and mimalloc reads the
    // value afresh each time it schedules a purge.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, PURGE_DELAY_MS) };
}

/// Hands the memory this thread's heap holds free back to the kernel now,
/// rather than after the purge delay or when the thread next allocates: for
/// a thread that has just dropped a large structure and may sit idle for
/// long (mimalloc purges a thread's free pages only when that thread runs
/// it). Costs a walk over the thread's heap.
pub fn release_free_memory() {
    // SAFETY: asks mimalloc to collect the calling thread's heap, which is
    // always valid (a process not on mimalloc has only mimalloc's own
    // empty heap to collect).
    unsafe { libmimalloc_sys::mi_collect(true) };
}

/// Keeps the kernel from backing this process's memory with transparent
/// huge pages, for a process whose memory is a figure to hold down (the
/// dispatcher's bytes per known URL).
///
/// mimalloc asks for huge pages on its arena (`madvise(MADV_HUGEPAGE)`,
/// which Debian's default THP mode, `madvise`, honours), and a huge page
/// is 2 MiB resident as soon as any byte of it is touched. The
/// dispatcher's heap is mostly small allocations made and freed at
/// different times, so its huge pages were largely empty: 49–52 MiB of
/// anonymous memory resident at start-up with 10,000 domains against
/// 18–28 MiB without them, and 159 against 120 bytes a known URL at the
/// million mark (scripts/scale-measurements.md, "The dispatcher
/// alone"). Call first thing in `main`: it applies to memory touched from
/// then on, and children inherit it.
pub fn without_huge_pages() -> std::io::Result<()> {
    // SAFETY: PR_SET_THP_DISABLE takes integers only and changes no memory
    // of this process, only how the kernel backs it from now on.
    let rc = unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_purge_delay_option_is_the_one_set() {
        // Option 15 must be `purge_delay`, whose default in mimalloc v3 is
        // 1,000 ms; an upgrade that renumbers the options fails here
        // instead of silently setting something else. (Read before
        // `tune`, in a process that has not called it; an environment
        // setting would also show here.)
        if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
            // SAFETY: reads mimalloc's option table.
            assert_eq!(
                unsafe { libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) },
                1_000
            );
        }
        tune();
        // SAFETY: as above.
        let now = unsafe { libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) };
        assert!(now == PURGE_DELAY_MS || std::env::var_os("MIMALLOC_PURGE_DELAY").is_some());
    }

    #[test]
    fn huge_pages_are_off_once_asked() {
        without_huge_pages().expect("prctl");
        // SAFETY: PR_GET_THP_DISABLE reads a flag of this process.
        assert_eq!(unsafe { libc::prctl(libc::PR_GET_THP_DISABLE, 0, 0, 0, 0) }, 1);
    }
}
