//! CPU profile capture and encoding.
//!
//! `pprof`'s profiler is process-wide (one SIGPROF timer, one sample table), so only one
//! capture may run at a time; a second concurrent request gets [`CaptureError::Busy`] and the
//! server answers 409 instead of corrupting or truncating the first capture.

use std::io::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use flate2::write::GzEncoder;
use flate2::Compression;
use pprof::protos::Message as _;

use crate::folded::{push_frame, Stacks};

/// Sampling frequency. 99 Hz (not 100) avoids lock-step with periodic 10 ms timers, the same
/// choice Go's and Linux perf's defaults make.
const FREQUENCY_HZ: i32 = 99;

/// Shared objects whose frames are skipped: unwinding through them from a signal handler
/// is where `backtrace` is known to deadlock or crash.
const BLOCKLIST: &[&str] = &["libc", "libgcc", "pthread", "vdso"];

/// Default capture length when `seconds` is absent or 0 (Go's default).
pub(crate) const DEFAULT_SECONDS: u64 = 30;
/// Upper bound so a typo cannot pin the profiler for hours.
pub(crate) const MAX_SECONDS: u64 = 300;

static BUSY: AtomicBool = AtomicBool::new(false);

#[derive(Debug)]
pub(crate) enum CaptureError {
    /// Another capture is running in this process.
    Busy,
    /// The profiler failed to start, sample or report.
    Failed(anyhow::Error),
}

impl From<pprof::Error> for CaptureError {
    fn from(err: pprof::Error) -> Self {
        CaptureError::Failed(err.into())
    }
}

/// Clears [`BUSY`] on drop, so an aborted request (client went away) frees the slot.
struct BusySlot;

impl BusySlot {
    fn acquire() -> Result<Self, CaptureError> {
        BUSY.compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .map(|_| BusySlot)
            .map_err(|_| CaptureError::Busy)
    }
}

impl Drop for BusySlot {
    fn drop(&mut self) {
        BUSY.store(false, Ordering::Release);
    }
}

/// Turns the `seconds` query parameter into a capture duration: absent or 0 → 30 s,
/// otherwise clamped to 1..=300.
pub(crate) fn duration_from_query(seconds: Option<u64>) -> Duration {
    let secs = match seconds {
        None | Some(0) => DEFAULT_SECONDS,
        Some(s) => s.clamp(1, MAX_SECONDS),
    };
    Duration::from_secs(secs)
}

/// Profiles the whole process for `duration`, then symbolises the samples and hands the
/// report to `render`.
///
/// The wait is an async sleep, so no runtime thread is parked for the capture and samples
/// show what the process really does rather than this handler. If the request is dropped
/// during the wait (client went away), the guard drops too and profiling stops.
/// Symbolisation and rendering can take a noticeable time on a large binary, so they run on
/// the blocking pool, still holding the busy slot so that no new capture can start before
/// this one's samples have been read.
async fn capture<T, F>(duration: Duration, render: F) -> Result<T, CaptureError>
where
    T: Send + 'static,
    F: FnOnce(&pprof::Report) -> Result<T, CaptureError> + Send + 'static,
{
    let slot = BusySlot::acquire()?;
    let guard = pprof::ProfilerGuardBuilder::default()
        .frequency(FREQUENCY_HZ)
        .blocklist(BLOCKLIST)
        .build()?;
    tokio::time::sleep(duration).await;
    tokio::task::spawn_blocking(move || {
        let report = guard.report().build();
        drop(guard);
        // Symbolising parsed the binary's debug info into a cache that
        // `backtrace` keeps for the life of the process: one profile left an
        // idle dispatcher 320 MiB bigger for good (27 to 347 MiB of RSS, 256
        // of it heap). The report holds its names already, so the cache goes;
        // the next profile parses the debug info again (about a second).
        backtrace::clear_symbol_cache();
        shared::alloc::release_free_memory();
        let out = render(&report?);
        drop(slot);
        out
    })
    .await
    .map_err(|e| CaptureError::Failed(anyhow::anyhow!("profile rendering task failed: {e}")))?
}

/// Captures a CPU profile and returns it as gzipped pprof protobuf, the format
/// `go tool pprof` fetches from `/debug/pprof/profile`.
pub(crate) async fn profile_pprof_gz(duration: Duration) -> Result<Vec<u8>, CaptureError> {
    capture(duration, |report| {
        let encoded = report.pprof()?.encode_to_vec();
        gzip(&encoded).map_err(|e| CaptureError::Failed(e.into()))
    })
    .await
}

/// Captures a CPU profile and renders it as an SVG flamegraph.
///
/// Rendered from the same collapsed stacks as [`profile_folded`], so this SVG and the ones
/// `cluster-profile` builds from `/debug/pprof/folded` look alike.
pub(crate) async fn profile_flamegraph_svg(duration: Duration) -> Result<Vec<u8>, CaptureError> {
    capture(duration, move |report| {
        let title = format!("CPU, pid {}, {} s", std::process::id(), duration.as_secs());
        Ok(report_stacks(report).flamegraph_svg(&title, None))
    })
    .await
}

/// Captures a CPU profile and returns it as collapsed stacks (`thread;root;..;leaf count`
/// per line, the format of Brendan Gregg's `stackcollapse-*` scripts and `inferno`), which
/// is what lets profiles of many processes be merged.
pub(crate) async fn profile_folded(duration: Duration) -> Result<String, CaptureError> {
    capture(duration, |report| Ok(report_stacks(report).to_text())).await
}

/// The report's samples as collapsed stacks: the thread name (or id) as the root frame, then
/// the call chain from the outermost caller to the sampled function, inlined callees after
/// their caller (the same order `pprof`'s own flamegraph uses).
fn report_stacks(report: &pprof::Report) -> Stacks {
    let mut stacks = Stacks::new();
    let mut line = String::new();
    for (frames, &count) in &report.data {
        let Ok(count) = u64::try_from(count) else {
            continue;
        };
        line.clear();
        push_frame(&mut line, &frames.thread_name_or_id());
        for frame in frames.frames.iter().rev() {
            for symbol in frame.iter().rev() {
                line.push(';');
                push_frame(&mut line, &symbol.name());
            }
        }
        stacks.add(&line, count);
    }
    stacks
}

fn gzip(data: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut enc = GzEncoder::new(Vec::with_capacity(data.len() / 4), Compression::default());
    enc.write_all(data)?;
    enc.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_defaults_and_clamps() {
        assert_eq!(duration_from_query(None), Duration::from_secs(30));
        assert_eq!(duration_from_query(Some(0)), Duration::from_secs(30));
        assert_eq!(duration_from_query(Some(1)), Duration::from_secs(1));
        assert_eq!(duration_from_query(Some(42)), Duration::from_secs(42));
        assert_eq!(duration_from_query(Some(10_000)), Duration::from_secs(300));
    }
}
