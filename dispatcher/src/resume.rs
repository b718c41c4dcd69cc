//! Start-up on a stored frontier, reading only what dispatching needs.
//!
//! Dispatching needs much less than every stored URL: where each domain's
//! queue starts and about how many URLs it holds (its window is then read
//! by `queue_reader` like any other), the next `seq` to hand out, and how
//! many URLs the crawl has admitted. [`summarize`] asks the store for
//! them: each domain's progress (`ProgressDoc`: below which `seq` its URLs
//! are finished), one `$group` of the queued segments by domain, one of
//! every segment, and the outcomes (URLs that ended without a page) past
//! their domain's progress. A domain's queue is read from its progress
//! on, so a restart does not look up the page of every URL the crawl ever
//! admitted; a domain whose progress is past its last segment has nothing
//! left, and is not read at all.
//!
//! The counts are estimates where a domain's progress is inside its
//! segments (the summary counts whole segments; the share of the
//! domain's `seq`s past its progress is taken): the windows' reads find
//! the URLs that are really left, and the counts follow them then.
//!
//! The seen-set still needs a hash of every stored URL. It is read in the
//! background ([`scan_seen`], in pages of segments) while the crawl runs;
//! until it is whole, a link whose hash is not known yet is held back
//! (`SeenSet::rebuilding`), and judged once it is. No URL is crawled
//! twice or dropped while the scan runs.
//!
//! When every queued URL fits the frontier's memory budget, all of them
//! are read back at once ([`read_back`], one query over the queued
//! segments) rather than window by window.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use bson::{doc, RawBsonRef, RawDocument, RawDocumentBuf};
use futures::TryStreamExt;
use shared::timing::TimingLog;
use shared::urls;
use store::docs::{OutcomeDoc, PageDoc, ProgressDoc, SegmentDoc, SegmentState};
use store::{self, Stores, READ_BATCH};

use crate::state::{Resumed, StoredFrontier, StoredQueue, LOOK_UP_BATCH};

mod seen_scan;

pub(crate) use seen_scan::{scan_seen, SeenScan, SeenScanTask, Stored};

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

/// The segments `filter` matches grouped by `field` (all in one group
/// without one): their URLs counted, the lowest first `seq` and the
/// highest `seq`. Only `$match` and a `$group` on at most one field: what
/// nx-27017 runs inside SQLite.
fn pipeline(filter: bson::Document, field: Option<&str>) -> Vec<bson::Document> {
    let group = doc! {
        "_id": field.map(|f| format!("${f}")),
        "n": {"$sum": format!("${}", SegmentDoc::N)},
        "lo": {"$min": format!("${}", SegmentDoc::FIRST)},
        "hi": {"$max": format!("${}", SegmentDoc::SEQ)},
    };
    vec![doc! {"$match": filter}, doc! {"$group": group}]
}

