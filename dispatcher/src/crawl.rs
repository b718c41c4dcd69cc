//! The dispatcher's event loop: supervisors' messages in, work out.
//!
//! The shell around the state machine (`crate::state`): it owns the
//! ZeroMQ socket, the stores and the timers, and carries out the effects
//! the state machine asks for. Beside this file: `startup` (the stored
//! frontier, the seeds, the seen-set's background read), `handshake`
//! (admitting a supervisor's connection), `effects` (the state machine's
//! effects carried out), `send` (what goes out on the socket) and `stop`
//! (the summary, the Byes, the last writes).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use bytes::Bytes;
use link::cluster_auth::{Challenges, ClusterKey, Session};
use link::envelope::{FrameToDispatcher, FrameToSupervisor, Sealed};
use link::protocol::{self, CrawlPolicy, ProcessInfo, ToDispatcher, PROTOCOL_VERSION};
use shared::timing::{Op, TimingLog};
use store::Stores;
use tokio::sync::mpsc;
use zeromq::{RouterSendHalf, RouterSocket, Socket, SocketRecv};

use crate::cluster::{self, ClusterView, SharedView};
use crate::config::{Config, Flags};
use crate::control::{self, ControlRequest};
use crate::frontier::SupId;
use crate::monitor::{FrontierView, Monitor};
use crate::persist::{Confirmed, FrontierWriter};
use crate::queue_reader::{self, QueueReader};
use crate::refusals::{Reason, Refusals};
use crate::resume::SeenScanTask;
use crate::state::{CrawlState, Settings};
use crate::{metric, ROLE};
use shared::metric::GaugeLine;
use shared::shutdown::Shutdown;

mod answers;
mod effects;
mod handshake;
mod send;
mod startup;
mod steering;
mod stop;

use effects::halt_update;
use send::short_id;
use startup::next_scan;

/// A challenge not answered within this long is forgotten (a supervisor
/// answers in milliseconds, and introduces itself again when its Hello
/// goes unanswered); also how long a welcomed connection may take to say
/// what it holds.
const CHALLENGE_TTL: Duration = Duration::from_secs(10);
/// Most introductions pending at once, and per source address; past them
/// a challenge is dropped (see `link::cluster_auth::Challenges`), so a
/// flood of Hellos costs a fixed amount of memory (about 100 bytes each).
const MAX_PENDING_CHALLENGES: usize = 4096;
const MAX_CHALLENGES_PER_SOURCE: usize = link::socket::UNTRUSTED_PER_ADDRESS;
/// Most messages taken from the socket in one turn of the serve loop
/// before it dispatches and looks at its timers again. Draining what waits
/// in one go makes one dispatch serve many results; draining without a
/// bound let a peer that sends faster than the loop reads hold every
/// heartbeat and lease expiry for as long as it kept sending. At about a
/// microsecond per refused message, a turn stays under a millisecond.
const DRAIN_MESSAGES: usize = 512;

/// The dispatcher's clock: Unix milliseconds that never step
/// (`link::fence::steady_unix_ms`). Supervisors are given up by it
/// after their heartbeat timeout, which a wall-clock step must not cut
/// short: their right to crawl ends a margin before, on their clocks.
pub(crate) fn now_ms() -> u64 {
    link::fence::steady_unix_ms()
}

