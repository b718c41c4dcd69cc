//! The store's work, counted by the MongoDB driver's command monitoring:
//! how many commands (each one round trip) every process sends, on which
//! collection, and how many documents each touches (inserted; matched by
//! an update or deleted, as the reply says; returned by `find`, `getMore`
//! and `aggregate`).
//!
//! Why from the driver and not at our call sites: a call site sees one
//! `insert_many`, the wire may carry it as several commands (16 MiB and
//! 100,000 documents a message), retries and cursors' `getMore`s are
//! invisible to it, and a call site added later is counted without anyone
//! remembering to. The price is the driver's: with a handler installed it
//! copies each command into a `Document` (about 13 µs per 5 KB page in an
//! insert batch, measured on this machine; see `scripts/scale-measurements.md`),
//! so the page inserts of a crawler child go through a client without the
//! handler and are counted by their caller ([`Sent`]).
//!
//! Collections are counted by kind (`pages`, `frontier`, ...: the crawl's
//! name is cut off, so labels stay few), commands by name (the rare ones
//! as `other`). The totals go to `/metrics`
//! (`crawler_store_commands_total`, `crawler_store_documents_total`; the
//! time commands take is in the per-operation histograms), to every timing-log gauge line
//! ([`gauge_values`], so `scripts/oprates.py` turns them into rates per
//! node and over time) and to the `store work` line each process logs as
//! it ends ([`log_totals`], which `scripts/bench.py` adds up per page).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

use bson::{Bson, Document};
use mongodb::event::command::CommandEvent;
use mongodb::event::EventHandler;

/// Collection kinds: the crawl's own (`<crawl>__<kind>`), the second
/// store's, anything else, and commands on no collection (handshakes).
const COLLECTIONS: [&str; 15] = [
    "pages",
    "segments",
    "outcomes",
    "progress",
    "urls",
    "frontier",
    "seeds",
    "body_dicts",
    "captures",
    "robots_txt",
    "control",
    "robots",
    "domains",
    "other",
    "none",
];
const OTHER_COLLECTION: usize = 13;
const NO_COLLECTION: usize = 14;

const COMMANDS: [&str; 8] = [
    "insert",
    "update",
    "delete",
    "find",
    "getMore",
    "aggregate",
    "count",
    "other",
];
const OTHER_COMMAND: usize = 7;

const CELLS: usize = COLLECTIONS.len() * COMMANDS.len();

/// Most commands awaiting their reply that are remembered (to count the
/// documents a read returns): a reply that never comes must not grow the
/// map for ever.
const MAX_PENDING: usize = 4096;

/// One process's counts, one cell per (collection, command).
struct Tally {
    commands: [AtomicU64; CELLS],
    documents: [AtomicU64; CELLS],
    micros: [AtomicU64; CELLS],
    /// Reads awaiting their reply: request id → cell.
    pending: Mutex<HashMap<i32, usize>>,
}

fn tally() -> &'static Tally {
    static TALLY: OnceLock<Tally> = OnceLock::new();
    TALLY.get_or_init(|| Tally {
        commands: std::array::from_fn(|_| AtomicU64::new(0)),
        documents: std::array::from_fn(|_| AtomicU64::new(0)),
        micros: std::array::from_fn(|_| AtomicU64::new(0)),
        pending: Mutex::new(HashMap::new()),
    })
}

/// The handler every client of the crawl installs (`store::client`);
/// none when `CRAWLER_STORE_MONITORING=off` (to measure what the
/// monitoring itself costs: the figures then stay at zero).
pub fn handler() -> Option<EventHandler<CommandEvent>> {
    counting().then(|| EventHandler::callback(|event| observe(&event)))
}

/// Whether the store's work is counted at all (`CRAWLER_STORE_MONITORING`
/// is not `off`).
fn counting() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var("CRAWLER_STORE_MONITORING").map_or(true, |v| v != "off"))
}

/// A command sent through a client the driver does not monitor, counted
/// by its caller as [`observe`] counts the others: one command on
/// `collection` (its full name) carrying `documents` documents, from
/// [`Sent::command`] until [`Sent::answered`].
///
/// Why such a client: with a handler installed the driver copies every
/// command into a `Document` for its event, page bodies and all, which
/// cost a crawler child about 6 % of its CPU (13 µs a page, measured on
/// the realistic bench). The bulk inserts of the hot path go through a
/// client without one (`Stores::pages_for_inserts`); everything else
/// stays monitored, so a call site added later is still counted.
#[derive(Debug)]
pub struct Sent {
    cell: usize,
    at: std::time::Instant,
}

