//! The crawl state machine without sockets or stores: leases, expiry,
//! adoption, reassignment, retries, halts and the stop, each driven by
//! events and checked on the effects. `Sim` plays the shell: a fake store
//! for the frontier's writes and reads, and supervisors that hold what they
//! were sent. It fails a test on the first URL leased while an earlier
//! lease of it may still be crawled (a doubled lease), and on the first
//! progress record that says a URL is finished that is not; and the
//! crawls end by checking that every admitted URL was finished exactly
//! once (no lost lease).
//!
//! This file holds `Sim` and what the tests share; the tests are in the
//! files beside it, by topic. The parts' own invariants are tested beside
//! each part (`state/intake.rs`, `state/flow.rs`, ...).

use std::collections::{BTreeMap, HashMap, HashSet};

use link::protocol::{CrawlResult, FailureKind, Outcome, WorkItem};
use shared::timing::TimingLog;
use store::docs::{ControlDoc, UrlState};

use super::retries::RETRY_AFTER;
use super::*;
use crate::breaker::BreakerConfig;
use crate::frontier::{ReadPage, Stored};
use crate::seen::{SeenCheck, SeenSet};

mod adoption;
mod intake;
mod leases;
mod resume;
mod retries_halts;
mod steering;
mod stop;
mod write_gate;

const LEASE_MS: u64 = 60_000;
const HEARTBEAT_TIMEOUT_MS: u64 = 30_000;
const T0: u64 = 1_000_000;
/// The shell's values (`persist::MAX_WRITE_BACKLOG`,
/// `queue_reader::MAX_PENDING`), written out: the core's tests import
/// nothing from the shell.
const MAX_WRITE_BACKLOG: usize = 20_000;
const MAX_PENDING_READS: usize = 400;

pub(super) fn settings() -> Settings {
    Settings {
        max_depth: 20,
        max_pages: 0,
        admission: crate::admission::AdmissionSettings::open(),
        canonical: shared::canonical::CanonicalRules::default(),
        min_supervisors: 1,
        heartbeat_timeout_ms: HEARTBEAT_TIMEOUT_MS,
        max_inflight_per_domain: 2,
        lease_ms: LEASE_MS,
        window: 4,
        memory_urls: 1_000_000,
        active_domains: 0,
        forget_idle_domains_ms: 60_000,
        breaker: BreakerConfig {
            // Only the halt rule, and only where a test asks for it.
            min_outcomes: usize::MAX,
            halt_after: 0,
            ..BreakerConfig::default()
        },
        seen_check: SeenCheck::Hash,
        seen_recent_urls: 0,
        held_links_memory: 500_000,
        max_write_backlog: MAX_WRITE_BACKLOG,
        max_pending_reads: MAX_PENDING_READS,
        revisit: false,
        // Progress recorded after every result: each record is checked
        // (`Sim::write`).
        progress_results: 1,
    }
}

/// `http://d<d>.test/p<n>` links to `p<2n+1>` and `p<2n+2>`, below `pages`.
fn url(d: u32, n: u32) -> String {
    format!("http://d{d}.test/p{n}")
}

fn links_of(u: &str, pages: u32) -> Vec<String> {
    let Some((host, n)) = u.strip_prefix("http://d").and_then(|r| r.split_once(".test/p")) else {
        return Vec::new();
    };
    let (Ok(d), Ok(n)) = (host.parse::<u32>(), n.parse::<u32>()) else {
        return Vec::new();
    };
    [2 * n + 1, 2 * n + 2]
        .into_iter()
        .filter(|&m| m < pages)
        .map(|m| url(d, m))
        .collect()
}

fn fetched(item: &WorkItem, links: Vec<String>) -> CrawlResult {
    CrawlResult {
        server: None,
        lease: item.lease,
        url: item.url.clone(),
        domain: item.domain.clone(),
        depth: item.depth,
        outcome: Outcome::Fetched {
            status: 200,
            final_url: None,
            content_type: Some("text/html".into()),
            bytes: 1000,
        },
        outlinks: links,
        sent_ms: 0,
    }
}

