//! The crawl as a state machine with no I/O: the frontier, the supervisors
//! (membership, credits, heartbeats), admission of discovered URLs, leases
//! and their results, retries, the circuit breaker and halts, and the stop.
//!
//! It is driven by events (a supervisor joined, results came in, a tick,
//! a store read answered), each a method taking the time as a value, and it
//! answers with [`Effect`]s: messages to send, frontier writes, store
//! reads. The shell (`crawl.rs`) owns the ZeroMQ socket, the cluster-secret
//! handshake, the stores and the timers, and carries effects out in order.
//! So every rule about leases can be tested without a socket or a store
//! (`state/tests.rs`), as in tokio's mini-redis, where `Db` knows nothing
//! of connections. Membership (joining, adoption, leaving, heartbeats) is
//! in `state/members.rs`.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use link::protocol::{CrawlResult, FailureKind, Outcome, ToSupervisor};
use shared::canonical::{CanonicalRules, Canonicalizer};
use shared::timing::{Op, TimingLog};
use shared::urls;
use store::docs::{ControlDoc, Deferral, UrlState};

use crate::admission::{Admission, AdmissionSettings, Over, Refusal};
use crate::breaker::{self, BreakerConfig, Breakers, Trip};
use crate::control::Controls;
use crate::frontier::{Frontier, LeaseRefusal, Leased, Refill, Relink, SupId};
use crate::refusals::{Reason, Refusals};
use crate::revisits::{DueRead, Revisits};
use crate::seen::{Seen, SeenCheck, SeenSet};
use crate::stats::{FinishReason, Stats};
pub(crate) use inputs::{Answer, Resumed, ScannedUrl, StoredFrontier, StoredQueue, LOOK_UP_BATCH};
use relink::Relinks;
use write_gate::WriteGate;

/// Pause before a retry, times the attempt number.
const RETRY_AFTER: Duration = Duration::from_secs(5);
/// Most URLs sent in one Work message.
const MAX_BATCH: usize = 512;
/// Store reads of domains' queues asked for at once (see `queue_reader`).
const READS_PER_TICK: usize = 64;

/// How often domains' progress is recorded (see `frontier::progress`).
const PROGRESS_EVERY_MS: u64 = 5_000;
/// Links held back while the stored URLs are read in (see
/// [`CrawlState::offer`]) past which no more URLs are leased: about 200
/// bytes each. The read takes seconds (segments hold hundreds of URLs a
/// document), so the crawl rarely meets it.
const MAX_HELD_LINKS: usize = 500_000;

/// A URL waiting for a retry.
#[derive(Debug, Clone)]
struct Retry {
    due_ms: u64,
    url: String,
    domain: String,
    depth: u16,
    seq: i64,
}

/// What the crawl is allowed to do, from the command line.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub(crate) max_depth: u16,
    /// 0: no limit.
    pub(crate) max_pages: u64,
    /// Where the crawl may go, trap rules and budgets.
    pub(crate) admission: AdmissionSettings,
    /// How links are made canonical before the seen-check (the children
    /// do it first; the dispatcher's word is the last).
    pub(crate) canonical: CanonicalRules,
    /// Supervisors to wait for before the first lease.
    pub(crate) min_supervisors: usize,
    pub(crate) heartbeat_timeout_ms: u64,
    pub(crate) max_inflight_per_domain: u32,
    pub(crate) lease_ms: u64,
    /// Past `memory_urls` queued URLs, each domain keeps `window` in memory.
    pub(crate) window: usize,
    pub(crate) memory_urls: usize,
    /// Past `memory_urls`, the most domains holding a window (0: derived
    /// from the budget; see `frontier::parking`).
    pub(crate) active_domains: usize,
    /// A domain with nothing left is forgotten this long after its last
    /// result (up to twice as long).
    pub(crate) forget_idle_domains_ms: u64,
    pub(crate) breaker: BreakerConfig,
    /// How a URL whose hash was seen before is judged (see `crate::seen`).
    pub(crate) seen_check: SeenCheck,
    /// With `SeenCheck::Store`: URLs kept whole to answer without the store.
    pub(crate) seen_recent_urls: usize,
    /// Frontier writes waiting past which leases are counted against the
    /// writes they will bring (`persist::MAX_WRITE_BACKLOG`).
    pub(crate) max_write_backlog: usize,
    /// Reads of domains' queues asked for and not answered yet, at most:
    /// what the queue reader can have under way and queued for its next
    /// round (`queue_reader::MAX_PENDING`). A tick asks for up to 64 every
    /// few tens of milliseconds whatever the store's pace: on a slow store
    /// with many domains, thousands would wait in the reader, be answered
    /// minutes later, and keep the store from the frontier writer's
    /// batches all that time.
    pub(crate) max_pending_reads: usize,
    /// Stored pages are fetched again when due (`--revisit-after`), and
    /// the crawl runs until stopped.
    pub(crate) revisit: bool,
    /// Results a domain has before its progress is recorded again
    /// (`frontier::progress`; tests: fewer).
    pub(crate) progress_results: u32,
}

