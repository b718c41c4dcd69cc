//! The background read of every stored URL for the seen-set after a
//! restart (see `crate::resume`), in pages of the `{domain, seq, state}` index (its `{domain, seq}` prefix).
//!
//! Why pages rather than one cursor: nx-27017 answers a query's first
//! batch only once it has loaded every document the query matches, and it
//! serves one request at a time. One cursor over a million stored URLs
//! held it for longer than the 30 s a batch may take; the dispatcher gave
//! the read up and asked again, which held it again, and every read of the
//! queues and every write waited behind it (after a restart on a million
//! stored URLs, 20,000 results took 322 s with one read per domain). A
//! page is an index seek and at most [`PAGE`] documents, on MongoDB as on
//! nx-27017, and a page that fails is asked for again on its own: a read
//! cut short no longer starts over from the first URL, which on a big
//! frontier on MongoDB meant reading it all again.
//!
//! Pages follow `(domain, seq)`: the next page is the rest of the last
//! page's last domain after its last `seq` when that page was full, else
//! the domains after it. Entries with a `seq` in `1..=` the summary's
//! highest have distinct `seq`s (one counter over the whole crawl), so the
//! pages count them exactly. Should they count fewer than the summary
//! found (entries without a `seq`, or whose domain is not a string:
//! written by hand or by an older version), one read of the whole
//! collection follows, which finds every entry whatever its shape.

use std::time::{Duration, Instant};

use bson::{doc, RawBsonRef, RawDocumentBuf};
use futures::TryStreamExt;
use mongodb::Collection;
use shared::timing::{Op, TimingLog};
use store::docs::{FrontierDoc, UrlState};
use store::{self, READ_BATCH};
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
    /// For a deferred entry (found over a budget): its domain and depth,
    /// should this run's budget take it up.
    pub(crate) deferred: Option<(String, u16)>,
}

/// The fields [`scanned`] reads.
fn projection() -> bson::Document {
    doc! {"_id": 1, FrontierDoc::DOMAIN: 1, FrontierDoc::SEQ: 1, FrontierDoc::STATE: 1, FrontierDoc::DEPTH: 1}
}

/// The stored URL of a frontier entry, if its `_id` is a string.
fn scanned(raw: &RawDocumentBuf) -> Option<ScannedUrl> {
    let Ok(Some(RawBsonRef::String(url))) = raw.get("_id") else {
        return None;
    };
    let deferred = (raw.get_str(FrontierDoc::STATE).ok() == Some(UrlState::Deferred.as_str())).then(|| {
        let domain = raw.get_str(FrontierDoc::DOMAIN).unwrap_or_default().to_string();
        let depth = FrontierDoc::raw_int(raw, FrontierDoc::DEPTH).unwrap_or(0);
        (domain, depth.clamp(0, i64::from(u16::MAX)) as u16)
    });
    Some(ScannedUrl {
        url: url.to_string(),
        deferred,
    })
}

/// What the summary found in the store, which the scan must read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stored {
    /// Entries, whatever their state or shape.
    pub(crate) urls: u64,
    /// The highest `seq` among them: entries written after start-up have
    /// higher ones, and are not counted.
    pub(crate) last_seq: i64,
}

/// Entries per page. On nx-27017 a page of 4,096 takes about 0.2 s of its
/// one thread (at a million stored URLs), so the crawl's own reads and
/// writes wait at most that long behind one.
const PAGE: usize = 4096;

/// Longest one page, or one batch of the whole read, may take.
const STALL: Duration = store::OP_TIMEOUT;

/// Longest the whole read's first batch may take: a store that loads every
/// match before answering (nx-27017) answers it only after a scan of the
/// collection, and a read given up on and asked again only scans again.
const WHOLE_FIRST_BATCH: Duration = Duration::from_secs(600);

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