fn failed(item: &WorkItem, kind: FailureKind) -> CrawlResult {
    CrawlResult {
        outcome: Outcome::failed(kind, "test"),
        outlinks: Vec::new(),
        ..fetched(item, Vec::new())
    }
}

/// A lease as the supervisor got it: on which connection, until when.
#[derive(Debug, Clone, Copy)]
struct Out {
    conn: u32,
    lease: u64,
    expires_ms: u64,
}

/// A frontier write, in the writer's order.
enum Write {
    /// (URL, domain, depth), with whether the writer must say if the
    /// store took it.
    Insert(i64, (String, String, u16), bool),
    /// A URL that ended without a page: (URL, seq, state).
    Ended(String, i64, UrlState),
    /// A URL over a budget: (seq, URL, domain, depth).
    Defer(i64, String, String, u16),
    /// Domains' progress.
    Progress(Vec<(String, i64)>),
}

/// The shell and the store, played: what was sent, stored and asked.
struct Sim {
    st: CrawlState<u32>,
    settings: Settings,
    now: u64,
    next_conn: u32,
    pages: u32,
    /// The stored frontier's queued segments, by seq: (url, domain, depth).
    store: BTreeMap<i64, (String, String, u16)>,
    /// Deferred entries of the store (over a budget), by URL: (domain, depth, seq).
    deferred: BTreeMap<String, (String, u16, i64)>,
    /// The stored outcomes of each URL (failed, disallowed).
    marks: HashMap<String, Vec<UrlState>>,
    /// The `seq`s of the stored outcomes.
    ended: HashSet<i64>,
    /// Each domain's stored progress.
    progress: HashMap<String, i64>,
    /// With `SeenCheck::Store`, the exact seen-set: URL → seq.
    exact: HashMap<String, i64>,
    /// The stored pages, with their links: a child stores its page before
    /// it reports, whether or not the report is taken.
    pages_stored: HashMap<String, Vec<String>>,
    /// Store reads asked for and not answered yet.
    reads: Vec<Answer>,
    /// Each connection's held work, as a supervisor holds it.
    held: HashMap<u32, Vec<WorkItem>>,
    /// The last lease of each URL.
    out: HashMap<String, Out>,
    /// Leases of each domain that may still be out: a domain is never out
    /// at two live connections at once (one child paces it).
    domain_out: HashMap<String, Vec<Out>>,
    /// Leases whose result reached the dispatcher on a live connection.
    reported: HashSet<u64>,
    leased: HashMap<String, u32>,
    sent: Vec<(u32, ToSupervisor)>,
    halts: Vec<(String, Option<String>)>,
    /// An operator's changes, as recorded for the next run.
    controls: Vec<ControlDoc>,
    gone: Vec<String>,
    /// Inserts the exact seen-set's unique index refused (URLs stored before).
    duplicate_inserts: usize,
    /// Links every page has besides its own (repeated links).
    extra_links: Vec<String>,
    /// Inserts not written yet, and whether the writer lags (writes only
    /// when time passes, after the reads asked for meanwhile).
    unwritten: Vec<Write>,
    /// What the writer said of unsure inserts, not handed over yet.
    confirmations: Vec<(i64, bool)>,
    calls: u64,
    lagging: bool,
    /// Every insert up to this `seq` is written (or refused as a duplicate).
    written: i64,
    /// Stored URLs the seen-set has not been given yet, after
    /// `restart_summarized`.
    scan: Option<Vec<ScannedUrl>>,
    /// The most domains parked at once in `run_to_end`.
    peak_parked: usize,
}

