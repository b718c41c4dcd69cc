//! Reads domains' next queued URLs from the store for the frontier's
//! windows (see `crate::frontier`), off the dispatch path: the dispatcher
//! sends [`Refill`]s and gets each one back with what the store holds, or
//! with why it could not be read (the frontier then asks again later).
//! Each refill is one query for one domain: a range of the `{domain, seq,
//! state}` index, which on a sharded store goes to the one shard holding the
//! domain. It also looks up the URLs a rejoining supervisor holds that may
//! be queued only in the store ([`crate::frontier::Adoption::look_up`]).
//!
//! Why not several domains in one query (`$in` on the domain): MongoDB
//! answers that with one range per domain too, but nx-27017 tests `$in`
//! on each document (with MongoDB's array semantics), which no index
//! answers, so each such read walks the whole index and a crawl past the
//! memory budget leases a tenth as fast. On MongoDB a query per domain
//! costs one more round trip per domain, well under a millisecond on a
//! local network.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bson::{doc, RawDocument, RawDocumentBuf};
use futures::TryStreamExt;
use shared::timing::{Op, TimingLog};
use store::docs::{FrontierDoc, PageDoc, UrlState};
use store::read::{find_all, Find};
use store::{self, Stores};
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use crate::frontier::{ReadPage, Refill, Stored, SupId};
use crate::revisits::{Due, DueRead};

/// Tasks reading at once, each reading the refills it took one by one.
/// nx-27017 serves one request at a time, so more would only queue there;
/// on MongoDB two keep thousands of windows a second coming.
const CONCURRENT: usize = 2;
/// Longest a read of a domain's queue may take. Longer than one ordinary
/// operation's deadline (`store::OP_TIMEOUT`, 30 s): on a store that serves
/// one request at a time, a read waits for every request before it, and a
/// read given up on is still served by such a store, so asking again only
/// queues more behind it.
const READ_DEADLINE: Duration = Duration::from_secs(300);
/// Most requests one task takes at once.
const BATCH: usize = 100;
/// Reads asked for and not answered that keep the reader busy: those
/// under way and a round's worth waiting (see `crate::state`).
pub(crate) const MAX_PENDING: usize = 2 * CONCURRENT * BATCH;

pub(crate) enum Answer {
    Read(Refill, Result<ReadPage, String>),
    /// The held URLs of `sup` found queued in the store, of `asked`.
    Held {
        sup: SupId,
        asked: usize,
        found: Result<Vec<(u64, Stored)>, String>,
    },
    /// Which of `asked` (lease, URL) have a stored page.
    Checked {
        asked: Vec<(u64, String)>,
        stored: Result<std::collections::HashSet<String>, String>,
    },
    /// The links of the stored pages of `asked` (URL, depth): (URL, links).
    Links {
        asked: Vec<(String, u16)>,
        found: Result<Vec<(String, Vec<String>)>, String>,
    },
    /// The pages due for a revisit (`crate::revisits`).
    Due(DueRead, Result<Vec<Due>, String>),
}

enum Request {
    Read(Refill),
    Held(SupId, Vec<(u64, String)>),
    Links(Vec<(String, u16)>),
    Check(Vec<(u64, String)>),
    Due(DueRead),
}

pub(crate) struct QueueReader {
    tx: mpsc::UnboundedSender<Request>,
    /// Reads asked for and not answered yet.
    pending: Arc<AtomicUsize>,
}

impl QueueReader {
    /// Starts the reader; answers arrive on the returned receiver.
    pub(crate) fn spawn(
        stores: &Stores,
        timing: TimingLog,
    ) -> (QueueReader, mpsc::UnboundedReceiver<Answer>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let (answers_tx, answers) = mpsc::unbounded_channel();
        let pending = Arc::new(AtomicUsize::new(0));
        let colls = Colls {
            frontier: stores.frontier(),
            pages: stores.pages(),
        };
        tokio::spawn(run(colls, rx, answers_tx, timing, pending.clone()));
        (QueueReader { tx, pending }, answers)
    }

    pub(crate) fn read(&self, r: Refill) {
        self.pending.fetch_add(1, Ordering::Relaxed);
        let _ = self.tx.send(Request::Read(r));
    }

    /// Reads asked for whose answer has not been sent yet.
    pub(crate) fn pending(&self) -> usize {
        self.pending.load(Ordering::Relaxed)
    }

    /// Looks up `held` (lease id, URL) of supervisor `sup`.
    pub(crate) fn look_up(&self, sup: SupId, held: Vec<(u64, String)>) {
        let _ = self.tx.send(Request::Held(sup, held));
    }

    /// Asks which of `ended` (lease, URL) have a stored page.
    pub(crate) fn check_stored(&self, ended: Vec<(u64, String)>) {
        let _ = self.tx.send(Request::Check(ended));
    }

