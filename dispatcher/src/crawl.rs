//! The dispatcher's event loop: supervisors' messages in, work out.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use bson::{doc, Document};
use bytes::Bytes;
use shared::cluster_auth::{Challenges, ClusterKey, Nonce, Proof, Refusal, SealError, Session};
use shared::docs::{DomainDoc, DomainHalt, FrontierDoc, UrlState};
use shared::protocol::{
    self, now_ms, CrawlPolicy, CrawlResult, FailureKind, Intro, Outcome, ProcessInfo, ToDispatcher,
    ToSupervisor, WorkItem, PROTOCOL_VERSION,
};
use shared::store::{decode_each, Stores};
use shared::timing::{Op, TimingLog};
use shared::urls;
use tokio::sync::mpsc;
use zeromq::{RouterSendHalf, RouterSocket, Socket, SocketRecv, SocketSend, ZmqMessage};

use crate::admin::{self, AdminCmd};
use crate::breaker::{self, Breakers, Trip};
use crate::cluster::{self, ClusterView, SharedView, SupState, SupervisorView};
use crate::frontier::{Adoption, Frontier, LeaseRefusal, Stored, SupId};
use crate::monitor::{FrontierView, Monitor};
use crate::persist::FrontierWriter;
use crate::queue_reader::{self, QueueReader};
use crate::refusals::{Reason, Refusals};
use crate::stats::{self, FinishReason, Stats, Summary};
use crate::{seeds, Args, Scope, ROLE};

/// Pause before a retry, times the attempt number.
const RETRY_AFTER: Duration = Duration::from_secs(5);
/// Most URLs sent in one Work message.
const MAX_BATCH: usize = 512;
/// Frontier writes the store may be behind before no more URLs are leased
/// (each result brings more writes): bounds the dispatcher's memory when
/// the store is slower than the crawl. About 20 MB of writes.
const MAX_WRITE_BACKLOG: usize = 100_000;
/// Store reads of domains' queues asked for at once (see `queue_reader`).
const READS_PER_TICK: usize = 64;
/// Longest one message to a supervisor may take to leave.
const SEND_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a stopping dispatcher waits for its supervisors' Byes. A
/// supervisor gives its children at most 15 s and then kills them, so a
/// live one answers well within this; a stuck or gone one is not waited
/// for longer (what it held stays `queued` in the store).
const STOP_WAIT: Duration = Duration::from_secs(25);
/// A challenge not answered within this long is forgotten (a supervisor
/// answers in milliseconds; its Hello is repeated after 2 s anyway).
const CHALLENGE_TTL: Duration = Duration::from_secs(10);
/// Most introductions pending at once; past it the oldest is dropped, so a
/// flood of Hellos costs a fixed amount of memory (64 bytes each).
const MAX_PENDING_CHALLENGES: usize = 4096;
/// Longest message taken from a peer that has not been admitted: a Join
/// carries what a supervisor holds (a few thousand URLs of at most 2 KiB),
/// far below this; anything longer is refused before it is decoded.
const MAX_UNADMITTED_MESSAGE: usize = 32 * 1024 * 1024;

pub async fn run(args: Args, settings: serde_json::Value, key: ClusterKey) -> anyhow::Result<()> {
    let view: SharedView = Arc::new(Mutex::new(ClusterView::default()));
    let (admin_tx, admin_rx) = mpsc::channel(16);
    let routes = cluster::route(view.clone()).merge(admin::route(admin_tx));
    let debug = profiling::serve(args.obs.debug_addr, args.obs.debug_token.clone(), routes).await?;
    shared::metric_help::describe_all();
    let timing = TimingLog::open(&args.obs.timing_config(ROLE))?;
    timing.spawn_flusher();
    if let Ok(mut v) = view.lock() {
        v.dispatcher = Some(ProcessInfo {
            role: ROLE.into(),
            node: args.obs.node_name(),
            pid: std::process::id(),
            debug_addr: Some(debug.addr.to_string()),
        });
    }

    let stores = Stores::connect(&args.store, ROLE, args.crawl_id.clone()).await?;
    stores.ping().await?;
    // Before the collections grow, and before their indexes (the
    // frontier's shard key is its queue index).
    if shared::sharding::shard_collections(&stores).await? {
        tracing::info!("the primary store is a mongos: this crawl's pages and frontier are sharded");
    }
    stores.ensure_indexes().await?;

    let (reader, mut read) = QueueReader::spawn(&stores, timing.clone());
    let mut d = Dispatcher::new(&args, stores.clone(), view, timing, admin_rx, key, reader);
    d.load(&args).await?;

    // Bound only now: a supervisor connecting while a big frontier loads
    // is refused and retries, instead of waiting unanswered for a Welcome.
    let mut socket = RouterSocket::new();
    let endpoint = socket
        .bind(&args.bind)
        .await
        .with_context(|| format!("binding {}", args.bind))?;
    let debug_addr = debug.addr;
    tracing::info!("listening on {endpoint}, debug on http://{debug_addr}");
    let (send, mut recv) = socket.split();
    let (in_tx, mut inbox) = mpsc::channel::<(Bytes, Bytes)>(1024);
    tokio::spawn(async move {
        while let Ok(msg) = recv.recv().await {
            let mut frames = msg.into_vec().into_iter();
            if let (Some(identity), Some(payload)) = (frames.next(), frames.next()) {
                if in_tx.send((identity, payload)).await.is_err() {
                    break;
                }
            }
        }
    });
    d.send = Some(send);
    let stopped = d.serve(&mut inbox, &mut read).await?;
    d.finish(&args, &settings, stopped, &mut inbox).await
}

struct Dispatcher {
    policy: CrawlPolicy,
    frontier: Frontier,
    writer: FrontierWriter,
    reader: QueueReader,
    /// The next admitted URL's place in its domain's queue (`FrontierDoc::seq`).
    next_seq: i64,
    stores: Stores,
    /// The ROUTER socket's sending half, once bound (after `load`).
    send: Option<RouterSendHalf>,
    sups: Vec<SupState>,
    /// The crawl is over: a supervisor that (re)joins now is told to stop.
    stopping: bool,
    view: SharedView,
    timing: TimingLog,
    stats: Stats,
    scope: Option<HashSet<String>>,
    max_depth: u16,
    max_pages: u64,
    admitted: u64,
    attempts: HashMap<String, u32>,
    /// (due ms, url, domain, depth) waiting for a retry.
    delayed: Vec<(u64, String, String, u16)>,
    min_supervisors: usize,
    started_dispatching: bool,
    heartbeat_timeout: Duration,
    progress_every: Duration,
    monitor_every: Duration,
    breakers: Breakers,
    admin: mpsc::Receiver<AdminCmd>,
    /// The cluster secret supervisors must prove (see `shared::cluster_auth`).
    key: ClusterKey,
    /// Introductions under way: challenges sent, by ZeroMQ identity.
    challenges: Challenges<Bytes>,
    refusals: Refusals,
}

