//! Test-only fault injection, compiled only with the `fault-injection`
//! feature (which only the tests turn on): the binary users build has none
//! of it, and nothing of it on the per-URL path.
//!
//! - `CRAWLER_FAULT_SLOW_PARSE_US_PER_SEC=N` makes every `parse` take N µs
//!   longer for each second the child has been running: a slowdown that
//!   grows over the run, like the one this project's profiling exists to
//!   find. The end-to-end tests use it to check that the trend report names
//!   `parse`.
//! - `CRAWLER_FAULT_FREEZE_ON_URL=S` makes the child stop itself (SIGSTOP)
//!   when it starts a URL containing `S`: a child that is stuck for good,
//!   deaf to SIGTERM and silent. The stop test uses it to check that every
//!   process still exits within its bound.
//!
//! - `CRAWLER_FAULT_PANIC_ON_URL=S` makes crawling a URL containing `S`
//!   panic: a bug on one page, which must fail that URL alone.
//!
//! - `CRAWLER_FAULT_STORE_US_PER_PAGE=N` makes every page write take N µs
//!   longer per page in the batch (an async sleep, no CPU): a slow store.
//! - `CRAWLER_FAULT_BURN_PARSE_US=N` makes every parse spin N µs more: a
//!   crawl that is short of CPU.
//!
//! The bottleneck tests use these two to check that the report names the
//! resource they starve.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

struct Fault {
    started: Instant,
    growth_us_per_sec: f64,
}

fn fault() -> Option<&'static Fault> {
    static FAULT: OnceLock<Option<Fault>> = OnceLock::new();
    FAULT
        .get_or_init(|| {
            let growth: f64 = std::env::var("CRAWLER_FAULT_SLOW_PARSE_US_PER_SEC")
                .ok()?
                .parse()
                .ok()?;
            tracing::warn!("FAULT INJECTION: parse slows by {growth} µs per second of run time");
            Some(Fault {
                started: Instant::now(),
                growth_us_per_sec: growth,
            })
        })
        .as_ref()
}

/// Called inside the timed parse step.
pub(crate) fn slow_parse() {
    if let Some(f) = fault() {
        let us = f.started.elapsed().as_secs_f64() * f.growth_us_per_sec;
        std::thread::sleep(Duration::from_micros(us as u64));
    }
}

/// A URL pattern from the environment variable `var`, read once.
fn pattern(cell: &'static OnceLock<Option<String>>, var: &str) -> Option<&'static str> {
    cell.get_or_init(|| std::env::var(var).ok().filter(|p| !p.is_empty()))
        .as_deref()
}

/// Panics if `url` matches `CRAWLER_FAULT_PANIC_ON_URL`.
pub(crate) fn panic_on(url: &str) {
    static PANIC: OnceLock<Option<String>> = OnceLock::new();
    if pattern(&PANIC, "CRAWLER_FAULT_PANIC_ON_URL").is_some_and(|p| url.contains(p)) {
        panic!("FAULT INJECTION: panic on {url}");
    }
}

/// Freezes this process if `url` matches `CRAWLER_FAULT_FREEZE_ON_URL`.
pub(crate) fn freeze_on(url: &str) {
    static FREEZE: OnceLock<Option<String>> = OnceLock::new();
    if pattern(&FREEZE, "CRAWLER_FAULT_FREEZE_ON_URL").is_some_and(|p| url.contains(p)) {
        tracing::warn!(url, "FAULT INJECTION: freezing (SIGSTOP)");
        // SAFETY: raise has no memory-safety preconditions.
        unsafe {
            libc::raise(libc::SIGSTOP);
        }
    }
}

/// A number from the environment variable `var`, read once.
fn micros(cell: &'static OnceLock<Option<u64>>, var: &str) -> Option<u64> {
    *cell.get_or_init(|| {
        let us = std::env::var(var).ok()?.parse().ok()?;
        tracing::warn!("FAULT INJECTION: {var}={us}");
        Some(us)
    })
}

/// Sleeps as long as `CRAWLER_FAULT_STORE_US_PER_PAGE` says for `pages`.
pub(crate) async fn slow_store(pages: usize) {
    static SLOW: OnceLock<Option<u64>> = OnceLock::new();
    if let Some(us) = micros(&SLOW, "CRAWLER_FAULT_STORE_US_PER_PAGE") {
        let total = us.saturating_mul(pages as u64);
        tokio::time::sleep(Duration::from_micros(total)).await;
    }
}

/// Spins as long as `CRAWLER_FAULT_BURN_PARSE_US` says.
pub(crate) fn burn_parse() {
    static BURN: OnceLock<Option<u64>> = OnceLock::new();
    if let Some(us) = micros(&BURN, "CRAWLER_FAULT_BURN_PARSE_US") {
        let until = Instant::now() + Duration::from_micros(us);
        while Instant::now() < until {
            std::hint::spin_loop();
        }
    }
}