pub(crate) async fn run(config: Config, shutdown: Shutdown) -> anyhow::Result<()> {
    let Config {
        flags: args,
        settings,
        key,
    } = config;
    let view: SharedView = Arc::new(Mutex::new(ClusterView::default()));
    let (admin_tx, admin_rx) = mpsc::channel(16);
    let routes = cluster::route(view.clone()).merge(control::http::route(admin_tx));
    let debug = profiling::serve(args.obs.debug_addr, args.obs.debug_token(), routes).await?;
    metric::describe();
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
    // The indexes first: the frontier's shard key is a prefix of its queue
    // index, which mongos then shards by instead of building an index of
    // the shard key alone. Sharding before the collections grow.
    stores.ensure_indexes().await?;
    if args.revisit().is_some() {
        stores.ensure_revisit_index().await?;
    }
    if store::sharding::shard_collections(&stores).await? {
        tracing::info!("the primary store is a mongos: this crawl's pages and frontier are sharded");
    }

    let ended = Arc::new(std::sync::OnceLock::new());
    let (reader, mut read) = QueueReader::spawn(&stores, ended.clone(), timing.clone());
    let exact = args.seen_check == crate::seen::SeenCheck::Store;
    let (writer, mut confirmations) = FrontierWriter::spawn(stores.clone(), exact, timing.clone());
    stop::on_abandon(writer.clone());
    let io = Io {
        writer,
        reader,
        ended,
    };
    let mut d = Dispatcher::new(&args, stores.clone(), view, timing, admin_rx, key, io)?;
    d.load(&args).await?;

    // Bound only now: a supervisor connecting while a big frontier loads
    // is refused and retries, instead of waiting unanswered for a Welcome.
    // What peers not yet proven can make it hold: `link::socket`.
    let mut socket = RouterSocket::with_options(link::socket::dispatcher_options());
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
    let stopped = d
        .serve(&mut inbox, &mut read, &mut confirmations, shutdown)
        .await?;
    d.finish(&args, &settings, stopped, &mut inbox).await
}

/// The frontier's writer and reader tasks, and what the reader learns of
/// the stored frontier at start-up (`crate::resume`).
struct Io {
    writer: FrontierWriter,
    reader: QueueReader,
    ended: Arc<std::sync::OnceLock<std::collections::HashSet<i64>>>,
}

/// The shell's handle on a supervisor's connection: its ZeroMQ routing id,
/// the keys that seal and open its messages after its Welcome, and its
/// results counter (looked up once: a labelled lookup per message cost
/// over 1% of the dispatcher's CPU).
struct Conn {
    identity: Bytes,
    session: Session,
    results: metrics::Counter,
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
    admin: mpsc::Receiver<control::http::Request>,
    control_writer: steering::ControlWriter,
    /// The cluster secret supervisors must prove (see `link::cluster_auth`).
    key: ClusterKey,
    /// Introductions under way: challenges sent, by ZeroMQ identity, with
    /// the address each peer connected from.
    challenges: Challenges<Bytes, Option<IpAddr>>,
    /// Welcomed connections that have not said what they hold yet.
    joining: HashMap<Bytes, handshake::Joining>,
    /// How often peers not admitted are answered.
    answers: answers::Answers,
    refusals: Refusals,
    /// The background read of stored URLs for the seen-set, while it runs.
    seen_scan: Option<SeenScanTask>,
    /// For the queue reader: the stored URLs that ended without a page.
    ended: Arc<std::sync::OnceLock<std::collections::HashSet<i64>>>,
}