    /// Reads the pages due for a revisit.
    pub(crate) fn due(&self, r: DueRead) {
        let _ = self.tx.send(Request::Due(r));
    }

    /// Reads the links of the stored pages of `urls` (URL, depth).
    pub(crate) fn links(&self, urls: Vec<(String, u16)>) {
        let _ = self.tx.send(Request::Links(urls));
    }
}

/// The collections the reader reads.
#[derive(Clone)]
struct Colls {
    frontier: mongodb::Collection<FrontierDoc>,
    pages: mongodb::Collection<PageDoc>,
}

async fn run(
    colls: Colls,
    mut rx: mpsc::UnboundedReceiver<Request>,
    answers: mpsc::UnboundedSender<Answer>,
    timing: TimingLog,
    pending: Arc<AtomicUsize>,
) {
    let mut reads = JoinSet::new();
    loop {
        tokio::select! {
            r = rx.recv(), if reads.len() < CONCURRENT => {
                let Some(first) = r else { break };
                // With the requests waiting behind it, one task: the (rare)
                // look-ups, then the refills.
                let (mut refills, mut held, mut links, mut checks) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
                let mut due = Vec::new();
                let mut next = Some(first);
                while let Some(r) = next {
                    match r {
                        Request::Read(r) => refills.push(r),
                        Request::Held(sup, h) => held.push((sup, h)),
                        Request::Links(urls) => links.push(urls),
                        Request::Check(ended) => checks.push(ended),
                        Request::Due(r) => due.push(r),
                    }
                    let n = refills.len() + held.len() + links.len() + checks.len() + due.len();
                    next = if n < BATCH { rx.try_recv().ok() } else { None };
                }
                let out = Answers { tx: answers.clone(), pending: pending.clone() };
                let (colls, timing) = (colls.clone(), timing.clone());
                reads.spawn(async move {
                    for (sup, h) in held {
                        out.send(look_up_answer(&colls.frontier, sup, h).await);
                    }
                    for asked in checks {
                        let urls: Vec<&str> = asked.iter().map(|(_, u)| u.as_str()).collect();
                        let stored = crate::finished::stored_among(&colls.pages, &urls, &timing).await;
                        out.send(Answer::Checked { asked, stored });
                    }
                    for asked in links {
                        let urls: Vec<&str> = asked.iter().map(|(u, _)| u.as_str()).collect();
                        let found = crate::finished::links_of(&colls.pages, &urls, &timing).await;
                        out.send(Answer::Links { asked, found });
                    }
                    for r in due {
                        let found = crate::revisits::read::due(&colls.pages, &r, &timing).await;
                        out.send(Answer::Due(r, found));
                    }
                    for r in refills {
                        let res = read(&colls, &r, &timing).await;
                        out.send(Answer::Read(r, res));
                    }
                });
            }
            Some(_) = reads.join_next() => {}
        }
    }
}

/// Where a reading task sends each answer as soon as it has it: a window
/// read first in a batch of [`BATCH`] does not wait for the other reads
/// (on nx-27017, a few milliseconds each).
struct Answers {
    tx: mpsc::UnboundedSender<Answer>,
    pending: Arc<AtomicUsize>,
}

impl Answers {
    fn send(&self, answer: Answer) {
        if let Answer::Read(..) = answer {
            self.pending.fetch_sub(1, Ordering::Relaxed);
        }
        let _ = self.tx.send(answer);
    }
}

async fn look_up_answer(
    frontier: &mongodb::Collection<FrontierDoc>,
    sup: SupId,
    held: Vec<(u64, String)>,
) -> Answer {
    Answer::Held {
        sup,
        asked: held.len(),
        found: look_up(frontier, held).await,
    }
}

/// The queued URLs of `r.domain` with a `seq` in `(r.after, r.upto]`,
/// in `seq` order: one range of the `{domain, seq, state}` index, whose
/// marked entries are passed over in the index, without reading their
/// documents. The query carries the domain, so on a sharded store it goes
/// to one shard. Those stored before this run (`r.finished_upto`) are
/// looked up in `pages` too: a stored page finishes its URL
/// (`crate::finished`).
async fn read(colls: &Colls, r: &Refill, timing: &TimingLog) -> Result<ReadPage, String> {
    let docs = find_sorted(&colls.frontier, one_domain(r), r.limit, timing).await?;
    let mut page = page_of(docs.iter().map(|d| &**d), r.limit);
    let earlier: Vec<&str> = page
        .urls
        .iter()
        .filter(|u| u.seq <= r.finished_upto)
        .map(|u| u.url.as_str())
        .collect();
    if !earlier.is_empty() {
        let stored = crate::finished::stored_among(&colls.pages, &earlier, timing).await?;
        page.finished = page
            .urls
            .iter()
            .filter(|u| stored.contains(&u.url))
            .map(|u| u.seq)
            .collect();
    }
    Ok(page)
}