/// What the shell must do, in this order, after an event.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Effect {
    /// A message for supervisor `s`, sealed with its connection's key.
    Send(SupId, ToSupervisor),
    /// A newly admitted URL for the stored frontier (`seq`: its place in
    /// its domain's queue).
    Insert {
        url: String,
        domain: String,
        depth: u16,
        seq: i64,
        /// An unsure URL: the writer must say whether the store took it
        /// ([`CrawlState::confirmed`]).
        confirm: bool,
    },
    /// A URL that finished without a page (failed, disallowed), for the
    /// stored frontier's outcomes.
    Ended {
        url: String,
        seq: i64,
        state: UrlState,
        failure: Option<FailureKind>,
    },
    /// A URL over a budget, for the stored frontier as deferred (known,
    /// not crawled; a later run with a larger budget takes it up).
    Defer {
        url: String,
        domain: String,
        depth: u16,
        seq: i64,
        why: Deferral,
    },
    /// Domains' progress for the stored frontier: (domain, the `seq`
    /// below which every URL of it is finished; see `frontier::progress`).
    Progress(Vec<(String, i64)>),
    /// Read the next URLs of a domain's queue from the store; the answer
    /// comes back as [`CrawlState::read_answered`].
    Read(Refill),
    /// A read of the pages due for a revisit (see `crate::revisits`).
    ReadDue(DueRead),
    /// Look up URLs a joining supervisor holds in the store: (lease, URL).
    LookUp(SupId, Vec<crate::frontier::LookUp>),
    /// Ask the store which of these URLs, whose leases ended without a
    /// result, have a stored page: (lease, URL); the answer comes back as
    /// [`CrawlState::read_answered`] (`frontier/unanswered.rs`).
    CheckStored(Vec<(u64, String)>),
    /// Read the links of these stored pages: URLs found finished after a
    /// restart (`crate::finished`); the answer comes back as
    /// [`CrawlState::read_answered`].
    ReadLinks(Vec<Relink>),
    /// Record a domain's halt (`Some(reason)`) or clear it, in the second
    /// store, so that a restarted dispatcher keeps it.
    RecordHalt { domain: String, reason: Option<String> },
    /// Record what an operator changed (see `crate::control`), so that a
    /// restarted dispatcher keeps it.
    RecordControl(ControlDoc),
    /// Seeds an operator added, for the seeds collection.
    StoreSeeds(Vec<String>),
    /// The supervisor with this id has no live connection any more.
    Gone(String),
}

/// Why a supervisor's connection is given up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Leaving {
    SaidBye,
    SaidHelloAgain,
    Reconnected,
    MissedHeartbeats,
    /// It stopped reading: its queue of messages from us filled up.
    NotReading,
}

impl Leaving {
    fn as_str(self) -> &'static str {
        match self {
            Leaving::SaidBye => "said bye",
            Leaving::SaidHelloAgain => "said hello again",
            Leaving::Reconnected => "reconnected",
            Leaving::MissedHeartbeats => "missed heartbeats",
            Leaving::NotReading => "stopped reading",
        }
    }
}

/// One connection of a supervisor, from its Join to its leaving. A
/// supervisor that reconnects gets a new one (a new [`SupId`]); the old one
/// stays, dead, so late messages on it are recognised.
pub(crate) struct Member<C> {
    /// The supervisor's own id (stable across its reconnections).
    pub(crate) id: String,
    /// The shell's handle on the connection (identity and session keys);
    /// never looked into here.
    pub(crate) conn: C,
    /// URLs it may hold at once; what it holds is [`Frontier::held`].
    pub(crate) capacity: u32,
    pub(crate) last_heard_ms: u64,
    pub(crate) live: bool,
    pub(crate) said_bye: bool,
    pub(crate) results: u64,
    /// An earlier connection of the same supervisor was met (it reconnected,
    /// perhaps after it was given up): what it held then and reports now
    /// may have been finished or handed out meanwhile, honestly.
    pub(crate) rejoined: bool,
}

/// The crawl's state; `C` is the shell's connection handle.
pub(crate) struct CrawlState<C> {
    settings: Settings,
    frontier: Frontier,
    seen: SeenSet,
    members: Vec<Member<C>>,
    /// The next admitted URL's place in its domain's queue (`FrontierDoc::seq`).
    next_seq: i64,
    /// Scope, rules, trap rules and budgets.
    admission: Admission,
    canonical: Canonicalizer,
    /// Deferred URLs the stored frontier holds that a larger budget may
    /// take up, once every stored URL is counted ([`CrawlState::seen_rebuilt`]):
    /// (URL, domain, depth).
    deferred_stored: Vec<(String, String, u16)>,
    admitted: u64,
    /// Failed attempts so far, by URL, while retries are left.
    attempts: HashMap<String, u32>,
    /// URLs waiting for a retry.
    delayed: Vec<Retry>,
    /// Links found while the stored URLs are read in that the seen-set
    /// cannot judge yet ([`Seen::NotYet`]): (URL, depth), offered again
    /// once it is whole.
    held_links: Vec<(String, u16)>,
    /// Keys (`SeenSet::key`) of the deferred URLs in `deferred_stored`,
    /// and of those among them that the stored frontier also holds queued
    /// (an earlier run took them up): those stay as they are.
    deferred_keys: HashSet<u64>,
    taken_up_before: HashSet<u64>,
    /// When domains' progress is next recorded (Unix ms).
    next_progress_ms: u64,
    started_dispatching: bool,
    /// The frontier writer was more than [`Settings::max_write_backlog`]
    /// writes behind at the last [`CrawlState::dispatch`]: no URL is
    /// leased and no queue is read until it catches up.
    writer_behind: bool,
    /// How many URLs may be leased while the writer is behind.
    write_gate: WriteGate,
    /// The member the next [`CrawlState::dispatch`] starts with, so that
    /// when the gate lets only a few URLs out, each member gets its turn.
    next_member: usize,
    /// Reads of queues asked for and not answered: the reader's count at
    /// the last tick, plus those asked for since, less those answered.
    reads_pending: usize,
    /// The crawl is over: a supervisor that (re)joins now is told to stop.
    stopping: bool,
    breakers: Breakers,
    stats: Stats,
    refusals: Refusals,
    /// Unsure URLs inserted and not confirmed yet, by `seq`: (URL, domain, depth).
    unsure: HashMap<i64, (String, String, u16)>,
    /// (finished, queued) entries read back from the stored frontier.
    resumed: (u64, u64),
    /// Entries found finished by their stored page, whose links are
    /// offered again.
    relinks: Relinks,
    /// Seeds waiting for the stored URLs' hashes (see [`CrawlState::seed`]).
    waiting_seeds: Vec<String>,
    /// What an operator set: a paused crawl, blocked domains, delays (`steer`).
    controls: Controls,
    /// What is due again, when the crawl revisits (see `crate::revisits`).
    revisits: Option<Revisits>,
    timing: TimingLog,
    effects: Vec<Effect>,
}