impl Dispatcher {
    fn new(
        args: &Flags,
        stores: Stores,
        view: SharedView,
        timing: TimingLog,
        admin: mpsc::Receiver<control::http::Request>,
        key: ClusterKey,
        io: Io,
    ) -> anyhow::Result<Self> {
        let settings = Settings {
            max_depth: args.max_depth,
            max_pages: args.max_pages,
            admission: args.admission(),
            canonical: args.canonical(),
            min_supervisors: args.min_supervisors.max(1),
            heartbeat_timeout_ms: args.heartbeat_timeout_secs.saturating_mul(1000),
            max_inflight_per_domain: args.max_inflight_per_domain,
            lease_ms: args.lease_secs.saturating_mul(1000),
            window: args.frontier_window as usize,
            memory_urls: args.frontier_memory_urls,
            active_domains: args.frontier_active_domains,
            forget_idle_domains_ms: args.forget_idle_domains_ms(),
            seen_check: args.seen_check,
            seen_recent_urls: args.seen_recent_urls,
            held_links_memory: args.held_links_memory,
            breaker: args.breaker(),
            max_write_backlog: crate::persist::MAX_WRITE_BACKLOG,
            max_pending_reads: queue_reader::MAX_PENDING,
            revisit: args.revisit().is_some(),
            progress_results: crate::frontier::PROGRESS_RESULTS,
        };
        let control_writer = steering::ControlWriter::start(stores.control());
        let state = CrawlState::new(settings, timing.clone(), now_ms()).map_err(anyhow::Error::msg)?;
        Ok(Dispatcher {
            policy: args.policy(),
            state,
            writer: io.writer,
            reader: io.reader,
            ended: io.ended,
            stores,
            send: None,
            view,
            timing,
            progress_every: Duration::from_secs_f64(args.progress_secs.max(0.0)),
            monitor_every: Duration::from_secs_f64(args.monitor_secs.max(0.0)),
            admin,
            control_writer,
            key,
            challenges: Challenges::new(
                PROTOCOL_VERSION,
                CHALLENGE_TTL,
                MAX_PENDING_CHALLENGES,
                MAX_CHALLENGES_PER_SOURCE,
            ),
            joining: HashMap::new(),
            answers: answers::Answers::new(Instant::now()),
            refusals: Refusals::default(),
            seen_scan: None,
        })
    }

    /// Leases what can be leased now: nothing while a welcomed connection
    /// has not said what it holds (its leases must be adopted before they
    /// can be leased again; it says so within milliseconds, and is dropped
    /// after [`CHALLENGE_TTL`]).
    async fn dispatch(&mut self) -> anyhow::Result<()> {
        if !self.joins_pending() {
            self.state.dispatch(now_ms(), self.writer.backlog());
        }
        self.apply().await
    }

