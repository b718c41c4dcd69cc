//! Per-domain pacing and the domain's last-crawled time in the second store.
//!
//! A domain is owned by exactly one child (the dispatcher gives it to one
//! supervisor, the supervisor to one child), so the pace is decided here in
//! memory. The last-crawled time (and the delay in force) is read when the
//! child takes the domain (first use, or after it was idle: another node
//! may have crawled it meanwhile) and written back in batches, never once
//! per request on the hot path.
//!
//! How often it is written: once soon after the child takes a domain or
//! its delay changes (so the delay, a robots.txt `Crawl-delay` among them,
//! is in the store for whoever takes the domain next), then at most every
//! [`RECORD_EVERY`], and all of it when the child stops. Written every
//! second, as it was, the record cost the store one statement per page at
//! the default pace of one request a second, as much as the page itself.
//! A stored time can then be up to [`RECORD_EVERY`] old, so a child that
//! takes a domain with a stored record waits a whole delay from the moment
//! it takes it, as well as from the stored time ([`Pace::resume`]): the
//! node it took the domain from made its last request before that, so the
//! gap holds however old the record is.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

// tokio's clock, so tests can run pacing on paused time.
use tokio::time::Instant;

use link::protocol::now_ms;
use shared::timing::{Op, TimingLog};
use store::docs::{DomainDoc, DomainPace};
use store::point_reads::PointReads;
use store::write::NotWritten;
use store::{self, Stores};

const FLUSH_EVERY: Duration = Duration::from_secs(1);
/// Longest a domain's written record may lag while the child crawls it.
const RECORD_EVERY: Duration = Duration::from_secs(30);
/// The longest any one wait may be: a delay from a flag, a stored
/// last-crawled time in the future (a clock step, a bad record) or a rate
/// ceiling near zero is clamped to it, so instant arithmetic cannot overflow.
const MAX_WAIT: Duration = Duration::from_secs(3600);

/// When the next request to one domain may start.
pub(crate) struct Pace {
    next_allowed: Instant,
    /// Optional requests-per-second ceiling (token bucket, burst of one).
    bucket: Option<Bucket>,
}

struct Bucket {
    per_sec: f64,
    tokens: f64,
    at: Instant,
}

impl Bucket {
    fn refill(&mut self, now: Instant) {
        let gained = now.duration_since(self.at).as_secs_f64() * self.per_sec;
        self.tokens = (self.tokens + gained).min(1.0);
        self.at = now;
    }

    /// When the next token is there.
    fn ready_at(&mut self, now: Instant) -> Instant {
        self.refill(now);
        if self.tokens >= 1.0 {
            now
        } else {
            let wait = Duration::try_from_secs_f64((1.0 - self.tokens) / self.per_sec).unwrap_or(MAX_WAIT);
            now + wait.min(MAX_WAIT)
        }
    }
}

impl Pace {
    /// A pace that continues from a stored last-crawled time: the next
    /// request waits `delay` from it, and `delay` from now too (the stored
    /// time may be up to [`RECORD_EVERY`] behind the last request the
    /// domain's previous owner made; see the module doc). A domain with no
    /// record was crawled by no one (or by a child that died within a
    /// second of taking it): no wait. `max_rps` > 0 also caps the domain's
    /// request rate.
    pub(crate) fn resume(last_crawled_ms: Option<u64>, delay: Duration, max_rps: f64) -> Pace {
        let now = Instant::now();
        let next_allowed = match last_crawled_ms {
            Some(last) => {
                // From the store: clamped, a wild value must not overflow.
                let due = last.saturating_add(delay.as_millis() as u64);
                let stored = Duration::from_millis(due.saturating_sub(now_ms()));
                now + stored.max(delay).min(MAX_WAIT)
            }
            None => now,
        };
        let bucket = (max_rps > 0.0 && max_rps.is_finite()).then_some(Bucket {
            per_sec: max_rps,
            tokens: 1.0,
            at: now,
        });
        Pace { next_allowed, bucket }
    }