impl Sim {
    fn new(settings: Settings, pages: u32) -> Sim {
        Sim {
            st: CrawlState::new(settings.clone(), TimingLog::disabled(), T0).unwrap(),
            settings,
            now: T0,
            next_conn: 0,
            pages,
            store: BTreeMap::new(),
            deferred: BTreeMap::new(),
            marks: HashMap::new(),
            ended: HashSet::new(),
            progress: HashMap::new(),
            exact: HashMap::new(),
            pages_stored: HashMap::new(),
            reads: Vec::new(),
            held: HashMap::new(),
            out: HashMap::new(),
            domain_out: HashMap::new(),
            reported: HashSet::new(),
            leased: HashMap::new(),
            sent: Vec::new(),
            halts: Vec::new(),
            controls: Vec::new(),
            gone: Vec::new(),
            duplicate_inserts: 0,
            extra_links: Vec::new(),
            unwritten: Vec::new(),
            confirmations: Vec::new(),
            calls: 0,
            lagging: false,
            written: 0,
            scan: None,
            peak_parked: 0,
        }
    }

    fn seed(&mut self, domains: u32) {
        let seeds: Vec<String> = (0..domains).map(|d| url(d, 0)).collect();
        self.st.seed(&seeds, self.now);
        self.pump();
    }

    fn conn_of(&self, s: SupId) -> u32 {
        self.st.member(s).map(|m| m.conn).expect("a known connection")
    }

    fn sup_of(&self, conn: u32) -> Option<SupId> {
        self.st.find(|c| *c == conn)
    }

    fn live(&self, conn: u32) -> bool {
        self.sup_of(conn).is_some_and(|s| self.st.is_live(s))
    }