impl Dispatcher {
    fn new(
        args: &Args,
        stores: Stores,
        view: SharedView,
        timing: TimingLog,
        admin: mpsc::Receiver<AdminCmd>,
        key: ClusterKey,
        reader: QueueReader,
    ) -> Self {
        let policy = args.policy();
        Dispatcher {
            frontier: Frontier::new(
                args.max_inflight_per_domain,
                args.lease_secs * 1000,
                now_ms() << 12,
            )
            .with_window(args.frontier_window as usize, args.frontier_memory_urls),
            writer: FrontierWriter::spawn(stores.clone(), timing.clone()),
            reader,
            next_seq: 1,
            policy,
            stores,
            send: None,
            sups: Vec::new(),
            stopping: false,
            view,
            timing,
            stats: Stats::new(),
            scope: (args.scope == Scope::Seeds).then(HashSet::new),
            max_depth: args.max_depth,
            max_pages: args.max_pages,
            admitted: 0,
            attempts: HashMap::new(),
            delayed: Vec::new(),
            min_supervisors: args.min_supervisors.max(1),
            started_dispatching: false,
            heartbeat_timeout: Duration::from_secs(args.heartbeat_timeout_secs),
            progress_every: Duration::from_secs_f64(args.progress_secs.max(0.0)),
            monitor_every: Duration::from_secs_f64(args.monitor_secs.max(0.0)),
            breakers: Breakers::new(args.breaker()),
            admin,
            key,
            challenges: Challenges::new(PROTOCOL_VERSION, CHALLENGE_TTL, MAX_PENDING_CHALLENGES),
            refusals: Refusals::default(),
        }
    }

    /// Resumes from the stored frontier, then adds seeds not seen before.
    async fn load(&mut self, args: &Args) -> anyhow::Result<()> {
        for domain in &args.unhalt {
            self.stores
                .domains()
                .update_one(doc! {"_id": domain}, halt_update(None)?)
                .await
                .with_context(|| format!("un-halting {domain}"))?;
            tracing::info!(domain = %domain, "domain un-halted (--unhalt)");
        }
        let mut halted = Vec::new();
        decode_each(
            &self.stores.domains(),
            doc! {DomainDoc::HALTED: true},
            |d: DomainDoc| halted.push(d),
            |d, e| tracing::warn!(document = ?d, error = %e, "skipping a malformed domain document"),
        )
        .await
        .context("reading halted domains")?;
        for d in halted {
            tracing::warn!(
                domain = %d.domain,
                reason = d.halt.as_ref().map_or("?", |h| h.halted_reason.as_str()),
                "domain is HALTED; un-halt it to crawl it"
            );
            self.frontier.halt(&d.domain);
        }
        warn_of_unnamed_crawl(&self.stores).await;
        let mut resumed = (0u64, 0u64);
        // The crawl's own frontier (see `shared::crawl_id`): another crawl
        // id on the same database starts from nothing.
        // Queued URLs beyond the memory budget are only counted here: the
        // windows read them later.
        let mut max_seq = 0;
        decode_each(
            &self.stores.frontier(),
            doc! {},
            |d: FrontierDoc| {
                self.frontier.mark_seen(&d.url);
                self.admitted += 1;
                max_seq = max_seq.max(d.seq);
                if d.state != UrlState::Queued {
                    resumed.0 += 1;
                    return;
                }
                resumed.1 += 1;
                let depth = d.depth.clamp(0, i32::from(u16::MAX)) as u16;
                if d.seq > 0 {
                    self.frontier.resume_queued(d.url, &d.domain, depth, d.seq);
                } else {
                    // Stored before queues lived in the store: it cannot
                    // be read by `seq`, so it is held in memory.
                    self.frontier.push(d.url, &d.domain, depth);
                }
            },
            |d, e| tracing::warn!(document = ?d, error = %e, "skipping a malformed frontier entry"),
        )
        .await
        .context("reading the stored frontier")?;
        self.next_seq = max_seq.saturating_add(1);
        if resumed != (0, 0) {
            tracing::info!(
                finished = resumed.0,
                queued = resumed.1,
                "resuming: {} URLs finished before, {} still queued",
                resumed.0,
                resumed.1
            );
        }
        let mut from_files = Vec::new();
        for f in &args.seeds {
            from_files.extend(seeds::read_file(f)?);
        }
        // Checked before the seeds are stored, so a refused crawl leaves
        // nothing behind, and again on what the store held already.
        self.check_user_agent(&from_files)?;
        let all = seeds::sync_with_store(&self.stores, &from_files).await?;
        self.check_user_agent(&all)?;
        if let Some(scope) = &mut self.scope {
            for s in &all {
                if let Ok(u) = urls::parse(s) {
                    scope.insert(urls::domain_of(&u));
                }
            }
        }
        for s in &all {
            self.offer(s, 0);
        }
        tracing::info!("{} seeds, {} URLs queued", all.len(), self.frontier.queued());
        Ok(())
    }

    /// Refuses to crawl a seed on the open web under the default user
    /// agent, which names no one a site owner could reach.
    fn check_user_agent(&self, seeds: &[String]) -> anyhow::Result<()> {
        if self.policy.user_agent != crate::DEFAULT_USER_AGENT {
            return Ok(());
        }
        match seeds::on_the_open_web(seeds) {
            Some(seed) => bail!(
                "seed {seed} is on the open web, and the default user agent names no one: give --user-agent (or user-agent in --config) naming the crawler and how to reach its operator, e.g. \"examplebot/1.0 (+https://example.org/bot; bot@example.org)\""
            ),
            None => Ok(()),
        }
    }