    /// Sleeps until the domain may be asked again, takes its token, and
    /// keeps the next start at least `delay` after this one (so parallel
    /// connections to one domain, when allowed, still start spaced out).
    pub(crate) async fn wait(&mut self, delay: Duration, timing: &TimingLog, domain: &str) {
        let now = Instant::now();
        let mut until = self.next_allowed;
        if let Some(b) = &mut self.bucket {
            until = until.max(b.ready_at(now));
        }
        if until > now {
            tokio::time::sleep_until(until).await;
            timing.record(Op::PolitenessWait, now.elapsed(), "waited", Some(domain), None);
        }
        let start = Instant::now();
        if let Some(b) = &mut self.bucket {
            b.refill(start);
            b.tokens -= 1.0;
        }
        self.next_allowed = self.next_allowed.max(start + delay.min(MAX_WAIT));
    }

    /// When the next request may start.
    pub(crate) fn next_allowed(&self) -> Instant {
        self.next_allowed
    }

    /// Keeps `other`'s next start when it is later (a pace read again from
    /// the store must not forget what this child did itself).
    pub(crate) fn keep_later(&mut self, other: &Pace) {
        self.next_allowed = self.next_allowed.max(other.next_allowed);
    }

    /// Called when a request has completed: the gap is measured from the
    /// end of one response to the start of the next request, so the server
    /// sees at least `delay` between two requests however long each took.
    pub(crate) fn request_done(&mut self, delay: Duration) {
        self.next_allowed = self.next_allowed.max(Instant::now() + delay.min(MAX_WAIT));
    }

    /// Pushes the next request at least `wait` into the future (429/503).
    pub(crate) fn hold(&mut self, wait: Duration) {
        self.next_allowed = self.next_allowed.max(Instant::now() + wait.min(MAX_WAIT));
    }
}

/// Last-crawled times waiting to be written, and their writer.
#[derive(Clone)]
pub(crate) struct DomainTimes {
    stores: Stores,
    /// The stored records, read in batches (see `store::point_reads`).
    reads: PointReads<DomainDoc>,
    records: Arc<Mutex<Records>>,
}

/// The times not written yet, and when each domain's was last written.
#[derive(Default)]
struct Records {
    /// Domain → (last crawled, Unix ms; delay, ms).
    dirty: HashMap<String, (u64, u64)>,
    /// Domain → (when written, the delay written), for the domains written
    /// in the last [`RECORD_EVERY`] (older ones are dropped: a domain's
    /// next record is due then anyway).
    written: HashMap<String, (Instant, u64)>,
}

impl Records {
    /// Takes the records to write now: every one with `all`; otherwise
    /// those of domains not written in the last [`RECORD_EVERY`], or
    /// whose delay changed since.
    fn due(&mut self, now: Instant, all: bool) -> Vec<(String, (u64, u64))> {
        self.written
            .retain(|_, (at, _)| now.saturating_duration_since(*at) < RECORD_EVERY);
        let written = &self.written;
        let due: Vec<String> = self
            .dirty
            .iter()
            .filter(|(domain, (_, delay))| all || written.get(*domain).is_none_or(|(_, d)| d != delay))
            .map(|(domain, _)| domain.clone())
            .collect();
        due.into_iter()
            .filter_map(|d| self.dirty.remove_entry(&d))
            .collect()
    }

    /// `batch` was written at `now`.
    fn wrote(&mut self, batch: &[(String, (u64, u64))], now: Instant) {
        for (domain, (_, delay)) in batch {
            self.written.insert(domain.clone(), (now, *delay));
        }
    }
}

impl DomainTimes {
    /// Needs a Tokio runtime: it starts the task that reads records.
    pub(crate) fn new(stores: Stores) -> Self {
        DomainTimes {
            reads: PointReads::spawn(stores.domains()),
            stores,
            records: Arc::default(),
        }
    }

