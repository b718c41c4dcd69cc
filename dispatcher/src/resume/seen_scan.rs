//! The background read of every stored URL for the seen-set after a
//! restart (see `crate::resume`): the frontier's segments in pages along
//! the `{domain, seq}` prefix of the queue index.
//!
//! Why pages rather than one cursor: nx-27017 answers a query's first
//! batch only once it has loaded every document the query matches, and it
//! serves one request at a time, so one cursor over a big frontier held
//! it for longer than a batch may take while every read and write of the
//! crawl waited behind it. A page is an index seek and at most [`PAGE`]
//! segments, on MongoDB as on nx-27017, and a page that fails is asked for
//! again on its own. Why along the queue index and not `_id` (a segment's
//! highest `seq`): nx-27017 answered a range of integer `_id`s sorted by
//! `_id` by scanning the collection, a page at a time (110 s for the 1
//! million URLs of `scripts/bench-dispatcher.sh --urls 1000000`).
//!
//! Why a pause after each page, as long as the page took: the crawl goes
//! on while the read runs (past `--held-links-memory` the links it cannot
//! judge yet wait in a file, `state::held`), and on a store that serves
//! one request at a time pages read back to back left the crawl's reads
//! and writes the gaps between them. With the pause the crawl's requests
//! have the store at least half the time.
//!
//! Pages follow `(domain, seq)`: the next page is the rest of the last
//! page's last domain after its last `seq` when that page was full, else
//! the domains after it. Segments written after start-up (a `seq` past
//! the summary's highest) are passed over.

use std::time::{Duration, Instant};

use bson::{doc, RawDocumentBuf};
use mongodb::Collection;
use shared::timing::{Op, TimingLog};
use store::docs::{SegmentDoc, SegmentState};
use store::read::{find_all, Find};
use tokio::sync::mpsc;

use crate::state::ScannedUrl;

