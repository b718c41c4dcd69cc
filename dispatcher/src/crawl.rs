//! The dispatcher's event loop: supervisors' messages in, work out.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use bson::{doc, Document};
use bytes::Bytes;
use shared::cluster_auth::{Challenges, ClusterKey, Nonce, Proof, Refusal, SealError, Session};
use shared::docs::{DomainDoc, DomainHalt};
use shared::protocol::{
    self, now_ms, CrawlPolicy, Intro, ProcessInfo, ToDispatcher, ToSupervisor, PROTOCOL_VERSION,
};
use shared::store::{decode_each, Stores};
use shared::timing::{Op, TimingLog};
use tokio::sync::mpsc;
use zeromq::{RouterSendHalf, RouterSocket, Socket, SocketRecv, SocketSend, ZmqMessage};

use crate::admin::{self, AdminCmd};
use crate::cluster::{self, ClusterView, SharedView, SupervisorView};
use crate::frontier::SupId;
use crate::monitor::{FrontierView, Monitor};
use crate::persist::{Confirmed, FrontierWriter};
use crate::queue_reader::{self, QueueReader};
use crate::refusals::{Reason, Refusals};
use crate::resume::{self, SeenScan, SeenScanTask};
use crate::state::{CrawlState, Effect, Leaving, Settings};
use crate::stats::{self, Summary};
use crate::{seeds, Args, Scope, ROLE};

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
    let (writer, mut confirmations) = FrontierWriter::spawn(stores.clone(), timing.clone());
    let io = Io { writer, reader };
    let mut d = Dispatcher::new(&args, stores.clone(), view, timing, admin_rx, key, io);
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
    let stopped = d.serve(&mut inbox, &mut read, &mut confirmations).await?;
    d.finish(&args, &settings, stopped, &mut inbox).await
}

/// The frontier's writer and reader tasks.
struct Io {
    writer: FrontierWriter,
    reader: QueueReader,
}

/// The shell's handle on a supervisor's connection: its ZeroMQ routing id
/// and the keys that seal and open its messages after its Welcome.
struct Conn {
    identity: Bytes,
    session: Session,
}

/// The shell around [`CrawlState`]: the socket, the handshake, the stores,
/// the timers, and what is served or printed about the crawl.
struct Dispatcher {
    policy: CrawlPolicy,
    state: CrawlState<Conn>,
    writer: FrontierWriter,
    reader: QueueReader,
    stores: Stores,
    /// The ROUTER socket's sending half, once bound (after `load`).
    send: Option<RouterSendHalf>,
    view: SharedView,
    timing: TimingLog,
    progress_every: Duration,
    monitor_every: Duration,
    admin: mpsc::Receiver<AdminCmd>,
    /// The cluster secret supervisors must prove (see `shared::cluster_auth`).
    key: ClusterKey,
    /// Introductions under way: challenges sent, by ZeroMQ identity.
    challenges: Challenges<Bytes>,
    refusals: Refusals,
    /// The background read of stored URLs for the seen-set, while it runs.
    seen_scan: Option<SeenScanTask>,
}

/// The scan's next message (never, without a scan).
async fn next_scan(scan: &mut Option<SeenScanTask>) -> Option<SeenScan> {
    match scan {
        Some(s) => s.next().await,
        None => std::future::pending().await,
    }
}