    /// Admits a discovered URL if it is new, in scope and within limits.
    fn offer(&mut self, url: &str, depth: u16) {
        if depth > self.max_depth {
            self.stats.counts.too_deep += 1;
            return;
        }
        if self.max_pages > 0 && self.admitted >= self.max_pages {
            self.stats.counts.over_page_limit += 1;
            return;
        }
        if !self.frontier.mark_seen(url) {
            return;
        }
        let parsed = match urls::parse(url) {
            Ok(u) => u,
            Err(_) => {
                self.stats.counts.bad_links += 1;
                return;
            }
        };
        let domain = urls::domain_of(&parsed);
        if self.scope.as_ref().is_some_and(|s| !s.contains(&domain)) {
            self.stats.counts.out_of_scope += 1;
            return;
        }
        let url = String::from(parsed);
        self.admitted += 1;
        self.stats.counts.new_urls += 1;
        let seq = self.next_seq;
        self.next_seq = seq.saturating_add(1);
        self.writer.insert(&url, &domain, depth, seq);
        self.frontier.admit(url, &domain, depth, seq, now_ms());
    }

    /// Nothing queued, out or waiting for a retry. Only once the expected
    /// supervisors have joined, so each of them is told to stop, even when
    /// a resumed crawl finds nothing left to do.
    fn done(&self) -> bool {
        self.started_dispatching && self.frontier.is_idle() && self.delayed.is_empty()
    }

    /// Runs the crawl until it is done (`false`) or signalled (`true`).
    async fn serve(
        &mut self,
        inbox: &mut mpsc::Receiver<(Bytes, Bytes)>,
        read: &mut mpsc::UnboundedReceiver<queue_reader::Answer>,
    ) -> anyhow::Result<bool> {
        let mut tick = tokio::time::interval(Duration::from_millis(50));
        let mut slow_tick = tokio::time::interval(Duration::from_secs(1));
        // A zero period means no progress lines; the interval then idles.
        let mut progress = tokio::time::interval(if self.progress_every.is_zero() {
            Duration::from_secs(3600)
        } else {
            self.progress_every
        });
        progress.tick().await;
        let mut monitor_tick = tokio::time::interval(if self.monitor_every.is_zero() {
            Duration::from_secs(3600)
        } else {
            self.monitor_every
        });
        monitor_tick.tick().await;
        let mut monitor = Monitor::new();
        let stop = shared::shutdown::signalled();
        tokio::pin!(stop);
        while !self.done() {
            tokio::select! {
                msg = inbox.recv() => {
                    let Some((identity, payload)) = msg else { bail!("ZeroMQ socket closed") };
                    self.on_message(identity, &payload).await?;
                    // Drain what else is waiting before dispatching once.
                    while let Ok((identity, payload)) = inbox.try_recv() {
                        self.on_message(identity, &payload).await?;
                    }
                    self.dispatch().await?;
                }
                _ = tick.tick() => {
                    self.release_delayed();
                    self.frontier.release_blocked(now_ms());
                    self.read_queues();
                    self.dispatch().await?;
                }
                Some(answer) = read.recv() => {
                    self.on_read(answer);
                    while let Ok(answer) = read.try_recv() {
                        self.on_read(answer);
                    }
                    self.read_queues();
                    self.dispatch().await?;
                }
                _ = slow_tick.tick() => self.housekeeping().await?,
                _ = progress.tick(), if !self.progress_every.is_zero() => {
                    let live = self.sups.iter().filter(|s| s.live).count();
                    let (paused, halted) = self.frontier.blocked_domains();
                    let blocked = (paused.len(), halted.len());
                    let line = self.stats.progress_line(self.frontier.queued(), self.frontier.in_flight(), live, blocked);
                    // Output, not a log line: kept plain (no time or level
                    // prefix) for the operator and for scripts that read it.
                    eprintln!("{line}");
                }
                _ = monitor_tick.tick(), if !self.monitor_every.is_zero() => {
                    let (paused, halted) = self.frontier.blocked_domains();
                    let view = FrontierView {
                        held: (0..self.sups.len()).map(|s| self.frontier.held(s)).collect(),
                        queued: self.frontier.queued(),
                        in_flight: self.frontier.in_flight(),
                        seen: self.frontier.seen_count(),
                        paused,
                        halted,
                    };
                    // Output, not a log line: `monitor ` and one JSON object.
                    eprintln!("monitor {}", monitor.report(&self.stats, &self.sups, view));
                }
                Some(cmd) = self.admin.recv() => self.on_admin(cmd).await,
                _ = &mut stop => {
                    tracing::info!("signalled; stopping supervisors (queued URLs stay in the store; run again to resume)");
                    return Ok(true);
                }
            }
        }
        Ok(false)
    }