    /// Carries out the effects, checking each lease against the last one
    /// of its URL.
    fn pump(&mut self) {
        for e in self.st.take_effects() {
            match e {
                Effect::Send(s, ToSupervisor::Work(items)) => {
                    let conn = self.conn_of(s);
                    for item in items {
                        if let Some(prev) = self.out.get(&item.url) {
                            let ended = !self.live(prev.conn)
                                || self.now >= prev.expires_ms
                                || self.reported.contains(&prev.lease);
                            assert!(
                                ended,
                                "{} leased to connection {conn} while connection {} still holds it (lease {})",
                                item.url, prev.conn, prev.lease
                            );
                        }
                        let lease = Out {
                            conn,
                            lease: item.lease,
                            expires_ms: item.lease_expires_ms,
                        };
                        let mut others = self.domain_out.remove(&item.domain).unwrap_or_default();
                        others.retain(|o| {
                            self.live(o.conn) && self.now < o.expires_ms && !self.reported.contains(&o.lease)
                        });
                        if let Some(o) = others.iter().find(|o| o.conn != conn) {
                            panic!(
                                "domain {} leased to connection {conn} while connection {} holds lease {} of it",
                                item.domain, o.conn, o.lease
                            );
                        }
                        others.push(lease);
                        self.domain_out.insert(item.domain.clone(), others);
                        self.out.insert(item.url.clone(), lease);
                        *self.leased.entry(item.url.clone()).or_default() += 1;
                        self.held.entry(conn).or_default().push(item);
                    }
                }
                Effect::Send(s, msg) => {
                    let conn = self.conn_of(s);
                    self.sent.push((conn, msg));
                }
                Effect::Insert {
                    url,
                    domain,
                    depth,
                    seq,
                    confirm,
                } => {
                    self.unwritten
                        .push(Write::Insert(seq, (url, domain, depth), confirm));
                    if !self.lagging {
                        self.flush();
                    }
                }
                Effect::Ended { url, seq, state, .. } => {
                    self.unwritten.push(Write::Ended(url, seq, state));
                    if !self.lagging {
                        self.flush();
                    }
                }
                Effect::Progress(domains) => {
                    self.unwritten.push(Write::Progress(domains));
                    if !self.lagging {
                        self.flush();
                    }
                }
                Effect::Defer {
                    url,
                    domain,
                    depth,
                    seq,
                    ..
                } => {
                    self.unwritten.push(Write::Defer(seq, url, domain, depth));
                    if !self.lagging {
                        self.flush();
                    }
                }
                // The simulated crawls do not revisit (`Settings::revisit`).
                Effect::ReadDue(_) => panic!("a read of due pages in a crawl that does not revisit"),
                Effect::CheckStored(asked) => {
                    let stored = asked
                        .iter()
                        .filter(|(_, u)| self.pages_stored.contains_key(u))
                        .map(|(_, u)| u.clone())
                        .collect();
                    self.reads.push(Answer::Checked {
                        asked,
                        stored: Ok(stored),
                    });
                }
                Effect::ReadLinks(asked) => {
                    let found = asked
                        .iter()
                        .filter_map(|r| Some((r.url.clone(), self.pages_stored.get(&r.url)?.clone())))
                        .collect();
                    self.reads.push(Answer::Links {
                        asked,
                        found: Ok(found),
                    });
                }
                Effect::Read(r) => {
                    let urls: Vec<Stored> = self
                        .store
                        .range(r.after + 1..=r.upto)
                        .filter(|(_, (_, d, _))| *d == r.domain)
                        .take(r.limit)
                        .map(|(seq, (u, _, depth))| Stored {
                            url: u.clone(),
                            depth: *depth,
                            seq: *seq,
                        })
                        .collect();
                    let mut page = ReadPage::of(urls, r.limit);
                    page.finished = page
                        .urls
                        .iter()
                        .filter(|u| {
                            u.seq <= r.finished_upto
                                && (self.pages_stored.contains_key(&u.url) || self.ended.contains(&u.seq))
                        })
                        .map(|u| u.seq)
                        .collect();
                    self.reads.push(Answer::Read(r, Ok(page)));
                }
                Effect::LookUp(sup, held) => {
                    let asked = held.iter().map(|l| l.held.len()).sum();
                    let found = held
                        .into_iter()
                        .flat_map(|l| {
                            let (after, upto) = (l.after, l.upto);
                            l.held.into_iter().map(move |h| (after, upto, h))
                        })
                        .filter_map(|(after, upto, (lease, u))| {
                            let (seq, (_, _, depth)) =
                                self.store.range(after + 1..=upto).find(|(_, (x, ..))| *x == u)?;
                            Some((
                                lease,
                                Stored {
                                    url: u,
                                    depth: *depth,
                                    seq: *seq,
                                },
                            ))
                        })
                        .collect();
                    self.reads.push(Answer::Held {
                        sup,
                        asked,
                        found: Ok(found),
                    });
                }
                Effect::RecordHalt { domain, reason } => self.halts.push((domain, reason)),
                Effect::Gone(id) => self.gone.push(id),
                Effect::RecordControl(doc) => self.controls.push(doc),
                // Stored for a restart; the seeds are offered meanwhile.
                Effect::StoreSeeds(_) => {}
            }
        }
    }

    /// The writer writes what it holds, in order; the unique index on
    /// `_id` keeps a URL stored before as it was.
    fn flush(&mut self) {
        self.write(usize::MAX);
    }