async fn groups(
    segments: &mongodb::Collection<SegmentDoc>,
    pipeline: Vec<bson::Document>,
    mut each: impl FnMut(Group<'_>),
) -> anyhow::Result<()> {
    let read = async {
        // A `$group` holding more than 100 MB (about a million domains'
        // queues) fails on MongoDB before 6.0 unless it may spill to disk
        // (later versions spill by default).
        let mut cursor = segments
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
    match tokio::time::timeout(SUMMARY_DEADLINE, read).await {
        Ok(r) => Ok(r?),
        Err(_) => anyhow::bail!("the store did not summarise the frontier within {SUMMARY_DEADLINE:?}"),
    }
}

/// The stored frontier (see the module doc): progress, queues, totals and
/// the outcomes past progress, read side by side where they can be
/// (nothing writes the frontier before start-up ends).
pub(crate) async fn summarize(stores: &Stores) -> anyhow::Result<StoredFrontier> {
    let segments = stores.segments();
    let mut totals = (0u64, 0i64);
    let mut queued = Vec::new();
    let all = groups(&segments, pipeline(doc! {}, None), |g| {
        totals.0 = totals.0.saturating_add(g.count);
        totals.1 = totals.1.max(g.max.unwrap_or(0));
    });
    let by_domain = groups(
        &segments,
        pipeline(
            doc! {SegmentDoc::DOMAIN: {"$gte": ""}, SegmentDoc::STATE: SegmentState::Queued.as_str()},
            Some(SegmentDoc::DOMAIN),
        ),
        |g| match (g.key, g.min, g.max) {
            (Some(domain), Some(lo), Some(hi)) if lo > 0 => {
                queued.push((domain.to_string(), g.count, lo, hi))
            }
            _ => {
                tracing::warn!(group = ?g, "queued segments with a malformed seq in the stored frontier are not resumed")
            }
        },
    );
    let (progress, ((), ())) = futures::try_join!(read_progress(stores), async {
        futures::try_join!(all, by_domain)
    })?;
    let ended = read_ended(stores, &progress).await?;
    let mut s = StoredFrontier {
        urls: totals.0,
        last_seq: totals.1,
        ended,
        ..StoredFrontier::default()
    };
    for (domain, count, lo, hi) in queued {
        let from = progress.get(&domain).copied().unwrap_or(0).max(lo);
        if from > hi {
            // Every URL of its queue is finished.
            continue;
        }
        s.queues.push(StoredQueue {
            domain,
            count: left_of(count, (lo, hi), from),
            first_seq: from,
        });
    }
    s.progress = progress;
    Ok(s)
}

/// About how many of a domain's `count` queued URLs, with `seq`s from
/// `lo` to `hi`, are at or past `from` (its progress): the share of its
/// `seq` range past it, the crawl's `seq`s being shared by its domains
/// about evenly over time; at least one. An estimate, and the windows'
/// first reads find the URLs really left.
fn left_of(count: u64, (lo, hi): (i64, i64), from: i64) -> u64 {
    if from <= lo {
        return count;
    }
    let span = u128::try_from(hi.saturating_sub(lo)).unwrap_or(0) + 1;
    let past = u128::try_from(hi.saturating_sub(from)).unwrap_or(0) + 1;
    let left = u128::from(count) * past.min(span) / span;
    u64::try_from(left).unwrap_or(count).clamp(1, count.max(1))
}

/// Every domain's progress.
async fn read_progress(stores: &Stores) -> anyhow::Result<HashMap<String, i64>> {
    let mut progress = HashMap::new();
    store::decode_each(
        &stores.progress(),
        doc! {},
        |p: ProgressDoc| {
            progress.insert(p.domain, p.below);
        },
        |d, e| tracing::warn!(document = ?d, error = %e, "skipping a malformed progress record"),
    )
    .await?;
    Ok(progress)
}

/// The `seq`s of the stored outcomes past their domain's progress.
async fn read_ended(stores: &Stores, progress: &HashMap<String, i64>) -> anyhow::Result<HashSet<i64>> {
    let mut ended = HashSet::new();
    store::decode_each(
        &stores.outcomes(),
        doc! {},
        |o: OutcomeDoc| {
            for u in o.urls {
                let Ok(parsed) = urls::parse(&u.url) else {
                    continue;
                };
                let below = progress.get(&urls::domain_of(&parsed)).copied().unwrap_or(0);
                if u.seq >= below {
                    ended.insert(u.seq);
                }
            }
        },
        |d, e| tracing::warn!(document = ?d, error = %e, "skipping a malformed outcome record"),
    )
    .await?;
    Ok(ended)
}

/// Reads back every queued URL of `s` past its domain's progress (when
/// they fit in memory), in one query over the queued segments. Each
/// comes with whether it is finished: ended without a page (`s.ended`),
/// or with its page stored (looked up one batch at a time; then its
/// links are offered again, `crate::finished`). A malformed segment is
/// skipped with a warning.
pub(crate) async fn read_back(
    stores: &Stores,
    s: &StoredFrontier,
    timing: &TimingLog,
    mut each: impl FnMut(Resumed, bool),
) -> anyhow::Result<()> {
    let filter = doc! {SegmentDoc::STATE: SegmentState::Queued.as_str()};
    let mut cursor = stores
        .segments()
        .clone_with_type::<RawDocumentBuf>()
        .find(filter)
        .batch_size(READ_BATCH)
        .await?;
    let pages = stores.pages();
    let mut batch: Vec<Resumed> = Vec::with_capacity(LOOK_UP_BATCH);
    loop {
        let next = cursor.try_next().await?;
        let end = next.is_none();
        if let Some(raw) = next {
            let domain = raw.get_str(SegmentDoc::DOMAIN).unwrap_or_default().to_string();
            let below = s.progress.get(&domain).copied().unwrap_or(0);
            match SegmentDoc::entries(&raw) {
                Ok(entries) => {
                    batch.extend(entries.into_iter().filter(|e| e.seq >= below).map(|e| Resumed {
                        url: e.url,
                        domain: domain.clone(),
                        depth: e.depth,
                        seq: e.seq,
                    }))
                }
                Err(e) => {
                    tracing::warn!(domain, error = %e, "skipping a malformed frontier segment; its URLs are not crawled")
                }
            }
        }
        if batch.len() >= LOOK_UP_BATCH || (end && !batch.is_empty()) {
            let unended: Vec<&str> = batch
                .iter()
                .filter(|r| !s.ended.contains(&r.seq))
                .map(|r| r.url.as_str())
                .collect();
            let stored = look_up_until_answered(&pages, &unended, timing).await;
            for r in batch.drain(..) {
                let finished = s.ended.contains(&r.seq) || stored.contains(&r.url);
                each(r, finished);
            }
        }
        if end {
            return Ok(());
        }
    }
}

/// Which of `urls` have a stored page, asked until the store answers:
/// start-up cannot go on without knowing (a URL taken as unfinished on a
/// guess would be fetched again).
async fn look_up_until_answered(
    pages: &mongodb::Collection<PageDoc>,
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
    fn a_queue_past_its_progress_is_counted_by_the_share_of_its_seqs_left() {
        assert_eq!(left_of(100, (1, 1000), 1), 100);
        assert_eq!(left_of(100, (1, 1000), 501), 50);
        assert_eq!(left_of(100, (1, 1000), 1000), 1);
        assert_eq!(left_of(1, (5, 5), 5), 1);
        assert_eq!(left_of(10, (1, i64::MAX), i64::MAX / 2 + 1), 5);
    }

    #[test]
    fn the_summary_counts_the_queued_and_the_rest_as_finished() {
        let s = StoredFrontier {
            urls: 17,
            queues: vec![
                StoredQueue {
                    domain: "a.test".into(),
                    count: 3,
                    first_seq: 41,
                },
                StoredQueue {
                    domain: "b.test".into(),
                    count: 2,
                    first_seq: 44,
                },
            ],
            last_seq: 60,
            ..StoredFrontier::default()
        };
        assert_eq!((s.queued(), s.finished()), (5, 12));
        assert!(!s.is_empty());
        assert!(StoredFrontier::default().is_empty());
    }
}