    /// One message from the ROUTER socket. Only Hello and Join are taken
    /// bare; everything else must be sealed with the keys of an admitted
    /// connection (see `shared::cluster_auth::Session`). Anything else is
    /// dropped, counted, logged (rate-limited) and, unless it may have
    /// been injected into an admitted connection, answered with
    /// Reintroduce, the refusal that makes a real supervisor introduce
    /// itself again.
    ///
    /// A connection is known by the ZeroMQ routing id the ROUTER gave it
    /// (random unless the peer names one, never sent to any peer). The seal
    /// is what makes that safe: a peer that names an admitted connection's
    /// id, or injects into its TCP stream, still cannot seal a message.
    async fn on_message(&mut self, identity: Bytes, payload: &[u8]) -> anyhow::Result<()> {
        metrics::counter!("crawler_zmq_messages_received_total").increment(1);
        // Only a live supervisor counts as known; one given up for dead
        // (or met by a previous dispatcher) is asked to introduce itself.
        let sup = cluster::sup_index(&self.sups, &identity).filter(|s| self.sups[*s].live);
        if sup.is_none() && payload.len() > MAX_UNADMITTED_MESSAGE {
            let n = payload.len();
            self.refusals.refuse(Reason::Oversized, 1, || {
                format!("a {n}-byte message from a peer not admitted")
            });
            return Ok(());
        }
        let msg: ToDispatcher = match protocol::decode(payload) {
            Ok(m) => m,
            Err(e) => {
                self.refusals
                    .refuse(Reason::Undecodable, 1, || format!("undecodable message: {e}"));
                return Ok(());
            }
        };
        // After the handshake every message is sealed with its connection's
        // key; only Hello and Join travel bare.
        let msg = match msg {
            ToDispatcher::Sealed {
                counter,
                tag,
                payload,
            } => {
                let Some(s) = cluster::sup_index(&self.sups, &identity) else {
                    let who = short_id(&identity);
                    self.refusals.refuse(Reason::Unauthenticated, 1, || {
                        format!("a sealed message from peer {who}, which was never admitted; dropped")
                    });
                    return self.send_to(&identity, &ToSupervisor::Reintroduce).await;
                };
                match self.open(s, &identity, counter, &tag, &payload) {
                    Some(inner) => inner,
                    None => return Ok(()),
                }
            }
            m @ (ToDispatcher::Hello { .. } | ToDispatcher::Join { .. }) => m,
            _ => {
                let who = short_id(&identity);
                let reason = if sup.is_some() {
                    Reason::Unsealed
                } else {
                    Reason::Unauthenticated
                };
                self.refusals.refuse(reason, 1, || {
                    format!("an unsealed message from peer {who}, which has not proved the cluster secret on this connection; dropped")
                });
                return self.send_to(&identity, &ToSupervisor::Reintroduce).await;
            }
        };
        if let Some(s) = sup {
            self.sups[s].last_heard = Instant::now();
        }
        match (msg, sup) {
            (ToDispatcher::Hello { version, nonce }, _) => self.on_hello(identity, version, nonce).await?,
            (ToDispatcher::Join { proof, intro }, _) => self.on_join(identity, proof, &intro).await?,
            (ToDispatcher::Results(results), Some(s)) => self.on_results(s, results),
            (ToDispatcher::Child { slot, process, alive }, Some(s)) => {
                let id = self.sups[s].id.clone();
                if let Ok(mut v) = self.view.lock() {
                    let children = &mut v.supervisors.entry(id).or_default().children;
                    if alive {
                        children.insert(slot, process);
                    } else {
                        children.remove(&slot);
                    }
                }
            }
            (ToDispatcher::Heartbeat { holding }, Some(s)) => {
                self.frontier.renew(s, &holding, now_ms());
            }
            (ToDispatcher::Bye, Some(s)) => {
                self.sups[s].said_bye = true;
                self.drop_supervisor(s, "said bye");
                self.send_sealed(s, &ToSupervisor::Farewell).await?;
            }
            // A supervisor admitted once (then given up for dead) that
            // leaves still gets its Farewell, so it need not wait for it.
            (ToDispatcher::Bye, None) => {
                if let Some(s) = cluster::sup_index(&self.sups, &identity) {
                    self.send_sealed(s, &ToSupervisor::Farewell).await?;
                }
            }
            (msg, None) => {
                let what = match &msg {
                    ToDispatcher::Results(r) => format!("{} results", r.len()),
                    ToDispatcher::Child { .. } => "a child announcement".into(),
                    ToDispatcher::Heartbeat { .. } => "a heartbeat".into(),
                    _ => "a message".into(),
                };
                let who = short_id(&identity);
                self.refusals.refuse(Reason::Unauthenticated, 1, || {
                    format!("{what} from peer {who}, which is not (or no longer) admitted; dropped")
                });
                self.send_to(&identity, &ToSupervisor::Reintroduce).await?;
            }
            // `open` never returns a sealed message.
            (ToDispatcher::Sealed { .. }, Some(_)) => {}
        }
        Ok(())
    }

    /// Opens a sealed message from `identity` (admitted as `s`) with the
    /// keys of its connection: the inner message, or None (refused and
    /// counted, no answer: it may be injected) when the seal does not hold.
    fn open(
        &mut self,
        s: SupId,
        identity: &Bytes,
        counter: u64,
        tag: &Proof,
        payload: &[u8],
    ) -> Option<ToDispatcher> {
        let who = short_id(identity);
        if let Err(e) = self.sups[s].session.open(counter, tag, payload) {
            let reason = match e {
                SealError::BadTag => Reason::BadSeal,
                SealError::Replayed => Reason::Replayed,
            };
            let id = self.sups[s].id.clone();
            self.refusals.refuse(reason, 1, || {
                format!("a message on supervisor {id}'s connection (peer {who}) whose seal does not hold ({}); dropped", e.as_str())
            });
            return None;
        }
        match protocol::decode::<ToDispatcher>(payload) {
            Ok(ToDispatcher::Sealed { .. }) | Err(_) => {
                self.refusals.refuse(Reason::Undecodable, 1, || {
                    format!("a sealed message from peer {who} holds no message")
                });
                None
            }
            Ok(m) => Some(m),
        }
    }

    /// A Hello opens an introduction: the peer gets a Challenge (a random
    /// nonce, nothing computed from the secret), or Stop when it speaks
    /// another protocol version.
    async fn on_hello(&mut self, identity: Bytes, version: u32, nonce: Nonce) -> anyhow::Result<()> {
        if version != PROTOCOL_VERSION {
            let who = short_id(&identity);
            self.refusals.refuse(Reason::Version, 1, || {
                format!("peer {who} speaks protocol {version}, we speak {PROTOCOL_VERSION}; told to stop")
            });
            return self.send_to(&identity, &ToSupervisor::Stop).await;
        }
        let (d_nonce, evicted) = self.challenges.challenge(identity.clone(), nonce, Instant::now());
        if evicted {
            self.refusals.refuse(Reason::ChallengeEvicted, 1, || {
                format!("over {MAX_PENDING_CHALLENGES} introductions pending; the oldest dropped")
            });
        }
        self.send_to(&identity, &ToSupervisor::Challenge { nonce: d_nonce })
            .await
    }

    /// A Join: the proof is checked before anything in it is believed (or
    /// even decoded); a peer that fails gets Refused and nothing else.
    async fn on_join(&mut self, identity: Bytes, proof: Proof, intro: &[u8]) -> anyhow::Result<()> {
        let checked = self
            .challenges
            .verify(&self.key, &identity, &proof, intro, Instant::now())
            .and_then(|admitted| {
                let intro = protocol::decode::<Intro>(intro).map_err(|_| Refusal::Malformed)?;
                Ok((admitted, intro))
            });
        let (admitted, intro) = match checked {
            Ok(ok) => ok,
            Err(why) => {
                let who = short_id(&identity);
                self.refusals.refuse(why.into(), 1, || {
                    format!("the introduction of peer {who} does not prove the cluster secret; refused")
                });
                return self.send_to(&identity, &ToSupervisor::Refused(why)).await;
            }
        };
        self.admit(identity.clone(), intro, admitted.session(&self.key));
        let policy = self.policy.clone();
        let proof = admitted.welcome_proof(&self.key, &protocol::encode(&policy));
        self.send_to(&identity, &ToSupervisor::Welcome { policy, proof })
            .await?;
        if self.stopping {
            // It reconnected while we stopped (it took a pause of ours for
            // our death): the Stop sent to its old connection never
            // reached it.
            let sid = self.sups.len().saturating_sub(1);
            self.send_sealed(sid, &ToSupervisor::Stop).await?;
        }
        Ok(())
    }