/// Sends every URL stored in the frontier, then [`SeenScan::Done`]: in
/// pages, and then, only if the pages did not count every entry of
/// `stored`, in one read of the whole collection. A failed or stalled
/// read is asked for again after a pause (sending a URL twice is
/// harmless); until `Done` the seen-set defers to the store. Each page,
/// and the whole read, is timed as [`Op::SeenScan`].
pub(crate) fn scan_seen(
    frontier: Collection<FrontierDoc>,
    stored: Stored,
    timing: TimingLog,
) -> SeenScanTask {
    let (tx, rx) = mpsc::channel(4);
    let task = tokio::spawn(async move {
        if in_pages(&frontier, stored, &tx, &timing).await.is_none() && !tx.is_closed() {
            whole(&frontier, stored.urls, &tx, &timing).await;
        }
    });
    SeenScanTask {
        task,
        rx,
        started: std::time::Instant::now(),
    }
}

const WHAT: &str = "reading the stored URLs for the seen-set";

/// The paged read; `Some` once `Done` is sent (or nobody listens), `None`
/// when the whole collection must be read instead.
async fn in_pages(
    frontier: &Collection<FrontierDoc>,
    stored: Stored,
    tx: &mpsc::Sender<SeenScan>,
    timing: &TimingLog,
) -> Option<()> {
    if stored.last_seq <= 0 {
        return None;
    }
    let raw = frontier.clone_with_type::<RawDocumentBuf>();
    let mut pages = Pages::new(stored.last_seq, PAGE);
    let mut backoff = store::Backoff::default();
    while let Some(Page { filter, sort }) = pages.next_page() {
        let start = Instant::now();
        let query = async {
            let cursor = raw
                .find(filter)
                .sort(sort)
                .projection(projection())
                .limit(i64::try_from(PAGE).unwrap_or(i64::MAX))
                .batch_size(u32::try_from(PAGE).unwrap_or(READ_BATCH))
                .await?;
            cursor.try_collect::<Vec<RawDocumentBuf>>().await
        };
        let answer = tokio::time::timeout(STALL, query).await;
        let (outcome, n) = match &answer {
            Ok(Ok(docs)) => ("ok", docs.len()),
            _ => ("error", 0),
        };
        timing.record_batch(Op::SeenScan, start.elapsed(), outcome, n);
        let docs = match answer {
            Ok(Ok(docs)) => {
                // Each failure waits longer, but only since the last page
                // read: a blink an hour ago says nothing about the store now.
                backoff = store::Backoff::default();
                docs
            }
            failed if !tx.is_closed() => {
                let why = match failed {
                    Ok(Err(e)) => e.to_string(),
                    _ => "the store did not answer a page".to_string(),
                };
                backoff.note(WHAT, &why).await;
                continue;
            }
            _ => return Some(()),
        };
        match pages.take(&docs) {
            Ok(urls) if urls.is_empty() => {}
            Ok(urls) => {
                if tx.send(SeenScan::Urls(urls)).await.is_err() {
                    return Some(());
                }
            }
            Err(Stuck) => {
                tracing::warn!(
                    "the store's order of the stored URLs did not move on; reading the whole frontier instead"
                );
                return None;
            }
        }
    }
    if pages.counted < stored.urls {
        tracing::warn!(
            counted = pages.counted,
            stored = stored.urls,
            "some stored URLs have no seq, or a domain that is not a string (written by hand or by an older version); reading the whole frontier for them"
        );
        return None;
    }
    let _ = tx.send(SeenScan::Done).await;
    Some(())
}

/// The page read cannot go on: the store answered a full page that did not
/// move past the last one (a page of entries without an integer `seq`).
#[derive(Debug, PartialEq, Eq)]
struct Stuck;

/// One page's query: which entries, in which order.
#[derive(Debug, PartialEq)]
struct Page {
    filter: bson::Document,
    sort: bson::Document,
}

/// Where the paged read stands, apart from the store: which page to ask
/// for next, and how many of the entries the summary counted were read.
#[derive(Debug)]
struct Pages {
    /// The last entry read, `(domain, seq)`; `None` before the first page.
    at: Option<(String, i64)>,
    /// The last page was full and ended in `at`'s domain: the next one is
    /// the rest of that domain.
    in_domain: bool,
    done: bool,
    last_seq: i64,
    page: usize,
    /// Entries read with a `seq` in `1..=last_seq` (each once).
    counted: u64,
}

