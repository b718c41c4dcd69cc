//! Batched page writes, and the report that follows a successful write.
//!
//! A result is reported to the supervisor only after its page is in the
//! store, so a crash can never leave the dispatcher believing a page was
//! stored when it was not. Writes are unordered `insert_many` batches keyed
//! by URL: a retried batch meets duplicate-key errors, which count as
//! success, so a page is stored exactly once.
//!
//! Errors are told apart by what a retry can do about them:
//! - the store is down, slow or failing over: the batch is retried with
//!   backoff for as long as it takes; the queue, bounded in bytes, then
//!   fills up and the crawl pauses instead of dropping pages or growing;
//! - the store refuses a document for good (over its size limit, invalid):
//!   that page alone fails, reported with kind `store_rejected`, and the
//!   rest of its batch is written;
//! - an error we cannot place is retried a few times, then handled as a
//!   refusal, so no loop is endless on an error a retry cannot fix.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bson::Document;
use mongodb::error::{ErrorKind, WriteFailure};
use shared::protocol::{CrawlResult, FailureKind, Outcome};
use shared::store::{self, Backoff, Stores};
use shared::timing::{Op, TimingLog};
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};

const BATCH_DOCS: usize = 256;
const BATCH_WAIT: Duration = Duration::from_millis(20);
const QUEUE: usize = 1024;
/// Page bytes (KiB) queued for writing at most. Stored pages are a few KB
/// as a rule but can be 12 MiB; a bound in count alone let one child hold
/// gigabytes while the store was refusing or slow.
const QUEUE_KIB: u32 = 64 * 1024;
/// Tries for an error that is neither an outage nor a refusal.
const MAX_UNCLEAR_TRIES: u32 = 5;

struct Queued {
    doc: Document,
    result: CrawlResult,
    _budget: OwnedSemaphorePermit,
}

#[derive(Clone)]
pub struct PageWriter {
    tx: mpsc::Sender<Queued>,
    budget: Arc<Semaphore>,
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
        let budget = Arc::new(Semaphore::new(QUEUE_KIB as usize));
        (PageWriter { tx, budget }, handle)
    }

    /// Queues a page; waits only when the queue is full (store slow or down).
    pub async fn submit(&self, doc: Document, result: CrawlResult) {
        let kib = (approx_bytes(&doc) / 1024 + 1).min(QUEUE_KIB as usize) as u32;
        // The semaphore is never closed.
        let Ok(budget) = self.budget.clone().acquire_many_owned(kib).await else {
            return;
        };
        // The receiver lives until all senders are gone, so this cannot fail.
        let _ = self
            .tx
            .send(Queued {
                doc,
                result,
                _budget: budget,
            })
            .await;
    }
}

/// A page document's size, near enough: its body and a little for the rest.
fn approx_bytes(doc: &Document) -> usize {
    let body = match doc.get("body") {
        Some(bson::Bson::Binary(b)) => b.bytes.len(),
        _ => 0,
    };
    body + 512
}

async fn run(
    stores: Stores,
    mut rx: mpsc::Receiver<Queued>,
    report: mpsc::UnboundedSender<CrawlResult>,
    timing: TimingLog,
) {
    let pages = stores.pages();
    let mut batch = Vec::with_capacity(BATCH_DOCS);
    while let Some(first) = rx.recv().await {
        batch.push(first);
        let deadline = tokio::time::Instant::now() + BATCH_WAIT;
        while batch.len() < BATCH_DOCS {
            match tokio::time::timeout_at(deadline, rx.recv()).await {
                Ok(Some(q)) => batch.push(q),
                _ => break,
            }
        }
        let docs: Vec<Document> = batch.iter().map(|q| q.doc.clone()).collect();
        let refused = write_batch(&pages, &docs, &timing).await;
        metrics::counter!("crawler_pages_stored_total").increment((docs.len() - refused.len()) as u64);
        for (i, q) in batch.drain(..).enumerate() {
            let mut result = q.result;
            if let Some((_, why)) = refused.iter().find(|(at, _)| *at == i) {
                metrics::counter!("crawler_store_rejected_total").increment(1);
                eprintln!(
                    "crawler-child: the store refused the page of {}: {why}",
                    result.url
                );
                result.outcome = Outcome::failed(FailureKind::StoreRejected, why.clone());
                result.outlinks.clear();
            }
            let _ = report.send(result);
        }
    }
}

/// What a failed write means for the documents in it.
#[derive(Debug, PartialEq)]
enum Verdict {
    /// Everything is stored (the errors were duplicates).
    Stored,
    /// The store is unavailable: retry the whole write.
    Outage,
    /// The store refused these documents (index in the write, reason) for
    /// good; the others are stored.
    Refused(Vec<(usize, String)>),
    /// The write as a whole was refused before reaching the documents
    /// (a client-side limit): retry them one by one to find the culprit.
    Split(String),
    /// Neither: retry a few times, then treat as a refusal.
    Unclear(String),
}

/// Server codes that mean "not now" (shutdown, step-down, time limits).
const TRANSIENT_CODES: [i32; 12] = [6, 7, 50, 89, 91, 189, 262, 9001, 10107, 11600, 11602, 13435];

