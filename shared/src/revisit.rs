//! When a URL is due again: the revisit rule a crawl runs by, shared by
//! the dispatcher (which reads what is due) and the child (which sets the
//! next due time from what it found).
//!
//! Two modes. With a fixed interval every page is due again that long
//! after it was last asked for. With the adaptive one (Nutch's
//! `AdaptiveFetchSchedule` shape) each URL has its own interval, starting
//! at `after`: a visit that found the content changed shortens it by a
//! fifth, one that found it unchanged lengthens it by two fifths, always
//! within `[min, max]`. Changing pages are then asked for more often and
//! static ones less, which is where a revisit's requests are worth
//! spending; the asymmetry (longer steps up than down) keeps a page that
//! changes now and then from being asked for at its fastest rate.
//!
//! "Changed" is the payload's SHA-1 (taken at fetch time), not the
//! server's word alone: a 304 is unchanged, and so is a 200 whose body
//! has the digest stored before (a server that ignores conditional
//! requests, or whose validators change with every answer).

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// A crawl's revisit settings (`--revisit-after` and the flags beside it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RevisitPolicy {
    /// The interval a page starts with (and keeps, without `adaptive`).
    pub after_ms: u64,
    pub adaptive: bool,
    /// The adaptive interval's bounds (`min_ms <= after_ms <= max_ms`).
    pub min_ms: u64,
    pub max_ms: u64,
    /// Record a capture for a revisit that found the content unchanged
    /// (a 304, or the same payload): the WARC's `revisit` records. Without
    /// it only changes are kept, and an unchanged visit only moves the
    /// page's due time.
    pub record_unchanged: bool,
}

impl RevisitPolicy {
    /// A fixed interval, every visit recorded.
    pub fn every(after: Duration) -> RevisitPolicy {
        let ms = u64::try_from(after.as_millis()).unwrap_or(u64::MAX);
        RevisitPolicy {
            after_ms: ms,
            adaptive: false,
            min_ms: ms,
            max_ms: ms,
            record_unchanged: true,
        }
    }

    /// Checks the settings a person gave: an interval of at least a second
    /// (less would ask a server for the same page continuously), and the
    /// bounds around it.
    pub fn check(&self) -> Result<(), String> {
        if self.after_ms < 1000 {
            return Err("--revisit-after must be at least 1s".into());
        }
        if self.adaptive && !(self.min_ms <= self.after_ms && self.after_ms <= self.max_ms) {
            return Err(format!(
                "--revisit-min ({} ms) <= --revisit-after ({} ms) <= --revisit-max ({} ms) does not hold",
                self.min_ms, self.after_ms, self.max_ms
            ));
        }
        if self.adaptive && self.min_ms < 1000 {
            return Err("--revisit-min must be at least 1s".into());
        }
        Ok(())
    }

    /// The interval after a visit that found the content `changed`, from
    /// the interval the URL had (0: none yet, the first visit).
    pub fn next_interval_ms(&self, interval_ms: u64, changed: bool) -> u64 {
        if !self.adaptive || interval_ms == 0 {
            return self.after_ms;
        }
        let next = if changed {
            interval_ms.saturating_sub(interval_ms / 5)
        } else {
            interval_ms.saturating_add(interval_ms.saturating_mul(2) / 5)
        };
        next.clamp(self.min_ms, self.max_ms.max(self.min_ms))
    }
}

/// `90s`, `30m`, `12h`, `2d` or plain seconds: how durations are written
/// on every command line of the crawler.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let bad = || format!("{s:?} is not a duration (e.g. 90s, 30m, 12h, 2d)");
    let (num, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()));
    let n: u64 = num.parse().map_err(|_| bad())?;
    let secs = match unit {
        "" | "s" => Some(n),
        "m" => n.checked_mul(60),
        "h" => n.checked_mul(3600),
        "d" => n.checked_mul(86_400),
        _ => None,
    };
    secs.map(Duration::from_secs).ok_or_else(bad)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn adaptive() -> RevisitPolicy {
        RevisitPolicy {
            after_ms: 10_000,
            adaptive: true,
            min_ms: 5_000,
            max_ms: 20_000,
            record_unchanged: true,
        }
    }

    #[test]
    fn a_fixed_interval_never_moves() {
        let p = RevisitPolicy::every(Duration::from_secs(60));
        assert_eq!(p.next_interval_ms(0, true), 60_000);
        assert_eq!(p.next_interval_ms(60_000, true), 60_000);
        assert_eq!(p.next_interval_ms(60_000, false), 60_000);
        assert!(p.check().is_ok());
    }

    #[test]
    fn the_adaptive_interval_shrinks_on_change_and_grows_when_unchanged_within_bounds() {
        let p = adaptive();
        assert_eq!(p.next_interval_ms(0, false), 10_000);
        assert_eq!(p.next_interval_ms(10_000, true), 8_000);
        assert_eq!(p.next_interval_ms(10_000, false), 14_000);
        assert_eq!(p.next_interval_ms(14_000, false), 19_600);
        assert_eq!(p.next_interval_ms(19_600, false), 20_000);
        assert_eq!(p.next_interval_ms(5_500, true), 5_000);
        assert_eq!(p.next_interval_ms(u64::MAX, false), 20_000);
    }

    #[test]
    fn settings_that_would_hammer_a_server_or_contradict_are_refused() {
        assert!(RevisitPolicy::every(Duration::from_millis(500)).check().is_err());
        let p = RevisitPolicy {
            min_ms: 30_000,
            ..adaptive()
        };
        assert!(p.check().is_err());
        let p = RevisitPolicy {
            min_ms: 10,
            after_ms: 1000,
            ..adaptive()
        };
        assert!(p.check().is_err());
    }

    #[test]
    fn durations_read_as_people_write_them() {
        assert_eq!(parse_duration("90"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("2d"), Ok(Duration::from_secs(172_800)));
        assert!(parse_duration("2w").is_err());
        assert!(parse_duration("").is_err());
        assert!(parse_duration("99999999999999999999d").is_err());
    }
}
