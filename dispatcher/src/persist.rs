//! Writes the frontier to the store, off the dispatch path.
//!
//! Newly admitted URLs are appended to their domain's queue in segments
//! (`store::docs::SegmentDoc`): a domain's URLs wait here until
//! [`SEGMENT_URLS`] of them or [`SEGMENT_BYTES`] of URLs are together, or
//! the oldest has waited [`HOLD`], and then go to the store as one
//! document; every segment ready at the same time goes in one unordered
//! insert. URLs found over a budget go the same way into `deferred`
//! segments. URLs that finish without a page (failed, disallowed) are
//! recorded in one `OutcomeDoc` per batch. Fetched URLs are not recorded
//! at all: their stored page says they are finished (`crate::finished`).
//! Each domain's progress (the `seq` below which all its URLs are
//! finished, `ProgressDoc`) is written when the dispatcher says, after
//! every segment and outcome sent before it, so a progress record never
//! runs ahead of what the store holds.
//!
//! With `--seen-check store`, every admitted URL is also inserted by
//! itself into `<crawl>__urls`, whose unique `_id` is the exact seen-set,
//! and the writer says which unsure URLs the store took (see `crate::seen`).
//!
//! A segment's `_id` is its highest `seq`, so a retried insert is a
//! duplicate and harmless. Domains' queues are read from the segments
//! (see `crate::frontier`): the writer says how far its inserts are
//! written ([`FrontierWriter::durable`]), so nothing is read before it is
//! there.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bson::{doc, RawDocumentBuf};
use futures::TryStreamExt;
use shared::failure::FailureKind;
use shared::timing::{Op, TimingLog};
use store::docs::{
    Deferral, Outcome, OutcomeDoc, SegmentBuilder, SegmentDoc, SegmentState, UrlDoc, UrlState,
};
use store::write;
use store::{self, Backoff, Stores};
use tokio::sync::{mpsc, oneshot};

/// Most commands taken into one round of writes.
pub(crate) const BATCH: usize = 2000;

/// Frontier writes the store may be behind before no more URLs are leased
/// (each result brings more writes): bounds the dispatcher's memory when
/// the store is slower than the crawl. Ten of the writer's batches keep it
/// busy; more only sit in memory (about 200 bytes each). Past it, leases
/// are counted against the writes they will bring (`crate::state`'s write
/// gate),
/// since results of leases already out add theirs past the mark.
pub(crate) const MAX_WRITE_BACKLOG: usize = 10 * BATCH;
/// How long a round waits for more commands once it has one.
const WAIT: Duration = Duration::from_millis(100);
/// Most URLs in a segment. A window read (a few hundred URLs at most)
/// then reads one or two segments, and a segment is a few KB compressed;
/// a domain that admits more than this in [`HOLD`] (a site being mapped)
/// writes one document per 256 URLs.
pub(crate) const SEGMENT_URLS: usize = 256;
/// Most bytes of URLs in a segment (URLs are up to 2 KiB long).
const SEGMENT_BYTES: usize = 64 * 1024;
/// Longest a domain's newest URLs wait for more before their segment is
/// written: a domain admits a few URLs a second as a rule, so a shorter
/// wait would write segments of one or two URLs; a longer one delays the
/// reads of URLs only in the store, which wait until the writer says they
/// are written (and a dispatcher killed loses them, to be offered again
/// from the stored pages' links, see `crate::finished`).
pub(crate) const HOLD: Duration = Duration::from_secs(2);
/// Most URLs held in segments not yet written, over all domains: past it
/// the oldest are written at once. About 6 MB of URLs; reached only when
/// tens of thousands of URLs a second are admitted across thousands of
/// domains (the dispatcher bench), whose segments are then a little
/// smaller.
const MAX_HELD: usize = 100_000;
/// Most outcomes in one document (URLs are up to 2 KiB: 4 MiB at most).
const OUTCOMES_PER_DOC: usize = 2000;

/// A URL the state machine admitted.
pub(crate) struct NewUrl {
    pub(crate) url: String,
    pub(crate) domain: String,
    pub(crate) depth: u16,
    pub(crate) seq: i64,
    /// Stored deferred (over a budget), not queued.
    pub(crate) deferred: Option<Deferral>,
    /// The dispatcher wants to know whether the store took it (an unsure
    /// URL, see `crate::seen`; with `--seen-check store` only): it goes
    /// into the exact seen-set alone, and the dispatcher inserts it again,
    /// under a new `seq`, if the store took it.
    pub(crate) confirm: bool,
}