    /// A supervisor that proved the secret (re)joins.
    fn admit(&mut self, identity: Bytes, intro: Intro, session: Session) {
        let Intro {
            supervisor_id: id,
            capacity,
            process,
            holding,
        } = intro;
        // A supervisor reintroducing itself on the same socket starts over.
        if let Some(old) = cluster::sup_index(&self.sups, &identity) {
            self.drop_supervisor(old, "said hello again");
        }
        let sid = self.frontier.add_supervisor();
        debug_assert_eq!(sid, self.sups.len());
        tracing::info!(
            supervisor = %id,
            pid = process.pid,
            node = %process.node,
            capacity,
            "supervisor joined"
        );
        if let Ok(mut v) = self.view.lock() {
            v.supervisors.insert(
                id.clone(),
                SupervisorView {
                    process: Some(process),
                    live: true,
                    children: Default::default(),
                },
            );
        }
        self.sups.push(SupState {
            id,
            identity,
            capacity,
            last_heard: Instant::now(),
            live: true,
            said_bye: false,
            results: 0,
            session,
        });
        if !holding.is_empty() {
            self.adopt(sid, holding);
        }
        // Earlier connections of the same supervisor (it reconnected on a
        // new socket) are gone: what they held and it did not list goes
        // back to the queue now rather than after the heartbeat timeout.
        let earlier: Vec<SupId> = (0..sid)
            .filter(|&o| self.sups[o].live && self.sups[o].id == self.sups[sid].id)
            .collect();
        for o in earlier {
            self.drop_supervisor(o, "reconnected");
        }
    }

    /// Takes over the leases a (re)joining supervisor still holds: they
    /// were handed out before this dispatcher started (or before it gave
    /// the supervisor up for dead, or on an earlier connection), so it must
    /// not lease them again. Only what the frontier can vouch for is
    /// adopted, with its own domain and depth (see `Frontier::adopt`).
    fn adopt(&mut self, s: SupId, holding: Vec<WorkItem>) {
        let held = holding.len();
        let id = self.sups[s].id.clone();
        let earlier: HashSet<SupId> = (0..s).filter(|&o| self.sups[o].id == id).collect();
        let mut report = self
            .frontier
            .adopt(s, holding, now_ms(), |holder| earlier.contains(&holder));
        tracing::info!(
            supervisor = %id,
            held,
            adopted = report.adopted,
            looked_up = report.look_up.len(),
            "supervisor holds URLs from before; adopted their leases"
        );
        let look_up = std::mem::take(&mut report.look_up);
        if !look_up.is_empty() {
            self.reader.look_up(s, look_up);
        }
        self.refuse_unadoptable(s, &report);
    }

    /// The held URLs of `s` looked up in the store (see `adopt`).
    fn adopt_stored(&mut self, s: SupId, asked: usize, found: Result<Vec<(u64, Stored)>, String>) {
        let found = found.unwrap_or_else(|e| {
            tracing::warn!(error = %e, "looking up a supervisor's held URLs in the store failed; they will be crawled again");
            Vec::new()
        });
        let report = self.frontier.adopt_stored(s, asked, found, now_ms());
        if let Some(sup) = self.sups.get(s) {
            tracing::info!(supervisor = %sup.id, asked, adopted = report.adopted, "adopted held URLs queued in the store");
        }
        self.refuse_unadoptable(s, &report);
    }

    fn refuse_unadoptable(&mut self, s: SupId, report: &Adoption) {
        if report.refused > 0 {
            let n = report.refused;
            let id = self.sups.get(s).map_or("?", |sup| sup.id.as_str());
            self.refusals.refuse(Reason::UnadoptableLease, n as u64, || {
                format!("{n} URLs supervisor {id} holds are not queued here or out at another supervisor; not adopted (their results will be dropped)")
            });
        }
    }

    fn drop_supervisor(&mut self, s: SupId, why: &str) {
        if !self.sups[s].live {
            return;
        }
        self.sups[s].live = false;
        let requeued = self.frontier.remove_supervisor(s);
        if requeued > 0 || why != "said bye" {
            tracing::warn!(
                supervisor = %self.sups[s].id,
                why = %why,
                requeued,
                "supervisor left; its URLs re-queued"
            );
        }
        // A restarted supervisor with the same id may have joined already;
        // the view shows that one.
        let id = &self.sups[s].id;
        let replaced = self.sups.iter().any(|o| o.live && o.id == *id);
        if let (false, Ok(mut v)) = (replaced, self.view.lock()) {
            if let Some(sv) = v.supervisors.get_mut(id) {
                sv.live = false;
                sv.children.clear();
            }
        }
    }