impl<C> CrawlState<C> {
    /// The state of a new crawl; an error names a bad allow/deny rule or
    /// canonical rule.
    pub(crate) fn new(settings: Settings, timing: TimingLog, now_ms: u64) -> Result<Self, String> {
        let write_gate = WriteGate::new(settings.max_write_backlog);
        let revisits = settings.revisit.then(Revisits::default);
        Ok(CrawlState {
            frontier: Frontier::new(settings.max_inflight_per_domain, settings.lease_ms, now_ms << 12)
                .with_stored_check()
                .with_window(settings.window, settings.memory_urls)
                .with_active_bound(settings.active_domains)
                .with_forgetting(settings.forget_idle_domains_ms),
            admission: Admission::new(&settings.admission)?,
            canonical: settings.canonical.compile()?,
            deferred_stored: Vec::new(),
            seen: SeenSet::new(settings.seen_check, settings.seen_recent_urls),
            breakers: Breakers::new(settings.breaker),
            settings,
            members: Vec::new(),
            next_seq: 1,
            admitted: 0,
            attempts: HashMap::new(),
            delayed: Vec::new(),
            held_links: Vec::new(),
            deferred_keys: HashSet::new(),
            taken_up_before: HashSet::new(),
            next_progress_ms: now_ms.saturating_add(PROGRESS_EVERY_MS),
            started_dispatching: false,
            writer_behind: false,
            write_gate,
            next_member: 0,
            reads_pending: 0,
            stopping: false,
            stats: Stats::new(),
            refusals: Refusals::default(),
            resumed: (0, 0),
            relinks: Relinks::default(),
            waiting_seeds: Vec::new(),
            controls: Controls::default(),
            revisits,
            unsure: HashMap::new(),
            timing,
            effects: Vec::new(),
        })
    }

    /// The seen-set to use (tests: one whose hashes collide).
    #[cfg(test)]
    pub(crate) fn with_seen(mut self, seen: SeenSet) -> Self {
        self.seen = seen;
        self
    }

    /// What the last events asked the shell to do, oldest first.
    pub(crate) fn take_effects(&mut self) -> Vec<Effect> {
        let ended = self.frontier.take_unanswered();
        if !ended.is_empty() {
            self.effects.push(Effect::CheckStored(ended));
        }
        std::mem::take(&mut self.effects)
    }

    // ---- start-up ----

    /// A domain halted in an earlier run.
    pub(crate) fn halted_before(&mut self, domain: &str) {
        self.frontier.halt(domain);
    }

    /// One queued URL of the stored frontier, read back at start-up (when
    /// they all fit in memory). `finished`: its page is stored or it ended
    /// without one (`crate::finished`), so it is not queued; a stored
    /// page's links are offered again.
    pub(crate) fn resume(&mut self, d: Resumed, finished: bool) {
        if finished {
            // Placed as a queued one would be: behind its domain's cursor
            // (done with: its links are offered again now), or counted in
            // the store, where its window's read meets it again and finds
            // it finished then.
            if self.frontier.resume_finished(&d.domain, d.seq) {
                self.relinks.found(Relink {
                    url: d.url,
                    depth: d.depth,
                    domain: d.domain,
                    seq: d.seq,
                });
            }
            return;
        }
        self.resumed.0 = self.resumed.0.saturating_sub(1);
        self.resumed.1 += 1;
        self.frontier.resume_queued(d.url, &d.domain, d.depth, d.seq);
    }

    /// Resumes from a summary of the stored frontier (`crate::resume`):
    /// each domain's queue is read from the store window by window (or
    /// every queued URL read back at once, [`CrawlState::resume`], when
    /// they fit in memory), and the stored URLs' hashes arrive later
    /// ([`CrawlState::seen_stored`]); until [`CrawlState::seen_rebuilt`]
    /// a link whose hash is not known yet is held back.
    pub(crate) fn resume_summary(&mut self, s: &StoredFrontier) {
        self.admitted = self.admitted.saturating_add(s.urls);
        self.next_seq = self.next_seq.max(s.last_seq.saturating_add(1));
        if !s.is_empty() {
            self.seen.rebuilding(s.urls);
        }
        if s.whole {
            // Counted as each is read back.
            self.resumed = (s.urls, 0);
            return;
        }
        self.resumed = (s.finished(), s.queued());
        // Each domain's reads go up to the frontier's highest `seq` (the
        // summary does not give each domain's own): no URL of the domain
        // lies between the two, so the reads find the same URLs.
        for q in &s.queues {
            self.frontier
                .resume_spilled(&q.domain, q.count, q.first_seq, s.last_seq);
        }
    }

    /// Whether every queued URL of a stored frontier fits the frontier's
    /// memory budget, so that start-up reads them all back at once
    /// ([`StoredFrontier::read_whole`]) rather than window by window.
    pub(crate) fn queues_fit(&self, s: &StoredFrontier) -> bool {
        self.frontier.fits(s.queued())
    }

    /// Stored URLs read in for the seen-set; each but the deferred ones
    /// counts against its budgets as when it was admitted. A deferred one
    /// that is not over its budget already is kept to be taken up once
    /// every stored URL is counted (counts only grow, so one over its
    /// budget now stays over), unless the stored frontier also holds it
    /// queued (an earlier run took it up: its queued copy comes later in
    /// the scan's order, which is the order of admission).
    pub(crate) fn seen_stored(&mut self, urls: Vec<ScannedUrl>) {
        for u in urls {
            self.seen.insert_stored(&u.url);
            match u.deferred {
                None => {
                    self.admission.count_stored(&u.url);
                    if !self.deferred_keys.is_empty() {
                        let key = self.seen.key(&u.url);
                        if self.deferred_keys.contains(&key) {
                            self.taken_up_before.insert(key);
                        }
                    }
                }
                Some((domain, depth)) => {
                    if self.admission.over_budget(&u.url).is_none() {
                        self.deferred_keys.insert(self.seen.key(&u.url));
                        self.deferred_stored.push((u.url, domain, depth));
                    }
                }
            }
        }
    }

