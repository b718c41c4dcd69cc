//! Writes the frontier to MongoDB in batches, off the dispatch path.
//!
//! New URLs become `{_id: url, domain, depth, seq, state: "queued"}`; failed
//! and disallowed ones get their state set, failed ones with the kind of
//! their failure (`failure: "timeout"`, `"blocked_address"`, ...), so the
//! store says why. Fetched ones are not marked: their stored page says
//! they are finished (`crate::finished`), so a page costs the frontier no
//! write of its own. Inserting by `_id` makes a retried batch harmless (duplicates are
//! ignored). A restarted dispatcher reads this collection back to resume,
//! and domains' queues are read from it (see `crate::frontier`): the
//! writer says how far its inserts are written ([`FrontierWriter::durable`]),
//! so nothing is read before it is there. A URL found over a budget is
//! inserted `deferred` (with the budget it was over) instead of queued,
//! and one a later run takes up again is turned back into a queued entry
//! with a new `seq` ([`FrontierWriter::requeue`]).

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bson::{doc, RawDocumentBuf};
use futures::TryStreamExt;
use link::failure::FailureKind;
use shared::timing::{Op, TimingLog};
use store::docs::{Deferral, FrontierDoc, UrlState};
use store::write;
use store::{self, Backoff, Stores};
use tokio::sync::{mpsc, oneshot};

/// Most writes in one batch.
pub(crate) const BATCH: usize = 2000;
const WAIT: Duration = Duration::from_millis(100);

enum Cmd {
    /// A new URL, and whether the dispatcher wants to know if the store
    /// took it (an unsure URL, see `crate::seen`).
    Insert(FrontierDoc, bool),
    Mark(String, UrlState, Option<FailureKind>),
    /// A deferred URL queued again, with its new `seq`.
    Requeue(String, i64),
    Flush(oneshot::Sender<()>),
}

#[derive(Clone)]
pub(crate) struct FrontierWriter {
    tx: mpsc::UnboundedSender<Cmd>,
    durable: Arc<AtomicI64>,
    /// Inserts and marks sent but not written yet.
    backlog: Arc<AtomicUsize>,
}

/// Whether the store took each unsure URL of a batch: (`seq`, taken).
pub(crate) type Confirmed = Vec<(i64, bool)>;

impl FrontierWriter {
    /// The writer, and where it says whether the store took the unsure
    /// URLs (sent before `durable` covers them, so a read that could
    /// return one is asked for only after its answer is on the way).
    pub(crate) fn spawn(
        stores: Stores,
        timing: TimingLog,
    ) -> (FrontierWriter, mpsc::UnboundedReceiver<Confirmed>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let (confirm_tx, confirm_rx) = mpsc::unbounded_channel();
        let durable = Arc::new(AtomicI64::new(0));
        let backlog = Arc::new(AtomicUsize::new(0));
        tokio::spawn(run(
            stores,
            rx,
            confirm_tx,
            timing,
            durable.clone(),
            backlog.clone(),
        ));
        (FrontierWriter { tx, durable, backlog }, confirm_rx)
    }

    /// Inserts and marks sent but not written yet: how far the store is
    /// behind. The dispatcher stops leasing while it is too far (see
    /// `crawl.rs`), so a slow store slows the crawl instead of filling
    /// the dispatcher's memory with writes.
    pub(crate) fn backlog(&self) -> usize {
        self.backlog.load(Ordering::Relaxed)
    }

    /// Writes a newly admitted URL; `seq` must be higher than any inserted
    /// before. With `confirm`, says whether the store took it (a URL stored
    /// before stays as it was: the unique `_id` index). Takes the strings
    /// the state machine made for it, so they are not copied again.
    pub(crate) fn insert(&self, url: String, domain: String, depth: u16, seq: i64, confirm: bool) {
        self.send_insert(url, domain, depth, seq, None, confirm);
    }

    /// Writes a URL found over a budget: stored `deferred`, not queued,
    /// so that it is known (not found again) and a later run with a larger
    /// budget can take it up. Its `seq` is in the same order as inserts'.
    pub(crate) fn defer(&self, url: String, domain: String, depth: u16, seq: i64, why: Deferral) {
        self.send_insert(url, domain, depth, seq, Some(why), false);
    }

    /// A new entry for the writer: queued, or deferred for `deferred`.
    fn send_insert(
        &self,
        url: String,
        domain: String,
        depth: u16,
        seq: i64,
        deferred: Option<Deferral>,
        confirm: bool,
    ) {
        self.backlog.fetch_add(1, Ordering::Relaxed);
        let doc = FrontierDoc {
            url,
            domain,
            depth: i32::from(depth),
            state: if deferred.is_some() {
                UrlState::Deferred
            } else {
                UrlState::Queued
            },
            failure: None,
            deferred,
            seq,
        };
        let _ = self.tx.send(Cmd::Insert(doc, confirm));
    }