enum Cmd {
    Insert(NewUrl),
    Outcome(Outcome),
    /// Domains' progress: (domain, below).
    Progress(Vec<(String, i64)>),
    Flush(oneshot::Sender<()>),
}

#[derive(Clone)]
pub(crate) struct FrontierWriter {
    tx: mpsc::UnboundedSender<Cmd>,
    durable: Arc<AtomicI64>,
    /// Commands sent and not yet taken into a round that is written.
    backlog: Arc<AtomicUsize>,
}

/// Whether the store took each unsure URL of a batch: (`seq`, taken).
pub(crate) type Confirmed = Vec<(i64, bool)>;

impl FrontierWriter {
    /// The writer, and where it says whether the store took the unsure
    /// URLs (sent before `durable` covers them, so a read that could
    /// return one is asked for only after its answer is on the way).
    /// `exact`: every URL is also written to `<crawl>__urls`
    /// (`--seen-check store`).
    pub(crate) fn spawn(
        stores: Stores,
        exact: bool,
        timing: TimingLog,
    ) -> (FrontierWriter, mpsc::UnboundedReceiver<Confirmed>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let (confirm_tx, confirm_rx) = mpsc::unbounded_channel();
        let durable = Arc::new(AtomicI64::new(0));
        let backlog = Arc::new(AtomicUsize::new(0));
        let writer = Writer {
            stores,
            exact,
            timing,
            confirm_tx,
            durable: durable.clone(),
            held: Held::default(),
            ready: Vec::new(),
            urls: Vec::new(),
            unsure: Vec::new(),
            outcomes: Vec::new(),
            progress: Vec::new(),
            last_seq: 0,
        };
        tokio::spawn(writer.run(rx, backlog.clone()));
        (FrontierWriter { tx, durable, backlog }, confirm_rx)
    }

    /// Commands sent but not written yet: how far the store is behind. The
    /// dispatcher stops leasing while it is too far (see `crawl.rs`), so a
    /// slow store slows the crawl instead of filling the dispatcher's
    /// memory with writes.
    pub(crate) fn backlog(&self) -> usize {
        self.backlog.load(Ordering::Relaxed)
    }

    fn send(&self, cmd: Cmd) {
        self.backlog.fetch_add(1, Ordering::Relaxed);
        let _ = self.tx.send(cmd);
    }

    /// Appends a newly admitted (or deferred) URL to its domain's queue;
    /// its `seq` must be higher than any inserted before. Takes the strings
    /// the state machine made for it, so they are not copied again.
    pub(crate) fn insert(&self, url: NewUrl) {
        self.send(Cmd::Insert(url));
    }

    /// Records a URL that finished without a page.
    pub(crate) fn outcome(&self, url: String, seq: i64, state: UrlState, failure: Option<FailureKind>) {
        self.send(Cmd::Outcome(Outcome {
            url,
            seq,
            state,
            failure,
        }));
    }

    /// Records domains' progress (domain, below), once everything sent
    /// before it is written.
    pub(crate) fn progress(&self, domains: Vec<(String, i64)>) {
        if !domains.is_empty() {
            self.send(Cmd::Progress(domains));
        }
    }

    /// Every URL inserted with a `seq` up to this one is written (or was
    /// refused by the store for good).
    pub(crate) fn durable(&self) -> i64 {
        self.durable.load(Ordering::Acquire)
    }

    /// Resolves once everything sent before it is written (segments held
    /// for more URLs too).
    pub(crate) async fn flush(&self) {
        let (tx, rx) = oneshot::channel();
        if self.tx.send(Cmd::Flush(tx)).is_ok() {
            let _ = rx.await;
        }
    }
}

/// A domain's URLs waiting for more before they are written as one
/// segment.
struct Pending {
    segment: SegmentBuilder,
    /// When its first URL arrived.
    since: Instant,
    /// Which of [`Held::order`]'s entries is this one's.
    generation: u64,
}

/// Where a URL is held: its domain's queue, or a deferred segment of the
/// domain for one budget.
type Key = (String, Option<Deferral>);

/// The segments being filled, and the order they were started in: the
/// first in `order` (that is still held) has the lowest first `seq` and
/// the earliest deadline, since `seq`s and time only grow.
#[derive(Default)]
struct Held {
    pending: HashMap<Key, Pending>,
    /// (key, generation): an entry whose generation is not its segment's
    /// any more was written already, and is passed over.
    order: VecDeque<(Key, u64)>,
    next_generation: u64,
    urls: usize,
}