/// Decodes each document on its own: a malformed one is skipped with a
/// warning, and still moves the queue past it (`last_seq`).
fn page_of<'a>(docs: impl ExactSizeIterator<Item = &'a RawDocument>, limit: usize) -> ReadPage {
    let mut page = ReadPage {
        urls: Vec::with_capacity(docs.len()),
        full: docs.len() >= limit,
        last_seq: 0,
        finished: Vec::new(),
    };
    for raw in docs {
        let seq = FrontierDoc::raw_seq(raw).unwrap_or(0);
        page.last_seq = page.last_seq.max(seq);
        // Only the fields a window needs, read in place: decoding whole
        // documents was about a quarter of the window reader's CPU.
        let url = raw.get_str(FrontierDoc::URL).ok();
        match (url, FrontierDoc::raw_int(raw, FrontierDoc::DEPTH)) {
            (Some(url), Some(depth)) => page.urls.push(Stored {
                url: url.to_string(),
                depth: depth.clamp(0, i64::from(u16::MAX)) as u16,
                seq,
            }),
            _ => {
                tracing::warn!(document = ?raw, "skipping a malformed frontier entry (no string _id or integer depth)")
            }
        }
    }
    page
}

/// The filter of [`read`]. The domain is matched with `$eq`, not as a
/// bare value: the same query and plan on MongoDB, but nx-27017 (on
/// SQLite) reads a bare value with MongoDB's array semantics, as "equal,
/// or an array holding it", which no index answers, and walks its whole
/// queue index; with `$eq` it seeks the domain's range (29.6 ms
/// against 0.7 ms at 20,000 stored URLs, and the gap grows with them).
fn one_domain(r: &Refill) -> bson::Document {
    doc! {
        FrontierDoc::DOMAIN: {"$eq": &r.domain},
        FrontierDoc::SEQ: {"$gt": r.after, "$lte": r.upto},
        FrontierDoc::STATE: UrlState::Queued.as_str(),
    }
}

/// The order of a read of one domain's queue: by `seq` alone, not by
/// domain and `seq`. The two are the same order when the filter names one
/// domain, and mongod takes either from the queue index, but SQLite
/// (nx-27017) does not see that a domain given by `=` is constant in
/// `ORDER BY domain, seq`: it fetched every queued entry of the domain past
/// the read's start and sorted them before taking the first `limit` (at 10
/// million stored URLs, 500 queued a domain, a read of 32 took 1.72 ms,
/// against 0.19 ms in `seq` order, which it reads off the index).
pub(crate) fn by_seq() -> bson::Document {
    doc! {FrontierDoc::SEQ: 1}
}

/// The frontier documents `filter` (one domain's) matches, in `seq`
/// order, at most `limit`; timed as one frontier read.
async fn find_sorted(
    frontier: &mongodb::Collection<FrontierDoc>,
    filter: bson::Document,
    limit: usize,
    timing: &TimingLog,
) -> Result<Vec<RawDocumentBuf>, String> {
    let find = Find {
        filter,
        sort: Some(by_seq()),
        limit: Some(limit),
        ..Find::default()
    };
    find_all(frontier, find, READ_DEADLINE, timing, Op::FrontierRead).await
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
    let page = page_of(docs.iter().map(|d| &**d), usize::MAX);
    Ok(page
        .urls
        .into_iter()
        .filter_map(|u| Some((leases.remove(&u.url)?, u)))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_single_domain_read_asks_for_its_domain_with_eq() {
        let f = one_domain(&Refill::for_test("a.test", 3, 9, 5));
        assert_eq!(
            f.get_document(FrontierDoc::DOMAIN).ok(),
            Some(&doc! {"$eq": "a.test"})
        );
        assert_eq!(
            f.get_document(FrontierDoc::SEQ).ok(),
            Some(&doc! {"$gt": 3i64, "$lte": 9i64})
        );
    }

    #[test]
    fn malformed_documents_are_skipped_but_move_the_queue_on() {
        let good = bson::rawdoc! {"_id": "http://a.test/1", "domain": "a.test", "depth": 1, "state": "queued", "seq": 1_i64};
        let bad = bson::rawdoc! {"_id": "http://a.test/4", "domain": "a.test", "depth": "deep", "seq": 4_i64};
        let page = page_of([&*good, &*bad].into_iter(), 10);
        let seqs: Vec<i64> = page.urls.iter().map(|u| u.seq).collect();
        assert_eq!((seqs, page.full, page.last_seq), (vec![1], false, 4));
        assert!(page_of([&*good, &*bad].into_iter(), 2).full);
    }
}
