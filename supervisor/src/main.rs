//! supervisor: one per node. Connects to the dispatcher over ZeroMQ,
//! starts and watches `crawler-child` processes, hands them URLs (each
//! domain always to the same child, so that child alone paces it) and
//! relays their results.

mod child;
mod outbox;
mod right;
use link::dispatcher_link::DispatcherLink;

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::Parser;
use link::args::ClusterArgs;
use link::cluster_auth::{ClusterKey, SECRET_ENV};
use link::protocol::{
    CrawlResult, FailureKind, FromChild, Intro, Outcome, ProcessInfo, ToDispatcher, ToSupervisor, WorkItem,
};
use shared::cli::ObsArgs;
use shared::timing::TimingLog;
use store::StoreArgs;
use tokio::sync::mpsc;

use child::{ChildSpec, SlotCmd, SlotEvent};
use link::fence::{self, Fence};
use outbox::Outbox;
use right::Right;

const ROLE: &str = "supervisor";

/// mimalloc instead of the system allocator, as in every crawler process
/// (see crawler-child/src/main.rs).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;
/// Attempts a URL gets when its child keeps dying on it.
const MAX_CHILD_ATTEMPTS: u32 = 3;
/// Longest a stopping supervisor waits for its child slots: each kills its
/// child after [`child::STOP_GRACE`], so this only ends a slot that is
/// itself stuck. With the Farewell wait (5 s) a SIGTERM ends a supervisor
/// within 25 s, whatever its children do.
const STOP_WAIT: Duration = Duration::from_secs(18);

#[derive(Parser, Debug)]
#[command(version, about = "Runs crawler-child processes on this node for a dispatcher")]
struct Args {
    /// The dispatcher's ZeroMQ endpoint.
    #[arg(long, env = "CRAWLER_DISPATCHER", default_value = "tcp://127.0.0.1:5555")]
    dispatcher: String,
    /// This supervisor's id (default: node name + pid).
    #[arg(long)]
    id: Option<String>,
    /// How long to keep trying to reach the dispatcher at start-up.
    #[arg(long, default_value_t = 120)]
    connect_timeout_secs: u64,
    /// The dispatcher counts as gone after this many seconds without a
    /// message from it (it sends a heartbeat every second); the supervisor
    /// then reconnects and re-introduces itself, keeping its children.
    #[arg(long, default_value_t = 15)]
    dispatcher_silence_secs: u64,
    /// Give up (drain the children and exit 1) after the dispatcher has
    /// been unreachable this many seconds.
    #[arg(long, default_value_t = 900)]
    reconnect_patience_secs: u64,
    /// Number of crawler-child processes.
    #[arg(long, default_value_t = 2)]
    children: usize,
    /// URLs each child may hold at once (the dispatcher's credit is the sum).
    #[arg(long, default_value_t = 256)]
    child_capacity: u32,
    /// The crawler-child binary (default: beside this executable).
    #[arg(long)]
    child_bin: Option<PathBuf>,
    /// A child silent (no heartbeat) for this many seconds is killed and restarted.
    #[arg(long, default_value_t = 60)]
    hang_timeout_secs: u64,
    /// A child that crashes this many times in a row (each within 30 s of
    /// its start) is not restarted again: the supervisor hands in its
    /// results, leaves the crawl (its work goes to other supervisors) and
    /// exits 1. A crash loop means a broken node, not a bad URL (a URL
    /// that kills its child 3 times is failed on its own).
    #[arg(long, default_value_t = 8)]
    max_child_crashes: u32,
    /// Host override HOST:PORT:ADDR for the children (like curl --resolve).
    #[arg(long)]
    resolve: Vec<String>,
    /// Hosts file (`ADDR NAME...`) for the children.
    #[arg(long)]
    hosts_file: Vec<PathBuf>,
    #[command(flatten)]
    store: StoreArgs,
    #[command(flatten)]
    obs: ObsArgs,
    #[command(flatten)]
    cluster: ClusterArgs,
}

