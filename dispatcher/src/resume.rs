//! Start-up on a stored frontier, reading only what dispatching needs.
//!
//! Dispatching needs much less than every stored URL: how many URLs each
//! domain has queued and where its queue starts (its window is then read
//! by `queue_reader` like any other), the next `seq` to hand out, and how
//! many URLs the crawl has admitted. Two `$group` aggregations and a count
//! answer that inside the store ([`summarize`]), one document per domain
//! with queued URLs and one for the whole frontier (a third, by state, only
//! for entries in no queue). Start-up then costs the store's grouping, not
//! a read of every URL, and no queued URL's string is held in memory.
//!
//! The seen-set (`crate::seen`) still needs a hash of every stored URL.
//! It is read in the background ([`scan_seen`], in pages along the
//! `{domain, seq, state}` index) while the crawl runs; until it is whole,
//! a URL whose hash is not known yet is unsure rather than new, so the
//! store's unique index decides, as for a hash collision
//! (`SeenSet::rebuilding`). No URL is crawled twice or dropped while the
//! scan runs; it only costs one `_id` query per write batch.
//!
//! Queued entries without a positive `seq` (older entries, or written by
//! hand) cannot be read by `seq`: those alone are read back, document by
//! document, and held in memory ([`read_back`]), so a few of them never
//! send the whole start-up down a full read.
//!
//! When every queued URL fits the frontier's memory budget, all of them
//! are read back that way too ([`StoredFrontier::read_whole`]), in one
//! query, rather than window by window: a store that answers a window read
//! by scanning the collection (nx-27017) would otherwise take one scan per
//! domain, and those reads crowd out the writer. On MongoDB a window read
//! is an index seek and the one query a collection scan: both cheap next
//! to the summary's own. (Figures: scripts/scale-measurements.md.)

use std::collections::HashSet;
use std::time::Duration;

use bson::{doc, RawBsonRef, RawDocument, RawDocumentBuf};
use futures::TryStreamExt;
use mongodb::Collection;
use shared::timing::TimingLog;
use store::docs::{FrontierDoc, PageDoc, UrlState};
use store::{self, READ_BATCH};

use crate::finished::LOOK_UP_BATCH;

mod seen_scan;

pub(crate) use seen_scan::{scan_seen, ScannedUrl, SeenScan, SeenScanTask, Stored};

/// A stored frontier entry as start-up reads it (`store::docs::FrontierDoc`
/// without its failure), borrowed from the raw document: a finished URL,
/// most of a big frontier, costs a hash and no allocation.
#[derive(Debug, serde::Deserialize)]
pub(crate) struct Resumed<'a> {
    #[serde(rename = "_id", borrow)]
    pub(crate) url: &'a str,
    #[serde(borrow)]
    pub(crate) domain: &'a str,
    pub(crate) depth: i32,
    pub(crate) state: UrlState,
    /// 0 in entries stored before queues lived in the store.
    #[serde(default)]
    pub(crate) seq: i64,
}

/// One domain's queue as the store holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StoredQueue {
    pub(crate) domain: String,
    /// Queued URLs.
    pub(crate) count: u64,
    /// The lowest `seq` among them. Not the highest: the frontier's
    /// highest ([`StoredFrontier::last_seq`]) bounds every domain's reads
    /// as well, and asking for it made the grouping on nx-27017 fetch
    /// every document (see [`Bounds`]).
    pub(crate) first_seq: i64,
}

/// What dispatching needs to know of a stored frontier.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct StoredFrontier {
    /// URLs crawled, failed or disallowed.
    pub(crate) finished: u64,
    pub(crate) queues: Vec<StoredQueue>,
    /// The highest `seq` stored (0 if none).
    pub(crate) last_seq: i64,
    /// Queued entries [`read_back`] reads one by one at start-up: those in
    /// no queue (no positive `seq`, or no domain), or, after
    /// [`StoredFrontier::read_whole`], all of them.
    pub(crate) read_back: u64,
    /// Whether `read_back` is every queued entry.
    pub(crate) whole: bool,
}

impl StoredFrontier {
    /// Queued URLs in `queues` (read window by window).
    pub(crate) fn queued(&self) -> u64 {
        self.queues.iter().fold(0u64, |n, q| n.saturating_add(q.count))
    }

    /// Every queued URL: in `queues`, and read back.
    pub(crate) fn all_queued(&self) -> u64 {
        self.queued().saturating_add(self.read_back)
    }

    /// Whether anything is stored at all.
    pub(crate) fn is_empty(&self) -> bool {
        self.finished == 0 && self.all_queued() == 0
    }