/// What the background scan of stored URLs sends.
pub(crate) enum SeenScan {
    /// Stored URLs (a batch).
    Urls(Vec<ScannedUrl>),
    /// Every stored URL was sent.
    Done,
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
    let mut pages = Pages::default();
    let mut counted = 0u64;
    let mut backoff = store::Backoff::default();
    while let Some(page) = pages.next_page() {
        let find = Find {
            filter: page.filter,
            sort: Some(page.sort),
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
        let took = start.elapsed();
        tracing::trace!(
            segments = docs.len(),
            ms = took.as_millis() as u64,
            "seen-set page"
        );
        let urls = scanned(&docs, stored.last_seq);
        counted = counted.saturating_add(urls.len() as u64);
        if !urls.is_empty() && tx.send(SeenScan::Urls(urls)).await.is_err() {
            return;
        }
        if pages.take(&docs).is_err() {
            tracing::error!("the store's order of the frontier's segments did not move on; the read of stored URLs ends early");
            break;
        }
        // The crawl's own reads and writes get the store at least as long
        // as the page took (see the module doc).
        tokio::time::sleep(took.min(STALL)).await;
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

/// One page's query: which segments, in which order.
#[derive(Debug, PartialEq)]
struct Page {
    filter: bson::Document,
    sort: bson::Document,
}

/// The page read cannot go on: the store answered a full page that did not
/// move past the last one.
#[derive(Debug, PartialEq, Eq)]
struct Stuck;

/// Where the paged read stands, apart from the store: which page to ask
/// for next.
#[derive(Debug, Default)]
struct Pages {
    /// The last segment read, `(domain, seq)`; `None` before the first page.
    at: Option<(String, i64)>,
    /// The last page was full and ended in `at`'s domain: the next one is
    /// the rest of that domain.
    in_domain: bool,
    done: bool,
}

impl Pages {
    /// The next page to read (in domain and `seq` order), or `None` when
    /// every page was read. The domain is matched with `$eq` (see
    /// `queue_reader::one_domain`), and `$gte ""` rather than nothing
    /// starts at the first domain with a range nx-27017 seeks too. Within
    /// one domain the sort is by `seq` alone, for the reason
    /// `queue_reader::by_seq` gives.
    fn next_page(&self) -> Option<Page> {
        if self.done {
            return None;
        }
        let across = store::queue_order;
        Some(match &self.at {
            None => Page {
                filter: doc! {SegmentDoc::DOMAIN: {"$gte": ""}},
                sort: across(),
            },
            Some((domain, seq)) if self.in_domain => Page {
                filter: doc! {SegmentDoc::DOMAIN: {"$eq": domain}, SegmentDoc::SEQ: {"$gt": seq}},
                sort: crate::queue_reader::by_seq(),
            },
            Some((domain, _)) => Page {
                filter: doc! {SegmentDoc::DOMAIN: {"$gt": domain}},
                sort: across(),
            },
        })
    }

    /// Takes the answer to [`Pages::next_page`].
    fn take(&mut self, docs: &[RawDocumentBuf]) -> Result<(), Stuck> {
        if docs.len() < PAGE {
            // The end of the domain, or of the collection.
            match (&self.at, self.in_domain) {
                (Some(_), true) => self.in_domain = false,
                _ => self.done = true,
            }
            return Ok(());
        }
        let Some((domain, seq)) = docs.last().and_then(domain_and_seq) else {
            return Err(Stuck);
        };
        if let Some((d, s)) = &self.at {
            if (domain, seq) <= (d.as_str(), *s) {
                return Err(Stuck);
            }
        }
        self.at = Some((domain.to_string(), seq));
        self.in_domain = true;
        Ok(())
    }
}

fn domain_and_seq(raw: &RawDocumentBuf) -> Option<(&str, i64)> {
    Some((raw.get_str(SegmentDoc::DOMAIN).ok()?, SegmentDoc::raw_seq(raw)?))
}

/// The URLs of a page of segments written before start-up (a `seq` up to
/// `last_seq`). A malformed segment is skipped with a warning.
fn scanned(docs: &[RawDocumentBuf], last_seq: i64) -> Vec<ScannedUrl> {
    let mut urls = Vec::new();
    for raw in docs {
        let id = SegmentDoc::raw_seq(raw);
        if id.is_some_and(|s| s > last_seq) {
            continue;
        }
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
    urls
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
    fn deferred_urls_carry_their_domain_and_depth_and_later_segments_are_passed_over() {
        let urls = scanned(
            &[
                segment(SegmentState::Queued, &[1, 3]),
                segment(SegmentState::Deferred, &[2]),
                segment(SegmentState::Queued, &[10]),
            ],
            9,
        );
        assert_eq!(urls.len(), 3);
        assert_eq!(urls[0].deferred, None);
        assert_eq!(urls[2].deferred, Some(("a.test".to_string(), 2)));
        assert!(scanned(&[bson::rawdoc! {"_id": 9_i64, "seq": 9_i64}], 9).is_empty());
    }

    fn at(domain: &str, seq: i64) -> RawDocumentBuf {
        bson::rawdoc! {"_id": seq, "domain": domain, "seq": seq}
    }

    #[test]
    fn page_filters_seek_the_domain_then_the_domains_after_it() {
        let mut pages = Pages::default();
        let across = doc! {"domain": 1, "seq": 1};
        assert_eq!(
            pages.next_page(),
            Some(Page {
                filter: doc! {"domain": {"$gte": ""}},
                sort: across.clone()
            })
        );
        let full: Vec<RawDocumentBuf> = (1..=PAGE as i64).map(|s| at("a.test", s)).collect();
        pages.take(&full).unwrap();
        // Within the domain, by `seq` alone (see `queue_reader::by_seq`).
        assert_eq!(
            pages.next_page(),
            Some(Page {
                filter: doc! {"domain": {"$eq": "a.test"}, "seq": {"$gt": PAGE as i64}},
                sort: doc! {"seq": 1}
            })
        );
        // The same full page again: stuck, not read for ever.
        let mut again = Pages::default();
        again.take(&full).unwrap();
        assert_eq!(again.take(&full), Err(Stuck));
        pages.take(&[at("a.test", 999)]).unwrap();
        assert_eq!(
            pages.next_page(),
            Some(Page {
                filter: doc! {"domain": {"$gt": "a.test"}},
                sort: across
            })
        );
        pages.take(&[at("b.test", 2)]).unwrap();
        assert_eq!(pages.next_page(), None);
    }
}