impl Held {
    /// Adds a URL to its segment; returns the segment if it is now full.
    fn add(&mut self, key: Key, (url, seq, depth): (&str, i64, u16), now: Instant) -> Option<SegmentBuilder> {
        let generation = self.next_generation;
        let p = self.pending.entry(key.clone()).or_insert_with(|| {
            let state = match key.1 {
                Some(_) => SegmentState::Deferred,
                None => SegmentState::Queued,
            };
            Pending {
                segment: SegmentBuilder::new(key.0.clone(), state, key.1),
                since: now,
                generation,
            }
        });
        if p.generation == generation {
            self.next_generation += 1;
            self.order.push_back((key.clone(), generation));
        }
        if p.segment.push(url, seq, depth) {
            self.urls += 1;
        } else {
            // Cannot happen: the state machine hands `seq`s out in order.
            crate::metric::FRONTIER_REJECTED.get().increment(1);
            tracing::error!(
                url,
                seq,
                "a frontier URL out of its domain's seq order; it will not be resumed"
            );
        }
        let full = p.segment.len() >= SEGMENT_URLS || p.segment.bytes() >= SEGMENT_BYTES;
        if full {
            return self.take(&key);
        }
        None
    }

    fn take(&mut self, key: &Key) -> Option<SegmentBuilder> {
        let p = self.pending.remove(key)?;
        self.urls -= p.segment.len();
        Some(p.segment)
    }

    /// The oldest segment still held, if it started by `before` (any with
    /// `None`), or the held URLs are past [`MAX_HELD`].
    fn take_oldest(&mut self, before: Option<Instant>) -> Option<SegmentBuilder> {
        loop {
            let (key, generation) = self.order.front()?;
            let live = self.pending.get(key).filter(|p| p.generation == *generation);
            let Some(p) = live else {
                self.order.pop_front();
                continue;
            };
            let due = before.is_none_or(|t| p.since <= t) || self.urls > MAX_HELD;
            if !due {
                return None;
            }
            let (key, _) = self.order.pop_front()?;
            return self.take(&key);
        }
    }

    /// The lowest `seq` held, and when the oldest segment is due.
    fn oldest(&mut self) -> Option<(i64, Instant)> {
        loop {
            let (key, generation) = self.order.front()?;
            match self.pending.get(key).filter(|p| p.generation == *generation) {
                Some(p) => return Some((p.segment.first(), p.since + HOLD)),
                None => {
                    self.order.pop_front();
                }
            }
        }
    }
}

struct Writer {
    stores: Stores,
    exact: bool,
    timing: TimingLog,
    confirm_tx: mpsc::UnboundedSender<Confirmed>,
    durable: Arc<AtomicI64>,
    held: Held,
    /// Segments to write this round.
    ready: Vec<SegmentDoc>,
    /// With `exact`: every URL of this round, for `<crawl>__urls`.
    urls: Vec<UrlDoc>,
    /// Unsure URLs of this round: (URL, `seq`).
    unsure: Vec<(String, i64)>,
    outcomes: Vec<Outcome>,
    progress: Vec<(String, i64)>,
    /// The highest `seq` taken in.
    last_seq: i64,
}

impl Writer {
    async fn run(mut self, mut rx: mpsc::UnboundedReceiver<Cmd>, backlog: Arc<AtomicUsize>) {
        let mut flushed = Vec::new();
        loop {
            // Wait for a command, or for the oldest held segment's time.
            let first = match self.held.oldest() {
                Some((_, due)) => {
                    match tokio::time::timeout_at(tokio::time::Instant::from_std(due), rx.recv()).await {
                        Ok(Some(cmd)) => Some(cmd),
                        Ok(None) => break,
                        Err(_) => None,
                    }
                }
                None => match rx.recv().await {
                    Some(cmd) => Some(cmd),
                    None => break,
                },
            };
            let deadline = tokio::time::Instant::now() + WAIT;
            let mut taken = 0;
            let mut next = first;
            let mut all = false;
            while let Some(cmd) = next.take() {
                taken += 1;
                match cmd {
                    Cmd::Insert(u) => self.take_in(u),
                    Cmd::Outcome(o) => self.outcomes.push(o),
                    Cmd::Progress(p) => {
                        self.progress.extend(p);
                        all = true;
                    }
                    Cmd::Flush(done) => {
                        flushed.push(done);
                        all = true;
                    }
                }
                if all || taken >= BATCH {
                    break;
                }
                if let Ok(Some(cmd)) = tokio::time::timeout_at(deadline, rx.recv()).await {
                    next = Some(cmd);
                }
            }
            // Everything held on a flush or progress, else what is due
            // (none in the first `HOLD` after the machine booted).
            let due = if all {
                Some(None)
            } else {
                Instant::now().checked_sub(HOLD).map(Some)
            };
            while let Some(segment) = due.and_then(|due| self.held.take_oldest(due)) {
                self.segment(segment);
            }
            self.write().await;
            backlog.fetch_sub(taken, Ordering::Relaxed);
            if !flushed.is_empty() {
                slow_flush().await;
            }
            for done in flushed.drain(..) {
                let _ = done.send(());
            }
        }
    }