    /// Every queued entry is to be read back at start-up (they fit in
    /// memory): no queue is left to read window by window.
    pub(crate) fn read_whole(&mut self) {
        self.read_back = self.all_queued();
        self.queues.clear();
        self.whole = true;
    }
}

/// Longest one aggregation of [`summarize`] may take.
const SUMMARY_DEADLINE: Duration = Duration::from_secs(30 * 60);

/// A `$group` result: the key, a count and the `seq` range.
#[derive(Debug, PartialEq)]
struct Group<'a> {
    key: Option<&'a str>,
    count: u64,
    min: Option<i64>,
    max: Option<i64>,
}

fn int(v: Option<RawBsonRef<'_>>) -> Option<i64> {
    match v? {
        RawBsonRef::Int64(n) => Some(n),
        RawBsonRef::Int32(n) => Some(i64::from(n)),
        // `$sum` of many documents may come back as a double on some stores.
        RawBsonRef::Double(f) if f.fract() == 0.0 && f.abs() < 9.0e15 => Some(f as i64),
        _ => None,
    }
}

fn group(raw: &RawDocument) -> Option<Group<'_>> {
    let get = |k: &str| raw.get(k).ok().flatten();
    let key = match get("_id")? {
        RawBsonRef::String(s) => Some(s),
        _ => None,
    };
    let count = u64::try_from(int(get("n"))?).ok()?;
    Some(Group {
        key,
        count,
        min: int(get("lo")),
        max: int(get("hi")),
    })
}

/// Which `seq` bound a group carries: the counts of the whole frontier
/// and the per-state groups need the highest (the next `seq` to hand out),
/// the queues the lowest (where each one's reads start).
///
/// Never both for the queues. nx-27017 turns the grouping into SQL whose
/// domain column SQLite reads from the document, not the index, on every
/// row where a `$min` or `$max` changes (a "bare column" of the group).
/// Along the index, in `seq` order, the lowest changes once per domain but
/// the highest on every row: at 10 million stored URLs, half queued, the
/// grouping took 1.4–2.2 s with the count and the lowest `seq` on the
/// `{domain, seq, state}` index, and 1.2 s with the count alone but 18–28 s
/// with the highest `seq` too on a `{domain, state, seq}` one (SQLite 3.40,
/// nx-27017's SQL on a copy of the store's file).
#[derive(Clone, Copy)]
enum Bounds {
    Highest,
    Lowest,
}

/// Counts and `seq` bounds of documents grouped by `field` (all in one
/// group without one), among those `filter` matches. Only `$match` and a
/// `$group` on at most one field: what
/// nx-27017 runs inside SQLite (a compound `_id` or `$cond` it evaluates
/// document by document, 10 times slower).
fn pipeline(filter: bson::Document, field: Option<&str>, bounds: Bounds) -> Vec<bson::Document> {
    let seq = format!("${}", FrontierDoc::SEQ);
    let mut group = doc! {
        "_id": field.map(|f| format!("${f}")),
        "n": {"$sum": 1},
    };
    match bounds {
        Bounds::Highest => group.insert("hi", doc! {"$max": seq}),
        Bounds::Lowest => group.insert("lo", doc! {"$min": seq}),
    };
    vec![doc! {"$match": filter}, doc! {"$group": group}]
}