impl Sent {
    /// Counts the command as sent (its documents are written ones, as an
    /// insert's are).
    pub fn command(collection: &str, command: &str, documents: u64) -> Sent {
        let cell = cell_of(command, Some(collection));
        if counting() {
            add(&tally().commands, cell, 1);
            add(&tally().documents, cell, documents);
            crate::metric::STORE_COMMANDS
                .at([collection_of(cell), command_of(cell)])
                .increment(1);
            if documents > 0 {
                crate::metric::STORE_DOCUMENTS
                    .at([collection_of(cell), command_of(cell)])
                    .increment(documents);
            }
        }
        Sent {
            cell,
            at: std::time::Instant::now(),
        }
    }

    /// Counts the time it took, answered or failed.
    pub fn answered(self) {
        if counting() {
            finished(self.cell, self.at.elapsed());
        }
    }
}

fn observe(event: &CommandEvent) {
    let t = tally();
    match event {
        CommandEvent::Started(e) => {
            let cell = cell(&e.command_name, &e.command);
            add(&t.commands, cell, 1);
            let written = written_documents(&e.command_name, &e.command);
            add(&t.documents, cell, written);
            crate::metric::STORE_COMMANDS
                .at([collection_of(cell), command_of(cell)])
                .increment(1);
            if written > 0 {
                crate::metric::STORE_DOCUMENTS
                    .at([collection_of(cell), command_of(cell)])
                    .increment(written);
            }
            if let Ok(mut pending) = t.pending.lock() {
                if pending.len() < MAX_PENDING {
                    pending.insert(e.request_id, cell);
                }
            }
        }
        CommandEvent::Succeeded(e) => {
            let Some(cell) = t.pending.lock().ok().and_then(|mut p| p.remove(&e.request_id)) else {
                return;
            };
            finished(cell, e.duration);
            let read = returned_documents(command_of(cell), &e.reply);
            if read > 0 {
                add(&t.documents, cell, read);
                crate::metric::STORE_DOCUMENTS
                    .at([collection_of(cell), command_of(cell)])
                    .increment(read);
            }
        }
        CommandEvent::Failed(e) => {
            if let Some(cell) = t.pending.lock().ok().and_then(|mut p| p.remove(&e.request_id)) {
                finished(cell, e.duration);
            }
        }
        _ => {}
    }
}

fn finished(cell: usize, took: std::time::Duration) {
    let micros = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
    add(&tally().micros, cell, micros);
}

fn add(counts: &[AtomicU64; CELLS], cell: usize, n: u64) {
    if let Some(c) = counts.get(cell) {
        c.fetch_add(n, Ordering::Relaxed);
    }
}

fn collection_of(cell: usize) -> &'static str {
    COLLECTIONS.get(cell / COMMANDS.len()).copied().unwrap_or("other")
}

fn command_of(cell: usize) -> &'static str {
    COMMANDS.get(cell % COMMANDS.len()).copied().unwrap_or("other")
}

/// The cell of a command: its collection is the value of its first key
/// (`{insert: "<crawl>__pages", ...}`), or `collection` for `getMore`.
fn cell(name: &str, command: &Document) -> usize {
    let target = if name == "getMore" {
        command.get_str("collection").ok()
    } else {
        command.iter().next().and_then(|(_, v)| v.as_str())
    };
    cell_of(name, target)
}

/// The cell of command `name` on collection `target` (its full name).
fn cell_of(name: &str, target: Option<&str>) -> usize {
    let command_ix = COMMANDS.iter().position(|c| *c == name).unwrap_or(OTHER_COMMAND);
    let collection_ix = match target {
        None => NO_COLLECTION,
        Some(full) => {
            // `<crawl>__<kind>` for a crawl's own; the second store's by name.
            let kind = full.rsplit_once("__").map_or(full, |(_, kind)| kind);
            COLLECTIONS[..OTHER_COLLECTION]
                .iter()
                .position(|c| *c == kind)
                .unwrap_or(OTHER_COLLECTION)
        }
    };
    collection_ix * COMMANDS.len() + command_ix
}

/// Documents an insert carries (updates and deletes are counted from
/// their reply: one statement may match many documents).
fn written_documents(name: &str, command: &Document) -> u64 {
    match name {
        "insert" => command.get_array("documents").map_or(0, |a| a.len() as u64),
        _ => 0,
    }
}

/// Documents a reply says its `command` touched: matched (or upserted)
/// by an update, deleted, or returned by a read (`cursor.firstBatch` or
/// `nextBatch`). An insert's were counted as it was sent.
fn returned_documents(command: &str, reply: &Document) -> u64 {
    match command {
        "update" | "delete" => match reply.get("n") {
            Some(Bson::Int32(n)) => u64::try_from(*n).unwrap_or(0),
            Some(Bson::Int64(n)) => u64::try_from(*n).unwrap_or(0),
            _ => 0,
        },
        "find" | "getMore" | "aggregate" => {
            let Ok(cursor) = reply.get_document("cursor") else {
                return 0;
            };
            ["firstBatch", "nextBatch"]
                .iter()
                .find_map(|k| match cursor.get(k) {
                    Some(Bson::Array(a)) => Some(a.len() as u64),
                    _ => None,
                })
                .unwrap_or(0)
        }
        _ => 0,
    }
}