    /// Records results from supervisor `s`: only those for leases issued
    /// to `s`; what a result is about (URL, domain, depth) comes from the
    /// lease record, not from the message. The rest is dropped and counted.
    fn on_results(&mut self, s: SupId, results: Vec<CrawlResult>) {
        let start = Instant::now();
        let n = results.len();
        let now = now_ms();
        for r in results {
            if r.sent_ms != 0 {
                let wait = Duration::from_millis(now.saturating_sub(r.sent_ms));
                self.timing.record(Op::ResultWait, wait, "ok", None, None);
            }
            // Ends the lease (and frees its credit) if it is `s`'s.
            let leased = match self.frontier.complete_for(s, r.lease, &r.url) {
                Ok(leased) => leased,
                Err(why) => {
                    let (reason, what) = match why {
                        LeaseRefusal::Unknown => (Reason::UnknownLease, "a lease not out"),
                        LeaseRefusal::Foreign => (Reason::ForeignLease, "a lease out at another supervisor"),
                        LeaseRefusal::OtherUrl => (Reason::LeaseUrlMismatch, "another URL than its lease's"),
                    };
                    let (who, lease) = (self.sups[s].id.clone(), r.lease);
                    self.refusals.refuse(reason, 1, || {
                        format!("supervisor {who} reported on {what} (lease {lease}); dropped")
                    });
                    continue;
                }
            };
            let r = CrawlResult {
                url: leased.url,
                domain: leased.domain,
                depth: leased.depth,
                ..r
            };
            self.sups[s].results += 1;
            self.stats.record(&r.outcome);
            if breaker::is_error(&r.outcome).is_some() {
                self.stats.counts.error_outcomes += 1;
            }
            if let Some(trip) = self.breakers.record(&r.domain, &r.outcome, now_ms()) {
                self.trip(&r.domain, trip);
            }
            // Links first: the writer stores in order, so a URL is marked
            // finished only after its links are in the stored frontier, and
            // a dispatcher killed in between re-crawls the page rather than
            // losing its links.
            for link in &r.outlinks {
                self.offer(link, r.depth.saturating_add(1));
            }
            let final_state = match &r.outcome {
                Outcome::Fetched { .. } => Some(UrlState::Done),
                Outcome::Disallowed => Some(UrlState::Disallowed),
                Outcome::Failed { kind, .. } => self.retry_or_fail(&r, *kind),
            };
            if let Some(st) = final_state {
                self.attempts.remove(&r.url);
                let failure = match &r.outcome {
                    Outcome::Failed { kind, .. } => Some(*kind),
                    _ => None,
                };
                self.writer.mark(r.url, st, failure);
            }
        }
        let from = self.sups[s].id.clone();
        metrics::counter!("crawler_supervisor_results_total", "supervisor" => from).increment(n as u64);
        self.timing.record_batch(Op::Report, start.elapsed(), "ok", n);
    }

    /// Pauses or halts a domain the circuit breaker gave up on.
    fn trip(&mut self, domain: &str, trip: Trip) {
        match trip {
            Trip::Pause {
                until_ms,
                errors,
                outcomes,
            } => {
                tracing::warn!(
                    domain = %domain,
                    pause_secs = until_ms.saturating_sub(now_ms()) / 1000,
                    errors,
                    outcomes,
                    "pausing domain: too many errors in its last outcomes"
                );
                metrics::counter!("crawler_domain_pauses_total").increment(1);
                self.frontier.pause(domain, until_ms);
            }
            Trip::Halt { reason } => {
                tracing::error!(
                    domain = %domain,
                    reason = %reason,
                    "HALTING DOMAIN; its URLs stay queued; un-halt with scripts/unhalt.sh"
                );
                metrics::counter!("crawler_domain_halts_total").increment(1);
                self.frontier.halt(domain);
                self.record_halt(domain, Some(&reason));
            }
        }
    }

    /// Writes (or clears, with `None`) a domain's halt in the second store,
    /// so a restarted dispatcher keeps it halted.
    fn record_halt(&self, domain: &str, reason: Option<&str>) {
        let Ok(update) = halt_update(reason) else {
            return;
        };
        let domains = self.stores.domains();
        let domain = domain.to_string();
        tokio::spawn(async move {
            let mut backoff = shared::store::Backoff::default();
            loop {
                let write = domains
                    .update_one(doc! {"_id": &domain}, update.clone())
                    .upsert(true);
                match shared::store::deadline(write).await {
                    Some(Ok(_)) => break,
                    Some(Err(e)) => backoff.wait("recording a domain halt", &e).await,
                    None => backoff.note("recording a domain halt", "no answer in time").await,
                }
            }
        });
    }

    async fn on_admin(&mut self, cmd: AdminCmd) {
        match cmd {
            AdminCmd::Unhalt { domain, done } => {
                let unhalted = self.frontier.unhalt(&domain);
                if unhalted {
                    tracing::info!(domain = %domain, "domain un-halted by an operator");
                    self.breakers.reset(&domain);
                    self.record_halt(&domain, None);
                }
                let _ = done.send(unhalted);
            }
        }
    }

    /// Retryable failures go back in the queue after a pause, a few times.
    fn retry_or_fail(&mut self, r: &CrawlResult, kind: FailureKind) -> Option<UrlState> {
        let attempts = self.attempts.entry(r.url.clone()).or_insert(0);
        *attempts = attempts.saturating_add(1);
        if *attempts < kind.max_attempts() {
            self.stats.counts.retried += 1;
            let due = now_ms() + RETRY_AFTER.as_millis() as u64 * *attempts as u64;
            self.delayed.push((due, r.url.clone(), r.domain.clone(), r.depth));
            None
        } else {
            self.stats.failed_for_good(kind);
            Some(UrlState::Failed)
        }
    }

    fn release_delayed(&mut self) {
        if self.delayed.is_empty() {
            return;
        }
        let now = now_ms();
        let (due, later): (Vec<_>, Vec<_>) = std::mem::take(&mut self.delayed)
            .into_iter()
            .partition(|d| d.0 <= now);
        self.delayed = later;
        for (_, url, domain, depth) in due {
            self.frontier.push_at(url, &domain, depth, now);
        }
    }

    /// Asks for the store reads of the windows that run low.
    fn read_queues(&mut self) {
        for r in self.frontier.refills(self.writer.durable(), READS_PER_TICK) {
            self.reader.read(r);
        }
    }

    fn on_read(&mut self, answer: queue_reader::Answer) {
        let (r, res) = match answer {
            queue_reader::Answer::Read(r, res) => (r, res),
            queue_reader::Answer::Held { sup, asked, found } => return self.adopt_stored(sup, asked, found),
        };
        match res {
            Ok(page) => {
                let missing = self.frontier.refilled(&r, page);
                if missing > 0 {
                    tracing::warn!(domain = %r.domain, missing, "queued URLs not found in the store (refused when written); dropped from the queue");
                }
            }
            Err(e) => {
                tracing::warn!(domain = %r.domain, error = %e, "reading a domain's queue from the store failed; will retry");
                self.frontier.refill_failed(&r);
            }
        }
    }