    /// A URL into its domain's segment.
    fn take_in(&mut self, u: NewUrl) {
        self.last_seq = self.last_seq.max(u.seq);
        if self.exact {
            self.urls.push(UrlDoc {
                url: u.url.clone(),
                seq: u.seq,
            });
        }
        if u.confirm {
            // Into a segment only once the store took it, under a new
            // `seq` (`CrawlState::confirmed`): a segment's URLs must not be
            // there before, nor out of order.
            self.unsure.push((u.url, u.seq));
            return;
        }
        let url = (u.url.as_str(), u.seq, u.depth);
        if let Some(segment) = self.held.add((u.domain, u.deferred), url, Instant::now()) {
            self.segment(segment);
        }
    }

    /// A held segment, made a document to write this round.
    fn segment(&mut self, segment: SegmentBuilder) {
        let n = segment.len();
        match segment.build() {
            Some(doc) => self.ready.push(doc),
            None if n == 0 => {}
            None => {
                // Cannot happen: compression in memory does not fail.
                crate::metric::FRONTIER_REJECTED.get().increment(n as u64);
                tracing::error!(
                    urls = n,
                    "a frontier segment could not be packed; its URLs will not be resumed"
                );
            }
        }
    }

    /// This round's writes, in the order a reader relies on: the exact
    /// seen-set's entries and the segments (then `durable` moves), the
    /// outcomes, then the progress that counts on both.
    async fn write(&mut self) {
        if !self.urls.is_empty() {
            let what = "exact seen-set insert";
            let urls = self.stores.urls();
            for (i, why) in
                write::insert_unordered(&urls, &self.urls, &self.timing, Op::FrontierInsert, what).await
            {
                let url = self.urls.get(i).map_or("?", |d| d.url.as_str());
                tracing::error!(url, error = %why, "the store refused an entry of the exact seen-set");
            }
            self.urls.clear();
        }
        if !self.ready.is_empty() {
            let what = "frontier segment insert";
            let segments = self.stores.segments();
            for (i, why) in
                write::insert_unordered(&segments, &self.ready, &self.timing, Op::FrontierInsert, what).await
            {
                // Cannot happen with segments of at most 64 KiB of URLs,
                // but if the store ever refuses one, the crawl goes on
                // without it, loudly.
                let n = self.ready.get(i).map_or(0, |d| d.n);
                crate::metric::FRONTIER_REJECTED
                    .get()
                    .increment(u64::try_from(n).unwrap_or(0));
                tracing::error!(urls = n, error = %why, "the store refused a frontier segment; its URLs will not be resumed");
            }
            self.ready.clear();
        }
        if !self.unsure.is_empty() {
            let answer = confirm(&self.stores, &mut self.unsure, &self.timing).await;
            let _ = self.confirm_tx.send(answer);
        }
        let durable = match self.held.oldest() {
            Some((first, _)) => first.saturating_sub(1),
            None => self.last_seq,
        };
        self.durable.fetch_max(durable, Ordering::AcqRel);
        if !self.outcomes.is_empty() {
            self.write_outcomes().await;
        }
        if !self.progress.is_empty() {
            self.write_progress().await;
        }
    }

    async fn write_outcomes(&mut self) {
        let docs: Vec<OutcomeDoc> = self
            .outcomes
            .chunks(OUTCOMES_PER_DOC)
            .map(|urls| OutcomeDoc {
                id: bson::oid::ObjectId::new(),
                at: bson::DateTime::now(),
                urls: urls.to_vec(),
            })
            .collect();
        let coll = self.stores.outcomes();
        let what = "frontier outcome insert";
        for (_, why) in write::insert_unordered(&coll, &docs, &self.timing, Op::FrontierInsert, what).await {
            tracing::error!(error = %why, "the store refused a batch of outcomes; those URLs may be tried again after a restart");
        }
        self.outcomes.clear();
    }

