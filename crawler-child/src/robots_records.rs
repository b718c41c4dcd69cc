//! The robots store's side of robots.txt: each origin's record read in
//! batches and written in batches.
//!
//! A child that meets a new origin reads its record (one point read) and,
//! when it has to fetch the file, writes the rules back. At the start of a
//! crawl of 100,000 domains that was one `find_one` and one upsert per
//! origin, each its own command: 100,000 of each in a minute, which the
//! store could not take (most reads timed out after 30 s, and 27,000
//! "storing robots.txt timed out" in one run; issue 61). Reads now go
//! through `store::point_reads`, and records to write wait here for the
//! next flush, [`FLUSH_EVERY`], as one `update` command of up to
//! [`MAX_PER_COMMAND`] upserts. On nx-27017 an upsert on its own took
//! 0.82 ms, in a batch of 500 0.10 ms.
//!
//! A record that is never written costs one robots.txt fetch by whoever
//! meets the origin next, no more: so what waits is bounded
//! ([`MAX_PENDING_BYTES`]), and past that new records are not kept.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use shared::timing::{Op, TimingLog};
use store::docs::RobotsDoc;
use store::point_reads::{PointReads, Read};
use store::write::NotWritten;
use store::Stores;

const FLUSH_EVERY: Duration = Duration::from_millis(250);
/// Upserts per `update` command: records are at most 500 KiB of rules
/// (most are well under 1 KiB), so a command stays far below 16 MiB.
const MAX_PER_COMMAND: usize = 500;
/// Bytes of records kept for writing while the store lags or is away.
const MAX_PENDING_BYTES: usize = 64 << 20;
/// How many records of a command may be as large as the file's limit and
/// still fit 16 MiB: a command is cut at this many bytes of bodies.
const MAX_COMMAND_BYTES: usize = 8 << 20;

/// The robots store's records: read in batches, written in batches.
#[derive(Clone)]
pub(crate) struct RobotsRecords {
    stores: Stores,
    reads: PointReads<RobotsDoc>,
    pending: Arc<Mutex<Pending>>,
}

/// Records waiting for the next flush, newest per origin.
#[derive(Default)]
struct Pending {
    records: HashMap<String, RobotsDoc>,
    bytes: usize,
    /// Records not kept because [`MAX_PENDING_BYTES`] were waiting.
    dropped: u64,
}

impl Pending {
    /// Keeps `record` for `origin` unless it is over the bound; a record
    /// already waiting for `origin` is replaced (only the newest matters).
    fn keep(&mut self, origin: String, record: RobotsDoc) -> bool {
        let size = record_bytes(&origin, &record);
        let replaced = self.records.get(&origin).map_or(0, |r| record_bytes(&origin, r));
        if self.bytes - replaced + size > MAX_PENDING_BYTES {
            self.dropped = self.dropped.saturating_add(1);
            return false;
        }
        self.bytes = self.bytes - replaced + size;
        self.records.insert(origin, record);
        true
    }

    /// Takes what one command may carry.
    fn take_command(&mut self) -> Vec<(String, RobotsDoc)> {
        let mut out = Vec::new();
        let mut bytes = 0;
        let origins: Vec<String> = self.records.keys().take(MAX_PER_COMMAND).cloned().collect();
        for origin in origins {
            let Some(record) = self.records.remove(&origin) else {
                continue;
            };
            let size = record_bytes(&origin, &record);
            self.bytes -= size;
            bytes += size;
            out.push((origin, record));
            if bytes >= MAX_COMMAND_BYTES {
                break;
            }
        }
        out
    }

    /// Puts back what could not be written, unless a newer record for
    /// the origin came meanwhile or there is no room.
    fn put_back(&mut self, records: Vec<(String, RobotsDoc)>) {
        for (origin, record) in records {
            if !self.records.contains_key(&origin) {
                self.keep(origin, record);
            }
        }
    }
}

/// What a record weighs in memory and in a command, roughly.
fn record_bytes(origin: &str, record: &RobotsDoc) -> usize {
    origin.len() + record.body.len() + 64
}

impl RobotsRecords {
    /// Needs a Tokio runtime: it starts the reads' task. Call
    /// [`RobotsRecords::spawn_flusher`] to write.
    pub(crate) fn new(stores: Stores) -> RobotsRecords {
        RobotsRecords {
            reads: PointReads::spawn(stores.robots()),
            stores,
            pending: Arc::default(),
        }
    }