/// One (collection, command) cell's totals.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Work {
    pub collection: &'static str,
    pub command: &'static str,
    pub commands: u64,
    pub documents: u64,
    pub micros: u64,
}

/// This process's totals, cells with at least one command only.
pub fn totals() -> Vec<Work> {
    let t = tally();
    (0..CELLS)
        .filter_map(|cell| {
            let commands = t.commands[cell].load(Ordering::Relaxed);
            (commands > 0).then(|| Work {
                collection: collection_of(cell),
                command: command_of(cell),
                commands,
                documents: t.documents[cell].load(Ordering::Relaxed),
                micros: t.micros[cell].load(Ordering::Relaxed),
            })
        })
        .collect()
}

/// The totals as timing-log gauges, `store.<collection>.<command>.commands`
/// and `.documents` (cumulative: a reader takes differences for rates).
pub fn gauge_values() -> Vec<(String, f64)> {
    totals()
        .into_iter()
        .flat_map(|w| {
            let key = format!("store.{}.{}", w.collection, w.command);
            [
                (format!("{key}.commands"), w.commands as f64),
                (format!("{key}.documents"), w.documents as f64),
            ]
        })
        .collect()
}

/// The totals as one JSON object: `{"<collection>.<command>":
/// {"commands":N,"documents":N,"ms":N}, ...}`.
pub fn totals_json() -> serde_json::Value {
    let cells = totals().into_iter().map(|w| {
        (
            format!("{}.{}", w.collection, w.command),
            serde_json::json!({"commands": w.commands, "documents": w.documents, "ms": w.micros / 1000}),
        )
    });
    serde_json::Value::Object(cells.collect())
}

/// Logs the totals as the process ends: `store work {json}`, one line
/// (`scripts/bench.py` adds these up over every process of a run).
pub fn log_totals(role: &str) {
    tracing::info!(
        "store work {}",
        serde_json::json!({"role": role, "pid": std::process::id(), "work": totals_json()})
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    #[test]
    fn commands_are_placed_by_collection_kind_and_name() {
        let c = cell(
            "insert",
            &doc! {"insert": "news_2d2026__pages", "documents": [{}, {}]},
        );
        assert_eq!((collection_of(c), command_of(c)), ("pages", "insert"));
        let c = cell(
            "getMore",
            &doc! {"getMore": 7_i64, "collection": "crawl__frontier"},
        );
        assert_eq!((collection_of(c), command_of(c)), ("frontier", "getMore"));
        let c = cell("update", &doc! {"update": "domains", "updates": []});
        assert_eq!((collection_of(c), command_of(c)), ("domains", "update"));
        let c = cell("insert", &doc! {"insert": "crawl__robots_txt", "documents": [{}]});
        assert_eq!((collection_of(c), command_of(c)), ("robots_txt", "insert"));
        let c = cell("hello", &doc! {"hello": 1});
        assert_eq!((collection_of(c), command_of(c)), ("none", "other"));
        let c = cell("find", &doc! {"find": "somebody_elses"});
        assert_eq!((collection_of(c), command_of(c)), ("other", "find"));
    }

    #[test]
    fn commands_the_driver_does_not_see_are_counted_by_their_caller() {
        // A cell no other test of this process touches.
        let cell = |w: &Work| (w.collection, w.command) == ("control", "aggregate");
        let before = totals().into_iter().find(cell);
        Sent::command("crawl__control", "aggregate", 3).answered();
        let after = totals().into_iter().find(cell).unwrap();
        let (commands, documents) = before.map_or((0, 0), |w| (w.commands, w.documents));
        assert_eq!((after.commands, after.documents), (commands + 1, documents + 3));
    }

    #[test]
    fn documents_are_counted_as_written_and_as_returned() {
        let insert = doc! {"insert": "c__pages", "documents": [{}, {}, {}]};
        assert_eq!(written_documents("insert", &insert), 3);
        // An update statement may match many documents: its reply says.
        let update = doc! {"update": "c__frontier", "updates": [{"q": {}, "u": {}}]};
        assert_eq!(written_documents("update", &update), 0);
        assert_eq!(
            returned_documents("update", &doc! {"n": 160, "nModified": 160, "ok": 1}),
            160
        );
        assert_eq!(returned_documents("insert", &doc! {"n": 5, "ok": 1}), 0);
        let first = doc! {"cursor": {"id": 0_i64, "firstBatch": [{}, {}]}, "ok": 1};
        let next = doc! {"cursor": {"id": 0_i64, "nextBatch": [{}]}, "ok": 1};
        assert_eq!(
            (
                returned_documents("find", &first),
                returned_documents("getMore", &next)
            ),
            (2, 1)
        );
    }
}
