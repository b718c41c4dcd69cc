//! Reads domains' next queued URLs from the store for the frontier's
//! windows (see `crate::frontier`), off the dispatch path: the dispatcher
//! sends [`Refill`]s and gets each one back with what the store holds, or
//! with why it could not be read (the frontier then asks again later).
//! It also looks up the URLs a rejoining supervisor holds that may be
//! queued only in the store ([`crate::frontier::Adoption::look_up`]).

use std::collections::HashMap;
use std::time::Instant;

use bson::{doc, RawDocumentBuf};
use futures::TryStreamExt;
use shared::docs::{FrontierDoc, UrlState};
use shared::store::{self, Stores};
use shared::timing::{Op, TimingLog};
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use crate::frontier::{ReadPage, Refill, Stored, SupId};

/// Reads at once: enough to fill many windows at start-up without a
/// queue of reads in front of the store.
const CONCURRENT: usize = 8;

pub enum Answer {
    Read(Refill, Result<ReadPage, String>),
    /// The held URLs of `sup` found queued in the store, of `asked`.
    Held {
        sup: SupId,
        asked: usize,
        found: Result<Vec<(u64, Stored)>, String>,
    },
}

enum Request {
    Read(Refill),
    Held(SupId, Vec<(u64, String)>),
}

pub struct QueueReader {
    tx: mpsc::UnboundedSender<Request>,
}

impl QueueReader {
    /// Starts the reader; answers arrive on the returned receiver.
    pub fn spawn(stores: &Stores, timing: TimingLog) -> (QueueReader, mpsc::UnboundedReceiver<Answer>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let (answers_tx, answers) = mpsc::unbounded_channel();
        tokio::spawn(run(stores.frontier(), rx, answers_tx, timing));
        (QueueReader { tx }, answers)
    }

    pub fn read(&self, r: Refill) {
        let _ = self.tx.send(Request::Read(r));
    }

    /// Looks up `held` (lease id, URL) of supervisor `sup`.
    pub fn look_up(&self, sup: SupId, held: Vec<(u64, String)>) {
        let _ = self.tx.send(Request::Held(sup, held));
    }
}

async fn run(
    frontier: mongodb::Collection<FrontierDoc>,
    mut rx: mpsc::UnboundedReceiver<Request>,
    answers: mpsc::UnboundedSender<Answer>,
    timing: TimingLog,
) {
    let mut reads = JoinSet::new();
    loop {
        tokio::select! {
            r = rx.recv(), if reads.len() < CONCURRENT => {
                let Some(r) = r else { break };
                let (frontier, timing) = (frontier.clone(), timing.clone());
                reads.spawn(async move {
                    match r {
                        Request::Read(r) => {
                            let res = read(&frontier, &r, &timing).await;
                            Answer::Read(r, res)
                        }
                        Request::Held(sup, held) => Answer::Held {
                            sup,
                            asked: held.len(),
                            found: look_up(&frontier, held).await,
                        },
                    }
                });
            }
            Some(done) = reads.join_next() => {
                if let Ok(answer) = done {
                    let _ = answers.send(answer);
                }
            }
        }
    }
}

/// The queued URLs of `r.domain` with a `seq` in `(r.after, r.upto]`,
/// in `seq` order: one range of the `{domain, seq}` index. The query
/// carries the domain, so on a sharded store it goes to one shard.
async fn read(
    frontier: &mongodb::Collection<FrontierDoc>,
    r: &Refill,
    timing: &TimingLog,
) -> Result<ReadPage, String> {
    let start = Instant::now();
    let filter = doc! {
        FrontierDoc::DOMAIN: &r.domain,
        FrontierDoc::SEQ: {"$gt": r.after, "$lte": r.upto},
        FrontierDoc::STATE: UrlState::Queued.as_str(),
    };
    let limit = i64::try_from(r.limit).unwrap_or(i64::MAX);
    let query = async {
        let cursor = frontier
            .clone_with_type::<RawDocumentBuf>()
            .find(filter)
            .sort(doc! {FrontierDoc::DOMAIN: 1, FrontierDoc::SEQ: 1})
            .limit(limit)
            .await?;
        cursor.try_collect::<Vec<RawDocumentBuf>>().await
    };
    let res = match store::deadline(query).await {
        Some(Ok(docs)) => Ok(page_of(&docs, r.limit)),
        Some(Err(e)) => Err(e.to_string()),
        None => Err("no answer in time".to_string()),
    };
    let (outcome, n) = match &res {
        Ok(page) => ("ok", page.urls.len()),
        Err(_) => ("error", 0),
    };
    timing.record_batch(Op::FrontierRead, start.elapsed(), outcome, n);
    res
}

/// Which of `held` (lease id, URL) are queued in the store, with their
/// `seq`. By `_id`: on a sharded store this one goes to every shard, and
/// it is rare (a supervisor rejoining a restarted dispatcher).
async fn look_up(
    frontier: &mongodb::Collection<FrontierDoc>,
    held: Vec<(u64, String)>,
) -> Result<Vec<(u64, Stored)>, String> {
    let mut leases: HashMap<String, u64> = held.into_iter().map(|(lease, url)| (url, lease)).collect();
    let urls: Vec<&String> = leases.keys().collect();
    let filter = doc! {"_id": {"$in": urls}, FrontierDoc::STATE: UrlState::Queued.as_str()};
    let query = async {
        let cursor = frontier.clone_with_type::<RawDocumentBuf>().find(filter).await?;
        cursor.try_collect::<Vec<RawDocumentBuf>>().await
    };
    let docs = match store::deadline(query).await {
        Some(Ok(docs)) => docs,
        Some(Err(e)) => return Err(e.to_string()),
        None => return Err("no answer in time".to_string()),
    };
    let page = page_of(&docs, usize::MAX);
    Ok(page
        .urls
        .into_iter()
        .filter_map(|u| Some((leases.remove(&u.url)?, u)))
        .collect())
}

/// Decodes each document on its own: a malformed one is skipped with a
/// warning, and still moves the queue past it.
fn page_of(docs: &[RawDocumentBuf], limit: usize) -> ReadPage {
    let mut page = ReadPage {
        urls: Vec::with_capacity(docs.len()),
        full: docs.len() >= limit,
        last_seq: 0,
    };
    for raw in docs {
        let seq = FrontierDoc::raw_seq(raw).unwrap_or(0);
        page.last_seq = page.last_seq.max(seq);
        match bson::from_slice::<FrontierDoc>(raw.as_bytes()) {
            Ok(d) => page.urls.push(Stored {
                url: d.url,
                depth: d.depth.clamp(0, i32::from(u16::MAX)) as u16,
                seq: d.seq,
            }),
            Err(e) => tracing::warn!(document = ?raw, error = %e, "skipping a malformed frontier entry"),
        }
    }
    page
}