    /// Every stored URL was read in: the seen-set judges alone again, the
    /// links held back meanwhile and the seeds that waited for it are
    /// offered, and deferred URLs that the budgets now let in are queued
    /// again.
    pub(crate) fn seen_rebuilt(&mut self, now_ms: u64) {
        self.seen.rebuilt();
        for (url, depth) in std::mem::take(&mut self.held_links) {
            self.offer(&url, depth, now_ms);
        }
        self.offer_waiting_seeds(now_ms);
        self.take_up_deferred(now_ms);
    }

    /// Queues again the deferred URLs this run's rules let in (its budget
    /// is larger than the run's that deferred them), each under a new
    /// `seq`, in the order they were stored. The others stay deferred.
    fn take_up_deferred(&mut self, now_ms: u64) {
        let before = std::mem::take(&mut self.taken_up_before);
        self.deferred_keys.clear();
        for (url, domain, depth) in std::mem::take(&mut self.deferred_stored) {
            if before.contains(&self.seen.key(&url)) {
                continue;
            }
            let Ok(parsed) = urls::parse(&url) else {
                continue;
            };
            let Ok(key) = self.admission.judge(&parsed, &domain) else {
                continue;
            };
            self.admission.count(&key);
            self.admitted += 1;
            self.stats.counts.deferred_taken_up += 1;
            self.queue_new(url, domain, depth, now_ms);
        }
    }

    /// The read of stored URLs ended early (it retries every page until
    /// the store answers, so only when its task died): the seen-set is
    /// taken as whole, with an error in the log, so that the crawl goes on;
    /// a stored URL it did not read may be crawled again (its page is
    /// stored once all the same).
    pub(crate) fn seen_scan_failed(&mut self, now_ms: u64) {
        self.deferred_stored.clear();
        self.deferred_keys.clear();
        self.taken_up_before.clear();
        self.seen_rebuilt(now_ms);
    }

    fn offer_waiting_seeds(&mut self, now_ms: u64) {
        for s in std::mem::take(&mut self.waiting_seeds) {
            self.offer(&s, 0, now_ms);
        }
    }

    /// (finished, queued) URLs resumed from the store.
    pub(crate) fn resumed(&self) -> (u64, u64) {
        self.resumed
    }

    /// The seeds, after the stored frontier: their domains are the scope
    /// (with `scope_to_seeds`), and those not seen before are admitted.
    ///
    /// While the stored URLs' hashes are still being read in, the seeds
    /// wait for them ([`CrawlState::seen_rebuilt`]); the crawl is not done
    /// before. A resumed crawl's seeds are nearly all stored already, and
    /// until then none can be judged.
    pub(crate) fn seed(&mut self, seeds: &[String], now_ms: u64) {
        for s in seeds {
            if let Ok(mut u) = urls::parse(s) {
                self.canonical.apply(&mut u);
                self.admission.seed(&u, &urls::domain_of(&u));
            }
        }
        if !self.seen.is_complete() {
            self.waiting_seeds.extend_from_slice(seeds);
            return;
        }
        for s in seeds {
            self.offer(s, 0, now_ms);
        }
    }

    /// Seeds waiting for the seen-set (see [`CrawlState::seed`]).
    pub(crate) fn waiting_seeds(&self) -> usize {
        self.waiting_seeds.len()
    }

    /// Admits a discovered URL if it is new, in scope and within limits.
    /// One the seen-set is unsure of is inserted all the same and waits in
    /// the store, where the unique index keeps the first copy (see
    /// `crate::seen` and `Frontier::admit_unverified`); one it cannot
    /// judge yet (the stored URLs are still being read in) is held back
    /// until it can.
    fn offer(&mut self, url: &str, depth: u16, now_ms: u64) {
        if depth > self.settings.max_depth {
            self.stats.counts.too_deep += 1;
            return;
        }
        if self.settings.max_pages > 0 && self.admitted >= self.settings.max_pages {
            self.stats.counts.over_page_limit += 1;
            return;
        }
        let mut seen = self.seen.check(url);
        if seen == Seen::Known {
            return;
        }
        let Ok(mut parsed) = urls::parse(url) else {
            self.stats.counts.bad_links += 1;
            return;
        };
        // Children send canonical links; one that is not (an older child,
        // a peer that lies) is judged by its canonical form.
        if self.canonical.apply(&mut parsed) {
            self.stats.counts.canonicalized += 1;
            seen = self.seen.check(parsed.as_str());
            if seen == Seen::Known {
                return;
            }
        }
        if seen == Seen::NotYet {
            // Maybe stored: judged once the stored URLs are read in.
            self.stats.counts.held_links += 1;
            self.held_links.push((String::from(parsed), depth));
            return;
        }
        let domain = urls::domain_of(&parsed);
        let key = match self.admission.judge(&parsed, &domain) {
            Ok(key) => key,
            Err(refusal) => {
                self.refused(refusal);
                if let Refusal::Over(over) = refusal {
                    self.defer(String::from(parsed), domain, depth, over);
                }
                return;
            }
        };
        self.admission.count(&key);
        let url = String::from(parsed);
        self.admitted += 1;
        let seq = self.take_seq();
        let confirm = seen == Seen::Unsure;
        if confirm {
            self.stats.counts.unsure_links += 1;
            self.seen.remember(&url);
            self.frontier.admit_unverified(&domain, seq);
            self.unsure.insert(seq, (url.clone(), domain.clone(), depth));
        } else {
            self.stats.counts.new_urls += 1;
            self.frontier.admit(url.clone(), &domain, depth, seq, now_ms);
        }
        self.effects.push(Effect::Insert {
            url,
            domain,
            depth,
            seq,
            confirm,
        });
    }