    async fn write_progress(&mut self) {
        let statements: Vec<bson::Document> = self
            .progress
            .drain(..)
            .map(|(domain, below)| {
                doc! {"q": {"_id": domain}, "u": {"$set": {store::docs::ProgressDoc::BELOW: below}}, "upsert": true}
            })
            .collect();
        let coll = self.stores.progress();
        if let Err(e) = write::update_each(
            &coll,
            statements,
            &self.timing,
            Op::FrontierInsert,
            "frontier progress",
        )
        .await
        {
            // Only a restart's speed depends on it: the next record
            // replaces it.
            tracing::warn!(error = %e, "the store refused domains' progress; a restart reads their queues from further back");
        }
    }
}

/// Which of `unsure` (URL, `seq`) the store took: those stored in
/// `<crawl>__urls` with their own `seq`. One stored with another was there
/// before (the insert was a duplicate); one not there at all was refused
/// (and logged). Asked by `_id`, retried until the store answers.
async fn confirm(stores: &Stores, unsure: &mut Vec<(String, i64)>, timing: &TimingLog) -> Confirmed {
    let urls: Vec<&str> = unsure.iter().map(|(u, _)| u.as_str()).collect();
    let coll = stores.urls().clone_with_type::<RawDocumentBuf>();
    let mut backoff = Backoff::default();
    let stored: HashMap<String, i64> = loop {
        let start = Instant::now();
        let query = async {
            let cursor = coll.find(doc! {"_id": {"$in": &urls}}).await?;
            cursor.try_collect::<Vec<RawDocumentBuf>>().await
        };
        let res = store::deadline(query).await;
        let outcome = if matches!(res, Some(Ok(_))) { "ok" } else { "error" };
        timing.record_batch(Op::FrontierRead, start.elapsed(), outcome, urls.len());
        match res {
            Some(Ok(docs)) => break docs.iter().filter_map(UrlDoc::raw_url_and_seq).collect(),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn e(seq: i64) -> (String, i64, u16) {
        (format!("http://a.test/{seq}"), seq, 0)
    }

    fn add(
        h: &mut Held,
        key: Key,
        (url, seq, depth): (String, i64, u16),
        now: Instant,
    ) -> Option<SegmentBuilder> {
        h.add(key, (&url, seq, depth), now)
    }

    fn key(d: &str) -> Key {
        (d.to_string(), None)
    }

    #[test]
    fn a_segment_is_given_up_when_full_and_the_oldest_first_when_due() {
        let t0 = Instant::now();
        let mut h = Held::default();
        for s in 1..SEGMENT_URLS as i64 {
            assert!(add(&mut h, key("a"), e(s), t0).is_none());
        }
        assert!(add(&mut h, key("b"), e(1000), t0 + Duration::from_millis(10)).is_none());
        let full = add(&mut h, key("a"), e(SEGMENT_URLS as i64), t0).unwrap();
        assert_eq!(full.len(), SEGMENT_URLS);
        // "a" was written: "b" is the oldest now, and its seq the lowest held.
        assert_eq!(h.oldest().map(|o| o.0), Some(1000));
        assert!(add(&mut h, key("a"), e(1001), t0 + Duration::from_millis(20)).is_none());
        assert!(h.take_oldest(Some(t0)).is_none());
        let b = h.take_oldest(Some(t0 + Duration::from_millis(15))).unwrap();
        assert_eq!(b.first(), 1000);
        assert_eq!(h.oldest().map(|o| o.0), Some(1001));
        let a = h.take_oldest(None).unwrap();
        assert_eq!((a.first(), a.len()), (1001, 1));
        assert!(h.oldest().is_none());
        assert_eq!(h.urls, 0);
    }

    #[test]
    fn deferred_urls_of_a_domain_are_held_apart_from_its_queue() {
        let t0 = Instant::now();
        let mut h = Held::default();
        add(&mut h, key("a"), e(1), t0);
        add(&mut h, ("a".into(), Some(Deferral::DomainBudget)), e(2), t0);
        add(&mut h, key("a"), e(3), t0);
        let mut got = Vec::new();
        while let Some(b) = h.take_oldest(None) {
            let doc = b.build().unwrap();
            got.push((doc.deferred, doc.first, doc.seq, doc.n));
        }
        assert_eq!(
            got,
            vec![(None, 1, 3, 2), (Some(Deferral::DomainBudget), 2, 2, 1)]
        );
    }
}