    /// Leases URLs to every supervisor with credit left.
    async fn dispatch(&mut self) -> anyhow::Result<()> {
        if !self.started_dispatching {
            if self.sups.iter().filter(|s| s.live).count() < self.min_supervisors {
                return Ok(());
            }
            self.started_dispatching = true;
            self.frontier.start_assigning();
        }
        if self.writer.backlog() > MAX_WRITE_BACKLOG {
            // Resumed by the next tick once the writer has caught up.
            return Ok(());
        }
        for s in 0..self.sups.len() {
            let sup = &self.sups[s];
            if !sup.live {
                continue;
            }
            let credit = sup.capacity.saturating_sub(self.frontier.held(s)) as usize;
            if credit == 0 {
                continue;
            }
            let start = Instant::now();
            let (items, waits) = self.frontier.take_timed(s, credit.min(MAX_BATCH), now_ms());
            if items.is_empty() {
                continue;
            }
            for wait in waits {
                self.timing
                    .record(Op::QueueWait, Duration::from_millis(wait), "ok", None, None);
            }
            let n = items.len();
            self.send_sealed(s, &ToSupervisor::Work(items)).await?;
            self.timing.record_batch(Op::Dispatch, start.elapsed(), "ok", n);
        }
        Ok(())
    }

    /// Once a second: heartbeats, dead supervisors, expired leases, gauges.
    async fn housekeeping(&mut self) -> anyhow::Result<()> {
        for s in 0..self.sups.len() {
            if !self.sups[s].live {
                continue;
            }
            if self.sups[s].last_heard.elapsed() > self.heartbeat_timeout {
                self.drop_supervisor(s, "missed heartbeats");
                continue;
            }
            self.send_sealed(s, &ToSupervisor::Heartbeat).await?;
        }
        self.challenges.expire(Instant::now());
        let expired = self.frontier.expire(now_ms());
        if expired > 0 {
            self.stats.counts.leases_expired += expired as u64;
            tracing::warn!(expired, "leases expired; URLs re-queued");
        }
        self.gauges();
        Ok(())
    }

    /// The state the bottleneck report reads, in `/metrics` and as a gauge
    /// line in the timing log: is there work it could hand out (`ready`),
    /// and do the supervisors' credits allow it (`credits_*`)?
    fn gauges(&self) {
        let live: Vec<SupId> = (0..self.sups.len()).filter(|&s| self.sups[s].live).collect();
        let held: u64 = live.iter().map(|&s| u64::from(self.frontier.held(s))).sum();
        let capacity: u64 = live.iter().map(|&s| u64::from(self.sups[s].capacity)).sum();
        let (queued, ready) = (self.frontier.queued() as f64, self.frontier.ready() as f64);
        let (in_flight, seen) = (
            self.frontier.in_flight() as f64,
            self.frontier.seen_count() as f64,
        );
        let (held, capacity, live) = (held as f64, capacity as f64, live.len() as f64);
        let in_store = self.frontier.spilled() as f64;
        metrics::gauge!("crawler_frontier_queued").set(queued);
        metrics::gauge!("crawler_frontier_in_store").set(in_store);
        let backlog = self.writer.backlog() as f64;
        metrics::gauge!("crawler_frontier_write_backlog").set(backlog);
        metrics::gauge!("crawler_frontier_ready").set(ready);
        metrics::gauge!("crawler_frontier_in_flight").set(in_flight);
        metrics::gauge!("crawler_frontier_seen").set(seen);
        metrics::gauge!("crawler_credits_held").set(held);
        metrics::gauge!("crawler_credits_capacity").set(capacity);
        metrics::gauge!("crawler_supervisors_live").set(live);
        let values = [
            ("frontier_queued", queued),
            ("frontier_in_store", in_store),
            ("frontier_write_backlog", backlog),
            ("frontier_ready", ready),
            ("frontier_in_flight", in_flight),
            ("frontier_seen", seen),
            ("credits_held", held),
            ("credits_capacity", capacity),
            ("supervisors_live", live),
        ];
        let mut line: Vec<(String, f64)> = values.iter().map(|(k, v)| (k.to_string(), *v)).collect();
        // Each supervisor's credit too: one saturated node among idle ones
        // is a different story from a cluster out of credit.
        for s in (0..self.sups.len()).filter(|&s| self.sups[s].live) {
            let sup = &self.sups[s];
            let (held, capacity) = (f64::from(self.frontier.held(s)), f64::from(sup.capacity));
            metrics::gauge!("crawler_supervisor_credits_held", "supervisor" => sup.id.clone()).set(held);
            metrics::gauge!("crawler_supervisor_credits_capacity", "supervisor" => sup.id.clone())
                .set(capacity);
            line.push((format!("credits_held.{}", sup.id), held));
            line.push((format!("credits_capacity.{}", sup.id), capacity));
        }
        line.extend(
            profiling::gauge_values(true)
                .into_iter()
                .map(|(k, v)| (k.to_string(), v)),
        );
        self.timing.gauges(&line);
    }

    /// Sends `msg` to admitted supervisor `s`, sealed with its connection's key.
    async fn send_sealed(&mut self, s: SupId, msg: &ToSupervisor) -> anyhow::Result<()> {
        let payload = protocol::encode(msg);
        let (counter, tag) = self.sups[s].session.seal(&payload);
        let identity = self.sups[s].identity.clone();
        self.send_to(
            &identity,
            &ToSupervisor::Sealed {
                counter,
                tag,
                payload,
            },
        )
        .await
    }

    /// Sends `msg` bare: only the handshake and refusals go this way.
    async fn send_to(&mut self, identity: &Bytes, msg: &ToSupervisor) -> anyhow::Result<()> {
        let mut m = ZmqMessage::from(protocol::encode(msg));
        m.push_front(identity.clone());
        metrics::counter!("crawler_zmq_messages_sent_total").increment(1);
        let Some(send) = self.send.as_mut() else {
            return Ok(());
        };
        // A peer that stops reading (frozen, or its host gone) must not
        // hold the dispatcher: past the deadline the message is dropped
        // like one to a dead peer, and heartbeats decide its fate.
        match tokio::time::timeout(SEND_TIMEOUT, send.send(m)).await {
            Ok(Ok(())) => {}
            // The peer is gone; heartbeats will notice and re-queue its work.
            Ok(Err(e)) => tracing::warn!(error = %e, "send failed"),
            Err(_) => {
                metrics::counter!("crawler_zmq_send_timeouts_total").increment(1);
                tracing::warn!(timeout = ?SEND_TIMEOUT, "a send took too long; message dropped");
            }
        }
        Ok(())
    }