async fn groups(
    frontier: &Collection<FrontierDoc>,
    pipeline: Vec<bson::Document>,
    mut each: impl FnMut(Group<'_>),
) -> anyhow::Result<()> {
    let read = async {
        // A `$group` holding more than 100 MB (about a million domains'
        // queues) fails on MongoDB before 6.0 unless it may spill to disk
        // (later versions spill by default).
        let mut cursor = frontier
            .aggregate(pipeline)
            .allow_disk_use(true)
            .with_type::<RawDocumentBuf>()
            .await?;
        while let Some(raw) = cursor.try_next().await? {
            match group(&raw) {
                Some(g) => each(g),
                None => tracing::warn!(group = ?raw, "skipping a malformed summary of the stored frontier"),
            }
        }
        mongodb::error::Result::Ok(())
    };
    // Each is a scan of the whole frontier inside the store, far more than
    // one ordinary operation's deadline: on nx-27017 the two took 324 s
    // together for 10 million URLs, each against the 300 s this deadline
    // was before.
    match tokio::time::timeout(SUMMARY_DEADLINE, read).await {
        Ok(r) => Ok(r?),
        Err(_) => anyhow::bail!("the store did not summarise the frontier within {SUMMARY_DEADLINE:?}"),
    }
}

/// The stored frontier, read side by side (nothing writes the frontier
/// before start-up ends, and a store with more than one core, mongod but
/// not nx-27017, which serves one request at a time, runs them at once):
/// the queued URLs grouped by domain ([`queues`]); how many entries are
/// shaped to be in a queue (a string domain and a positive `seq`) and the
/// highest `seq` ([`sequenced`]); and the collection's count of documents,
/// which stores keep without a scan.
///
/// When every document is shaped to be in a queue and every queued one is
/// in one, the finished URLs are those entries less the queued ones, and
/// nothing is read back: every frontier this version wrote. Otherwise
/// (entries written by hand or by an older version; or a count the store
/// keeps loosely: MongoDB's after a crash, orphaned documents on a sharded
/// cluster; or no count at all) the entries are grouped by state as well,
/// and those in no queue are read back.
///
/// Why not group by state every time: that is a scan of every document,
/// and the count of entries in a queue's shape needs only the `{domain,
/// seq, state}` index. At 10 million stored URLs on nx-27017, 2.3–2.8 s against
/// 31 s for the grouping by state (and 15–17 s for the same count without
/// the condition on the domain, which no index answers).
pub(crate) async fn summarize(frontier: &Collection<FrontierDoc>) -> anyhow::Result<StoredFrontier> {
    let count = async {
        match store::deadline(frontier.estimated_document_count()).await {
            Some(Ok(n)) => Ok(Some(n)),
            Some(Err(e)) => {
                tracing::warn!(error = %e, "the store did not count the frontier's documents");
                Ok(None)
            }
            None => {
                tracing::warn!("the store did not count the frontier's documents in time");
                Ok(None)
            }
        }
    };
    let (documents, sequenced, (queues, outside)) =
        futures::try_join!(count, sequenced(frontier), queues(frontier))?;
    let queues = match documents {
        Some(d) => match without_states(d, &sequenced, queues, outside) {
            Ok(s) => return Ok(s),
            Err(queues) => queues,
        },
        None => queues,
    };
    tracing::info!(
        documents,
        in_queue_shape = sequenced.count,
        queued_outside_queues = outside,
        "some stored entries may be in no queue (from an older version, or written by hand), or the store's count is loose: grouping the frontier by state as well"
    );
    let mut by_state = Vec::new();
    groups(
        frontier,
        pipeline(doc! {}, Some(FrontierDoc::STATE), Bounds::Highest),
        |g| by_state.push((g.key.map(str::to_string), g.count, g.max)),
    )
    .await?;
    Ok(from_groups(&by_state, queues))
}

/// The summary from the queues and the counts alone, when every document
/// is shaped to be in a queue (`documents` counts no more than
/// `sequenced`) and every queued one is in a queue: then the finished URLs
/// are those entries less the queued ones. Otherwise the queues back, for
/// [`from_groups`].
fn without_states(
    documents: u64,
    sequenced: &Sequenced,
    queues: Vec<StoredQueue>,
    outside: u64,
) -> Result<StoredFrontier, Vec<StoredQueue>> {
    if outside != 0 || documents != sequenced.count {
        return Err(queues);
    }
    let mut s = StoredFrontier {
        queues,
        last_seq: sequenced.last_seq,
        ..StoredFrontier::default()
    };
    s.finished = sequenced.count.saturating_sub(s.queued());
    Ok(s)
}

/// Entries shaped to be in a queue (a string domain and a positive
/// `seq`): how many, and the highest `seq`.
#[derive(Debug, Default, PartialEq)]
struct Sequenced {
    count: u64,
    last_seq: i64,
}

async fn sequenced(frontier: &Collection<FrontierDoc>) -> anyhow::Result<Sequenced> {
    let mut s = Sequenced::default();
    groups(frontier, pipeline(in_a_queue(), None, Bounds::Highest), |g| {
        s.count = s.count.saturating_add(g.count);
        s.last_seq = s.last_seq.max(g.max.unwrap_or(0));
    })
    .await?;
    Ok(s)
}

/// The queued URLs in a queue's shape, grouped by domain; and how many of
/// them are in groups that cannot be read as a queue (a `seq` that is not
/// an integer), which are counted in neither set.
///
/// Queued entries in no queue's shape (a domain that is not a string, no
/// positive `seq`) are in no group: they make the collection's count
/// exceed [`sequenced`]'s, so the states are grouped too and those
/// entries read back.
///
/// Every condition is on the `{domain, seq, state}` index, which answers
/// the grouping alone (the condition on the domain lets mongod and
/// nx-27017 seek it rather than scan the collection).
async fn queues(frontier: &Collection<FrontierDoc>) -> anyhow::Result<(Vec<StoredQueue>, u64)> {
    let mut queues = Vec::new();
    let mut outside = 0u64;
    let mut queued = in_a_queue();
    queued.insert(FrontierDoc::STATE, UrlState::Queued.as_str());
    groups(
        frontier,
        pipeline(queued, Some(FrontierDoc::DOMAIN), Bounds::Lowest),
        |g| match (g.key, g.min) {
            (Some(domain), Some(first_seq)) if first_seq > 0 => queues.push(StoredQueue {
                domain: domain.to_string(),
                count: g.count,
                first_seq,
            }),
            _ => {
                outside = outside.saturating_add(g.count);
                tracing::warn!(group = ?g, "queued URLs with a malformed seq in the stored frontier are not resumed")
            }
        },
    )
    .await?;
    Ok((queues, outside))
}

/// What an entry needs to be read by `seq` with its domain's queue (what
/// [`summarize`] puts in `queues`, and counts in [`sequenced`]): a string
/// domain and a positive `seq`. [`read_back`] reads the rest one by one
/// (`$nor`, not `$not`, which nx-27017 does not implement), so that every
/// queued entry is counted in exactly one of the two. `$gte: ""` is every
/// string and only strings, and, unlike a `$type` test (which nx-27017
/// judges in Python), both conditions are on the `{domain, seq, state}` index,
/// which then answers alone.
fn in_a_queue() -> bson::Document {
    doc! {FrontierDoc::DOMAIN: {"$gte": ""}, FrontierDoc::SEQ: {"$gt": 0}}
}

/// The summary from the per-state groups (state, count, highest `seq`) and
/// the per-domain queues; queued entries missing from `queues` are read
/// back.
fn from_groups(by_state: &[(Option<String>, u64, Option<i64>)], queues: Vec<StoredQueue>) -> StoredFrontier {
    let mut s = StoredFrontier {
        queues,
        ..StoredFrontier::default()
    };
    let mut queued = 0u64;
    for (state, count, max) in by_state {
        s.last_seq = s.last_seq.max(max.unwrap_or(0));
        if state.as_deref() == Some(UrlState::Queued.as_str()) {
            queued = *count;
        } else {
            s.finished = s.finished.saturating_add(*count);
        }
    }
    s.read_back = queued.saturating_sub(s.queued());
    s
}

/// Reads back the `expected` queued entries a summary counts in
/// [`StoredFrontier::read_back`], document by document: those no queue
/// holds, or all of them (`whole`). Each comes with whether its page is
/// stored (then it is finished: `crate::finished`), looked up one batch
/// of entries at a time. A malformed document is skipped with a warning.
/// Fewer documents than counted means the store cut the read short (see
/// [`scan_seen`]); it is logged as an error, and the crawl starts without
/// them (they stay queued in the store).
pub(crate) async fn read_back(
    frontier: &Collection<FrontierDoc>,
    pages: &Collection<PageDoc>,
    (expected, whole): (u64, bool),
    timing: &TimingLog,
    mut each: impl FnMut(Resumed<'_>, bool),
) -> anyhow::Result<()> {
    let fields =
        doc! {"_id": 1, FrontierDoc::DOMAIN: 1, "depth": 1, FrontierDoc::STATE: 1, FrontierDoc::SEQ: 1};
    let mut filter = doc! {FrontierDoc::STATE: UrlState::Queued.as_str()};
    if !whole {
        filter.insert("$nor", vec![in_a_queue()]);
    }
    let mut cursor = frontier
        .clone_with_type::<RawDocumentBuf>()
        .find(filter)
        .projection(fields)
        .batch_size(READ_BATCH)
        .await?;
    let mut read = 0u64;
    let mut batch = Vec::with_capacity(LOOK_UP_BATCH);
    loop {
        let next = cursor.try_next().await?;
        let end = next.is_none();
        if let Some(raw) = next {
            read = read.saturating_add(1);
            batch.push(raw);
        }
        if batch.len() >= LOOK_UP_BATCH || (end && !batch.is_empty()) {
            let urls: Vec<&str> = batch.iter().filter_map(|r| r.get_str("_id").ok()).collect();
            let stored = look_up_until_answered(pages, &urls, timing).await;
            for raw in batch.drain(..) {
                match bson::from_slice::<Resumed>(raw.as_bytes()) {
                    Ok(d) => {
                        let finished = stored.contains(d.url);
                        each(d, finished)
                    }
                    Err(e) => {
                        tracing::warn!(document = ?raw, error = %e, "skipping a malformed frontier entry")
                    }
                }
            }
        }
        if end {
            break;
        }
    }
    if read < expected {
        // Not fatal: a dispatcher that cannot start is worse. The rest stay
        // queued in the store for the next start.
        tracing::error!(
            read,
            expected,
            "the store ended the read of queued URLs early; those not read stay queued in the store and are crawled when the dispatcher starts again"
        );
    }
    Ok(())
}

/// Which of `urls` have a stored page, asked until the store answers:
/// start-up cannot go on without knowing (an entry taken as unfinished
/// on a guess would be fetched again).
async fn look_up_until_answered(
    pages: &Collection<PageDoc>,
    urls: &[&str],
    timing: &TimingLog,
) -> HashSet<String> {
    let mut backoff = store::Backoff::default();
    loop {
        match crate::finished::stored_among(pages, urls, timing).await {
            Ok(stored) => return stored,
            Err(e) => {
                backoff
                    .note("looking up the stored pages of resumed URLs", &e)
                    .await
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(domain: &str, count: u64, first_seq: i64) -> StoredQueue {
        StoredQueue {
            domain: domain.into(),
            count,
            first_seq,
        }
    }

    #[test]
    fn groups_decode_whatever_integer_width_the_store_uses() {
        let raw = bson::rawdoc! {"_id": "a.test", "n": 3_i32, "lo": 5_i64, "hi": 9.0};
        assert_eq!(
            group(&raw),
            Some(Group {
                key: Some("a.test"),
                count: 3,
                min: Some(5),
                max: Some(9)
            })
        );
        let nulls = bson::rawdoc! {"_id": bson::RawBson::Null, "n": 2_i64, "lo": bson::RawBson::Null};
        assert_eq!(group(&nulls).map(|g| (g.key, g.min)), Some((None, None)));
        // A negative count is no count.
        assert_eq!(group(&bson::rawdoc! {"_id": "a", "n": -1}), None);
        assert_eq!(group(&bson::rawdoc! {"_id": "a"}), None);
    }

    #[test]
    fn the_summary_adds_up_states_and_finds_the_last_seq() {
        let by_state = vec![
            (Some("done".to_string()), 10, Some(40)),
            (Some("failed".to_string()), 2, Some(12)),
            (Some("queued".to_string()), 5, Some(55)),
        ];
        let s = from_groups(&by_state, vec![q("a.test", 3, 41), q("b.test", 2, 44)]);
        assert_eq!(
            s,
            StoredFrontier {
                finished: 12,
                queues: vec![q("a.test", 3, 41), q("b.test", 2, 44)],
                last_seq: 55,
                read_back: 0,
                whole: false,
            }
        );
    }

    #[test]
    fn without_states_the_finished_urls_are_the_sequenced_ones_not_queued() {
        let sequenced = Sequenced {
            count: 17,
            last_seq: 60,
        };
        let queues = vec![q("a.test", 3, 41), q("b.test", 2, 44)];
        let s = without_states(17, &sequenced, queues.clone(), 0);
        // The same summary as grouping by state gives (see the test above,
        // whose store holds the same entries), but for the highest `seq`
        // among finished ones.
        assert_eq!(
            s,
            Ok(StoredFrontier {
                finished: 12,
                queues: queues.clone(),
                last_seq: 60,
                read_back: 0,
                whole: false,
            })
        );
        // An entry without a `seq` (more documents than entries with one),
        // or queued URLs in no queue: the states must be grouped.
        assert_eq!(
            without_states(18, &sequenced, queues.clone(), 0),
            Err(queues.clone())
        );
        assert_eq!(
            without_states(17, &sequenced, queues.clone(), 1),
            Err(queues.clone())
        );
        // A store whose count runs behind (MongoDB's after a crash) too.
        assert_eq!(without_states(16, &sequenced, queues.clone(), 0), Err(queues));
        // Nothing stored.
        assert!(without_states(0, &Sequenced::default(), vec![], 0).is_ok_and(|s| s.is_empty()));
    }

    #[test]
    fn queued_entries_missing_from_the_queues_are_read_back() {
        // 5 queued, but only 4 have a seq (one was stored by an old version).
        let by_state = vec![(Some("queued".to_string()), 5, Some(9))];
        let s = from_groups(&by_state, vec![q("a.test", 4, 1)]);
        assert_eq!((s.queued(), s.read_back), (4, 1));
        assert!(!s.is_empty());
        assert!(from_groups(&[], vec![]).is_empty());
        let mut whole = s.clone();
        whole.read_whole();
        assert_eq!((whole.queued(), whole.read_back, whole.whole), (0, 5, true));
        assert_eq!(whole.all_queued(), s.all_queued());
    }
}