fn verdict(err: &mongodb::error::Error) -> Verdict {
    match err.kind.as_ref() {
        ErrorKind::InsertMany(e) => {
            if e.write_concern_error.is_some() {
                return Verdict::Outage;
            }
            let errs = e.write_errors.as_deref().unwrap_or_default();
            if errs.iter().any(|w| TRANSIENT_CODES.contains(&w.code)) {
                return Verdict::Outage;
            }
            let refused: Vec<_> = errs
                .iter()
                .filter(|w| w.code != 11000)
                .map(|w| (w.index, format!("code {}: {}", w.code, w.message)))
                .collect();
            if refused.is_empty() {
                Verdict::Stored
            } else {
                Verdict::Refused(refused)
            }
        }
        ErrorKind::Write(WriteFailure::WriteError(w)) if w.code == 11000 => Verdict::Stored,
        ErrorKind::Write(WriteFailure::WriteError(w)) if !TRANSIENT_CODES.contains(&w.code) => {
            Verdict::Refused(vec![(0, format!("code {}: {}", w.code, w.message))])
        }
        ErrorKind::InvalidArgument { .. } | ErrorKind::BsonSerialization(_) => {
            Verdict::Split(err.to_string())
        }
        ErrorKind::Io(_)
        | ErrorKind::ServerSelection { .. }
        | ErrorKind::ConnectionPoolCleared { .. }
        | ErrorKind::DnsResolve { .. }
        | ErrorKind::Write(_) => Verdict::Outage,
        ErrorKind::Command(c) if TRANSIENT_CODES.contains(&c.code) => Verdict::Outage,
        _ if err.contains_label(mongodb::error::RETRYABLE_WRITE_ERROR) => Verdict::Outage,
        _ => Verdict::Unclear(err.to_string()),
    }
}

/// Writes `docs`; returns the ones the store refused for good (index, why).
/// Returns only once every other document is stored.
async fn write_batch(
    pages: &mongodb::Collection<Document>,
    docs: &[Document],
    timing: &TimingLog,
) -> Vec<(usize, String)> {
    let mut backoff = Backoff::default();
    let mut unclear = 0;
    loop {
        let start = Instant::now();
        let res = store::deadline(pages.insert_many(docs).ordered(false)).await;
        let verdict = match &res {
            None => Verdict::Outage,
            Some(Ok(_)) => Verdict::Stored,
            Some(Err(e)) => verdict(e),
        };
        let outcome = match verdict {
            Verdict::Stored => "ok",
            Verdict::Refused(_) => "refused",
            _ => "error",
        };
        timing.record(Op::Store, start.elapsed(), outcome, None, None);
        match verdict {
            Verdict::Stored => return Vec::new(),
            Verdict::Refused(refused) => return refused,
            Verdict::Split(_) if docs.len() > 1 => return write_one_by_one(pages, docs, timing).await,
            Verdict::Split(why) => return vec![(0, why)],
            Verdict::Unclear(why) => {
                unclear += 1;
                if unclear >= MAX_UNCLEAR_TRIES {
                    if docs.len() > 1 {
                        return write_one_by_one(pages, docs, timing).await;
                    }
                    return vec![(0, why)];
                }
                backoff.note("crawler-child: storing pages", &why).await;
            }
            Verdict::Outage => {
                let why = match &res {
                    Some(Err(e)) => e.to_string(),
                    _ => format!("no answer within {:?}", store::OP_TIMEOUT),
                };
                backoff.note("crawler-child: storing pages", &why).await;
            }
        }
    }
}

/// Writes each document alone, so one the store refuses is found and the
/// others are stored.
async fn write_one_by_one(
    pages: &mongodb::Collection<Document>,
    docs: &[Document],
    timing: &TimingLog,
) -> Vec<(usize, String)> {
    let mut refused = Vec::new();
    for (i, doc) in docs.iter().enumerate() {
        // A batch of one cannot be split again: its refusal is final.
        for (_, why) in Box::pin(write_batch(pages, std::slice::from_ref(doc), timing)).await {
            refused.push((i, why));
        }
    }
    refused
}

#[cfg(test)]
mod tests {
    use super::*;
    use mongodb::error::{Error, InsertManyError};

    fn insert_many_error(codes: &[i32]) -> Error {
        let write_errors: Vec<_> = codes
            .iter()
            .enumerate()
            .map(|(index, code)| serde_json::json!({"index": index, "code": code, "errmsg": "x"}))
            .collect();
        let e: InsertManyError =
            serde_json::from_value(serde_json::json!({ "writeErrors": write_errors })).unwrap();
        Error::from(ErrorKind::InsertMany(e))
    }

    #[test]
    fn refusals_outages_and_duplicates_are_told_apart() {
        assert_eq!(verdict(&insert_many_error(&[11000, 11000])), Verdict::Stored);
        assert_eq!(
            verdict(&insert_many_error(&[11000, 10334])),
            Verdict::Refused(vec![(1, "code 10334: x".into())])
        );
        assert_eq!(verdict(&insert_many_error(&[91])), Verdict::Outage);
        // A client-side refusal of the whole write (InvalidArgument, which
        // only the driver can build, is handled the same way).
        let unserialisable = bson::to_document(&5i32).unwrap_err();
        let client_side = Error::from(ErrorKind::BsonSerialization(unserialisable));
        assert!(matches!(verdict(&client_side), Verdict::Split(_)));
        let io = Error::from(ErrorKind::Io(Arc::new(std::io::Error::other("reset"))));
        assert_eq!(verdict(&io), Verdict::Outage);
    }
}
