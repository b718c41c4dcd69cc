//! Fencing: a node may start a request only while its right to crawl its
//! domains is fresh, and that right runs out on the node before the
//! dispatcher can give the domains to another node.
//!
//! The rule, as in leases of Gray and Cheriton (and Chubby's): the
//! dispatcher gives a supervisor up once it has heard nothing from it for
//! `T` (`--heartbeat-timeout-secs`), measured from when a message
//! *arrived*. The supervisor numbers its messages; the dispatcher
//! acknowledges the highest number it has read (`Ack`). A supervisor whose
//! message sent at `s` is acknowledged knows the dispatcher heard it at
//! some `r >= s`, so it cannot be given up before `r + T >= s + T`. Its
//! right runs to `s + grant(T)` on its own clock, with
//! `grant(T) = T - margin(T)`. Message delay only shortens the right; the
//! margin covers:
//! - clock rates: the two clocks would have to differ in rate by
//!   `margin / T` (a fifth) to matter; quartz clocks differ by parts per
//!   million;
//! - requests started just before the right ran out, which still run: the
//!   next node's first request to the domain comes at least `margin`
//!   later, more than any Crawl-delay up to `margin`, and the new owner
//!   also paces from the domain's stored last-crawled time;
//! - the children's copy of the right, which only ever lags (it is an
//!   instant on the host's monotonic clock, shared by all processes, sent
//!   down a pipe: a child holds an older, earlier instant, never a later
//!   one).
//!
//! A cut-off node therefore stops starting requests `margin` before the
//! dispatcher hands its domains on; the URLs it holds come back as
//! [`shared::failure::FailureKind::Fenced`] results, not fetched, and what it
//! did fetch waits, unacknowledged, until it is back.
//!
//! The dispatcher measures `T` on a monotonic clock too
//! ([`steady_unix_ms`]): a wall-clock step must not make it give a node up
//! early.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// The margin between a node's right and the dispatcher's timeout `T`:
/// a quarter of `T`, at least 1 s, but at most half of `T`.
pub fn margin(timeout: Duration) -> Duration {
    (timeout / 4).max(Duration::from_secs(1)).min(timeout / 2)
}

/// How long an acknowledged message keeps a node's right fresh, from when
/// it was sent: `T - margin(T)`.
pub fn grant(timeout: Duration) -> Duration {
    timeout.saturating_sub(margin(timeout))
}

/// How often a supervisor sends a heartbeat: often enough that its right,
/// renewed by each acknowledged one, never runs out on a healthy link
/// (at least four beats per grant), and at most once a second.
pub fn beat_every(timeout: Duration) -> Duration {
    (grant(timeout) / 4)
        .min(Duration::from_secs(1))
        .max(Duration::from_millis(100))
}

/// Milliseconds on the host's monotonic clock (`CLOCK_MONOTONIC`): the
/// same clock in every process of the host, never stepped. What a
/// supervisor's right and its children's copy of it are measured on.
pub fn mono_ms() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own; CLOCK_MONOTONIC
    // exists on every Linux.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    if rc != 0 {
        return 0;
    }
    (ts.tv_sec.max(0) as u64)
        .saturating_mul(1000)
        .saturating_add(ts.tv_nsec.max(0) as u64 / 1_000_000)
}

/// The monotonic-clock milliseconds of a past [`Instant`] of this process.
pub fn mono_ms_at(at: Instant) -> u64 {
    mono_ms().saturating_sub(at.elapsed().as_millis() as u64)
}

/// Unix milliseconds that never step: the wall clock read once, at the
/// first call, then advanced by the monotonic clock. For the dispatcher's
/// heartbeat timeout, which a wall-clock step must not cut short.
pub fn steady_unix_ms() -> u64 {
    static START: OnceLock<(u64, Instant)> = OnceLock::new();
    let (wall, at) = START.get_or_init(|| (crate::protocol::now_ms(), Instant::now()));
    wall.saturating_add(at.elapsed().as_millis() as u64)
}

/// Until when (on [`mono_ms`]) requests may start; shared by a child's
/// tasks. Closed (0) until the supervisor first opens it.
#[derive(Clone, Debug, Default)]
pub struct Fence {
    until_ms: Arc<AtomicU64>,
}

impl Fence {
    /// Moves the end of the right (forward or back: the supervisor's word
    /// is the latest one).
    pub fn set(&self, until_mono_ms: u64) {
        self.until_ms.store(until_mono_ms, Ordering::Release);
    }

    pub fn until(&self) -> u64 {
        self.until_ms.load(Ordering::Acquire)
    }

    /// Whether a request may start now.
    pub fn allows(&self) -> bool {
        mono_ms() < self.until()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_right_ends_a_margin_before_the_timeout() {
        let s = Duration::from_secs;
        assert_eq!(
            (grant(s(15)), margin(s(15))),
            (Duration::from_millis(11_250), Duration::from_millis(3_750))
        );
        assert_eq!(grant(s(10)), Duration::from_millis(7_500));
        // Short timeouts (tests): at least a second of margin, at most half.
        assert_eq!(grant(s(3)), s(2));
        assert_eq!(grant(s(1)), Duration::from_millis(500));
        for t in [1, 2, 3, 10, 15, 60, 600] {
            let t = s(t);
            assert!(grant(t) < t && grant(t) >= t / 2);
            // Four beats or more per grant: a healthy link never lets it lapse.
            assert!(beat_every(t) * 4 <= grant(t), "{t:?}");
        }
    }

    #[test]
    fn the_fence_is_closed_until_opened_and_closes_again() {
        let f = Fence::default();
        assert!(!f.allows());
        f.set(mono_ms() + 60_000);
        assert!(f.clone().allows());
        f.set(mono_ms().saturating_sub(1));
        assert!(!f.allows());
    }

    #[test]
    fn clocks_agree() {
        let at = Instant::now();
        let m = mono_ms_at(at);
        assert!(mono_ms() >= m);
        let a = steady_unix_ms();
        assert!(a.abs_diff(crate::protocol::now_ms()) < 1000);
        assert!(steady_unix_ms() >= a);
    }
}