    /// The writer writes the first `n` of what it holds.
    fn write(&mut self, n: usize) {
        let rest = self.unwritten.split_off(n.min(self.unwritten.len()));
        for w in std::mem::replace(&mut self.unwritten, rest) {
            match w {
                Write::Insert(seq, doc, confirm) => {
                    self.written = self.written.max(seq);
                    if self.settings.seen_check == SeenCheck::Store {
                        let taken = *self.exact.entry(doc.0.clone()).or_insert(seq) == seq;
                        if !taken {
                            self.duplicate_inserts += 1;
                        }
                        if confirm {
                            // Into a segment once confirmed, under a new seq.
                            self.confirmations.push((seq, taken));
                            continue;
                        }
                    }
                    assert!(
                        !self.store.values().any(|(u, ..)| *u == doc.0),
                        "{} in the frontier twice",
                        doc.0
                    );
                    assert!(self.store.insert(seq, doc).is_none(), "seq {seq} twice");
                }
                Write::Ended(url, seq, state) => {
                    self.ended.insert(seq);
                    self.marks.entry(url).or_default().push(state);
                }
                Write::Defer(seq, url, domain, depth) => {
                    self.written = self.written.max(seq);
                    let known = self.store.values().any(|(u, ..)| *u == url);
                    assert!(!known, "{url} deferred and queued");
                    self.deferred.entry(url).or_insert((domain, depth, seq));
                }
                Write::Progress(domains) => {
                    for (domain, below) in domains {
                        for (seq, (u, ..)) in self.store.range(..below).filter(|(_, e)| e.1 == domain) {
                            assert!(
                                self.pages_stored.contains_key(u) || self.ended.contains(seq),
                                "progress of {domain} recorded past {u} (seq {seq}, below {below}), which is not finished"
                            );
                        }
                        self.progress.insert(domain, below);
                    }
                }
            }
        }
    }

    /// The dispatcher is killed and `st` starts on the store, as the
    /// shell does (see `restart_summarized`).
    fn restart(&mut self, st: CrawlState<u32>) {
        self.restart_summarized(st);
    }

    /// The dispatcher is killed (what the old one's writer held and the
    /// reads it asked for are lost) and `st` starts from the store's
    /// summary of the frontier (`resume::summarize`), as the shell does:
    /// each domain's queue from its progress on (counted whole, an upper
    /// bound), all queued URLs read back after it (`resume::read_back`)
    /// when they fit in memory, and the stored URLs reach its seen-set
    /// later, a few at a time (`scan`).
    fn restart_summarized(&mut self, st: CrawlState<u32>) {
        self.killed(st);
        let below = |d: &str| self.progress.get(d).copied().unwrap_or(0);
        let mut summary = StoredFrontier {
            urls: (self.store.len() + self.deferred.len()) as u64,
            progress: self.progress.clone(),
            ..StoredFrontier::default()
        };
        let mut queues: BTreeMap<&str, (StoredQueue, i64)> = BTreeMap::new();
        for (&seq, (_, domain, _)) in &self.store {
            summary.last_seq = summary.last_seq.max(seq);
            let q = queues.entry(domain).or_insert((
                StoredQueue {
                    domain: domain.clone(),
                    count: 0,
                    first_seq: seq.max(below(domain)),
                },
                seq,
            ));
            q.0.count += 1;
            q.1 = seq;
        }
        for (_, _, seq) in self.deferred.values() {
            summary.last_seq = summary.last_seq.max(*seq);
        }
        summary.queues = queues
            .into_values()
            .filter(|(q, last)| q.first_seq <= *last)
            .map(|(q, _)| q)
            .collect();
        summary.ended = self
            .ended
            .iter()
            .copied()
            .filter(|seq| self.store.get(seq).is_some_and(|(_, d, _)| *seq >= below(d)))
            .collect();
        if self.st.queues_fit(&summary) {
            summary.read_whole();
        }
        self.st.resume_summary(&summary);
        if summary.whole {
            let back: Vec<(i64, (String, String, u16))> = self
                .store
                .iter()
                .filter(|(seq, (_, d, _))| **seq >= below(d))
                .map(|(s, e)| (*s, e.clone()))
                .collect();
            for (seq, (url, domain, depth)) in back {
                let finished = summary.ended.contains(&seq) || self.pages_stored.contains_key(&url);
                self.st.resume(
                    Resumed {
                        url,
                        domain,
                        depth,
                        seq,
                    },
                    finished,
                );
            }
        }
        let stored = self.store.values().map(|(u, ..)| ScannedUrl {
            url: u.clone(),
            deferred: None,
        });
        let deferred = self.deferred.iter().map(|(u, (d, depth, _))| ScannedUrl {
            url: u.clone(),
            deferred: Some((d.clone(), *depth)),
        });
        // In the order of admission, as the scan reads segments.
        let mut all: Vec<(i64, ScannedUrl)> = self
            .store
            .keys()
            .copied()
            .zip(stored)
            .chain(self.deferred.values().map(|v| v.2).zip(deferred))
            .collect();
        all.sort_by_key(|(seq, _)| *seq);
        self.scan = Some(all.into_iter().map(|(_, u)| u).collect());
    }