    /// Flushes the frontier, stops the supervisors, prints the summary.
    async fn finish(
        mut self,
        args: &Args,
        settings: &serde_json::Value,
        stopped: bool,
        inbox: &mut mpsc::Receiver<(Bytes, Bytes)>,
    ) -> anyhow::Result<()> {
        let left = self.frontier.queued() + self.frontier.in_flight() + self.delayed.len();
        let finish_reason = if stopped {
            FinishReason::Stopped
        } else if left > 0 && !self.frontier.blocked_domains().1.is_empty() {
            FinishReason::Halted
        } else if self.stats.counts.over_page_limit > 0 {
            FinishReason::MaxPages
        } else {
            FinishReason::Done
        };
        self.stopping = true;
        self.flush_beating().await;
        let live: Vec<SupId> = (0..self.sups.len()).filter(|s| self.sups[*s].live).collect();
        for s in &live {
            self.send_sealed(*s, &ToSupervisor::Stop).await?;
        }
        tracing::info!(
            supervisors = live.len(),
            "crawl finished; waiting for the supervisors to stop"
        );
        self.await_byes(&live, inbox).await;
        // Results that arrived while supervisors drained are in the store too.
        self.writer.flush().await;
        // The zeromq crate has no linger: give the last Farewells a moment
        // to leave before the socket is dropped with the process.
        tokio::time::sleep(Duration::from_millis(300)).await;
        self.timing.flush();
        let elapsed = self.stats.started.elapsed().as_secs_f64();
        let summary = Summary {
            crawl_id: &self.policy.crawl_id,
            started_at: stats::rfc3339(self.stats.started_at),
            finished_at: stats::rfc3339(std::time::SystemTime::now()),
            finish_reason,
            settings,
            elapsed_secs: elapsed,
            pages_per_sec: self.stats.counts.fetched as f64 / elapsed.max(1e-3),
            frontier_left: self.frontier.queued() + self.frontier.in_flight() + self.delayed.len(),
            seen_urls: self.frontier.seen_count(),
            domains: self.frontier.domain_count(),
            supervisors: self.sups.len(),
            counts: &self.stats.counts,
        };
        let json = serde_json::to_string(&summary)?;
        println!("{json}");
        if let Some(path) = &args.summary_file {
            std::fs::write(path, format!("{json}\n"))
                .with_context(|| format!("writing {}", path.display()))?;
        }
        Ok(())
    }

    /// Keeps handling messages (last results, Byes) until every live
    /// supervisor has said Bye, or [`STOP_WAIT`] passes. Heartbeats go on
    /// meanwhile: a supervisor that heard nothing for its silence limit
    /// would take us for dead and reconnect as a new peer, and its Bye
    /// would then come from a stranger.
    async fn await_byes(&mut self, live: &[SupId], inbox: &mut mpsc::Receiver<(Bytes, Bytes)>) {
        let deadline = tokio::time::Instant::now() + STOP_WAIT;
        let mut beat = tokio::time::interval(Duration::from_secs(1));
        while live.iter().any(|s| !self.said_bye(*s)) {
            tokio::select! {
                msg = tokio::time::timeout_at(deadline, inbox.recv()) => match msg {
                    Ok(Some((identity, payload))) => {
                        if let Err(e) = self.on_message(identity, &payload).await {
                            tracing::warn!(error = %e, "while stopping");
                        }
                    }
                    _ => {
                        tracing::warn!("some supervisors did not confirm the stop");
                        return;
                    }
                },
                _ = beat.tick() => self.beat_to_live().await,
            }
        }
    }

    /// Writes what the frontier writer holds, heartbeating meanwhile: with
    /// a slow store this can take longer than a supervisor's silence limit
    /// (24 s at the end of a crawl of a million pages on nx-27017), and a
    /// supervisor that hears nothing takes us for dead and reconnects.
    async fn flush_beating(&mut self) {
        let writer = self.writer.clone();
        let flush = writer.flush();
        tokio::pin!(flush);
        let mut beat = tokio::time::interval(Duration::from_secs(1));
        loop {
            tokio::select! {
                _ = &mut flush => return,
                _ = beat.tick() => self.beat_to_live().await,
            }
        }
    }

    /// A heartbeat to every connected supervisor that has not said Bye
    /// (on its latest connection: one that reconnected is on a new one).
    async fn beat_to_live(&mut self) {
        for s in 0..self.sups.len() {
            if self.sups[s].live && !self.said_bye(s) {
                let _ = self.send_sealed(s, &ToSupervisor::Heartbeat).await;
            }
        }
    }

    /// Whether supervisor `s`, or a later incarnation of it (same id, after
    /// a reconnect), has said Bye.
    fn said_bye(&self, s: SupId) -> bool {
        let id = &self.sups[s].id;
        self.sups.iter().any(|o| o.said_bye && o.id == *id)
    }
}

/// A short, loggable name for a ZeroMQ identity (its first bytes in hex):
/// enough to tell peers apart in a log, not enough to speak as one.
fn short_id(identity: &Bytes) -> String {
    identity.iter().take(4).map(|b| format!("{b:02x}")).collect()
}

/// The `$set` that records a domain's halt (`Some(reason)`) or clears it.
fn halt_update(reason: Option<&str>) -> bson::ser::Result<Document> {
    let halt = DomainHalt {
        halted: reason.is_some(),
        halted_reason: reason.unwrap_or_default().to_string(),
        halted_at_ms: reason.map(|_| now_ms() as i64),
    };
    Ok(doc! {"$set": bson::to_document(&halt)?})
}

/// Warns when the database holds a crawl stored before crawls had
/// collections of their own (`frontier`, `pages`, ... without a prefix):
/// it is not resumed, and the warning says how to make it resumable.
async fn warn_of_unnamed_crawl(stores: &Stores) {
    let unprefixed = stores.primary.collection::<Document>(shared::store::FRONTIER);
    let old = unprefixed.find_one(doc! {}).projection(doc! {"crawl_id": 1});
    if let Some(Ok(Some(d))) = shared::store::deadline(old).await {
        let name = d.get_str("crawl_id").unwrap_or(shared::store::CrawlId::DEFAULT);
        tracing::warn!(
            "the database holds crawl {name:?} in collections without a crawl prefix (from an earlier version); it is not resumed. To resume it, rename them in mongosh: {}",
            ["seeds", "frontier", "pages", "body_dicts"]
                .map(|kind| format!(
                    "db.{kind}.renameCollection({:?});",
                    shared::store::CrawlId::parse(name)
                        .map(|c| c.collection(kind))
                        .unwrap_or_else(|_| format!("<crawl>__{kind}"))
                ))
                .join(" ")
        );
    }
}