    /// Counts a refusal by its reason (and deny rules by rule).
    fn refused(&mut self, refusal: Refusal) {
        let reason = refusal.reason();
        crate::metric::LINKS_REFUSED.at([reason]).increment(1);
        let counts = &mut self.stats.counts;
        match refusal {
            Refusal::OutOfScope => counts.out_of_scope += 1,
            Refusal::Denied(i) => {
                *counts.refused.entry(reason).or_default() += 1;
                let rule = self.admission.deny_label(i);
                match counts.refused_by_rule.get_mut(rule) {
                    Some(n) => *n += 1,
                    None => {
                        counts.refused_by_rule.insert(rule.to_string(), 1);
                    }
                }
            }
            _ => *counts.refused.entry(reason).or_default() += 1,
        }
    }

    /// Stores a URL found over a budget as deferred: known from now on,
    /// not crawled, and taken up by a later run whose budget is larger.
    fn defer(&mut self, url: String, domain: String, depth: u16, over: Over) {
        let seq = self.take_seq();
        self.effects.push(Effect::Defer {
            url,
            domain,
            depth,
            seq,
            why: over.deferral(),
        });
    }

    /// Queues a URL already counted as admitted under a new `seq`, in
    /// memory and for the stored frontier.
    fn queue_new(&mut self, url: String, domain: String, depth: u16, now_ms: u64) {
        let seq = self.take_seq();
        self.frontier.admit(url.clone(), &domain, depth, seq, now_ms);
        self.effects.push(Effect::Insert {
            url,
            domain,
            depth,
            seq,
            confirm: false,
        });
    }

    /// The `seq` of the next entry of the stored frontier (admitted,
    /// deferred or queued again): one counter over the whole crawl.
    fn take_seq(&mut self) -> i64 {
        let seq = self.next_seq;
        self.next_seq = seq.saturating_add(1);
        seq
    }

    /// The frontier writer's word on unsure URLs, by `seq`: taken by the
    /// store (new: the seen-set's hash collided), and then admitted under
    /// a new `seq` (the exact seen-set holds it, no segment does yet); or
    /// there before (known, and no longer counted against `--max-pages`).
    pub(crate) fn confirmed(&mut self, answers: Vec<(i64, bool)>, now_ms: u64) {
        for (seq, new) in answers {
            let Some((url, domain, depth)) = self.unsure.remove(&seq) else {
                continue;
            };
            if !self.frontier.confirmed(&domain, seq) {
                continue;
            }
            if !new {
                self.stats.counts.unsure_known += 1;
                self.admitted = self.admitted.saturating_sub(1);
                self.admission.uncount(&url);
                continue;
            }
            self.stats.counts.unsure_new += 1;
            self.stats.counts.new_urls += 1;
            self.queue_new(url, domain, depth, now_ms);
        }
    }

    // ---- results ----

    /// Records results from supervisor `s`: only those for leases issued
    /// to `s`; what a result is about (URL, domain, depth) comes from the
    /// lease record, not from the message. The rest is dropped and counted.
    pub(crate) fn results<S: AsRef<str>>(&mut self, s: SupId, results: Vec<CrawlResult<S>>, now_ms: u64) {
        if !self.is_live(s) {
            return;
        }
        let (effects_before, mut accepted) = (self.effects.len(), 0);
        for r in results {
            if r.sent_ms != 0 {
                let wait = Duration::from_millis(now_ms.saturating_sub(r.sent_ms));
                self.timing.record(Op::ResultWait, wait, "ok", None, None);
            }
            let handed_back = matches!(r.outcome, Outcome::Failed { kind, .. } if kind.is_handed_back());
            // Ends the lease (and frees its credit) if it is `s`'s.
            let leased = match self.frontier.complete_for(s, r.lease, r.url.as_ref()) {
                Ok(leased) => leased,
                // Handed back after the lease had ended anyway (given up,
                // re-queued): nothing to do, and no lie.
                Err(LeaseRefusal::Unknown) if handed_back => continue,
                // Sent again after a reconnect, for a URL finished or handed
                // out elsewhere while it was away: a duplicate.
                Err(LeaseRefusal::Unknown) if self.members[s].rejoined => {
                    self.stats.counts.stale_results += 1;
                    continue;
                }
                Err(why) => {
                    let (reason, what) = match why {
                        LeaseRefusal::Unknown => (Reason::UnknownLease, "a lease not out"),
                        LeaseRefusal::Foreign => (Reason::ForeignLease, "a lease out at another supervisor"),
                        LeaseRefusal::OtherUrl => (Reason::LeaseUrlMismatch, "another URL than its lease's"),
                    };
                    let (who, lease) = (self.members[s].id.clone(), r.lease);
                    self.refusals.refuse(reason, 1, || {
                        format!("supervisor {who} reported on {what} (lease {lease}); dropped")
                    });
                    continue;
                }
            };
            accepted += 1;
            if handed_back {
                // Not fetched, not a failure of the URL: queued again, first.
                self.stats.counts.handed_back += 1;
                if let Some(addr) = r.server {
                    // `Regrouped`: the domain's server, from the child that
                    // resolved it (see `frontier::servers`).
                    self.frontier.learn_server(&leased.domain, addr);
                }
                self.frontier
                    .push_front(leased.url, &leased.domain, leased.depth, leased.seq);
                continue;
            }
            self.members[s].results += 1;
            self.stats.record(&r.outcome);
            if breaker::is_error(&r.outcome).is_some() {
                self.stats.counts.error_outcomes += 1;
            }
            if let Some(trip) = self.breakers.record(&leased.domain, &r.outcome, now_ms) {
                self.trip(&leased.domain, trip, now_ms);
            }
            // Links first: the writer stores in order, so a URL's outcome
            // (and its domain's progress past it) is written only after its
            // links are in the stored frontier, and a dispatcher killed in
            // between re-crawls it rather than losing its links. A fetched
            // URL is not recorded at all: its stored page says it is
            // finished, and carries its links for a dispatcher killed
            // before they were written (`crate::finished`).
            for link in &r.outlinks {
                self.offer(link.as_ref(), leased.depth.saturating_add(1), now_ms);
            }
            let (state, failure) = match &r.outcome {
                Outcome::Fetched { .. } => {
                    self.attempts.remove(&leased.url);
                    (None, None)
                }
                Outcome::Disallowed => (Some(UrlState::Disallowed), None),
                Outcome::Failed { kind, .. } => (self.retry_or_fail(&leased, *kind, now_ms), Some(*kind)),
            };
            let over = state.is_some() || matches!(r.outcome, Outcome::Fetched { .. });
            // A revisit is not in the stored frontier: the page's due time
            // says what comes of it.
            let revisit = over && self.revisit_over(&leased.url);
            if let Some(state) = state {
                self.attempts.remove(&leased.url);
                if !revisit && leased.seq > 0 {
                    self.effects.push(Effect::Ended {
                        url: leased.url,
                        seq: leased.seq,
                        state,
                        failure,
                    });
                }
            }
        }
        let writes = self.effects[effects_before..]
            .iter()
            .filter(|e| {
                matches!(
                    e,
                    Effect::Insert { .. } | Effect::Ended { .. } | Effect::Defer { .. }
                )
            })
            .count();
        self.write_gate.observe(accepted, writes);
    }

