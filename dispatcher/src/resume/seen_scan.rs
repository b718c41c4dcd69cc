//! The background read of every stored URL for the seen-set after a
//! restart (see `crate::resume`): the frontier's segments in pages, in
//! `_id` order (a segment's `_id` is its highest `seq`, so the order
//! segments were admitted in), up to the highest `seq` stored at start-up.
//!
//! Why pages rather than one cursor: nx-27017 answers a query's first
//! batch only once it has loaded every document the query matches, and it
//! serves one request at a time, so one cursor over a big frontier held
//! it for longer than a batch may take while every read and write of the
//! crawl waited behind it. A page is a seek of the primary key and at most
//! [`PAGE`] segments, on MongoDB as on nx-27017, and a page that fails is
//! asked for again on its own. Segments hold up to a few hundred URLs, so
//! a page is up to tens of thousands of URLs.

use std::time::{Duration, Instant};

use bson::{doc, RawDocumentBuf};
use mongodb::Collection;
use shared::timing::{Op, TimingLog};
use store::docs::{SegmentDoc, SegmentState};
use store::read::{find_all, Find};
use tokio::sync::mpsc;

/// What the background scan of stored URLs sends.
pub(crate) enum SeenScan {
    /// Stored URLs (a batch).
    Urls(Vec<ScannedUrl>),
    /// Every stored URL was sent.
    Done,
}

/// A stored URL, as the seen-set and the budgets need it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ScannedUrl {
    pub(crate) url: String,
    /// For a deferred one (found over a budget): its domain and depth,
    /// should this run's budget take it up.
    pub(crate) deferred: Option<(String, u16)>,
}

/// What the summary found in the store, which the scan must read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stored {
    /// URLs, in every segment.
    pub(crate) urls: u64,
    /// The highest `seq` among them: segments written after start-up have
    /// higher ones, and are not read.
    pub(crate) last_seq: i64,
}

/// Segments per page: up to about a megabyte, tens of thousands of URLs.
const PAGE: usize = 256;

/// Longest one page may take.
const STALL: Duration = store::OP_TIMEOUT;

/// The background read of stored URLs for the seen-set; aborted when
/// dropped (before the store's client shuts down).
pub(crate) struct SeenScanTask {
    task: tokio::task::JoinHandle<()>,
    rx: mpsc::Receiver<SeenScan>,
    pub(crate) started: std::time::Instant,
}

impl SeenScanTask {
    /// The next message; `None` if the scan ended without [`SeenScan::Done`].
    pub(crate) async fn next(&mut self) -> Option<SeenScan> {
        self.rx.recv().await
    }
}

impl Drop for SeenScanTask {
    fn drop(&mut self) {
        self.task.abort();
    }
}

const WHAT: &str = "reading the stored URLs for the seen-set";

/// Sends every URL stored in the frontier's segments, then
/// [`SeenScan::Done`]. A failed or stalled page is asked for again after
/// a pause; until `Done` the seen-set holds back the links it cannot
/// judge. Each page is timed as [`Op::SeenScan`].
pub(crate) fn scan_seen(segments: Collection<SegmentDoc>, stored: Stored, timing: TimingLog) -> SeenScanTask {
    let (tx, rx) = mpsc::channel(4);
    let task = tokio::spawn(async move { in_pages(&segments, stored, &tx, &timing).await });
    SeenScanTask {
        task,
        rx,
        started: std::time::Instant::now(),
    }
}

async fn in_pages(
    segments: &Collection<SegmentDoc>,
    stored: Stored,
    tx: &mpsc::Sender<SeenScan>,
    timing: &TimingLog,
) {
    let mut after = 0i64;
    let mut counted = 0u64;
    let mut backoff = store::Backoff::default();
    loop {
        let find = Find {
            filter: doc! {SegmentDoc::ID: {"$gt": after, "$lte": stored.last_seq}},
            sort: Some(doc! {SegmentDoc::ID: 1}),
            limit: Some(PAGE),
            ..Find::default()
        };
        let start = Instant::now();
        let docs = match find_all(segments, find, STALL, timing, Op::SeenScan).await {
            Ok(docs) => {
                backoff = store::Backoff::default();
                docs
            }
            Err(_) if tx.is_closed() => return,
            Err(why) => {
                backoff.note(WHAT, &why).await;
                continue;
            }
        };
        tracing::trace!(
            segments = docs.len(),
            ms = start.elapsed().as_millis() as u64,
            "seen-set page"
        );
        let full = docs.len() >= PAGE;
        let (urls, last) = scanned(&docs);
        counted = counted.saturating_add(urls.len() as u64);
        if !urls.is_empty() && tx.send(SeenScan::Urls(urls)).await.is_err() {
            return;
        }
        match last {
            Some(last) if full && last > after => after = last,
            _ => break,
        }
    }
    if counted < stored.urls {
        tracing::error!(
            counted,
            stored = stored.urls,
            "the stored frontier's segments held fewer URLs than its summary counted (malformed segments are skipped); those not read may be admitted again"
        );
    }
    let _ = tx.send(SeenScan::Done).await;
}

/// The URLs of a page of segments, and the highest `_id` among them. A
/// malformed segment is skipped with a warning.
fn scanned(docs: &[RawDocumentBuf]) -> (Vec<ScannedUrl>, Option<i64>) {
    let mut urls = Vec::new();
    let mut last = None;
    for raw in docs {
        let id = SegmentDoc::raw_seq(raw);
        last = last.max(id);
        let deferred = raw.get_str(SegmentDoc::STATE).ok() == Some(SegmentState::Deferred.as_str());
        let domain = raw.get_str(SegmentDoc::DOMAIN).unwrap_or_default();
        match SegmentDoc::entries(raw) {
            Ok(entries) => urls.extend(entries.into_iter().map(|e| ScannedUrl {
                url: e.url,
                deferred: deferred.then(|| (domain.to_string(), e.depth)),
            })),
            Err(e) => tracing::warn!(seq = ?id, error = %e, "skipping a malformed frontier segment"),
        }
    }
    (urls, last)
}

#[cfg(test)]
mod tests {
    use super::*;
    use store::docs::{Deferral, SegmentEntry};

    fn segment(state: SegmentState, seqs: &[i64]) -> RawDocumentBuf {
        let entries: Vec<SegmentEntry> = seqs
            .iter()
            .map(|&s| SegmentEntry {
                url: format!("http://a.test/{s}"),
                seq: s,
                depth: 2,
            })
            .collect();
        let why = (state == SegmentState::Deferred).then_some(Deferral::DomainBudget);
        let d = SegmentDoc::new("a.test".into(), state, why, &entries).unwrap();
        RawDocumentBuf::from_document(&bson::to_document(&d).unwrap()).unwrap()
    }

    #[test]
    fn deferred_urls_carry_their_domain_and_depth_and_the_page_its_last_id() {
        let (urls, last) = scanned(&[
            segment(SegmentState::Queued, &[1, 3]),
            segment(SegmentState::Deferred, &[2]),
        ]);
        assert_eq!(last, Some(3));
        assert_eq!(urls.len(), 3);
        assert_eq!(urls[0].deferred, None);
        assert_eq!(urls[2].deferred, Some(("a.test".to_string(), 2)));
        let (urls, last) = scanned(&[bson::rawdoc! {"_id": 9_i64, "seq": 9_i64}]);
        assert!(urls.is_empty());
        assert_eq!(last, Some(9));
    }
}