    /// The stored last-crawled time of `domain` (Unix ms) and the delay
    /// that was in force then, if the domain was crawled before.
    pub(crate) async fn load(&self, domain: &str) -> Option<(u64, Duration)> {
        // A store that fails or does not answer costs the stored pace, not
        // the domain: it is crawled with the configured delay from now.
        let pace = self.reads.get(domain).await.found()?.pace?;
        let last = pace.last_crawled_ms.max(0) as u64;
        let delay = pace.crawl_delay_ms.max(0) as u64;
        Some((last, Duration::from_millis(delay)))
    }

    /// Notes a request to `domain` just done under `delay`, to be written
    /// when its record is due (see the module doc). Not for a domain
    /// crawled without a delay: its
    /// stored time could make no owner wait (the next request may start
    /// at once), so writing it would be a store write per domain and
    /// second for nothing (on the realistic bench, with `--min-delay-ms
    /// 0`, 0.14 to 0.22 upserts a page). A time stored while it had a
    /// delay stays, and can only make a later owner wait longer.
    pub(crate) fn touch(&self, domain: &str, delay: Duration) {
        if delay.is_zero() {
            return;
        }
        if let Ok(mut r) = self.records.lock() {
            r.dirty
                .insert(domain.to_string(), (now_ms(), delay.as_millis() as u64));
        }
    }

    /// Writes the records due every second until the process ends.
    pub(crate) fn spawn_flusher(&self, timing: TimingLog) {
        let me = self.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(FLUSH_EVERY).await;
                me.write_due(&timing, false).await;
            }
        });
    }

    /// Writes every time not written yet (the child stops).
    pub(crate) async fn flush(&self, timing: &TimingLog) {
        self.write_due(timing, true).await;
    }

    async fn write_due(&self, timing: &TimingLog, all: bool) {
        let batch = match self.records.lock() {
            Ok(mut r) => r.due(Instant::now(), all),
            Err(_) => return,
        };
        if batch.is_empty() {
            return;
        }
        let (n, start) = (batch.len(), Instant::now());
        let mut failed = 0;
        for chunk in batch.chunks(MAX_UPDATES_PER_COMMAND) {
            let written = self.write(chunk).await;
            let Ok(mut r) = self.records.lock() else {
                continue;
            };
            if written {
                r.wrote(chunk, Instant::now());
            } else {
                failed += chunk.len();
                // Put them back (unless a newer time arrived) so the next flush retries.
                for (domain, time) in chunk {
                    r.dirty.entry(domain.clone()).or_insert(*time);
                }
            }
        }
        let outcome = if failed == 0 { "ok" } else { "error" };
        timing.record_batch(Op::DomainFlush, start.elapsed(), outcome, n);
    }

    /// Upserts the times of `chunk` in one `update` command (several
    /// statements): a command per domain costs the store several times
    /// the CPU of a statement, and on mongod it is one round trip and one
    /// journal commit instead of one per domain. Whether all were written.
    async fn write(&self, chunk: &[(String, (u64, u64))]) -> bool {
        let updates: Vec<bson::Document> = chunk
            .iter()
            .filter_map(|(domain, (last, delay))| {
                let pace = DomainPace {
                    last_crawled_ms: *last as i64,
                    crawl_delay_ms: *delay as i64,
                };
                store::write::upsert_statement(domain, &pace)
            })
            .collect();
        match store::write::update_once(&self.stores.domains(), updates).await {
            Ok(()) => true,
            // Refused for good: not put back, or every flush would send it again.
            Err(NotWritten::Refused(why)) => {
                tracing::warn!(why, "last-crawled times refused by the store; not kept");
                true
            }
            Err(NotWritten::Unavailable) => false,
        }
    }
}