    /// The links of stored pages found finished after a restart: offered
    /// again (nearly all are known, and dropped in memory); their URLs'
    /// domains may then record progress past them.
    fn links_read(
        &mut self,
        asked: Vec<Relink>,
        found: Result<Vec<(String, Vec<String>)>, String>,
        now_ms: u64,
    ) {
        let found = match found {
            Ok(found) => found,
            Err(e) => {
                tracing::warn!(urls = asked.len(), error = %e, "reading the links of finished pages failed; will retry");
                self.relinks.answered(&asked, true);
                return;
            }
        };
        self.relinks.answered(&asked, false);
        let depths: HashMap<&str, u16> = asked.iter().map(|r| (r.url.as_str(), r.depth)).collect();
        for (url, links) in found {
            let Some(&depth) = depths.get(url.as_str()) else {
                continue;
            };
            for link in &links {
                self.offer(link, depth.saturating_add(1), now_ms);
            }
            self.stats.counts.relinked += 1;
        }
    }

    /// Retryable failures go back in the queue after a pause, a few times.
    fn retry_or_fail(&mut self, r: &Leased, kind: FailureKind, now_ms: u64) -> Option<UrlState> {
        let attempts = self.attempts.entry(r.url.clone()).or_insert(0);
        *attempts = attempts.saturating_add(1);
        if *attempts < kind.max_attempts() {
            self.stats.counts.retried += 1;
            let pause = (RETRY_AFTER.as_millis() as u64).saturating_mul(u64::from(*attempts));
            self.delayed.push(Retry {
                due_ms: now_ms.saturating_add(pause),
                url: r.url.clone(),
                domain: r.domain.clone(),
                depth: r.depth,
                seq: r.seq,
            });
            None
        } else {
            self.stats.failed_for_good(kind);
            Some(UrlState::Failed)
        }
    }

    /// Pauses or halts a domain the circuit breaker gave up on.
    fn trip(&mut self, domain: &str, trip: Trip, now_ms: u64) {
        match trip {
            Trip::Pause {
                until_ms,
                errors,
                outcomes,
            } => {
                tracing::warn!(
                    domain = %domain,
                    pause_secs = until_ms.saturating_sub(now_ms) / 1000,
                    errors,
                    outcomes,
                    "pausing domain: too many errors in its last outcomes"
                );
                crate::metric::DOMAIN_PAUSES.get().increment(1);
                self.frontier.pause(domain, until_ms);
            }
            Trip::Halt { reason } => {
                tracing::error!(
                    domain = %domain,
                    reason = %reason,
                    "HALTING DOMAIN; its URLs stay queued; un-halt with scripts/unhalt.sh"
                );
                crate::metric::DOMAIN_HALTS.get().increment(1);
                self.frontier.halt(domain);
                self.effects.push(Effect::RecordHalt {
                    domain: domain.to_string(),
                    reason: Some(reason),
                });
            }
        }
    }

    /// An operator un-halts a domain: whether it was halted.
    pub(crate) fn unhalt(&mut self, domain: &str) -> bool {
        let unhalted = self.frontier.unhalt(domain);
        if unhalted {
            tracing::info!(domain = %domain, "domain un-halted by an operator");
            self.breakers.reset(domain);
            self.effects.push(Effect::RecordHalt {
                domain: domain.to_string(),
                reason: None,
            });
        }
        unhalted
    }

    // ---- time and the store ----

    /// Every few tens of milliseconds: retries and paused domains that are
    /// due, and the store reads of windows that run low (only up to
    /// `durable`, the last `seq` the frontier writer has stored; fewer than
    /// [`Settings::max_pending_reads`] beside the `reads_pending` the reader
    /// has).
    pub(crate) fn tick(&mut self, now_ms: u64, durable: i64, reads_pending: usize) {
        self.reads_pending = reads_pending;
        if !self.delayed.is_empty() {
            let (due, later): (Vec<_>, Vec<_>) = std::mem::take(&mut self.delayed)
                .into_iter()
                .partition(|r| r.due_ms <= now_ms);
            self.delayed = later;
            for r in due {
                self.frontier.push_at(r.url, &r.domain, r.depth, r.seq, now_ms);
            }
        }
        self.frontier.release_blocked(now_ms);
        self.breakers.forget_idle(now_ms);
        self.frontier.forget_idle(now_ms);
        self.read_queues(durable);
        self.want_due(now_ms);
    }