    fn killed(&mut self, st: CrawlState<u32>) {
        self.unwritten.clear();
        self.confirmations.clear();
        self.reads.clear();
        self.scan = None;
        let last = |m: Option<i64>| m.unwrap_or(0);
        self.written =
            last(self.store.keys().next_back().copied()).max(last(self.deferred.values().map(|v| v.2).max()));
        self.st = st;
    }

    /// Hands `n` more stored URLs to the seen-set, if a scan runs.
    fn scan(&mut self, n: usize) {
        let Some(left) = &mut self.scan else { return };
        let batch: Vec<ScannedUrl> = left.drain(..n.min(left.len())).collect();
        self.st.seen_stored(batch);
        if left.is_empty() {
            self.st.seen_rebuilt(self.now);
            self.scan = None;
        }
    }

    /// As `FrontierWriter::durable`.
    fn durable(&self) -> i64 {
        self.written
    }

    /// A supervisor joins on a new connection, holding `holding`.
    fn join(&mut self, id: &str, capacity: u32, holding: Vec<WorkItem>) -> u32 {
        let conn = self.next_conn;
        self.next_conn += 1;
        // What it holds under its URL's latest lease is its own now, for
        // as long as a fresh lease (an older lease must be refused).
        for item in &holding {
            if self.out.get(&item.url).is_some_and(|o| o.lease != item.lease) {
                continue;
            }
            self.out.insert(
                item.url.clone(),
                Out {
                    conn,
                    lease: item.lease,
                    expires_ms: self.now + self.settings.lease_ms,
                },
            );
        }
        self.held.insert(conn, holding.clone());
        self.st.join(conn, id.into(), capacity, holding, self.now);
        self.pump();
        conn
    }

    fn dispatch(&mut self) {
        self.st.dispatch(self.now, 0);
        self.pump();
    }

    /// Answers the store reads asked for so far, and hands over what the
    /// writer confirmed (a read may return an unsure URL first, or after).
    /// Every other call, the writer's word comes first.
    fn answer_reads(&mut self) {
        self.calls += 1;
        let first = self.calls.is_multiple_of(2);
        let confirmed = std::mem::take(&mut self.confirmations);
        if first {
            self.st.confirmed(confirmed.clone(), self.now);
        }
        let durable = self.durable();
        for a in std::mem::take(&mut self.reads) {
            self.st.read_answered(a, self.now, durable);
        }
        if !first {
            self.st.confirmed(confirmed, self.now);
        }
        self.pump();
    }

    fn advance(&mut self, ms: u64) {
        self.now += ms;
        self.st.tick(self.now, self.durable(), self.reads.len());
        self.pump();
        if self.lagging {
            // Reads asked for now are answered before the writer catches up.
            self.answer_reads();
            self.flush();
        }
    }

    /// Every live connection is heard from, then the once-a-second round.
    fn housekeeping(&mut self, silent: &[u32]) {
        for s in 0..self.st.members().len() {
            let conn = self.conn_of(s);
            if self.st.is_live(s) && !silent.contains(&conn) {
                self.st.heard(s, self.now);
            }
        }
        self.st.housekeeping(self.now);
        self.pump();
    }

    /// Connection `conn` reports on what it holds (up to `n`), fetched with
    /// the links of the synthetic web.
    fn report(&mut self, conn: u32, n: usize) {
        let mut items = self.held.remove(&conn).unwrap_or_default();
        let rest = items.split_off(n.min(items.len()));
        self.held.insert(conn, rest);
        let results: Vec<CrawlResult> = items
            .iter()
            .map(|i| {
                let mut links = links_of(&i.url, self.pages);
                links.extend(self.extra_links.iter().cloned());
                fetched(i, links)
            })
            .collect();
        self.deliver(conn, results);
    }