    /// Runs the crawl until it is done (`false`) or signalled (`true`).
    async fn serve(
        &mut self,
        inbox: &mut mpsc::Receiver<(Bytes, Bytes)>,
        read: &mut mpsc::UnboundedReceiver<crate::state::Answer>,
        confirmations: &mut mpsc::UnboundedReceiver<Confirmed>,
        mut shutdown: Shutdown,
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
        let stop = shutdown.requested();
        tokio::pin!(stop);
        while !self.state.done() {
            tokio::select! {
                msg = inbox.recv() => {
                    let Some((identity, payload)) = msg else { bail!("ZeroMQ socket closed") };
                    self.on_message(identity, &payload).await?;
                    // Drain what else is waiting, within a bound, before
                    // dispatching once.
                    for _ in 1..DRAIN_MESSAGES {
                        let Ok((identity, payload)) = inbox.try_recv() else { break };
                        self.on_message(identity, &payload).await?;
                    }
                    self.dispatch().await?;
                }
                _ = tick.tick() => {
                    self.state.tick(now_ms(), self.writer.durable(), self.reader.pending());
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
                    let now = Instant::now();
                    self.challenges.expire(now);
                    self.expire_joining(now);
                    self.answers.forget_idle(now);
                    self.state.expire_controls(now_ms());
                    self.state.housekeeping(now_ms());
                    self.apply().await?;
                    self.gauges();
                }
                _ = progress.tick(), if !self.progress_every.is_zero() => {
                    // Output, not a log line: kept plain (no time or level
                    // prefix) for the operator and for scripts that read it.
                    shared::live_line::progress(&self.state.progress_line());
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
                        operator: self.state.controls().summary(),
                    };
                    // Output, not a log line: `monitor ` and one JSON object.
                    shared::live_line::line(&format!(
                        "monitor {}",
                        monitor.report(self.state.stats(), self.state.members(), view)
                    ));
                }
                Some(request) = self.admin.recv() => {
                    if self.on_control(request).await? {
                        tracing::info!("stopped by an operator; stopping supervisors (queued URLs stay in the store; run again to resume)");
                        return Ok(true);
                    }
                }
                msg = next_scan(&mut self.seen_scan), if self.seen_scan.is_some() => {
                    self.on_seen_scan(msg);
                    self.dispatch().await?;
                }
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
    /// connection (see `link::cluster_auth::Session`). Anything else is
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
        link::metric::ZMQ_MESSAGES_RECEIVED.get().increment(1);
        // Only a live supervisor counts as known; one given up for dead
        // (or met by a previous dispatcher) is asked to introduce itself.
        let member = self.connection(&identity);
        let sup = member.filter(|s| self.state.is_live(*s));
        // The socket bounds what unproven peers send (`link::socket`);
        // this says so in the refusals too, should that ever change.
        let proven = member.is_some() || self.joining.contains_key(&identity);
        if !proven && payload.len() > link::socket::UNTRUSTED_MESSAGE_BYTES {
            let n = payload.len();
            self.refusals.refuse(Reason::Oversized, 1, || {
                format!("a {n}-byte message from a peer not admitted")
            });
            return Ok(());
        }
        let frame: FrameToDispatcher = match protocol::decode(payload) {
            Ok(f) => f,
            Err(e) => {
                self.refusals
                    .refuse(Reason::Undecodable, 1, || format!("undecodable message: {e}"));
                return Ok(());
            }
        };
        // After the handshake every message is sealed with its connection's
        // key; only Hello and Join travel bare.
        match frame {
            FrameToDispatcher::Hello { version, nonce } => {
                self.heard(sup);
                self.on_hello(identity, version, nonce);
            }
            FrameToDispatcher::Join { proof, intro } => {
                self.heard(sup);
                self.on_join(identity, proof, intro);
            }
            FrameToDispatcher::Sealed(sealed) => match self.joining.remove(&identity) {
                Some(joining) => self.on_holding(identity, joining, &sealed),
                None => self.on_sealed(identity, &sealed),
            },
        }
        self.apply().await
    }

    /// A live supervisor was heard from.
    fn heard(&mut self, sup: Option<SupId>) {
        if let Some(s) = sup {
            self.state.heard(s, now_ms());
        }
    }

    /// A sealed message: opened with its connection's keys (see `open`),
    /// then acted on if its connection is live. Results borrow their
    /// strings from the frame (see `CrawlResult`).
    fn on_sealed(&mut self, identity: Bytes, sealed: &Sealed<'_>) {
        let Some(s) = self.connection(&identity) else {
            let who = short_id(&identity);
            self.refusals.refuse(Reason::Unauthenticated, 1, || {
                format!("a sealed message from peer {who}, which was never admitted; dropped")
            });
            return self.answer(&identity, &FrameToSupervisor::Reintroduce);
        };
        let Some(msg) = self.open(s, &identity, sealed) else {
            return;
        };
        // A supervisor admitted once (then given up for dead) that leaves
        // still gets its Farewell, so it need not wait for it.
        if matches!(msg, ToDispatcher::Bye) {
            self.heard(Some(s).filter(|s| self.state.is_live(*s)));
            self.state.bye(s);
            return;
        }
        if !self.state.is_live(s) {
            let what = match &msg {
                ToDispatcher::Results(r) => format!("{} results", r.len()),
                ToDispatcher::Child { .. } => "a child announcement".into(),
                ToDispatcher::Holding(_) => "what it holds".into(),
                _ => "a heartbeat".into(),
            };
            let who = short_id(&identity);
            self.refusals.refuse(Reason::Unauthenticated, 1, || {
                format!("{what} from peer {who}, which is not (or no longer) admitted; dropped")
            });
            return self.answer(&identity, &FrameToSupervisor::Reintroduce);
        }
        let now = now_ms();
        self.state.heard(s, now);
        // The seal's counter: what an Ack of this message names.
        let seq = sealed.counter;
        match msg {
            ToDispatcher::Results(results) => {
                let start = Instant::now();
                let n = results.len();
                self.state.results(s, results, now);
                self.state.acknowledge(s, seq);
                if let Some(m) = self.state.member(s) {
                    m.conn.results.increment(n as u64);
                }
                self.timing.record_batch(Op::Report, start.elapsed(), "ok", n);
            }
            ToDispatcher::Child { slot, process, alive } => {
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
            ToDispatcher::Heartbeat { holding } => {
                self.state.heartbeat(s, &holding, now);
                self.state.acknowledge(s, seq);
            }
            ToDispatcher::Bye => self.state.bye(s),
            ToDispatcher::Holding(_) => {
                let who = short_id(&identity);
                self.refusals.refuse(Reason::OutOfTurn, 1, || {
                    format!("peer {who} said what it holds a second time on one connection; ignored")
                });
            }
        }
    }

    /// An operator's command (see `crate::control`), answered; true for
    /// Stop, which ends the crawl's loop as SIGTERM does.
    async fn on_control(&mut self, request: control::http::Request) -> anyhow::Result<bool> {
        let stop = request.command == ControlRequest::Stop;
        let answer = self.state.steer(request.command, now_ms());
        if stop {
            // Told before the operator hears back, so nothing starts after
            // `crawlctl stop` returns (`finish` does not tell them again).
            self.state.stop();
        }
        // Recalls, a pause's among them, leave before the answer too.
        self.apply().await?;
        let _ = request.answer.send(answer);
        self.dispatch().await?;
        Ok(stop)
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
        let (active, parked) = (f.active_domains() as f64, f.parked_domains() as f64);
        let forgotten = f.forgotten();
        let mut line = GaugeLine::new();
        line.set(&metric::FRONTIER_QUEUED, queued);
        line.set(&metric::FRONTIER_IN_STORE, in_store);
        line.set(&metric::FRONTIER_WRITE_BACKLOG, self.writer.backlog() as f64);
        line.set(&metric::FRONTIER_READY, ready);
        line.set(&metric::FRONTIER_IN_FLIGHT, in_flight);
        line.set(&metric::FRONTIER_SEEN, seen);
        line.set(&metric::FRONTIER_SEEN_BYTES, seen_bytes);
        line.set(&metric::FRONTIER_DOMAINS, domains);
        line.set(&metric::FRONTIER_DOMAINS_ACTIVE, active);
        line.set(&metric::FRONTIER_DOMAINS_PARKED, parked);
        line.total(&metric::FRONTIER_DOMAINS_FORGOTTEN, forgotten);
        line.set(&metric::CREDITS_HELD, held);
        line.set(&metric::CREDITS_CAPACITY, capacity);
        line.set(&metric::SUPERVISORS_LIVE, live_n);
        let (paused, blocked, delays) = self.state.controls().summary();
        line.set(&metric::CRAWL_PAUSED, f64::from(u8::from(paused)));
        line.set(&metric::DOMAINS_BLOCKED_BY_OPERATOR, blocked as f64);
        line.set(&metric::DOMAIN_DELAYS_SET, delays as f64);
        line.set(&metric::SERVERS_SHARED, f.shared_servers() as f64);
        if let Some((queued, started)) = self.state.revisit_counts() {
            line.set(&metric::REVISITS_QUEUED, queued as f64);
            line.total(&metric::REVISITS_STARTED, started);
        }
        // Each supervisor's credit too: one saturated node among idle ones
        // is a different story from a cluster out of credit.
        for &s in &live {
            let m = &members[s];
            line.set_at(&metric::SUPERVISOR_CREDITS_HELD, &m.id, f64::from(f.held(s)));
            line.set_at(&metric::SUPERVISOR_CREDITS_CAPACITY, &m.id, f64::from(m.capacity));
            line.set_at(&metric::SUPERVISOR_DOMAINS, &m.id, f.domains_of(s) as f64);
        }
        line.log_only(profiling::gauge_values(true));
        line.log_only(store::work::gauge_values());
        line.write(&self.timing);
    }
}