    /// Asks for the reads of windows that run low, unless the writer is
    /// behind: a store that cannot keep up with the writes gets no reads
    /// either, as nothing is leased then anyway: on a resumed crawl of many
    /// domains, reads would keep the store busy, the writer would fall
    /// further behind, and nothing would be leased for minutes.
    fn read_queues(&mut self, durable: i64) {
        if self.writer_behind {
            return;
        }
        // Once the seen-set is whole, so that known links are dropped in
        // memory; or when nothing else is left (a read of stored URLs that
        // never ends must not keep the crawl from ending).
        if self.seen.is_complete() || self.frontier.is_idle() {
            while let Some(urls) = self.relinks.next_read() {
                self.effects.push(Effect::ReadLinks(urls));
            }
        }
        let room = self.settings.max_pending_reads.saturating_sub(self.reads_pending);
        for r in self.frontier.refills(durable, READS_PER_TICK.min(room)) {
            self.reads_pending += 1;
            self.effects.push(Effect::Read(r));
        }
    }

    /// A store read asked for by an [`Effect::Read`] or [`Effect::LookUp`].
    pub(crate) fn read_answered(&mut self, answer: Answer, now_ms: u64, durable: i64) {
        if let Answer::Read(..) = answer {
            self.reads_pending = self.reads_pending.saturating_sub(1);
        }
        match answer {
            Answer::Read(r, Ok(page)) => {
                let missing = self.frontier.refilled(&r, page);
                // A resumed queue's estimate is settled by the windows
                // (`Window::resumed_left`): a URL counted and not found
                // was refused by the store when written.
                if missing > 0 {
                    tracing::warn!(domain = %r.domain, missing, "queued URLs not found in the store (refused when written); dropped from the queue");
                }
                for relink in self.frontier.take_finished() {
                    self.resumed.0 += 1;
                    self.resumed.1 = self.resumed.1.saturating_sub(1);
                    self.relinks.found(relink);
                }
            }
            Answer::Links { asked, found } => self.links_read(asked, found, now_ms),
            Answer::Checked { asked, stored } => match stored {
                Ok(stored) => {
                    for (lease, url) in asked {
                        let finished = self.frontier.checked(lease, stored.contains(&url));
                        if let Some(l) = finished {
                            self.stats.counts.finished_unanswered += 1;
                            self.relinks.found(Relink {
                                url: l.url,
                                depth: l.depth,
                                domain: l.domain,
                                seq: l.seq,
                            });
                        }
                    }
                }
                Err(e) => {
                    tracing::warn!(urls = asked.len(), error = %e, "asking the store for the pages of ended leases failed; will retry");
                    self.frontier.check_failed(asked);
                }
            },
            Answer::Read(r, Err(e)) => {
                tracing::warn!(domain = %r.domain, error = %e, "reading a domain's queue from the store failed; will retry");
                self.frontier.refill_failed(&r);
            }
            Answer::Held { sup, asked, found } => self.adopt_stored(sup, asked, found, now_ms),
            Answer::Due(asked, found) => self.due_answered(&asked, found, now_ms),
        }
        self.read_queues(durable);
    }

    /// Leases URLs to every live supervisor with credit left, once the
    /// expected supervisors have joined, and as far as the writes the
    /// leases will bring fit once the frontier writer is behind (see
    /// `state/write_gate.rs`).
    pub(crate) fn dispatch(&mut self, now_ms: u64, write_backlog: usize) {
        self.writer_behind = write_backlog > self.settings.max_write_backlog;
        if self.stopping {
            // The supervisors were told to stop: nothing new goes out.
            return;
        }
        if !self.started_dispatching {
            let live = self.members.iter().filter(|m| m.live).count();
            if live < self.settings.min_supervisors.max(1) {
                return;
            }
            self.started_dispatching = true;
            self.frontier.start_assigning();
        }
        if self.controls.paused {
            // Leases out finish; nothing new goes out until resumed.
            return;
        }
        if self.held_links.len() >= MAX_HELD_LINKS {
            // The stored URLs are still being read in: no more links to
            // hold until they are (see `CrawlState::offer`).
            return;
        }
        let mut room = self.write_gate.room(write_backlog, self.frontier.in_flight());
        let (n, start) = (self.members.len(), self.next_member);
        for i in 0..n {
            if room == 0 {
                // Resumed by a later dispatch as the writer catches up.
                return;
            }
            let s = (start + i) % n;
            if !self.members[s].live {
                continue;
            }
            let credit = self.members[s].capacity.saturating_sub(self.frontier.held(s)) as usize;
            if credit == 0 {
                continue;
            }
            let (mut items, waits) = self
                .frontier
                .take_timed(s, credit.min(MAX_BATCH).min(room), now_ms);
            if items.is_empty() {
                continue;
            }
            if !self.controls.delays.is_empty() {
                for item in &mut items {
                    item.min_delay_ms = self.delay_of(&item.domain);
                }
            }
            self.lease_revisits(&mut items);
            room = room.saturating_sub(items.len());
            self.next_member = (s + 1) % n;
            for wait in waits {
                self.timing
                    .record(Op::QueueWait, Duration::from_millis(wait), "ok", None, None);
            }
            self.effects.push(Effect::Send(s, ToSupervisor::Work(items)));
        }
    }