    fn deliver(&mut self, conn: u32, results: Vec<CrawlResult>) {
        for r in &results {
            if let Outcome::Fetched { .. } = r.outcome {
                self.pages_stored
                    .entry(r.url.clone())
                    .or_insert_with(|| r.outlinks.clone());
            }
        }
        let Some(s) = self.sup_of(conn) else { return };
        if self.st.is_live(s) {
            self.reported.extend(results.iter().map(|r| r.lease));
            self.st.heard(s, self.now);
        }
        self.st.results(s, results, self.now);
        self.pump();
    }

    /// Runs the crawl to its end with the live connections answering all
    /// they hold, store reads answered, time moving on.
    fn run_to_end(&mut self) {
        for _ in 0..100_000 {
            if self.st.done() {
                // As the shell does at the end: every domain's progress,
                // and what the writer holds is written before the process
                // exits.
                self.st.record_progress(true);
                self.pump();
                self.flush();
                return;
            }
            self.answer_reads();
            self.scan(3);
            self.dispatch();
            let conns: Vec<u32> = self.held.keys().copied().filter(|c| self.live(*c)).collect();
            for c in conns {
                self.report(c, usize::MAX);
            }
            self.advance(1_000);
            self.housekeeping(&[]);
            self.peak_parked = self.peak_parked.max(self.st.frontier.parked_domains());
        }
        panic!(
            "the crawl did not end: {} left (queued {}, in flight {}, spilled {}), URLs to scan {:?}, done {}",
            self.st.left(),
            self.st.frontier.queued(),
            self.st.frontier.in_flight(),
            self.st.frontier.spilled(),
            self.scan.as_ref().map(|s| s.len()),
            self.st.done()
        );
    }

    /// Whether `u` is finished in the store: its page is stored, or its
    /// outcome (failed, disallowed).
    fn finished(&self, u: &str) -> bool {
        self.pages_stored.contains_key(u) || self.marks.contains_key(u)
    }

    /// No lease lost: every URL admitted was finished, once: its page
    /// stored, or its outcome.
    fn assert_each_finished_once(&self) {
        assert!(self.st.done());
        let admitted: HashSet<&String> = self.store.values().map(|(u, ..)| u).collect();
        assert_eq!(admitted.len(), self.store.len(), "a URL admitted twice");
        for u in &admitted {
            let page = usize::from(self.pages_stored.contains_key(*u));
            let marks = self.marks.get(*u).map_or(&[][..], Vec::as_slice);
            assert_eq!(
                page + marks.len(),
                1,
                "{u} finished {} times: page {page}, outcomes {marks:?}",
                page + marks.len()
            );
        }
        for u in self.marks.keys().chain(self.pages_stored.keys()) {
            assert!(admitted.contains(u), "{u} finished but never admitted");
        }
    }

    /// [`Sim::assert_each_finished_once`], and no URL was leased twice.
    fn assert_each_crawled_once(&self) {
        self.assert_each_finished_once();
        assert!(self.leased.values().all(|&n| n == 1));
    }

    fn sent_to(&self, conn: u32, what: fn(&ToSupervisor) -> bool) -> usize {
        self.sent.iter().filter(|(c, m)| *c == conn && what(m)).count()
    }
}

/// Domains of `sim`'s store: (admitted, deferred) entries of `url(d, _)`.
fn admitted_and_deferred(sim: &Sim, d: u32) -> (usize, usize) {
    let host = format!("http://d{d}.test/");
    let admitted = sim.store.values().filter(|(u, ..)| u.starts_with(&host)).count();
    let deferred = sim.deferred.keys().filter(|u| u.starts_with(&host)).count();
    (admitted, deferred)
}
