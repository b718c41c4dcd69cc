//! Batched page writes, and the report that follows a successful write.
//!
//! A result is reported to the supervisor only after its page is in the
//! store, so a crash can never leave the dispatcher believing a page was
//! stored when it was not. Writes are unordered `insert_many` batches keyed
//! by URL: a retried batch meets duplicate-key errors, which count as
//! success, so a page is stored exactly once.
//!
//! Errors are told apart by what a retry can do about them (see
//! `store::write`): while the store is down the batch is retried and
//! the queue, bounded in bytes, fills up, so the crawl pauses instead of
//! dropping pages or growing; a page the store refuses for good fails alone,
//! reported with kind `store_rejected`, and the rest of its batch is written.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use link::protocol::{CrawlResult, FailureKind, Outcome};
use shared::timing::{Op, TimingLog};
use store::docs::{CaptureDoc, PageDoc, RobotsTxtDoc};
use store::read::{find_all, Find};
use store::write;
use store::Stores;
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};

use crate::metric;
use crate::revisit::RevisitWrite;
use crate::sitemap_due::{self, Lastmod};

const BATCH_DOCS: usize = 256;
const QUEUE: usize = 1024;
/// Page bytes (KiB) queued for writing at most. Stored pages are a few KB
/// as a rule but can be 12 MiB; a bound in count alone let one child hold
/// gigabytes while the store was refusing or slow.
const QUEUE_KIB: u32 = 64 * 1024;

/// What is written: for a crawled URL, with the result reported once it
/// is stored.
enum Write {
    /// A first visit: its page.
    Page(PageDoc, CrawlResult),
    /// A revisit: its capture, if kept, and the page's new schedule.
    Revisit(RevisitWrite, CrawlResult),
    /// The responses of one robots.txt fetch, for the archive: nothing is
    /// reported (a refused one is logged).
    Robots(Vec<RobotsTxtDoc>),
    /// A sitemap's lastmods (see `crate::sitemap_due`), after its page:
    /// nothing is reported.
    Lastmods(Vec<Lastmod>),
}

impl Write {
    /// The domain it is for, to time its wait by.
    fn domain(&self) -> &str {
        match self {
            Write::Page(_, r) | Write::Revisit(_, r) => &r.domain,
            Write::Robots(docs) => docs.first().map_or("", |d| &d.page.domain),
            Write::Lastmods(_) => "",
        }
    }
}

struct Queued {
    write: Write,
    /// When it was handed over: its `store_wait` ends when its batch starts.
    queued: Instant,
    /// Its share of the queue's byte budget, given back once it is written.
    budget: OwnedSemaphorePermit,
}

#[derive(Clone)]
pub(crate) struct PageWriter {
    tx: mpsc::Sender<Queued>,
    budget: Arc<Semaphore>,
    /// Pages handed over and not yet written (the `store_queue` gauge).
    queued: Arc<AtomicUsize>,
}

impl PageWriter {
    /// Starts the writer task; results are sent to `report` once stored.
    /// The task ends (after a final flush) when every `PageWriter` is dropped.
    pub(crate) fn spawn(
        stores: Stores,
        report: mpsc::UnboundedSender<CrawlResult>,
        timing: TimingLog,
    ) -> (PageWriter, tokio::task::JoinHandle<()>) {
        let (tx, rx) = mpsc::channel(QUEUE);
        let queued = Arc::new(AtomicUsize::new(0));
        let handle = tokio::spawn(run(stores, rx, report, timing, queued.clone()));
        let budget = Arc::new(Semaphore::new(QUEUE_KIB as usize));
        (PageWriter { tx, budget, queued }, handle)
    }

    /// Pages handed over and not yet written.
    pub(crate) fn queued(&self) -> usize {
        self.queued.load(Ordering::Relaxed)
    }

    /// Queues a page; waits only when the queue is full (store slow or down).
    pub(crate) async fn submit(&self, doc: PageDoc, result: CrawlResult) {
        let bytes = approx_bytes(&doc);
        self.queue(Write::Page(doc, result), bytes).await
    }

    /// Queues a revisit's writes, as [`PageWriter::submit`] a page.
    pub(crate) async fn submit_revisit(&self, write: RevisitWrite, result: CrawlResult) {
        let bytes = write.capture.as_ref().map_or(512, |c| approx_bytes(&c.page));
        self.queue(Write::Revisit(write, result), bytes).await
    }