    /// Queues a deferred URL again under a new `seq` (higher than any
    /// inserted before), written before `durable` covers that `seq`.
    pub(crate) fn requeue(&self, url: String, seq: i64) {
        self.backlog.fetch_add(1, Ordering::Relaxed);
        let _ = self.tx.send(Cmd::Requeue(url, seq));
    }

    /// Every URL inserted with a `seq` up to this one is written (or was
    /// refused by the store for good).
    pub(crate) fn durable(&self) -> i64 {
        self.durable.load(Ordering::Acquire)
    }

    /// Sets a finished URL's state; `failure`: why a failed one failed.
    pub(crate) fn mark(&self, url: String, state: UrlState, failure: Option<FailureKind>) {
        self.backlog.fetch_add(1, Ordering::Relaxed);
        let _ = self.tx.send(Cmd::Mark(url, state, failure));
    }

    /// Resolves once everything sent before it is written.
    pub(crate) async fn flush(&self) {
        let (tx, rx) = oneshot::channel();
        if self.tx.send(Cmd::Flush(tx)).is_ok() {
            let _ = rx.await;
        }
    }
}

async fn run(
    stores: Stores,
    mut rx: mpsc::UnboundedReceiver<Cmd>,
    confirm_tx: mpsc::UnboundedSender<Confirmed>,
    timing: TimingLog,
    durable: Arc<AtomicI64>,
    backlog: Arc<AtomicUsize>,
) {
    let frontier = stores.frontier();
    let mut inserts = Vec::new();
    let mut marks: Vec<Mark> = Vec::new();
    let mut requeues: Vec<(String, i64)> = Vec::new();
    let mut flushed = Vec::new();
    let mut unsure: Vec<(String, i64)> = Vec::new();
    while let Some(cmd) = rx.recv().await {
        let deadline = tokio::time::Instant::now() + WAIT;
        let mut next = Some(cmd);
        while let Some(cmd) = next.take() {
            match cmd {
                Cmd::Insert(d, confirm) => {
                    if confirm {
                        unsure.push((d.url.clone(), d.seq));
                    }
                    inserts.push(d);
                }
                Cmd::Mark(url, s, failure) => marks.push((url, s, failure)),
                Cmd::Requeue(url, seq) => requeues.push((url, seq)),
                Cmd::Flush(done) => flushed.push(done),
            }
            if !flushed.is_empty() || inserts.len() + marks.len() + requeues.len() >= BATCH {
                break;
            }
            if let Ok(Some(cmd)) = tokio::time::timeout_at(deadline, rx.recv()).await {
                next = Some(cmd);
            }
        }
        // Inserts arrive in `seq` order, and a batch is written before
        // the next is taken.
        let last = inserts
            .last()
            .map(|d| d.seq)
            .into_iter()
            .chain(requeues.iter().map(|r| r.1))
            .max();
        let written = inserts.len() + marks.len() + requeues.len();
        write_requeues(&frontier, &mut requeues, &timing).await;
        write_inserts(&frontier, &mut inserts, &timing).await;
        if !unsure.is_empty() {
            let _ = confirm_tx.send(confirm(&frontier, &mut unsure, &timing).await);
        }
        if let Some(seq) = last {
            durable.fetch_max(seq, Ordering::AcqRel);
        }
        write_marks(&frontier, &mut marks, &timing).await;
        backlog.fetch_sub(written, Ordering::Relaxed);
        if !flushed.is_empty() {
            slow_flush().await;
        }
        for done in flushed.drain(..) {
            let _ = done.send(());
        }
    }
}

/// Which of `unsure` (URL, `seq`) the store took: those stored with their
/// own `seq`. One stored with another was there before (the insert was a
/// duplicate); one not there at all was refused (and logged). Asked by
/// `_id`, retried until the store answers.
async fn confirm(
    frontier: &mongodb::Collection<FrontierDoc>,
    unsure: &mut Vec<(String, i64)>,
    timing: &TimingLog,
) -> Confirmed {
    let urls: Vec<&str> = unsure.iter().map(|(u, _)| u.as_str()).collect();
    let mut backoff = Backoff::default();
    let stored: HashMap<String, i64> = loop {
        let start = Instant::now();
        let query = async {
            let cursor = frontier
                .clone_with_type::<RawDocumentBuf>()
                .find(doc! {"_id": {"$in": &urls}})
                .projection(doc! {FrontierDoc::SEQ: 1})
                .await?;
            cursor.try_collect::<Vec<RawDocumentBuf>>().await
        };
        let res = store::deadline(query).await;
        let outcome = if matches!(res, Some(Ok(_))) { "ok" } else { "error" };
        timing.record_batch(Op::FrontierRead, start.elapsed(), outcome, urls.len());
        match res {
            Some(Ok(docs)) => break docs.iter().filter_map(url_and_seq).collect(),
            Some(Err(e)) => backoff.wait("confirming unsure frontier inserts", &e).await,
            None => {
                backoff
                    .note("confirming unsure frontier inserts", "no answer in time")
                    .await
            }
        }
    };
    let confirmed = unsure
        .iter()
        .map(|(url, seq)| (*seq, stored.get(url) == Some(seq)))
        .collect();
    unsure.clear();
    confirmed
}

