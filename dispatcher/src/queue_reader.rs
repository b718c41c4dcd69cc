//! Reads domains' next queued URLs from the store for the frontier's
//! windows (see `crate::frontier`), off the dispatch path: the dispatcher
//! sends [`Refill`]s and gets each one back with what the store holds, or
//! with why it could not be read (the frontier then asks again later).
//! Each refill is one query for one domain: a range of the `{domain, seq,
//! state}` index over the domain's queued segments
//! (`store::docs::SegmentDoc`), which on a sharded store goes to the one
//! shard holding the domain; a segment holds up to a few hundred URLs, so
//! a window is one or two documents. It also looks up the URLs a
//! rejoining supervisor holds that may be queued only in the store
//! ([`crate::frontier::Adoption::look_up`]).
//!
//! Why not several domains in one query (`$in` on the domain): MongoDB
//! answers that with one range per domain too, but nx-27017 tests `$in`
//! on each document (with MongoDB's array semantics), which no index
//! answers, so each such read walks the whole index and a crawl past the
//! memory budget leases a tenth as fast. On MongoDB a query per domain
//! costs one more round trip per domain, well under a millisecond on a
//! local network.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bson::{doc, RawDocumentBuf};
use shared::timing::{Op, TimingLog};
use store::docs::{PageDoc, SegmentDoc, SegmentState};
use store::read::{find_all, Find};
use store::{self, Stores};
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use crate::frontier::{LookUp, ReadPage, Refill, Stored, SupId};
use crate::revisits::DueRead;
use crate::state::Answer;

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