    /// Queues the responses of a robots.txt fetch for the archive.
    pub(crate) async fn submit_robots(&self, docs: Vec<RobotsTxtDoc>) {
        if docs.is_empty() {
            return;
        }
        let bytes = docs.iter().map(|d| approx_bytes(&d.page)).sum();
        self.queue(Write::Robots(docs), bytes).await
    }

    /// Queues a sitemap's lastmods, to be run after its page is written.
    pub(crate) async fn submit_lastmods(&self, lastmods: Vec<Lastmod>) {
        if lastmods.is_empty() {
            return;
        }
        let bytes = lastmods.iter().map(|(url, _)| url.len() + 64).sum();
        self.queue(Write::Lastmods(lastmods), bytes).await
    }

    async fn queue(&self, write: Write, bytes: usize) {
        let queued = Instant::now();
        self.queued.fetch_add(1, Ordering::Relaxed);
        let kib = (bytes / 1024 + 1).min(QUEUE_KIB as usize) as u32;
        // The semaphore is never closed.
        let Ok(budget) = self.budget.clone().acquire_many_owned(kib).await else {
            return;
        };
        // The receiver lives until all senders are gone, so this cannot fail.
        let _ = self
            .tx
            .send(Queued {
                write,
                queued,
                budget,
            })
            .await;
    }
}

/// A page document's size, near enough: its body and a little for the rest.
fn approx_bytes(doc: &PageDoc) -> usize {
    doc.body.as_ref().map_or(0, |b| b.bytes.len()) + 512
}

async fn run(
    stores: Stores,
    mut rx: mpsc::Receiver<Queued>,
    report: mpsc::UnboundedSender<CrawlResult>,
    timing: TimingLog,
    queued: Arc<AtomicUsize>,
) {
    // Off the driver's command monitoring (the child asked for a bulk
    // client), so the writer counts them.
    let (pages, counted) = stores.pages_for_inserts();
    let mut batch = Vec::with_capacity(BATCH_DOCS);
    while let Some(first) = rx.recv().await {
        // Group commit: write what is queued now, without waiting for more.
        // Pages that arrive during a write make the next batch, so batches
        // grow exactly when the store is slow, and a page never waits for
        // others to arrive when it is not (waiting 20 ms for a batch to
        // fill made a page's own store latency the biggest part of its
        // lease in a crawl of little in flight).
        batch.push(first);
        while batch.len() < BATCH_DOCS {
            match rx.try_recv() {
                Ok(q) => batch.push(q),
                Err(_) => break,
            }
        }
        for q in &batch {
            timing.record(
                Op::StoreWait,
                q.queued.elapsed(),
                "ok",
                Some(q.write.domain()),
                None,
            );
        }
        let n = batch.len();
        // The documents move into the writes; each result keeps its queue
        // budget until what it wrote is written.
        let mut docs = Vec::with_capacity(n);
        let mut waiting = Vec::with_capacity(n);
        let mut revisits = Vec::new();
        let mut robots = Vec::new();
        let mut lastmods = Vec::new();
        for q in batch.drain(..) {
            match q.write {
                Write::Page(doc, result) => {
                    docs.push(doc);
                    waiting.push((result, q.budget));
                }
                Write::Revisit(w, result) => revisits.push((w, result, q.budget)),
                Write::Robots(r) => robots.extend(r),
                Write::Lastmods(l) => lastmods.extend(l),
            }
        }
        #[cfg(feature = "fault-injection")]
        crate::fault::slow_store(docs.len()).await;
        if !docs.is_empty() {
            let refused =
                write::insert_counted(&pages, counted, &docs, &timing, Op::Store, "storing pages").await;
            metric::PAGES_STORED
                .get()
                .increment((docs.len() - refused.len()) as u64);
            for (i, (result, _budget)) in waiting.into_iter().enumerate() {
                let refusal = refused
                    .iter()
                    .find(|(at, _)| *at == i)
                    .map(|(_, why)| why.clone());
                send(&report, result, refusal);
            }
        }
        if !revisits.is_empty() {
            write_revisits(&stores, revisits, &report, &timing).await;
        }
        if !robots.is_empty() {
            write_robots(&stores, &robots, &timing).await;
        }
        // After the pages of the batch: a sitemap's before its lastmods.
        if !lastmods.is_empty() {
            write_lastmods(&stores, &lastmods, &timing).await;
        }
        queued.fetch_sub(n, Ordering::Relaxed);
    }
}

