//! Global Prometheus recorder.
//!
//! The `metrics` facade allows exactly one global recorder per process, so installation is
//! memoised: every caller gets a clone of the same [`PrometheusHandle`]. We do not use the
//! exporter's own HTTP listener (our debug server serves `/metrics`, behind the same auth),
//! which means someone has to call [`PrometheusHandle::run_upkeep`] periodically to drain
//! histogram buffers and expire idle metrics — that is [`spawn_upkeep`].
//!
//! [`render`] adds the `process_*` families of Prometheus client libraries (CPU seconds,
//! memory, file descriptors, start time). They are written here rather than recorded through
//! the `metrics` facade because its counters hold integers and CPU seconds need a fraction,
//! and because reading `/proc` at the moment of the scrape makes them exact then, with no
//! stored copy to refresh in between.

use std::fmt::Write as _;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use anyhow::Context as _;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

use crate::process::{self, ProcessSample};

/// Latency buckets (seconds), 100 µs .. 30 s: covers in-process queue hops up to slow
/// fetches and robots.txt timeouts.
const SECONDS_BUCKETS: &[f64] = &[
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
    30.0,
];

/// Size buckets (bytes), 256 B .. 64 MiB in powers of 4: page bodies, batches, messages.
const BYTES_BUCKETS: &[f64] = &[
    256.0,
    1024.0,
    4096.0,
    16384.0,
    65536.0,
    262_144.0,
    1_048_576.0,
    4_194_304.0,
    16_777_216.0,
    67_108_864.0,
];

/// Fallback for other histograms (counts: links per page, batch sizes, ...), 1-2-5 series.
/// Set so that *every* histogram renders as a Prometheus histogram rather than a summary,
/// which keeps them aggregatable across processes.
const DEFAULT_BUCKETS: &[f64] = &[
    1.0,
    2.0,
    5.0,
    10.0,
    20.0,
    50.0,
    100.0,
    200.0,
    500.0,
    1000.0,
    2000.0,
    5000.0,
    10000.0,
    100_000.0,
    1_000_000.0,
];

/// How often [`spawn_upkeep`] runs [`PrometheusHandle::run_upkeep`] (the exporter's own
/// listener uses 5 s).
const UPKEEP_INTERVAL: Duration = Duration::from_secs(5);

static HANDLE: Mutex<Option<PrometheusHandle>> = Mutex::new(None);
static UPKEEP: OnceLock<()> = OnceLock::new();

/// Installs the global `metrics` recorder (Prometheus) once per process and returns its handle.
///
/// Histograms whose name ends in `_seconds` get latency buckets (100 µs .. 30 s), those ending
/// in `_bytes` get byte-size buckets, all others a generic 1-2-5 count series. Calling it again
/// returns the same handle.
///
/// # Errors
/// Fails if a different global recorder was already installed by someone else.
pub fn install_metrics() -> anyhow::Result<PrometheusHandle> {
    // A Mutex (not OnceLock) so concurrent first callers cannot race into
    // `set_global_recorder` twice; the fallible init is not expressible with stable OnceLock.
    let mut slot = HANDLE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(handle) = slot.as_ref() {
        return Ok(handle.clone());
    }
    let handle = PrometheusBuilder::new()
        .set_buckets(DEFAULT_BUCKETS)?
        .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), SECONDS_BUCKETS)?
        .set_buckets_for_metric(Matcher::Suffix("_bytes".into()), BYTES_BUCKETS)?
        .install_recorder()
        .context("installing global Prometheus metrics recorder")?;
    *slot = Some(handle.clone());
    Ok(handle)
}

/// Runs [`PrometheusHandle::run_upkeep`] every few seconds on a background thread.
///
/// Idempotent: only the first call per process starts the thread (there is only one global
/// recorder anyway). A plain thread rather than a tokio task so it works with or without a
/// runtime and cannot be starved by a busy runtime. [`start_debug_server`](crate::start_debug_server)
/// calls this itself.
pub fn spawn_upkeep(handle: PrometheusHandle) {
    UPKEEP.get_or_init(|| {
        let spawned = std::thread::Builder::new()
            .name("metrics-upkeep".into())
            .spawn(move || loop {
                std::thread::sleep(UPKEEP_INTERVAL);
                handle.run_upkeep();
            });
        if let Err(err) = spawned {
            tracing::error!(error = %err, "cannot start the metrics upkeep thread");
        }
    });
}

/// The body of `/metrics`: everything recorded through the `metrics` facade, then the
/// `process_*` families read from `/proc` now (left out where that cannot be read).
pub(crate) fn render(handle: &PrometheusHandle) -> String {
    let mut text = handle.render();
    if let Some(sample) = process::process_sample() {
        append_process_families(&mut text, &sample);
    }
    text
}

/// Writes `sample` as the families Prometheus client libraries export under these names
/// (with their HELP texts), so dashboards and alerts made for those work unchanged.
fn append_process_families(out: &mut String, sample: &ProcessSample) {
    let families = [
        (
            "process_cpu_seconds_total",
            "counter",
            "Total user and system CPU time spent in seconds.",
            sample.cpu_seconds,
        ),
        (
            "process_resident_memory_bytes",
            "gauge",
            "Resident memory size in bytes.",
            sample.resident_bytes as f64,
        ),
        (
            "process_virtual_memory_bytes",
            "gauge",
            "Virtual memory size in bytes.",
            sample.virtual_bytes as f64,
        ),
        (
            "process_open_fds",
            "gauge",
            "Number of open file descriptors.",
            sample.open_fds as f64,
        ),
        (
            "process_max_fds",
            "gauge",
            "Maximum number of open file descriptors.",
            sample.max_fds as f64,
        ),
        (
            "process_start_time_seconds",
            "gauge",
            "Start time of the process since unix epoch in seconds.",
            sample.start_time_seconds,
        ),
    ];
    for (name, kind, help, value) in families {
        // The exporter ends each family with a blank line; so do these.
        let _ = write!(
            out,
            "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}\n\n"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn process_families_are_prometheus_text() {
        let mut out = String::from("# TYPE x_total counter\nx_total 1\n\n");
        append_process_families(
            &mut out,
            &ProcessSample {
                cpu_seconds: 12.34,
                resident_bytes: 50_331_648,
                virtual_bytes: 1_073_741_824,
                open_fds: 17,
                max_fds: 1024,
                start_time_seconds: 1_700_000_000.25,
            },
        );
        assert_eq!(
            out,
            "# TYPE x_total counter\nx_total 1\n\n\
             # HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.\n\
             # TYPE process_cpu_seconds_total counter\n\
             process_cpu_seconds_total 12.34\n\n\
             # HELP process_resident_memory_bytes Resident memory size in bytes.\n\
             # TYPE process_resident_memory_bytes gauge\n\
             process_resident_memory_bytes 50331648\n\n\
             # HELP process_virtual_memory_bytes Virtual memory size in bytes.\n\
             # TYPE process_virtual_memory_bytes gauge\n\
             process_virtual_memory_bytes 1073741824\n\n\
             # HELP process_open_fds Number of open file descriptors.\n\
             # TYPE process_open_fds gauge\n\
             process_open_fds 17\n\n\
             # HELP process_max_fds Maximum number of open file descriptors.\n\
             # TYPE process_max_fds gauge\n\
             process_max_fds 1024\n\n\
             # HELP process_start_time_seconds Start time of the process since unix epoch in seconds.\n\
             # TYPE process_start_time_seconds gauge\n\
             process_start_time_seconds 1700000000.25\n\n"
        );
    }
}