enum Request {
    Read(Refill),
    Held(SupId, Vec<LookUp>),
    Links(Vec<crate::frontier::Relink>),
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
    /// `ended`: the `seq`s of stored URLs that finished without a page,
    /// once start-up has read them (`crate::resume`): a read takes them
    /// as finished.
    pub(crate) fn spawn(
        stores: &Stores,
        ended: Arc<OnceLock<HashSet<i64>>>,
        timing: TimingLog,
    ) -> (QueueReader, mpsc::UnboundedReceiver<Answer>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let (answers_tx, answers) = mpsc::unbounded_channel();
        let pending = Arc::new(AtomicUsize::new(0));
        let colls = Colls {
            segments: stores.segments(),
            pages: stores.pages(),
            ended,
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

    /// Looks up what supervisor `sup` holds, domain by domain.
    pub(crate) fn look_up(&self, sup: SupId, held: Vec<LookUp>) {
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

    /// Reads the links of the stored pages of `urls`.
    pub(crate) fn links(&self, urls: Vec<crate::frontier::Relink>) {
        let _ = self.tx.send(Request::Links(urls));
    }
}

/// The collections the reader reads.
#[derive(Clone)]
struct Colls {
    segments: mongodb::Collection<SegmentDoc>,
    pages: mongodb::Collection<PageDoc>,
    ended: Arc<OnceLock<HashSet<i64>>>,
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
                        out.send(look_up_answer(&colls, sup, h, &timing).await);
                    }
                    for asked in checks {
                        let urls: Vec<&str> = asked.iter().map(|(_, u)| u.as_str()).collect();
                        let stored = crate::finished::stored_among(&colls.pages, &urls, &timing).await;
                        out.send(Answer::Checked { asked, stored });
                    }
                    for asked in links {
                        let urls: Vec<&str> = asked.iter().map(|r| r.url.as_str()).collect();
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

async fn look_up_answer(colls: &Colls, sup: SupId, held: Vec<LookUp>, timing: &TimingLog) -> Answer {
    Answer::Held {
        sup,
        asked: held.iter().map(|l| l.held.len()).sum(),
        found: look_up(colls, held, timing).await,
    }
}

/// The queued URLs of `r.domain` with a `seq` in `(r.after, r.upto]`,
/// in `seq` order, at most `r.limit`: the domain's queued segments from
/// the one holding the URL after `r.after`, read in pages of segments
/// until the limit or `r.upto` is reached. Those stored before this run
/// (`r.finished_upto`) may be finished: those that ended without a page
/// are known (`ended`), and the others' pages are looked up in `pages`
/// (a stored page finishes its URL, `crate::finished`).
async fn read(colls: &Colls, r: &Refill, timing: &TimingLog) -> Result<ReadPage, String> {
    let mut page = ReadPage {
        urls: Vec::new(),
        full: false,
        last_seq: 0,
        finished: Vec::new(),
    };
    let mut cursor = Cursor::new(r.after, r.upto, r.limit);
    while cursor.next_read().is_some() {
        read_segments(&colls.segments, &r.domain, &mut cursor, &mut page.urls, timing).await?;
    }
    page.full = cursor.full;
    page.last_seq = cursor.last_seq;
    if r.finished_upto > 0 {
        let mut earlier = Vec::new();
        for u in page.urls.iter().filter(|u| u.seq <= r.finished_upto) {
            if colls.ended.get().is_some_and(|e| e.contains(&u.seq)) {
                page.finished.push(u.seq);
            } else {
                earlier.push(u.url.as_str());
            }
        }
        if !earlier.is_empty() {
            let stored = crate::finished::stored_among(&colls.pages, &earlier, timing).await?;
            page.finished.extend(
                page.urls
                    .iter()
                    .filter(|u| stored.contains(&u.url))
                    .map(|u| u.seq),
            );
            page.finished.sort_unstable();
        }
    }
    Ok(page)
}

/// Where a read of one domain's queue stands: what it has taken, and from
/// which `seq` it reads on.
struct Cursor {
    /// URLs up to this `seq` are behind the read.
    after: i64,
    upto: i64,
    limit: usize,
    /// The queue may go on past what was taken (the limit was reached).
    full: bool,
    /// The highest `seq` the read went past, malformed segments included.
    last_seq: i64,
    /// Nothing more to read.
    done: bool,
    /// Segments asked for by the next read.
    wanted: usize,
}

/// Segments a read asks for first: a window is a few hundred URLs at most,
/// and a segment holds up to [`crate::persist::SEGMENT_URLS`], but a
/// domain's segments written a few seconds apart may hold a few each.
const FIRST_SEGMENTS: usize = 4;
/// Most segments one query asks for.
const MAX_SEGMENTS: usize = 64;

impl Cursor {
    fn new(after: i64, upto: i64, limit: usize) -> Cursor {
        Cursor {
            after,
            upto,
            limit,
            full: false,
            last_seq: 0,
            done: upto <= after,
            wanted: FIRST_SEGMENTS,
        }
    }

    /// The `seq` the next query starts after, if one is wanted.
    fn next_read(&self) -> Option<i64> {
        (!self.done).then_some(self.after)
    }

    fn segments_wanted(&self) -> usize {
        self.wanted
    }

    /// Takes the URLs of `docs` (segments in `seq` order, at most
    /// [`Cursor::segments_wanted`]) that are after the cursor and up to
    /// `upto`, into `urls`, until the limit. A malformed segment is skipped
    /// with a warning, and the read goes on past it.
    fn take(&mut self, docs: &[RawDocumentBuf], urls: &mut Vec<Stored>) {
        // Fewer than asked for: the queue ends with them.
        let last_page = docs.len() < self.wanted;
        self.wanted = (self.wanted * 4).min(MAX_SEGMENTS);
        self.take_each(docs, urls);
        if last_page {
            self.done = true;
        }
    }

    fn take_each(&mut self, docs: &[RawDocumentBuf], urls: &mut Vec<Stored>) {
        for raw in docs {
            let Some(seg_seq) = SegmentDoc::raw_seq(raw) else {
                tracing::warn!(document = ?raw, "skipping a frontier segment without a seq");
                continue;
            };
            let entries = match SegmentDoc::entries(raw) {
                Ok(entries) => entries,
                Err(e) => {
                    tracing::warn!(seq = seg_seq, error = %e, "skipping a malformed frontier segment; its URLs are not crawled");
                    self.pass(seg_seq);
                    if self.done {
                        return;
                    }
                    continue;
                }
            };
            for e in entries {
                if e.seq <= self.after {
                    continue;
                }
                if e.seq > self.upto {
                    self.done = true;
                    return;
                }
                if urls.len() >= self.limit {
                    self.full = true;
                    self.done = true;
                    return;
                }
                self.after = e.seq;
                self.last_seq = self.last_seq.max(e.seq);
                urls.push(Stored {
                    url: e.url,
                    depth: e.depth,
                    seq: e.seq,
                });
            }
            self.pass(seg_seq);
            if self.done {
                return;
            }
        }
    }

    /// The read went past every URL of a segment whose highest `seq` is
    /// `seq` (up to `upto`).
    fn pass(&mut self, seq: i64) {
        let past = seq.min(self.upto);
        self.after = self.after.max(past);
        self.last_seq = self.last_seq.max(past);
        if seq >= self.upto {
            self.done = true;
        }
    }
}

/// The filter of a read of one domain's queued segments after `after`.
/// The domain is matched with `$eq`, not as a bare value: the same query
/// and plan on MongoDB, but nx-27017 (on SQLite) reads a bare value with
/// MongoDB's array semantics, as "equal, or an array holding it", which no
/// index answers, and walks its whole queue index; with `$eq` it seeks the
/// domain's range (29.6 ms against 0.7 ms at 20,000 stored URLs, and the
/// gap grows with them).
fn one_domain(domain: &str, after: i64) -> bson::Document {
    doc! {
        SegmentDoc::DOMAIN: {"$eq": domain},
        SegmentDoc::SEQ: {"$gt": after},
        SegmentDoc::STATE: SegmentState::Queued.as_str(),
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
    doc! {SegmentDoc::SEQ: 1}
}

/// The next of `domain`'s queued segments after `cursor`, in `seq` order,
/// as many as it wants, taken into `urls`: one query, timed as one
/// frontier read of the URLs it took.
async fn read_segments(
    segments: &mongodb::Collection<SegmentDoc>,
    domain: &str,
    cursor: &mut Cursor,
    urls: &mut Vec<Stored>,
    timing: &TimingLog,
) -> Result<(), String> {
    let find = Find {
        filter: one_domain(domain, cursor.after),
        sort: Some(by_seq()),
        limit: Some(cursor.segments_wanted()),
        ..Find::default()
    };
    let start = std::time::Instant::now();
    let res = find_all(
        segments,
        find,
        READ_DEADLINE,
        &TimingLog::disabled(),
        Op::FrontierRead,
    )
    .await;
    let before = urls.len();
    if let Ok(docs) = &res {
        cursor.take(docs, urls);
    }
    let outcome = if res.is_ok() { "ok" } else { "error" };
    timing.record_batch(Op::FrontierRead, start.elapsed(), outcome, urls.len() - before);
    res.map(|_| ())
}

/// Most URLs a look-up reads of one domain's queue for the URLs a
/// rejoining supervisor holds: they were leased from the front of the
/// queue, so they are among its first URLs after the window.
const LOOK_UP_URLS: usize = 20_000;

/// Which URLs of `held` are queued in the store, with their `seq`, each
/// domain's read from its window's cursor on.
async fn look_up(colls: &Colls, held: Vec<LookUp>, timing: &TimingLog) -> Result<Vec<(u64, Stored)>, String> {
    let mut found = Vec::new();
    for l in held {
        let mut leases: HashMap<String, u64> = l.held.into_iter().map(|(lease, url)| (url, lease)).collect();
        let mut cursor = Cursor::new(l.after, l.upto, LOOK_UP_URLS);
        let mut urls = Vec::new();
        while cursor.next_read().is_some() && !leases.is_empty() {
            read_segments(&colls.segments, &l.domain, &mut cursor, &mut urls, timing).await?;
            for u in urls.drain(..) {
                if let Some(lease) = leases.remove(&u.url) {
                    found.push((lease, u));
                }
            }
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;
    use store::docs::SegmentEntry;

    fn segment(domain: &str, seqs: std::ops::RangeInclusive<i64>) -> RawDocumentBuf {
        let entries: Vec<SegmentEntry> = seqs
            .map(|s| SegmentEntry {
                url: format!("http://{domain}/{s}"),
                seq: s,
                depth: 1,
            })
            .collect();
        let d = SegmentDoc::new(domain.to_string(), SegmentState::Queued, None, &entries).unwrap();
        RawDocumentBuf::from_document(&bson::to_document(&d).unwrap()).unwrap()
    }

    fn seqs(urls: &[Stored]) -> Vec<i64> {
        urls.iter().map(|u| u.seq).collect()
    }

    #[test]
    fn a_single_domain_read_asks_for_its_domain_with_eq() {
        let f = one_domain("a.test", 3);
        assert_eq!(
            f.get_document(SegmentDoc::DOMAIN).ok(),
            Some(&doc! {"$eq": "a.test"})
        );
        assert_eq!(f.get_document(SegmentDoc::SEQ).ok(), Some(&doc! {"$gt": 3i64}));
        assert_eq!(f.get_str(SegmentDoc::STATE), Ok("queued"));
    }

    #[test]
    fn a_read_takes_the_urls_after_its_cursor_up_to_the_limit() {
        // Segments 1..=3 and 4..=6; the read starts after 2, 3 at most.
        let mut c = Cursor::new(2, 100, 3);
        assert_eq!(c.next_read(), Some(2));
        let mut urls = Vec::new();
        c.take(&[segment("a", 1..=3), segment("a", 4..=6)], &mut urls);
        assert_eq!(seqs(&urls), vec![3, 4, 5]);
        assert!(c.full && c.next_read().is_none());
        assert_eq!(c.last_seq, 5);
    }

    #[test]
    fn a_read_stops_at_upto_and_goes_on_while_segments_fill_its_query() {
        let mut c = Cursor::new(0, 5, 100);
        let mut urls = Vec::new();
        // A full query (4 segments): more may follow.
        let four: Vec<_> = [1..=1, 2..=2, 3..=3, 4..=4]
            .into_iter()
            .map(|r| segment("a", r))
            .collect();
        c.take(&four, &mut urls);
        assert_eq!(c.next_read(), Some(4));
        assert_eq!(c.segments_wanted(), 16);
        // Past `upto`: done, and not full (nothing more up to 5).
        c.take(&[segment("a", 5..=9)], &mut urls);
        assert_eq!(seqs(&urls), vec![1, 2, 3, 4, 5]);
        assert!(!c.full && c.next_read().is_none());
        assert_eq!(c.last_seq, 5);
    }

    #[test]
    fn a_short_answer_ends_the_read() {
        let mut c = Cursor::new(0, 50, 100);
        let mut urls = Vec::new();
        c.take(&[segment("a", 1..=3)], &mut urls);
        assert_eq!(seqs(&urls), vec![1, 2, 3]);
        assert!(!c.full && c.next_read().is_none());
    }

    #[test]
    fn malformed_segments_are_skipped_but_move_the_queue_on() {
        let good = segment("a", 1..=2);
        let bad = bson::rawdoc! {"_id": 4_i64, "domain": "a", "seq": 4_i64, "first": 3_i64, "n": 2, "state": "queued", "urls": "not packed"};
        let mut c = Cursor::new(0, 10, 2);
        let mut urls = Vec::new();
        c.take(&[good, bad], &mut urls);
        assert_eq!((seqs(&urls), c.full, c.last_seq), (vec![1, 2], false, 4));
    }
}