impl Pages {
    fn new(last_seq: i64, page: usize) -> Pages {
        Pages {
            at: None,
            in_domain: false,
            done: false,
            last_seq,
            page,
            counted: 0,
        }
    }

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
                filter: doc! {FrontierDoc::DOMAIN: {"$gte": ""}},
                sort: across(),
            },
            Some((domain, seq)) if self.in_domain => Page {
                filter: doc! {FrontierDoc::DOMAIN: {"$eq": domain}, FrontierDoc::SEQ: {"$gt": seq}},
                sort: crate::queue_reader::by_seq(),
            },
            Some((domain, _)) => Page {
                filter: doc! {FrontierDoc::DOMAIN: {"$gt": domain}},
                sort: across(),
            },
        })
    }

    /// Takes the answer to [`Pages::next_page`]: the URLs it holds.
    fn take(&mut self, docs: &[RawDocumentBuf]) -> Result<Vec<ScannedUrl>, Stuck> {
        let mut urls = Vec::with_capacity(docs.len());
        let mut last = None;
        for raw in docs {
            urls.extend(scanned(raw));
            let seq = FrontierDoc::raw_seq(raw);
            if seq.is_some_and(|s| s > 0 && s <= self.last_seq) {
                self.counted = self.counted.saturating_add(1);
            }
            last = Some((raw.get_str(FrontierDoc::DOMAIN).ok(), seq));
        }
        if docs.len() < self.page {
            // The end of the domain, or of the collection.
            match (&self.at, self.in_domain) {
                (Some(_), true) => self.in_domain = false,
                _ => self.done = true,
            }
            return Ok(urls);
        }
        let Some((Some(domain), Some(seq))) = last else {
            return Err(Stuck);
        };
        if let Some((d, s)) = &self.at {
            if (domain, seq) <= (d.as_str(), *s) {
                return Err(Stuck);
            }
        }
        self.at = Some((domain.to_string(), seq));
        self.in_domain = true;
        Ok(urls)
    }
}

/// Reads the whole collection (one cursor), as often as it takes: a read
/// cut short or counting fewer than `stored` entries starts over.
/// nx-27017 answers a read of a cursor it dropped (when the connection
/// that opened it closed) with a last, empty batch rather than an error,
/// and a seen-set declared whole without every stored URL would admit some
/// of them again.
async fn whole(
    frontier: &Collection<FrontierDoc>,
    stored: u64,
    tx: &mpsc::Sender<SeenScan>,
    timing: &TimingLog,
) {
    let mut backoff = store::Backoff::default();
    loop {
        let start = Instant::now();
        let res = whole_once(frontier, tx).await;
        let (outcome, n) = match &res {
            Ok(n) => ("ok", usize::try_from(*n).unwrap_or(usize::MAX)),
            Err(_) => ("error", 0),
        };
        timing.record_batch(Op::SeenScan, start.elapsed(), outcome, n);
        match res {
            Ok(n) if n < stored => {
                let why = format!("the store ended the read after {n} of at least {stored} URLs");
                backoff.note(WHAT, &why).await
            }
            Ok(_) => {
                let _ = tx.send(SeenScan::Done).await;
                return;
            }
            Err(_) if tx.is_closed() => return,
            Err(why) => backoff.note(WHAT, &why).await,
        }
    }
}