    /// Once a second: supervisors silent for too long are given up, the
    /// others get a heartbeat, expired leases go back to the queue, and
    /// domains are rebalanced after a supervisor joined.
    pub(crate) fn housekeeping(&mut self, now_ms: u64) {
        for (s, domains) in self.frontier.rebalance() {
            self.effects
                .push(Effect::Send(s, ToSupervisor::Recall { domains }));
        }
        for s in 0..self.members.len() {
            if !self.members[s].live {
                continue;
            }
            let silent = now_ms.saturating_sub(self.members[s].last_heard_ms);
            if silent > self.settings.heartbeat_timeout_ms {
                self.leave(s, Leaving::MissedHeartbeats);
                continue;
            }
            self.effects.push(Effect::Send(s, ToSupervisor::Heartbeat));
        }
        let expired = self.frontier.expire(now_ms);
        if expired > 0 {
            self.stats.counts.leases_expired += expired as u64;
            tracing::warn!(expired, "leases expired; URLs re-queued");
        }
        if now_ms >= self.next_progress_ms {
            self.next_progress_ms = now_ms.saturating_add(PROGRESS_EVERY_MS);
            self.record_progress(false);
        }
    }

    /// Domains' progress for the stored frontier (see
    /// `frontier::progress`): of those with enough results since their
    /// last record, or, with `all` (the crawl stops), of every one with a
    /// result. Not while the stored URLs are being read in: a link held
    /// back then is not in the stored frontier yet, and the page it came
    /// from must stay open to find it again after a restart.
    pub(crate) fn record_progress(&mut self, all: bool) {
        if !self.seen.is_complete() || !self.held_links.is_empty() {
            return;
        }
        let mut open: HashMap<String, i64> = HashMap::new();
        for r in self.delayed.iter().filter(|r| r.seq > 0) {
            let low = open.entry(r.domain.clone()).or_insert(r.seq);
            *low = (*low).min(r.seq);
        }
        self.relinks.lowest_open(&mut open);
        let enough = if all { 1 } else { self.settings.progress_results };
        let progress = self.frontier.progress(&open, enough);
        if !progress.is_empty() {
            self.effects.push(Effect::Progress(progress));
        }
    }

    // ---- the end ----

    /// Nothing queued, out, waiting for a retry, or seeds or links waiting
    /// for the stored URLs to be read in (deferred URLs a larger budget
    /// lets in are found there too). Only once the expected supervisors
    /// have joined, so each of them is told to stop, even when a resumed
    /// crawl finds nothing left to do.
    pub(crate) fn done(&self) -> bool {
        self.started_dispatching
            && self.frontier.is_idle()
            && self.delayed.is_empty()
            && self.seen.is_complete()
            && self.held_links.is_empty()
            && self.waiting_seeds.is_empty()
            && self.relinks.is_idle()
            && self.revisits.is_none()
    }

    /// URLs queued, out or waiting for a retry (not seeds waiting for the
    /// seen-set: nearly all of them are stored already).
    pub(crate) fn left(&self) -> usize {
        self.frontier.queued() + self.frontier.in_flight() + self.delayed.len()
    }

    pub(crate) fn finish_reason(&self, signalled: bool) -> FinishReason {
        if signalled {
            FinishReason::Stopped
        } else if self.left() > 0 && !self.frontier.blocked_domains().1.is_empty() {
            FinishReason::Halted
        } else if self.stats.counts.over_page_limit > 0 {
            FinishReason::MaxPages
        } else {
            FinishReason::Done
        }
    }

    /// The crawl stops: every live supervisor is told to, and one that
    /// joins from now on too. The connections told, to wait for their Byes.
    pub(crate) fn stop(&mut self) -> Vec<SupId> {
        let first = !self.stopping;
        self.stopping = true;
        let live: Vec<SupId> = (0..self.members.len())
            .filter(|&s| self.members[s].live)
            .collect();
        if first {
            for &s in &live {
                self.effects.push(Effect::Send(s, ToSupervisor::Stop));
            }
        }
        live
    }

    /// Whether supervisor `s`, or a later connection of it (same id, after
    /// a reconnect), has said Bye.
    pub(crate) fn said_bye(&self, s: SupId) -> bool {
        let Some(id) = self.members.get(s).map(|m| &m.id) else {
            return true;
        };
        self.members.iter().any(|o| o.said_bye && o.id == *id)
    }

    /// A heartbeat to every live supervisor that has not said Bye, while
    /// the dispatcher is busy stopping (a supervisor that hears nothing
    /// takes us for dead and reconnects).
    pub(crate) fn beat_to_live(&mut self) {
        for s in 0..self.members.len() {
            if self.members[s].live && !self.said_bye(s) {
                self.effects.push(Effect::Send(s, ToSupervisor::Heartbeat));
            }
        }
    }

    // ---- what the shell reports ----

    pub(crate) fn frontier(&self) -> &Frontier {
        &self.frontier
    }

    pub(crate) fn stats(&self) -> &Stats {
        &self.stats
    }

    /// URLs known (distinct hashes).
    pub(crate) fn seen_count(&self) -> usize {
        self.seen.len()
    }

    /// Heap bytes of the seen-set's hashes.
    pub(crate) fn seen_bytes(&self) -> usize {
        self.seen.bytes()
    }

    /// The live progress line (its rate is since the last one).
    pub(crate) fn progress_line(&mut self) -> String {
        let live = self.members.iter().filter(|m| m.live).count();
        let (paused, halted) = self.frontier.blocked_domains();
        let blocked = (paused.len(), halted.len());
        let (queued, in_flight) = (self.frontier.queued(), self.frontier.in_flight());
        let mut line = self.stats.progress_line(queued, in_flight, live, blocked);
        if let Some((revisits, started)) = self.revisit_counts() {
            line.push_str(&format!(
                " | revisits {revisits} queued or out, {started} started"
            ));
        }
        if self.controls.paused {
            // Said first: a crawl that stands still must say why.
            format!("PAUSED by an operator (crawlctl resume) {line}")
        } else {
            line
        }
    }
}

mod inputs;
mod members;
mod relink;
mod revisit;
mod steer;
#[cfg(test)]
#[path = "state/tests.rs"]
mod tests;
mod write_gate;