    /// The stored record of `origin`.
    pub(crate) async fn load(&self, origin: &str) -> Read<RobotsDoc> {
        self.reads.get(origin).await
    }

    /// Keeps `record` (its `origin` left empty: the key is the filter) for
    /// the next flush.
    pub(crate) fn keep(&self, origin: &str, record: RobotsDoc) {
        let Ok(mut pending) = self.pending.lock() else {
            return;
        };
        if !pending.keep(origin.to_string(), record) && pending.dropped.is_power_of_two() {
            tracing::warn!(
                dropped = pending.dropped,
                "robots.txt records not kept: the store is not taking them; their origins' files will be fetched again"
            );
        }
    }

    /// Writes the records kept every [`FLUSH_EVERY`] until the process ends.
    pub(crate) fn spawn_flusher(&self, timing: TimingLog) {
        let me = self.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(FLUSH_EVERY).await;
                me.flush(&timing).await;
            }
        });
    }

    /// Writes the records kept now, a command at a time; what the store
    /// does not take waits for the next flush.
    pub(crate) async fn flush(&self, timing: &TimingLog) {
        loop {
            let command = match self.pending.lock() {
                Ok(mut pending) => pending.take_command(),
                Err(_) => return,
            };
            if command.is_empty() {
                return;
            }
            let (n, start) = (command.len(), Instant::now());
            let statements = command
                .iter()
                .filter_map(|(origin, record)| store::write::upsert_statement(origin, record))
                .collect();
            let written = store::write::update_once(&self.stores.robots(), statements).await;
            let outcome = if written.is_ok() { "ok" } else { "error" };
            timing.record_batch(Op::RobotsFlush, start.elapsed(), outcome, n);
            match written {
                Ok(()) => {}
                Err(NotWritten::Refused(why)) => {
                    tracing::warn!(
                        why,
                        records = n,
                        "robots.txt records refused by the store; not kept"
                    )
                }
                Err(NotWritten::Unavailable) => {
                    tracing::warn!(
                        records = n,
                        "storing robots.txt records failed; kept for the next flush"
                    );
                    if let Ok(mut pending) = self.pending.lock() {
                        pending.put_back(command);
                    }
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(body: usize) -> RobotsDoc {
        RobotsDoc {
            origin: String::new(),
            status: 200,
            body: "x".repeat(body),
            fetched_at_ms: 1,
            expires_at_ms: None,
            tls_failure: None,
        }
    }

    #[test]
    fn the_newest_record_per_origin_waits_and_the_bytes_are_bounded() {
        let mut p = Pending::default();
        assert!(p.keep("http://a.test".into(), record(10)));
        assert!(p.keep("http://a.test".into(), record(20)));
        assert_eq!(p.records.len(), 1);
        assert_eq!(p.records["http://a.test"].body.len(), 20);
        assert_eq!(p.bytes, record_bytes("http://a.test", &record(20)));
        // Up to the bound, then refused and counted.
        let big = MAX_PENDING_BYTES / 3;
        assert!(p.keep("http://b.test".into(), record(big)));
        assert!(p.keep("http://c.test".into(), record(big)));
        assert!(!p.keep("http://d.test".into(), record(big)));
        assert_eq!(p.dropped, 1);
        // A command stops once it holds MAX_COMMAND_BYTES of bodies.
        let mut taken = Vec::new();
        loop {
            let command = p.take_command();
            if command.is_empty() {
                break;
            }
            assert!(command.len() <= 2, "{}", command.len());
            taken.extend(command);
        }
        assert_eq!(taken.len(), 3);
        assert_eq!(p.bytes, 0);
        // Put back unless a newer one came meanwhile.
        assert!(p.keep("http://a.test".into(), record(5)));
        p.put_back(taken);
        assert_eq!(p.records["http://a.test"].body.len(), 5);
        assert_eq!(p.records.len(), 3);
    }

    #[test]
    fn a_command_carries_at_most_its_count() {
        let mut p = Pending::default();
        for i in 0..(MAX_PER_COMMAND + 7) {
            p.keep(format!("http://s{i}.test"), record(1));
        }
        assert_eq!(p.take_command().len(), MAX_PER_COMMAND);
        assert_eq!(p.take_command().len(), 7);
        assert!(p.take_command().is_empty());
    }
}