/// Statements per `update` command: far below MongoDB's 100,000 and 16 MiB.
const MAX_UPDATES_PER_COMMAND: usize = 1000;

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn only_domains_with_a_delay_have_a_time_to_write() {
        // Never connects: the driver connects on first use.
        let args = store::StoreArgs {
            mongo_uri: "mongodb://127.0.0.1:9".into(),
            db: "t".into(),
            robots_uri: None,
            robots_db: "t".into(),
        };
        let times = DomainTimes::new(Stores::connect(&args, "test", Default::default()).await.unwrap());
        times.touch("a.test", Duration::ZERO);
        times.touch("b.test", Duration::from_millis(500));
        let records = times.records.lock().unwrap();
        assert_eq!(records.dirty.keys().collect::<Vec<_>>(), vec!["b.test"]);
    }

    #[test]
    fn resumed_pace_honours_the_stored_time_and_waits_a_delay_from_now() {
        let fresh = Pace::resume(None, Duration::from_secs(5), 0.0);
        assert!(fresh.next_allowed <= Instant::now());
        let recent = Pace::resume(Some(now_ms() + 3000), Duration::from_secs(5), 0.0);
        assert!(recent.next_allowed > Instant::now() + Duration::from_secs(7));
        // However old the record (it may lag the owner's last request).
        let old = Pace::resume(Some(now_ms() - 60_000), Duration::from_secs(5), 0.0);
        assert!(old.next_allowed > Instant::now() + Duration::from_secs(4));
        let none = Pace::resume(Some(now_ms() - 60_000), Duration::ZERO, 0.0);
        assert!(none.next_allowed <= Instant::now());
    }

    #[test]
    fn a_domain_is_written_soon_then_every_thirty_seconds_or_when_its_delay_changes() {
        let t0 = Instant::now();
        let mut r = Records::default();
        let touch = |r: &mut Records, d: &str, delay: u64| {
            r.dirty.insert(d.to_string(), (now_ms(), delay));
        };
        touch(&mut r, "a", 1000);
        let first = r.due(t0, false);
        assert_eq!(first.len(), 1);
        r.wrote(&first, t0);
        // Crawled again: not written again within the period...
        touch(&mut r, "a", 1000);
        assert!(r.due(t0 + Duration::from_secs(10), false).is_empty());
        // ...unless its delay changed (a Crawl-delay learnt), or all is asked.
        touch(&mut r, "a", 5000);
        assert_eq!(r.due(t0 + Duration::from_secs(11), false).len(), 1);
        touch(&mut r, "a", 1000);
        assert_eq!(r.due(t0 + Duration::from_secs(12), true).len(), 1);
        // And once the period is over.
        r.wrote(&[("a".to_string(), (0, 1000))], t0 + Duration::from_secs(12));
        touch(&mut r, "a", 1000);
        assert!(r.due(t0 + Duration::from_secs(41), false).is_empty());
        assert_eq!(r.due(t0 + Duration::from_secs(42), false).len(), 1);
        assert!(r.dirty.is_empty());
    }

    #[tokio::test]
    async fn the_rate_ceiling_spaces_request_starts() {
        let timing = TimingLog::disabled();
        let mut pace = Pace::resume(None, Duration::ZERO, 50.0);
        let start = Instant::now();
        for _ in 0..5 {
            pace.wait(Duration::ZERO, &timing, "a.test").await;
            pace.request_done(Duration::ZERO);
        }
        // One token at once, then one every 20 ms.
        let took = start.elapsed();
        assert!(took >= Duration::from_millis(79), "{took:?}");
    }

    #[tokio::test]
    async fn parallel_requests_still_start_a_delay_apart() {
        // Two requests in flight at once (no request_done in between):
        // the second starts a delay after the first, the third a delay after
        // the second.
        let timing = TimingLog::disabled();
        let mut pace = Pace::resume(None, Duration::ZERO, 0.0);
        let delay = Duration::from_millis(30);
        let start = Instant::now();
        for _ in 0..3 {
            pace.wait(delay, &timing, "a.test").await;
        }
        let took = start.elapsed();
        assert!(took >= Duration::from_millis(59), "{took:?}");
        // A response ending now pushes the next start a delay past it.
        pace.request_done(delay);
        assert!(pace.next_allowed >= Instant::now() + Duration::from_millis(29));
    }
}
