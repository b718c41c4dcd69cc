//! Test-only fault injection.
//!
//! `CRAWLER_FAULT_SLOW_PARSE_US_PER_SEC=N` makes every `parse` take N µs
//! longer for each second the child has been running: a slowdown that grows
//! over the run, like the one this project's profiling exists to find. The
//! end-to-end tests use it to check that the trend report names `parse`.
//! Unset (always, outside tests) it costs one relaxed load per page.

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
            eprintln!("crawler-child: FAULT INJECTION: parse slows by {growth} µs per second of run time");
            Some(Fault {
                started: Instant::now(),
                growth_us_per_sec: growth,
            })
        })
        .as_ref()
}

/// Called inside the timed parse step.
pub fn slow_parse() {
    if let Some(f) = fault() {
        let us = f.started.elapsed().as_secs_f64() * f.growth_us_per_sec;
        std::thread::sleep(Duration::from_micros(us as u64));
    }
}