/// Reports `result`, as a failure of kind `store_rejected` when the store
/// refused what it wrote.
fn send(report: &mpsc::UnboundedSender<CrawlResult>, mut result: CrawlResult, refusal: Option<String>) {
    if let Some(why) = refusal {
        metric::STORE_REJECTED.get().increment(1);
        tracing::error!(url = %result.url, error = %why, "the store refused a page");
        result.outcome = Outcome::failed(FailureKind::StoreRejected, why);
        result.outlinks.clear();
    }
    let _ = report.send(result);
}

/// A batch's revisits: the captures in one insert, then each page's
/// schedule (`$set` by `_id`; there is no batched update both stores
/// answer). The capture first: a child killed in between leaves the page
/// due, and its next visit stores a capture of its own (another time, so
/// another key) rather than none.
async fn write_revisits(
    stores: &Stores,
    revisits: Vec<(RevisitWrite, CrawlResult, OwnedSemaphorePermit)>,
    report: &mpsc::UnboundedSender<CrawlResult>,
    timing: &TimingLog,
) {
    let (with, captures): (Vec<usize>, Vec<CaptureDoc>) = revisits
        .iter()
        .enumerate()
        .filter_map(|(i, (w, _, _))| Some((i, w.capture.clone()?)))
        .unzip();
    let refused = if captures.is_empty() {
        Vec::new()
    } else {
        write::insert_unordered(
            &stores.captures(),
            &captures,
            timing,
            Op::Store,
            "storing captures",
        )
        .await
    };
    let pages = stores.pages();
    for (i, (w, result, _budget)) in revisits.into_iter().enumerate() {
        let refusal = refused
            .iter()
            .find(|(at, _)| with.get(*at) == Some(&i))
            .map(|(_, why)| why.clone());
        let refusal = match refusal {
            Some(why) => Some(why),
            None => match w.schedule() {
                Ok(fields) => write::set_fields(
                    &pages,
                    &w.url,
                    fields,
                    timing,
                    Op::Store,
                    "moving a page's schedule",
                )
                .await
                .err(),
                Err(e) => Some(e.to_string()),
            },
        };
        send(report, result, refusal);
    }
}

/// A batch's robots.txt responses, in one insert. One the store refuses
/// for good (it never should: 500 KiB at most) is left out of the
/// archive, with an error logged: the crawl itself does not need it
/// (the rules are in the second store).
async fn write_robots(stores: &Stores, docs: &[RobotsTxtDoc], timing: &TimingLog) {
    let refused = write::insert_unordered(
        &stores.robots_txt(),
        docs,
        timing,
        Op::Store,
        "storing robots.txt responses",
    )
    .await;
    for (at, why) in refused {
        let url = docs.get(at).map_or("?", |d| d.id.url.as_str());
        tracing::error!(url, error = %why, "the store refused a robots.txt response");
    }
}

/// A batch's sitemap lastmods (see `crate::sitemap_due`): per chunk, the
/// pages' schedules read, then one `update` command. A read or write that
/// fails leaves those pages on their own schedule (logged): a lastmod
/// only brings a revisit forward.
async fn write_lastmods(stores: &Stores, lastmods: &[Lastmod], timing: &TimingLog) {
    let pages = stores.pages();
    for chunk in lastmods.chunks(sitemap_due::CHUNK) {
        let scheduled = match read_schedules(stores, chunk, timing).await {
            Ok(s) => s,
            Err(why) => {
                tracing::warn!(error = %why, pages = chunk.len(), "sitemap lastmods not applied: reading the pages' schedules failed");
                continue;
            }
        };
        let now = i64::try_from(link::protocol::now_ms()).unwrap_or(i64::MAX);
        let statements = sitemap_due::statements(chunk, &scheduled, now);
        if statements.is_empty() {
            continue;
        }
        match write::update_each(&pages, statements, timing, Op::Store, "applying sitemap lastmods").await {
            Ok(moved) => metric::SITEMAP_DUE.get().increment(moved),
            Err(why) => tracing::warn!(error = %why, "a sitemap lastmod was not applied"),
        }
    }
}

/// The schedules of `chunk`'s stored pages, in one read.
async fn read_schedules(
    stores: &Stores,
    chunk: &[Lastmod],
    timing: &TimingLog,
) -> Result<Vec<sitemap_due::Scheduled>, String> {
    let (filter, projection) = sitemap_due::query(chunk);
    let find = Find {
        filter,
        projection: Some(projection),
        ..Find::default()
    };
    let found = find_all(&stores.pages(), find, store::OP_TIMEOUT, timing, Op::Store).await?;
    // One at a time: a page this version cannot read is passed over.
    Ok(found
        .iter()
        .filter_map(|raw| bson::from_slice(raw.as_bytes()).ok())
        .collect())
}