/// A frontier document's `_id` and `seq`.
fn url_and_seq(raw: &RawDocumentBuf) -> Option<(String, i64)> {
    Some((raw.get_str("_id").ok()?.to_string(), FrontierDoc::raw_seq(raw)?))
}

/// Test-only fault: `CRAWLER_FAULT_FLUSH_MS` delays the answer to every
/// flush, as a store far behind does at the end of a big crawl.
async fn slow_flush() {
    static MS: std::sync::OnceLock<Option<u64>> = std::sync::OnceLock::new();
    let ms = *MS.get_or_init(|| {
        let ms = std::env::var("CRAWLER_FAULT_FLUSH_MS").ok()?.parse().ok()?;
        tracing::warn!("FAULT INJECTION: CRAWLER_FAULT_FLUSH_MS={ms}");
        Some(ms)
    });
    if let Some(ms) = ms {
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }
}

async fn write_inserts(
    frontier: &mongodb::Collection<FrontierDoc>,
    docs: &mut Vec<FrontierDoc>,
    timing: &TimingLog,
) {
    if docs.is_empty() {
        return;
    }
    let what = "frontier insert";
    for (i, why) in write::insert_unordered(frontier, docs, timing, Op::FrontierInsert, what).await {
        // Cannot happen with URLs of at most 2 KiB, but if the store ever
        // refuses one, the crawl goes on without it, loudly.
        crate::metric::FRONTIER_REJECTED.get().increment(1);
        let url = docs.get(i).map_or("?", |d| d.url.as_str());
        tracing::error!(url, error = %why, "the store refused a frontier entry; it will not be resumed");
    }
    docs.clear();
}

/// Deferred URLs queued again: one update each (each has its own `seq`).
/// Rare (a run whose budgets grew takes up what earlier runs deferred),
/// so not batched.
async fn write_requeues(
    frontier: &mongodb::Collection<FrontierDoc>,
    requeues: &mut Vec<(String, i64)>,
    timing: &TimingLog,
) {
    for (url, seq) in requeues.drain(..) {
        let set = doc! {"$set": {FrontierDoc::STATE: UrlState::Queued.as_str(), FrontierDoc::SEQ: seq},
        "$unset": {FrontierDoc::DEFERRED: ""}};
        let mut backoff = Backoff::default();
        loop {
            let start = Instant::now();
            let res = store::deadline(frontier.update_one(doc! {"_id": &url}, set.clone())).await;
            let outcome = if matches!(res, Some(Ok(_))) { "ok" } else { "error" };
            timing.record_batch(Op::FrontierInsert, start.elapsed(), outcome, 1);
            match res {
                Some(Ok(_)) => break,
                Some(Err(e)) => backoff.wait("queueing a deferred URL again", &e).await,
                None => {
                    backoff
                        .note("queueing a deferred URL again", "no answer in time")
                        .await
                }
            }
        }
    }
}

/// A URL, its final state and, when it failed, why.
type Mark = (String, UrlState, Option<FailureKind>);

/// One `update_many` per state (and failure kind) among `marks`.
async fn write_marks(frontier: &mongodb::Collection<FrontierDoc>, marks: &mut Vec<Mark>, timing: &TimingLog) {
    let mut groups: BTreeMap<(UrlState, Option<FailureKind>), Vec<&str>> = BTreeMap::new();
    for (url, s, failure) in marks.iter() {
        groups.entry((*s, *failure)).or_default().push(url.as_str());
    }
    for ((s, failure), urls) in groups {
        let mut set = doc! {FrontierDoc::STATE: s.as_str()};
        if let Some(kind) = failure {
            set.insert(FrontierDoc::FAILURE, kind.as_str());
        }
        let mut backoff = Backoff::default();
        loop {
            let start = Instant::now();
            let update = frontier.update_many(doc! {"_id": {"$in": &urls}}, doc! {"$set": set.clone()});
            let res = store::deadline(update).await;
            let outcome = if matches!(res, Some(Ok(_))) { "ok" } else { "error" };
            timing.record_batch(Op::FrontierInsert, start.elapsed(), outcome, urls.len());
            match res {
                Some(Ok(_)) => break,
                Some(Err(e)) => backoff.wait("frontier state update", &e).await,
                None => backoff.note("frontier state update", "no answer in time").await,
            }
        }
    }
    marks.clear();
}