/// One read of every stored URL; how many documents it read (a malformed
/// `_id` is counted, as the summary counts it, but not sent).
async fn whole_once(frontier: &Collection<FrontierDoc>, tx: &mpsc::Sender<SeenScan>) -> Result<u64, String> {
    let raw = frontier.clone_with_type::<RawDocumentBuf>();
    let find = raw.find(doc! {}).projection(projection()).batch_size(READ_BATCH);
    let mut cursor = match tokio::time::timeout(WHOLE_FIRST_BATCH, find).await {
        Ok(c) => c.map_err(|e| e.to_string())?,
        Err(_) => return Err("the store did not answer".into()),
    };
    let mut batch = Vec::with_capacity(PAGE);
    let mut read = 0u64;
    loop {
        let next = match tokio::time::timeout(STALL, cursor.try_next()).await {
            Ok(n) => n.map_err(|e| e.to_string())?,
            Err(_) => return Err("the store stopped answering".into()),
        };
        let Some(raw) = next else { break };
        read = read.saturating_add(1);
        batch.extend(scanned(&raw));
        if batch.len() >= PAGE {
            let full = std::mem::replace(&mut batch, Vec::with_capacity(PAGE));
            tx.send(SeenScan::Urls(full))
                .await
                .map_err(|_| "nobody listens".to_string())?;
        }
    }
    if !batch.is_empty() {
        tx.send(SeenScan::Urls(batch))
            .await
            .map_err(|_| "nobody listens".to_string())?;
    }
    Ok(read)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{rawdoc, Bson};

    /// A store's answer to a page filter, as MongoDB gives it: entries
    /// whose domain is a string matching the filter (`$gte`, `$gt`, `$eq`
    /// on the domain; `$gt` on an integer `seq`), by domain and `seq`, at
    /// most `page`. `store` is sorted that way.
    fn answer(store: &[RawDocumentBuf], filter: &bson::Document, page: usize) -> Vec<RawDocumentBuf> {
        let dom = filter.get_document(FrontierDoc::DOMAIN).unwrap();
        let seq_gt = filter
            .get_document(FrontierDoc::SEQ)
            .ok()
            .map(|s| match s.get("$gt") {
                Some(Bson::Int64(n)) => *n,
                other => panic!("seq filter {other:?}"),
            });
        store
            .iter()
            .filter(|d| {
                let Ok(domain) = d.get_str(FrontierDoc::DOMAIN) else {
                    return false;
                };
                let by_domain = match dom.iter().next().unwrap() {
                    (op, Bson::String(v)) if op == "$gte" => domain >= v.as_str(),
                    (op, Bson::String(v)) if op == "$gt" => domain > v.as_str(),
                    (op, Bson::String(v)) if op == "$eq" => domain == v.as_str(),
                    other => panic!("domain filter {other:?}"),
                };
                by_domain && seq_gt.is_none_or(|gt| FrontierDoc::raw_seq(d).is_some_and(|s| s > gt))
            })
            .take(page)
            .cloned()
            .collect()
    }

    fn entry(domain: &str, seq: i64) -> RawDocumentBuf {
        rawdoc! {"_id": format!("http://{domain}/{seq}"), "domain": domain, "seq": seq}
    }

    /// Runs the pages over `store` to the end; the URLs in read order.
    fn read_all(store: &mut [RawDocumentBuf], last_seq: i64, page: usize) -> (Vec<String>, Pages) {
        store.sort_by_key(|d| {
            (
                d.get_str(FrontierDoc::DOMAIN).unwrap_or("").to_string(),
                FrontierDoc::raw_seq(d).unwrap_or(i64::MIN),
            )
        });
        let mut pages = Pages::new(last_seq, page);
        let mut urls = Vec::new();
        let mut asked = 0;
        while let Some(p) = pages.next_page() {
            asked += 1;
            assert!(asked < 10_000, "the pages never end");
            urls.extend(
                pages
                    .take(&answer(store, &p.filter, page))
                    .unwrap()
                    .into_iter()
                    .map(|u| u.url),
            );
        }
        (urls, pages)
    }

    #[test]
    fn deferred_entries_carry_their_domain_and_depth() {
        let queued = rawdoc! {"_id": "http://a.test/1", "domain": "a.test", "seq": 1i64, "state": "queued", "depth": 2};
        let deferred = rawdoc! {"_id": "http://a.test/2", "domain": "a.test", "seq": 2i64, "state": "deferred", "depth": 3};
        assert_eq!(scanned(&queued).unwrap().deferred, None);
        assert_eq!(
            scanned(&deferred).unwrap().deferred,
            Some(("a.test".to_string(), 3))
        );
        assert_eq!(scanned(&rawdoc! {"_id": 7}), None);
    }

    #[test]
    fn pages_read_every_entry_once_across_domains_of_every_size() {
        // One domain over several pages, a domain exactly one page long,
        // many one-entry domains, and seqs interleaved across domains.
        let mut store = Vec::new();
        let mut seq = 0;
        for i in 0..40 {
            let domain = match i % 4 {
                0 => "big.test".to_string(),
                1 => "three.test".to_string(),
                _ => format!("d{i:02}.test"),
            };
            if domain == "three.test" && i > 9 {
                continue;
            }
            seq += 1;
            store.push(entry(&domain, seq));
        }
        let n = store.len() as u64;
        for page in [1, 2, 3, 4, 7, 100] {
            let (mut urls, pages) = read_all(&mut store, seq, page);
            assert_eq!(urls.len() as u64, n, "page {page}: {urls:?}");
            urls.sort();
            urls.dedup();
            assert_eq!(urls.len() as u64, n, "page {page}: an entry read twice");
            assert_eq!(pages.counted, n, "page {page}");
        }
    }

    #[test]
    fn entries_written_after_start_up_or_without_a_seq_are_not_counted() {
        let mut store = vec![entry("a.test", 1), entry("a.test", 2), entry("b.test", 3)];
        // Admitted after the summary: read, not counted.
        store.push(entry("a.test", 9));
        // From an older version: no `seq`, or 0.
        store.push(rawdoc! {"_id": "http://b.test/old", "domain": "b.test"});
        store.push(rawdoc! {"_id": "http://c.test/old", "domain": "c.test", "seq": 0_i64});
        let (urls, pages) = read_all(&mut store, 3, 2);
        assert_eq!(pages.counted, 3);
        assert!(urls.contains(&"http://a.test/9".to_string()));
        // Fewer than the summary's 6 entries: the whole collection is read.
        assert!(pages.counted < store.len() as u64);
    }

    #[test]
    fn a_full_page_that_does_not_move_on_stops_the_pages() {
        // A page of entries without an integer `seq` gives no place to go on from.
        let no_seq = |i: i32| rawdoc! {"_id": format!("http://a.test/{i}"), "domain": "a.test"};
        let mut pages = Pages::new(5, 2);
        assert_eq!(pages.take(&[no_seq(1), no_seq(2)]), Err(Stuck));
        // A store that answers the same full page again.
        let mut pages = Pages::new(5, 2);
        let page = [entry("a.test", 1), entry("a.test", 2)];
        assert!(pages.take(&page).is_ok());
        assert_eq!(pages.take(&page), Err(Stuck));
    }

    #[test]
    fn page_filters_seek_the_domain_then_the_domains_after_it() {
        let mut pages = Pages::new(10, 2);
        let across = doc! {"domain": 1, "seq": 1};
        let page = |filter, sort| Some(Page { filter, sort });
        assert_eq!(
            pages.next_page(),
            page(doc! {"domain": {"$gte": ""}}, across.clone())
        );
        pages.take(&[entry("a.test", 1), entry("a.test", 4)]).unwrap();
        // Within the domain, by `seq` alone (see `queue_reader::by_seq`).
        assert_eq!(
            pages.next_page(),
            page(
                doc! {"domain": {"$eq": "a.test"}, "seq": {"$gt": 4_i64}},
                doc! {"seq": 1}
            )
        );
        pages.take(&[entry("a.test", 7)]).unwrap();
        assert_eq!(
            pages.next_page(),
            page(doc! {"domain": {"$gt": "a.test"}}, across)
        );
        pages.take(&[entry("b.test", 2)]).unwrap();
        assert_eq!(pages.next_page(), None);
    }
}