fn main() -> anyhow::Result<()> {
    shared::alloc::tune();
    shared::logging::init("supervisor");
    let args = Args::parse();
    let key = args.cluster.key(std::env::var_os(SECRET_ENV))?;
    // Read once; no child (nor anything else this process starts) inherits
    // it. Still single-threaded here, so changing the environment is sound.
    std::env::remove_var(SECRET_ENV);
    shared::runtime()?.block_on(run(args, key))
}

/// Once a second, this process's and this machine's CPU use as a gauge
/// line in the timing log: one supervisor runs per node, so the bottleneck
/// report gets every node's CPU from them.
async fn write_gauges(timing: TimingLog) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        tick.tick().await;
        timing.gauges(&profiling::gauge_values(true));
    }
}

/// How long a result waits for others to share its message to the dispatcher.
const RESULTS_FLUSH: Duration = Duration::from_millis(5);
/// How soon unsent results are tried again while the dispatcher link is down.
const RESULTS_RETRY: Duration = Duration::from_millis(100);
/// How long a leaving supervisor keeps handing in its last results.
const LEAVE_WAIT: Duration = Duration::from_secs(5);

/// Sleeps until `at`, or for ever when it is `None` (a disabled timer).
async fn sleep_until_some(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

async fn run(args: Args, key: ClusterKey) -> anyhow::Result<()> {
    if args.children == 0 {
        bail!("--children must be at least 1");
    }
    let debug = profiling::serve(
        args.obs.debug_addr,
        args.obs.debug_token.clone(),
        profiling::axum::Router::new(),
    )
    .await?;
    shared::metric_help::describe_all();
    let timing = TimingLog::open(&args.obs.timing_config(ROLE))?;
    timing.spawn_flusher();
    tokio::spawn(write_gauges(timing));
    let node = args.obs.node_name();
    let id = args
        .id
        .clone()
        .unwrap_or_else(|| format!("{node}-{}", std::process::id()));
    let me = ProcessInfo {
        role: ROLE.into(),
        node: node.clone(),
        pid: std::process::id(),
        debug_addr: Some(debug.addr.to_string()),
    };
    let intro = Me {
        id: id.clone(),
        capacity: args.child_capacity * args.children as u32,
        process: me,
    };
    if key.is_insecure() {
        tracing::warn!(supervisor = %id, "--insecure-cluster: no cluster secret is proven either way");
    }
    let mut link = DispatcherLink::connect(
        &args.dispatcher,
        key,
        Duration::from_secs(args.connect_timeout_secs),
        Duration::from_secs(args.dispatcher_silence_secs.max(2)),
    )
    .await?;
    link.set_patience(Duration::from_secs(args.reconnect_patience_secs));
    let debug_addr = debug.addr;
    tracing::info!(
        supervisor = %id,
        "connected to {}, debug on http://{debug_addr}",
        args.dispatcher
    );
    let policy = link.welcome(&intro.intro(Vec::new())).await?;

    let program = match &args.child_bin {
        Some(p) => p.clone(),
        None => std::env::current_exe()?
            .parent()
            .context("executable has no directory")?
            .join("crawler-child"),
    };
    let mut child = args.store.to_child();
    child.extend(args.obs.to_child());
    for r in &args.resolve {
        child.args.extend(["--resolve".into(), r.clone()]);
    }
    for h in &args.hosts_file {
        child
            .args
            .extend(["--hosts-file".into(), h.to_string_lossy().into_owned()]);
    }
    let spec = ChildSpec {
        program,
        args: child.args,
        env: child.env,
        policy,
        hang_timeout: Duration::from_secs(args.hang_timeout_secs),
        max_crashes: args.max_child_crashes.max(1),
    };
    let mut sup = Supervisor::start(spec, args.children, intro);
    // Our right to crawl runs from the Join the Welcome answered.
    sup.right.welcomed(link.answered_at());
    sup.tell_children();
    sup.serve(&mut link).await?;
    tracing::info!(supervisor = %id, "stopped");
    Ok(())
}

/// Who this supervisor is, for its introductions.
struct Me {
    id: String,
    capacity: u32,
    process: ProcessInfo,
}

impl Me {
    fn intro(&self, holding: Vec<WorkItem>) -> Intro {
        Intro {
            supervisor_id: self.id.clone(),
            capacity: self.capacity,
            process: self.process.clone(),
            holding,
        }
    }
}

/// In-memory state: which child holds which lease.
struct Supervisor {
    slots: Vec<mpsc::Sender<SlotCmd>>,
    events: mpsc::Receiver<SlotEvent>,
    in_flight: HashMap<u64, (usize, WorkItem, u32)>,
    /// Results until the dispatcher acknowledges them.
    outbox: Outbox,
    /// This node's right to crawl, renewed by acknowledgements.
    right: Right,
    /// The right's end as the slots pass it to new children.
    fence: Fence,
    /// How often to send a heartbeat (see `fence::beat_every`).
    beat_every: Duration,
    hasher: ahash::RandomState,
    intro: Me,
    /// Live children by slot, re-announced after a reconnect.
    children: BTreeMap<usize, ProcessInfo>,
}

impl Supervisor {
    fn start(spec: ChildSpec, children: usize, intro: Me) -> Supervisor {
        let (ev_tx, events) = mpsc::channel(4096);
        let fence = Fence::default();
        let timeout = Duration::from_millis(spec.policy.heartbeat_timeout_ms.max(1000));
        let slots = (0..children)
            .map(|slot| {
                let (tx, rx) = mpsc::channel(1024);
                tokio::spawn(child::run_slot(
                    slot,
                    spec.clone(),
                    fence.clone(),
                    rx,
                    ev_tx.clone(),
                ));
                tx
            })
            .collect();
        Supervisor {
            slots,
            events,
            in_flight: HashMap::new(),
            outbox: Outbox::default(),
            right: Right::new(timeout),
            fence,
            beat_every: fence::beat_every(timeout),
            // Fixed keys: a domain maps to the same slot for the whole run.
            hasher: ahash::RandomState::with_seeds(1, 2, 3, 4),
            intro,
            children: BTreeMap::new(),
        }
    }

    /// An introduction listing every URL still held: with the children,
    /// or finished and waiting in the outbox (sent or not).
    fn intro(&self) -> Intro {
        let mut holding: Vec<WorkItem> = self.in_flight.values().map(|(_, item, _)| item.clone()).collect();
        holding.extend(self.outbox.as_items());
        self.intro.intro(holding)
    }

    fn slot_of(&self, domain: &str) -> usize {
        (self.hasher.hash_one(domain) % self.slots.len() as u64) as usize
    }

    async fn assign(&mut self, items: Vec<WorkItem>, attempt: u32) {
        let mut per_slot: Vec<Vec<WorkItem>> = vec![Vec::new(); self.slots.len()];
        for item in items {
            let slot = self.slot_of(&item.domain);
            self.in_flight.insert(item.lease, (slot, item.clone(), attempt));
            per_slot[slot].push(item);
        }
        for (slot, items) in per_slot.into_iter().enumerate() {
            if !items.is_empty() {
                let _ = self.slots[slot].send(SlotCmd::Work(items)).await;
            }
        }
    }

    /// The dispatcher moves these domains away: each one's child hands
    /// back what it has not started.
    async fn recall(&mut self, domains: Vec<String>) {
        let mut per_slot: Vec<Vec<String>> = vec![Vec::new(); self.slots.len()];
        for d in domains {
            let slot = self.slot_of(&d);
            per_slot[slot].push(d);
        }
        for (slot, domains) in per_slot.into_iter().enumerate() {
            if !domains.is_empty() {
                let _ = self.slots[slot].send(SlotCmd::Recall(domains)).await;
            }
        }
    }

    /// URLs of a dead child go to its successor, unless they keep killing it.
    async fn reassign_lost(&mut self, slot: usize, why: &str) {
        let lost: Vec<u64> = self
            .in_flight
            .iter()
            .filter(|(_, (s, _, _))| *s == slot)
            .map(|(lease, _)| *lease)
            .collect();
        let mut retry = Vec::new();
        for lease in lost {
            let Some((_, item, attempt)) = self.in_flight.remove(&lease) else {
                continue;
            };
            if attempt + 1 >= MAX_CHILD_ATTEMPTS {
                self.outbox.push(CrawlResult {
                    lease,
                    url: item.url,
                    domain: item.domain,
                    depth: item.depth,
                    outcome: Outcome::failed(
                        FailureKind::ChildCrashed,
                        format!("crawler-child died {MAX_CHILD_ATTEMPTS} times holding it: {why}"),
                    ),
                    outlinks: Vec::new(),
                    sent_ms: link::protocol::now_ms(),
                });
            } else {
                retry.push((item, attempt + 1));
            }
        }
        for (item, attempt) in retry {
            self.assign(vec![item], attempt).await;
        }
    }

    /// The right moved: the shared copy new children get, and the running
    /// children (told only when it moved enough; a slot too busy to take
    /// the word now gets the next one).
    fn tell_children(&mut self) {
        self.fence.set(self.right.until_mono_ms());
        if let Some(until) = self.right.news_for_children() {
            for s in &self.slots {
                let _ = s.try_send(SlotCmd::Fence(until));
            }
        }
    }

    /// The dispatcher welcomed us on a new connection: what it never
    /// acknowledged on the old one goes again, and our right runs from our
    /// Join.
    async fn welcomed(&mut self, link: &mut DispatcherLink) {
        self.outbox.reconnected();
        self.right.welcomed(link.answered_at());
        self.tell_children();
        self.announce_children(link).await;
        self.flush(link).await;
    }

    /// A message went out: its acknowledgement will renew our right.
    fn sent(&mut self, link: &DispatcherLink) {
        self.right.sent(link.last_seq(), std::time::Instant::now());
    }

    async fn serve(&mut self, link: &mut DispatcherLink) -> anyhow::Result<()> {
        // Results wait at most RESULTS_FLUSH for others to share their
        // message: every millisecond is a millisecond more each lease is
        // held, so more credit for the same rate (Little's law). The timer
        // runs only while results wait, so an idle supervisor sleeps.
        let mut flush_at: Option<tokio::time::Instant> = None;
        // Beats often enough that acknowledgements keep our right fresh.
        let mut beat = tokio::time::interval(self.beat_every);
        beat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut stopping = false;
        // Set when stopping starts; see STOP_WAIT.
        let mut stop_by: Option<tokio::time::Instant> = None;
        let mut gave_up: Option<anyhow::Error> = None;
        let mut stopped_slots = 0;
        let signalled = shared::shutdown::signalled();
        tokio::pin!(signalled);
        loop {
            if stopping && stop_by.is_none() {
                stop_by = Some(tokio::time::Instant::now() + STOP_WAIT);
            }
            let stop_deadline =
                stop_by.unwrap_or_else(|| tokio::time::Instant::now() + Duration::from_secs(3600));
            tokio::select! {
                _ = tokio::time::sleep_until(stop_deadline), if stop_by.is_some() => {
                    tracing::warn!(
                        running = self.slots.len() - stopped_slots,
                        slots = self.slots.len(),
                        waited = ?STOP_WAIT,
                        "child slots still running after the stop; leaving anyway"
                    );
                    return self.leave(link, gave_up).await;
                }
                _ = &mut signalled, if !stopping => {
                    tracing::info!("signalled; draining children");
                    stopping = true;
                    self.stop_slots().await;
                }
                msg = link.recv() => match msg {
                    Some(ToSupervisor::Work(items)) => self.assign(items, 0).await,
                    Some(ToSupervisor::Ack { seq }) => {
                        let acked = self.outbox.acked(seq);
                        metrics::counter!("crawler_supervisor_results_acked_total").increment(acked as u64);
                        self.right.acked(seq);
                        self.tell_children();
                        if self.outbox.waiting() > 0 {
                            flush_at.get_or_insert_with(tokio::time::Instant::now);
                        }
                    }
                    Some(ToSupervisor::Recall { domains }) => self.recall(domains).await,
                    Some(ToSupervisor::Stop) if !stopping => {
                        stopping = true;
                        self.stop_slots().await;
                    }
                    Some(ToSupervisor::Reintroduce) => link.reintroduce().await,
                    Some(ToSupervisor::Challenge { nonce }) => link.answer(nonce, &self.intro()).await,
                    Some(ToSupervisor::Refused(why)) => link.refused(why),
                    Some(ToSupervisor::Welcome { .. }) => self.welcomed(link).await,
                    // (The link opens sealed messages; none reaches here.)
                    Some(
                        ToSupervisor::Stop
                        | ToSupervisor::Heartbeat
                        | ToSupervisor::Farewell
                        | ToSupervisor::Sealed { .. },
                    )
                    | None => {}
                },
                ev = self.events.recv() => match ev {
                    Some(SlotEvent::Message(_, FromChild::Result(r))) => {
                        self.in_flight.remove(&r.lease);
                        if matches!(r.outcome, Outcome::Failed { kind: FailureKind::Fenced, .. }) {
                            metrics::counter!("crawler_supervisor_fenced_total").increment(1);
                        }
                        self.outbox.push(r);
                        flush_at.get_or_insert_with(|| tokio::time::Instant::now() + RESULTS_FLUSH);
                    }
                    Some(SlotEvent::Message(slot, FromChild::Ready(process))) => {
                        self.children.insert(slot, process.clone());
                        if link.is_up() {
                            link.send(&ToDispatcher::Child { slot: slot as u32, process, alive: true }).await;
                        }
                    }
                    Some(SlotEvent::Message(_, FromChild::Heartbeat)) => {}
                    Some(SlotEvent::Lost { slot, why }) => {
                        self.children.remove(&slot);
                        if !stopping {
                            self.reassign_lost(slot, &why).await;
                        }
                    }
                    Some(SlotEvent::GaveUp { slot, why }) => {
                        // What it held stays in flight: our Bye makes the
                        // dispatcher re-queue it for other supervisors.
                        self.children.remove(&slot);
                        stopped_slots += 1;
                        if gave_up.is_none() {
                            tracing::error!(slot, why = %why, "LEAVING THE CRAWL: a child slot keeps crashing");
                            gave_up = Some(anyhow::anyhow!("child slot {slot} keeps crashing: {why}"));
                        }
                        if !stopping {
                            stopping = true;
                            self.stop_slots().await;
                        }
                        if stopped_slots == self.slots.len() {
                            return self.leave(link, gave_up).await;
                        }
                    }
                    Some(SlotEvent::Stopped) => {
                        stopped_slots += 1;
                        if stopped_slots == self.slots.len() {
                            return self.leave(link, gave_up).await;
                        }
                    }
                    None => bail!("all child slots ended"),
                },
                _ = sleep_until_some(flush_at) => {
                    self.flush(link).await;
                    // Still there when the dispatcher link is down (or the
                    // window is full): try again later.
                    flush_at = (self.outbox.waiting() > 0)
                        .then(|| tokio::time::Instant::now() + RESULTS_RETRY);
                }
                _ = beat.tick() => {
                    metrics::gauge!("crawler_supervisor_in_flight").set(self.in_flight.len() as f64);
                    metrics::gauge!("crawler_supervisor_results_unacked").set(self.outbox.unacked() as f64);
                    metrics::gauge!("crawler_supervisor_results_waiting").set(self.outbox.waiting() as f64);
                    metrics::gauge!("crawler_supervisor_right_seconds").set(self.right.left().as_secs_f64());
                    if self.right.just_lapsed() {
                        tracing::warn!(
                            held = self.in_flight.len(),
                            unreported = self.outbox.waiting() + self.outbox.unacked(),
                            "RIGHT TO CRAWL RAN OUT: no word from the dispatcher; no request starts until it is back (held URLs are handed back, results kept)"
                        );
                    }
                    if link.is_up() {
                        let beat = ToDispatcher::Heartbeat {
                            holding: self.held_leases(),
                        };
                        if link.send(&beat).await {
                            self.sent(link);
                        }
                    }
                    if gave_up.is_none() {
                        if let Err(e) = link.maintain().await {
                            tracing::error!("{e:#}; draining children");
                            gave_up = Some(e);
                            if !stopping {
                                stopping = true;
                                self.stop_slots().await;
                            }
                        }
                    }
                }
            }
        }
    }

    /// Every lease this supervisor holds: with its children, or finished
    /// and waiting for the dispatcher's acknowledgement. Heartbeats carry
    /// them so the dispatcher renews them.
    fn held_leases(&self) -> Vec<u64> {
        let mut held: Vec<u64> = self.in_flight.keys().copied().collect();
        held.extend(self.outbox.results().map(|r| r.lease));
        held
    }

    /// Tells every slot to stop. A slot too busy to take the command soon
    /// is left to the stop deadline.
    async fn stop_slots(&self) {
        for s in &self.slots {
            let _ = tokio::time::timeout(Duration::from_secs(1), s.send(SlotCmd::Stop)).await;
        }
    }

    /// After a (re)join: tells the dispatcher which children run where.
    async fn announce_children(&self, link: &mut DispatcherLink) {
        for (slot, process) in &self.children {
            let msg = ToDispatcher::Child {
                slot: *slot as u32,
                process: process.clone(),
                alive: true,
            };
            link.send(&msg).await;
        }
    }

    /// Every child has exited: hand in the last results and say Bye (the
    /// dispatcher then re-queues whatever we still held), then exit with
    /// `gave_up` as the error, if any.
    async fn leave(
        &mut self,
        link: &mut DispatcherLink,
        gave_up: Option<anyhow::Error>,
    ) -> anyhow::Result<()> {
        self.hand_in(link, LEAVE_WAIT).await;
        if self.outbox.waiting() > 0 {
            // Their pages are stored; the URLs stay queued in the stored
            // frontier and a resumed crawl finds the pages already there.
            tracing::warn!(
                unreported = self.outbox.waiting(),
                "dispatcher unreachable; results not reported"
            );
        } else if link.send(&ToDispatcher::Bye).await && link.await_farewell(Duration::from_secs(5)).await {
            // The Farewell comes after everything sent before the Bye was read.
            self.outbox.all_acked();
        }
        gave_up.map_or(Ok(()), Err)
    }

    /// Sends every waiting result, window by window, taking the
    /// acknowledgements that open the window, for at most `patience`.
    async fn hand_in(&mut self, link: &mut DispatcherLink, patience: Duration) {
        let deadline = tokio::time::Instant::now() + patience;
        loop {
            self.flush(link).await;
            if self.outbox.waiting() == 0 || !link.is_up() {
                return;
            }
            match tokio::time::timeout_at(deadline, link.recv()).await {
                Ok(Some(ToSupervisor::Ack { seq })) => {
                    self.outbox.acked(seq);
                }
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => return,
            }
        }
    }

    /// Sends the waiting results, in messages of bounded size and no more
    /// than the window unacknowledged; keeps what could not be sent.
    async fn flush(&mut self, link: &mut DispatcherLink) {
        if self.outbox.waiting() == 0 || !link.is_up() {
            return;
        }
        let mut batches = self.outbox.take_batches().into_iter();
        while let Some(results) = batches.next() {
            let n = results.len();
            let msg = ToDispatcher::Results(results);
            let sent = link.send(&msg).await;
            let ToDispatcher::Results(results) = msg else {
                return;
            };
            if sent {
                metrics::counter!("crawler_supervisor_results_total").increment(n as u64);
                self.sent(link);
                self.outbox.sent(link.last_seq(), results);
                continue;
            }
            let mut rest = vec![results];
            rest.extend(batches);
            self.outbox.unsent(rest);
            return;
        }
    }
}
