//! Batched page writes, and the report that follows a successful write.
//!
//! A result is reported to the supervisor only after its page is in the
//! store, so a crash can never leave the dispatcher believing a page was
//! stored when it was not. Writes are `insert_many` batches keyed by URL:
//! a retried batch meets duplicate-key errors, which count as success, so
//! a page is stored exactly once. While the store is down the batch is
//! retried with backoff; the bounded channel then fills up and the crawl
//! pauses instead of dropping pages.

use std::time::{Duration, Instant};

use bson::Document;
use shared::protocol::CrawlResult;
use shared::store::{only_duplicates, Backoff, Stores};
use shared::timing::{Op, TimingLog};
use tokio::sync::mpsc;

const BATCH_DOCS: usize = 256;
const BATCH_WAIT: Duration = Duration::from_millis(20);
const QUEUE: usize = 1024;

#[derive(Clone)]
pub struct PageWriter {
    tx: mpsc::Sender<(Document, CrawlResult)>,
}

impl PageWriter {
    /// Starts the writer task; results are sent to `report` once stored.
    /// The task ends (after a final flush) when every `PageWriter` is dropped.
    pub fn spawn(
        stores: Stores,
        report: mpsc::UnboundedSender<CrawlResult>,
        timing: TimingLog,
    ) -> (PageWriter, tokio::task::JoinHandle<()>) {
        let (tx, rx) = mpsc::channel(QUEUE);
        let handle = tokio::spawn(run(stores, rx, report, timing));
        (PageWriter { tx }, handle)
    }

    /// Queues a page; waits only when the queue is full (store slow or down).
    pub async fn submit(&self, page: Document, result: CrawlResult) {
        // The receiver lives until all senders are gone, so this cannot fail.
        let _ = self.tx.send((page, result)).await;
    }
}

async fn run(
    stores: Stores,
    mut rx: mpsc::Receiver<(Document, CrawlResult)>,
    report: mpsc::UnboundedSender<CrawlResult>,
    timing: TimingLog,
) {
    let pages = stores.pages();
    let mut docs = Vec::with_capacity(BATCH_DOCS);
    let mut results = Vec::with_capacity(BATCH_DOCS);
    while let Some((doc, result)) = rx.recv().await {
        docs.push(doc);
        results.push(result);
        let deadline = tokio::time::Instant::now() + BATCH_WAIT;
        while docs.len() < BATCH_DOCS {
            match tokio::time::timeout_at(deadline, rx.recv()).await {
                Ok(Some((doc, result))) => {
                    docs.push(doc);
                    results.push(result);
                }
                _ => break,
            }
        }
        write_with_retry(&pages, &docs, &timing).await;
        metrics::counter!("crawler_pages_stored_total").increment(docs.len() as u64);
        docs.clear();
        for r in results.drain(..) {
            let _ = report.send(r);
        }
    }
}

async fn write_with_retry(pages: &mongodb::Collection<Document>, docs: &[Document], timing: &TimingLog) {
    let mut backoff = Backoff::default();
    loop {
        let start = Instant::now();
        let res = pages.insert_many(docs).ordered(false).await;
        let ok = res.as_ref().map_or_else(only_duplicates, |_| true);
        timing.record(
            Op::Store,
            start.elapsed(),
            if ok { "ok" } else { "error" },
            None,
            None,
        );
        match res {
            Err(e) if !ok => backoff.wait("crawler-child: storing pages", &e).await,
            _ => return,
        }
    }
}