impl Dispatcher {
    fn new(
        args: &Args,
        stores: Stores,
        view: SharedView,
        timing: TimingLog,
        admin: mpsc::Receiver<AdminCmd>,
        key: ClusterKey,
        io: Io,
    ) -> Self {
        let settings = Settings {
            max_depth: args.max_depth,
            max_pages: args.max_pages,
            scope_to_seeds: args.scope == Scope::Seeds,
            min_supervisors: args.min_supervisors.max(1),
            heartbeat_timeout_ms: args.heartbeat_timeout_secs.saturating_mul(1000),
            max_inflight_per_domain: args.max_inflight_per_domain,
            lease_ms: args.lease_secs.saturating_mul(1000),
            window: args.frontier_window as usize,
            memory_urls: args.frontier_memory_urls,
            forget_idle_domains_ms: args.forget_idle_domains_ms(),
            seen_check: args.seen_check,
            seen_recent_urls: args.seen_recent_urls,
            breaker: args.breaker(),
        };
        Dispatcher {
            policy: args.policy(),
            state: CrawlState::new(settings, timing.clone(), now_ms()),
            writer: io.writer,
            reader: io.reader,
            stores,
            send: None,
            view,
            timing,
            progress_every: Duration::from_secs_f64(args.progress_secs.max(0.0)),
            monitor_every: Duration::from_secs_f64(args.monitor_secs.max(0.0)),
            admin,
            key,
            challenges: Challenges::new(PROTOCOL_VERSION, CHALLENGE_TTL, MAX_PENDING_CHALLENGES),
            refusals: Refusals::default(),
            seen_scan: None,
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
            self.state.halted_before(&d.domain);
        }
        warn_of_unnamed_crawl(&self.stores).await;
        // The crawl's own frontier (see `shared::crawl_id`): another crawl
        // id on the same database starts from nothing.
        let scan = self.resume().await.context("reading the stored frontier")?;
        let (finished, queued) = self.state.resumed();
        if (finished, queued) != (0, 0) {
            tracing::info!(
                finished,
                queued,
                "resuming: {finished} URLs finished before, {queued} still queued"
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
        self.state.seed(&all, now_ms());
        self.apply().await?;
        tracing::info!(
            "{} seeds, {} URLs queued",
            all.len(),
            self.state.frontier().queued()
        );
        if let Some(stored) = scan {
            // Only now: not in the way of the seeds' reads and writes.
            self.seen_scan = Some(resume::scan_seen(self.stores.frontier(), stored));
        }
        Ok(())
    }

    /// Resumes from a summary of the stored frontier, then reads back the
    /// queued entries no queue holds, or all of them when they fit in
    /// memory (see `crate::resume`). The number of stored URLs the
    /// seen-set must still read in, if any.
    async fn resume(&mut self) -> anyhow::Result<Option<u64>> {
        let frontier = self.stores.frontier();
        let started = Instant::now();
        // Said first: on a big frontier it takes minutes, with nothing else to show.
        tracing::info!("summarising the stored frontier (two scans of it inside the store)");
        let mut stored = resume::summarize(&frontier).await?;
        if self.state.queues_fit(&stored) {
            stored.read_whole();
        }
        let urls = stored.finished.saturating_add(stored.all_queued());
        let back = (stored.read_back, stored.whole);
        tracing::info!(
            domains = stored.queues.len(),
            secs = started.elapsed().as_secs_f64(),
            "summarised the stored frontier"
        );
        self.state.resume_summary(stored);
        if back.0 > 0 {
            tracing::info!(
                urls = back.0,
                all = back.1,
                "reading back queued URLs (all of them when they fit in memory; otherwise those without a seq, from an older version or written by hand)"
            );
            resume::read_back(&frontier, back, |d| self.state.resume(d)).await?;
        }
        Ok((urls > 0).then_some(urls))
    }

    /// A batch (or the end) of the background read of stored URLs.
    fn on_seen_scan(&mut self, msg: Option<SeenScan>) {
        match msg {
            Some(SeenScan::Urls(urls)) => self.state.seen_stored(&urls),
            Some(SeenScan::Done) => {
                self.state.seen_rebuilt();
                let secs = self
                    .seen_scan
                    .take()
                    .map_or(0.0, |s| s.started.elapsed().as_secs_f64());
                tracing::info!(
                    seen = self.state.seen_count(),
                    secs,
                    "read the stored URLs into the seen-set; it judges URLs without the store again"
                );
            }
            None => {
                self.seen_scan = None;
                tracing::error!("the read of stored URLs for the seen-set ended early; the store keeps judging every new URL");
            }
        }
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

    /// Carries out what the state machine asked for, in order.
    async fn apply(&mut self) -> anyhow::Result<()> {
        for effect in self.state.take_effects() {
            match effect {
                Effect::Send(s, msg) => {
                    let work = match &msg {
                        ToSupervisor::Work(items) => Some(items.len()),
                        _ => None,
                    };
                    let start = Instant::now();
                    self.send_sealed(s, &msg).await?;
                    if let Some(n) = work {
                        self.timing.record_batch(Op::Dispatch, start.elapsed(), "ok", n);
                    }
                }
                Effect::Insert {
                    url,
                    domain,
                    depth,
                    seq,
                    confirm,
                } => self.writer.insert(&url, &domain, depth, seq, confirm),
                Effect::Mark { url, state, failure } => self.writer.mark(url, state, failure),
                Effect::Read(r) => self.reader.read(r),
                Effect::LookUp(s, held) => self.reader.look_up(s, held),
                Effect::RecordHalt { domain, reason } => self.record_halt(&domain, reason.as_deref()),
                Effect::Gone(id) => {
                    if let Ok(mut v) = self.view.lock() {
                        if let Some(sv) = v.supervisors.get_mut(&id) {
                            sv.live = false;
                            sv.children.clear();
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// Leases what can be leased now.
    async fn dispatch(&mut self) -> anyhow::Result<()> {
        self.state.dispatch(now_ms(), self.writer.backlog());
        self.apply().await
    }

    /// Runs the crawl until it is done (`false`) or signalled (`true`).
    async fn serve(
        &mut self,
        inbox: &mut mpsc::Receiver<(Bytes, Bytes)>,
        read: &mut mpsc::UnboundedReceiver<queue_reader::Answer>,
        confirmations: &mut mpsc::UnboundedReceiver<Confirmed>,
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
        while !self.state.done() {
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
                    self.state.tick(now_ms(), self.writer.durable());
                    self.dispatch().await?;
                }
                Some(answer) = read.recv() => {
                    let durable = self.writer.durable();
                    self.state.read_answered(answer, now_ms(), durable);
                    while let Ok(answer) = read.try_recv() {
                        self.state.read_answered(answer, now_ms(), durable);
                    }
                    self.dispatch().await?;
                }
                Some(answers) = confirmations.recv() => {
                    self.state.confirmed(answers, now_ms());
                    while let Ok(answers) = confirmations.try_recv() {
                        self.state.confirmed(answers, now_ms());
                    }
                    self.dispatch().await?;
                }
                _ = slow_tick.tick() => {
                    self.challenges.expire(Instant::now());
                    self.state.housekeeping(now_ms());
                    self.apply().await?;
                    self.gauges();
                }
                _ = progress.tick(), if !self.progress_every.is_zero() => {
                    // Output, not a log line: kept plain (no time or level
                    // prefix) for the operator and for scripts that read it.
                    eprintln!("{}", self.state.progress_line());
                }
                _ = monitor_tick.tick(), if !self.monitor_every.is_zero() => {
                    let f = self.state.frontier();
                    let (paused, halted) = f.blocked_domains();
                    let view = FrontierView {
                        held: (0..self.state.members().len()).map(|s| f.held(s)).collect(),
                        queued: f.queued(),
                        in_flight: f.in_flight(),
                        seen: self.state.seen_count(),
                        paused,
                        halted,
                    };
                    // Output, not a log line: `monitor ` and one JSON object.
                    eprintln!("monitor {}", monitor.report(self.state.stats(), self.state.members(), view));
                }
                Some(cmd) = self.admin.recv() => self.on_admin(cmd).await?,
                msg = next_scan(&mut self.seen_scan), if self.seen_scan.is_some() => self.on_seen_scan(msg),
                _ = &mut stop => {
                    tracing::info!("signalled; stopping supervisors (queued URLs stay in the store; run again to resume)");
                    return Ok(true);
                }
            }
        }
        Ok(false)
    }

    /// The connection (live or given up) that `identity` was admitted on.
    fn connection(&self, identity: &Bytes) -> Option<SupId> {
        self.state.find(|c| c.identity == *identity)
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
        let sup = self.connection(&identity).filter(|s| self.state.is_live(*s));
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
                let Some(s) = self.connection(&identity) else {
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
        let now = now_ms();
        if let Some(s) = sup {
            self.state.heard(s, now);
        }
        match (msg, sup) {
            (ToDispatcher::Hello { version, nonce }, _) => self.on_hello(identity, version, nonce).await?,
            (ToDispatcher::Join { proof, intro }, _) => self.on_join(identity, proof, &intro).await?,
            (ToDispatcher::Results(results), Some(s)) => {
                let start = Instant::now();
                let n = results.len();
                self.state.results(s, results, now);
                if let Some(m) = self.state.member(s) {
                    metrics::counter!("crawler_supervisor_results_total", "supervisor" => m.id.clone())
                        .increment(n as u64);
                }
                self.timing.record_batch(Op::Report, start.elapsed(), "ok", n);
            }
            (ToDispatcher::Child { slot, process, alive }, Some(s)) => {
                let id = self.state.member(s).map(|m| m.id.clone()).unwrap_or_default();
                if let Ok(mut v) = self.view.lock() {
                    let children = &mut v.supervisors.entry(id).or_default().children;
                    if alive {
                        children.insert(slot, process);
                    } else {
                        children.remove(&slot);
                    }
                }
            }
            (ToDispatcher::Heartbeat { holding }, Some(s)) => self.state.heartbeat(s, &holding, now),
            (ToDispatcher::Bye, Some(s)) => self.state.bye(s),
            // A supervisor admitted once (then given up for dead) that
            // leaves still gets its Farewell, so it need not wait for it.
            (ToDispatcher::Bye, None) => {
                if let Some(s) = self.connection(&identity) {
                    self.state.bye(s);
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
        self.apply().await
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
        let m = self.state.member_mut(s)?;
        if let Err(e) = m.conn.session.open(counter, tag, payload) {
            let reason = match e {
                SealError::BadTag => Reason::BadSeal,
                SealError::Replayed => Reason::Replayed,
            };
            let id = m.id.clone();
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
    /// even decoded); a peer that fails gets Refused and nothing else. One
    /// that passes joins the crawl on a new connection and gets its
    /// Welcome before anything the crawl has for it (see `apply`).
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
        let Intro {
            supervisor_id: id,
            capacity,
            process,
            holding,
        } = intro;
        // A supervisor reintroducing itself on the same socket starts over.
        if let Some(old) = self.connection(&identity) {
            self.state.leave(old, Leaving::SaidHelloAgain);
        }
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
        let conn = Conn {
            identity: identity.clone(),
            session: admitted.session(&self.key),
        };
        self.state.join(conn, id, capacity, holding, now_ms());
        let policy = self.policy.clone();
        let proof = admitted.welcome_proof(&self.key, &protocol::encode(&policy));
        self.send_to(&identity, &ToSupervisor::Welcome { policy, proof })
            .await
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

    async fn on_admin(&mut self, cmd: AdminCmd) -> anyhow::Result<()> {
        match cmd {
            AdminCmd::Unhalt { domain, done } => {
                let unhalted = self.state.unhalt(&domain);
                let _ = done.send(unhalted);
            }
        }
        self.apply().await
    }

    /// The state the bottleneck report reads, in `/metrics` and as a gauge
    /// line in the timing log: is there work it could hand out (`ready`),
    /// and do the supervisors' credits allow it (`credits_*`)?
    fn gauges(&self) {
        let f = self.state.frontier();
        let members = self.state.members();
        let live: Vec<SupId> = (0..members.len()).filter(|&s| members[s].live).collect();
        let held: u64 = live.iter().map(|&s| u64::from(f.held(s))).sum();
        let capacity: u64 = live.iter().map(|&s| u64::from(members[s].capacity)).sum();
        let (queued, ready) = (f.queued() as f64, f.ready() as f64);
        let (in_flight, seen) = (f.in_flight() as f64, self.state.seen_count() as f64);
        let (held, capacity, live_n) = (held as f64, capacity as f64, live.len() as f64);
        let in_store = f.spilled() as f64;
        let seen_bytes = self.state.seen_bytes() as f64;
        let domains = f.domain_count() as f64;
        metrics::gauge!("crawler_frontier_domains").set(domains);
        metrics::counter!("crawler_frontier_domains_forgotten_total").absolute(f.forgotten());
        metrics::gauge!("crawler_frontier_queued").set(queued);
        metrics::gauge!("crawler_frontier_in_store").set(in_store);
        let backlog = self.writer.backlog() as f64;
        metrics::gauge!("crawler_frontier_write_backlog").set(backlog);
        metrics::gauge!("crawler_frontier_ready").set(ready);
        metrics::gauge!("crawler_frontier_in_flight").set(in_flight);
        metrics::gauge!("crawler_frontier_seen").set(seen);
        metrics::gauge!("crawler_frontier_seen_bytes").set(seen_bytes);
        metrics::gauge!("crawler_credits_held").set(held);
        metrics::gauge!("crawler_credits_capacity").set(capacity);
        metrics::gauge!("crawler_supervisors_live").set(live_n);
        let values = [
            ("frontier_queued", queued),
            ("frontier_in_store", in_store),
            ("frontier_write_backlog", backlog),
            ("frontier_ready", ready),
            ("frontier_in_flight", in_flight),
            ("frontier_seen", seen),
            ("frontier_seen_bytes", seen_bytes),
            ("frontier_domains", domains),
            ("frontier_domains_forgotten", f.forgotten() as f64),
            ("credits_held", held),
            ("credits_capacity", capacity),
            ("supervisors_live", live_n),
        ];
        let mut line: Vec<(String, f64)> = values.iter().map(|(k, v)| (k.to_string(), *v)).collect();
        // Each supervisor's credit too: one saturated node among idle ones
        // is a different story from a cluster out of credit.
        for &s in &live {
            let m = &members[s];
            let (held, capacity) = (f64::from(f.held(s)), f64::from(m.capacity));
            metrics::gauge!("crawler_supervisor_credits_held", "supervisor" => m.id.clone()).set(held);
            metrics::gauge!("crawler_supervisor_credits_capacity", "supervisor" => m.id.clone())
                .set(capacity);
            line.push((format!("credits_held.{}", m.id), held));
            line.push((format!("credits_capacity.{}", m.id), capacity));
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
        let Some(m) = self.state.member_mut(s) else {
            return Ok(());
        };
        let (counter, tag) = m.conn.session.seal(&payload);
        let identity = m.conn.identity.clone();
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
        signalled: bool,
        inbox: &mut mpsc::Receiver<(Bytes, Bytes)>,
    ) -> anyhow::Result<()> {
        let finish_reason = self.state.finish_reason(signalled);
        self.flush_beating().await;
        let live = self.state.stop();
        self.apply().await?;
        tracing::info!(
            supervisors = live.len(),
            "crawl finished; waiting for the supervisors to stop"
        );
        self.await_byes(&live, inbox).await;
        // Results that arrived while supervisors drained are in the store too.
        self.writer.flush().await;
        // Its cursor would hold the client's shutdown up.
        self.seen_scan = None;
        self.stores.shutdown().await;
        // The zeromq crate has no linger: give the last Farewells a moment
        // to leave before the socket is dropped with the process.
        tokio::time::sleep(Duration::from_millis(300)).await;
        self.timing.flush();
        let stats = self.state.stats();
        let elapsed = stats.started.elapsed().as_secs_f64();
        let f = self.state.frontier();
        let summary = Summary {
            crawl_id: &self.policy.crawl_id,
            started_at: stats::rfc3339(stats.started_at),
            finished_at: stats::rfc3339(std::time::SystemTime::now()),
            finish_reason,
            settings,
            elapsed_secs: elapsed,
            pages_per_sec: stats.counts.fetched as f64 / elapsed.max(1e-3),
            frontier_left: self.state.left(),
            seen_urls: self.state.seen_count(),
            domains: f.domain_count(),
            domains_forgotten: f.forgotten(),
            supervisors: self.state.members().len(),
            counts: &stats.counts,
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
        while live.iter().any(|s| !self.state.said_bye(*s)) {
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

    async fn beat_to_live(&mut self) {
        self.state.beat_to_live();
        if let Err(e) = self.apply().await {
            tracing::warn!(error = %e, "while stopping");
        }
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
