//! Runs the real crawler for tests and benchmarks: store servers (through
//! `scripts/store.sh`, the same script developers use), one dispatcher and
//! N supervisors (which start their own children), all as real processes
//! talking over real sockets; optionally each in a network namespace of a
//! [`crate::netns::Net`] ([`ClusterSpec::netns`]), so they talk over real
//! links that a test can cut or slow down.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use anyhow::{bail, Context};
use bson::{doc, Document};
use futures::future::BoxFuture;
use futures::TryStreamExt;
use tokio::process::{Child, Command};

/// The repository root (this crate lives in `tests/`).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

/// Where the crawler binaries are: `$CRAWLER_BIN_DIR`, else `target/release`.
pub fn bin_dir() -> PathBuf {
    std::env::var_os("CRAWLER_BIN_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("target/release"))
}

pub fn bin(name: &str) -> anyhow::Result<PathBuf> {
    let p = bin_dir().join(name);
    if !p.exists() {
        bail!(
            "{} not found: build the binaries first (cargo build --release --workspace --bins --features crawl-tests/fault-injection)",
            p.display()
        );
    }
    Ok(p)
}

/// Lowest port of the kernel's ephemeral range (`ip_local_port_range`).
const EPHEMERAL_LOW_DEFAULT: u16 = 32768;
/// [`free_port`] hands out ports from here up to the ephemeral range.
const TEST_PORTS_FROM: u16 = 20000;

/// The first port of the kernel's ephemeral range, from which `bind(port 0)`
/// and outgoing connections take their ports (32768 when it cannot be read).
pub fn ephemeral_port_low() -> u16 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(EPHEMERAL_LOW_DEFAULT)
}

/// A TCP port on 127.0.0.1 that is free now and that nobody else will be
/// handed by the kernel meanwhile: for a server the test starts later.
///
/// Asking the kernel (`bind` to port 0, read it, close it) is not enough:
/// the dispatcher binds its port only seconds later (after loading the
/// store), and meanwhile every other process of the tests running in
/// parallel binds its debug server to port 0, and every outgoing
/// connection takes a local port, all from the same ephemeral range. The
/// kernel can give our port to one of them, and the dispatcher then fails
/// to bind it (or a client connects to the wrong server). So ports come
/// from *below* the ephemeral range (`[20000, low)`), which the kernel
/// never hands out by itself. Each test process starts at an offset
/// derived from its pid (so parallel test binaries spread out) and walks
/// the range with a process-wide counter, so one process never hands out
/// the same port twice; a candidate something already holds is skipped.
/// Falls back to asking the kernel only if that range is empty or full.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);

    let low = ephemeral_port_low();
    let from = if low > TEST_PORTS_FROM {
        TEST_PORTS_FROM
    } else {
        1024
    };
    let span = u32::from(low.saturating_sub(from));
    if span > 0 {
        let offset = std::process::id().wrapping_mul(2_654_435_761) % span;
        for _ in 0..span {
            let k = NEXT.fetch_add(1, Ordering::Relaxed);
            let port = from + ((offset + k) % span) as u16;
            if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
                return port;
            }
        }
    }
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or(0)
}

/// Two free ports in a row, `p` and `p + 1`, both reserved like
/// [`free_port`] (for a process whose second port is its first plus one).
pub fn free_port_pair() -> u16 {
    for _ in 0..100 {
        let p = free_port();
        if free_port() == p.wrapping_add(1) {
            return p;
        }
    }
    panic!("no two consecutive free ports below the ephemeral range");
}

/// A MongoDB-compatible server for one test; stopped on drop.
pub struct StoreServer {
    state: tempfile::TempDir,
    pub uri: String,
    /// `mongod` or `nx-27017`.
    pub kind: String,
    /// Set by [`StoreServer::start_on`]: the store as seen on another address.
    exposed: Option<crate::relay::Relay>,
}

impl StoreServer {
    /// A store that keeps its data in memory (nx-27017) or in the state dir (mongod).
    pub fn start() -> anyhow::Result<StoreServer> {
        Self::launch(tempfile::tempdir()?, free_port(), false)
    }

    /// A store whose data survives [`StoreServer::stop`] and [`StoreServer::restart`].
    pub fn start_persistent() -> anyhow::Result<StoreServer> {
        Self::launch(tempfile::tempdir()?, free_port(), true)
    }

    /// [`StoreServer::start`], reachable at `addr` (and [`StoreServer::uri`]
    /// naming it) rather than at 127.0.0.1: for crawlers in network
    /// namespaces, which cannot reach the root namespace's loopback; `addr`
    /// is then the bridge's ([`crate::netns::Net::host_addr`]).
    ///
    /// `scripts/store.sh` binds 127.0.0.1 only, so the store still listens
    /// there, and a relay without delay ([`crate::relay::Relay`]) forwards
    /// `addr`, on the store's port, to it.
    pub fn start_on(addr: IpAddr) -> anyhow::Result<StoreServer> {
        let mut store = Self::start()?;
        store.expose_on(addr)?;
        Ok(store)
    }

    /// [`StoreServer::start_persistent`], reachable at `addr` as with
    /// [`StoreServer::start_on`].
    pub fn start_persistent_on(addr: IpAddr) -> anyhow::Result<StoreServer> {
        let mut store = Self::start_persistent()?;
        store.expose_on(addr)?;
        Ok(store)
    }

    fn expose_on(&mut self, addr: IpAddr) -> anyhow::Result<()> {
        let port = self.port()?;
        let relay = crate::relay::Relay::start(
            SocketAddr::new(addr, port),
            SocketAddr::from((Ipv4Addr::LOCALHOST, port)),
            Duration::ZERO,
        )
        .context("exposing the store")?;
        self.uri = format!("mongodb://{}", SocketAddr::new(addr, port));
        self.exposed = Some(relay);
        Ok(())
    }

    fn port(&self) -> anyhow::Result<u16> {
        self.uri
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .with_context(|| format!("no port in {}", self.uri))
    }

    /// Starts a stopped persistent store again on the same port, with its
    /// data (and on the same address, after [`StoreServer::start_persistent_on`]:
    /// the relay dials the store anew for each connection).
    pub fn restart(&mut self) -> anyhow::Result<()> {
        let port = self.port()?;
        let state = std::mem::replace(&mut self.state, tempfile::tempdir()?);
        let (uri, exposed) = (self.uri.clone(), self.exposed.take());
        *self = Self::launch(state, port, true)?;
        if exposed.is_some() {
            self.uri = uri;
            self.exposed = exposed;
        }
        Ok(())
    }

    /// Always hands store.sh a port from [`free_port`] (below the ephemeral
    /// range, never the same twice in this process) rather than letting it
    /// pick one, so the store's port cannot collide with the dispatcher's.
    fn launch(state: tempfile::TempDir, port: u16, persist: bool) -> anyhow::Result<StoreServer> {
        let mut cmd = std::process::Command::new("bash");
        cmd.arg(repo_root().join("scripts/store.sh"))
            .arg("start")
            .arg(state.path())
            .arg(port.to_string());
        if persist {
            cmd.arg("--persist");
        }
        let out = cmd
            .stderr(Stdio::inherit())
            .output()
            .context("running scripts/store.sh")?;
        if !out.status.success() {
            bail!("scripts/store.sh start failed ({})", out.status);
        }
        let uri = String::from_utf8_lossy(&out.stdout).trim().to_string();
        let kind = std::fs::read_to_string(state.path().join("kind"))?
            .trim()
            .to_string();
        Ok(StoreServer {
            state,
            uri,
            kind,
            exposed: None,
        })
    }

    pub fn stop(&self) {
        let _ = std::process::Command::new("bash")
            .arg(repo_root().join("scripts/store.sh"))
            .arg("stop")
            .arg(self.state.path())
            .status();
    }

    /// A client of this server (boxed: see the crate's doc).
    pub fn client(&self) -> BoxFuture<'_, anyhow::Result<mongodb::Client>> {
        Box::pin(async move {
            mongodb::Client::with_uri_str(&self.uri)
                .await
                .map_err(anyhow::Error::from)
        })
    }
}

impl Drop for StoreServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// How to run one crawl.
#[derive(Clone, Debug)]
pub struct ClusterSpec {
    pub mongo_uri: String,
    pub robots_uri: Option<String>,
    pub db: String,
    pub robots_db: String,
    pub seeds_file: PathBuf,
    pub hosts_file: Option<PathBuf>,
    pub supervisors: usize,
    pub children: usize,
    /// Extra dispatcher flags (policy, limits).
    pub dispatcher_args: Vec<String>,
    /// Timing logs go here when set.
    pub timing_dir: Option<PathBuf>,
    /// Extra environment for the supervisors (and so their children).
    pub env: Vec<(String, String)>,
    /// Extra environment for the dispatcher.
    pub dispatcher_env: Vec<(String, String)>,
    /// The dispatcher's log (its stderr) goes to this file when set, for a
    /// test to read; otherwise to the test's stderr.
    pub dispatcher_log: Option<PathBuf>,
    /// Extra supervisor flags.
    pub supervisor_args: Vec<String>,
    /// More flags for supervisor `i` only (index `i` of this list).
    pub per_supervisor_args: Vec<Vec<String>>,
    /// The cluster secret the dispatcher and the supervisors share, random
    /// per spec; it reaches them in their environment (`CRAWLER_CLUSTER_SECRET`).
    pub cluster_secret: String,
    /// `--min-supervisors` for the dispatcher (default: the supervisors
    /// [`spawn_crawl`] starts, `supervisors - late_supervisors`); a test
    /// that joins supervisors of its own sets it higher.
    pub min_supervisors: Option<usize>,
    /// Where the processes run when not all in the root namespace: the
    /// dispatcher in one network namespace, each supervisor (and so its
    /// children) in another. `None`: all on 127.0.0.1, as before.
    pub netns: Option<NetPlacement>,
    /// The last this many of `supervisors` are not started by
    /// [`spawn_crawl`]: the test starts them with
    /// [`RunningCrawl::start_late_supervisor`], to join a running crawl.
    pub late_supervisors: usize,
}

/// Where [`spawn_crawl`] runs the dispatcher and the supervisors when they
/// run in network namespaces ([`crate::netns::Net`]).
#[derive(Clone, Debug)]
pub struct NetPlacement {
    /// The dispatcher's namespace.
    pub dispatcher_ns: String,
    /// The dispatcher binds `tcp://<dispatcher_addr>:<dispatcher_port>`:
    /// its namespace's address, which the supervisors reach over the bridge.
    pub dispatcher_addr: Ipv4Addr,
    /// Chosen up front, so that a relay to the dispatcher can be started
    /// before the crawl ([`NetPlacement::dispatcher_socket`]).
    pub dispatcher_port: u16,
    /// Supervisor `i` runs in `supervisor_ns[i]`.
    pub supervisor_ns: Vec<String>,
    /// What the supervisors dial instead of the dispatcher's endpoint
    /// (`tcp://host:port` of a [`crate::relay::Relay`] that adds latency).
    pub supervisor_endpoint: Option<String>,
}

impl NetPlacement {
    /// The dispatcher in node `dispatcher` of `net`, supervisor `i` in node
    /// `supervisors[i]`, connecting straight to the dispatcher.
    ///
    /// # Panics
    /// If a node is not in `net`.
    pub fn new(net: &crate::netns::Net, dispatcher: &str, supervisors: &[&str]) -> NetPlacement {
        NetPlacement {
            dispatcher_ns: net.ns(dispatcher).to_string(),
            dispatcher_addr: net.addr(dispatcher),
            dispatcher_port: free_port(),
            supervisor_ns: supervisors.iter().map(|n| net.ns(n).to_string()).collect(),
            supervisor_endpoint: None,
        }
    }

    /// The dispatcher's listening address (a relay's target).
    pub fn dispatcher_socket(&self) -> SocketAddr {
        SocketAddr::from((self.dispatcher_addr, self.dispatcher_port))
    }

    /// The dispatcher's ZeroMQ endpoint.
    pub fn dispatcher_endpoint(&self) -> String {
        format!("tcp://{}", self.dispatcher_socket())
    }
}

impl ClusterSpec {
    pub fn new(mongo_uri: &str, seeds_file: &Path) -> ClusterSpec {
        ClusterSpec {
            mongo_uri: mongo_uri.to_string(),
            robots_uri: None,
            db: "crawler".into(),
            robots_db: "crawler_robots".into(),
            seeds_file: seeds_file.to_path_buf(),
            hosts_file: None,
            supervisors: 2,
            children: 2,
            dispatcher_args: Vec::new(),
            timing_dir: None,
            env: Vec::new(),
            dispatcher_env: Vec::new(),
            dispatcher_log: None,
            supervisor_args: Vec::new(),
            per_supervisor_args: Vec::new(),
            cluster_secret: random_secret(),
            min_supervisors: None,
            netns: None,
            late_supervisors: 0,
        }
    }

    /// A spec crawling a synthetic web: its seeds, and a hosts file mapping
    /// every name it serves to 127.0.0.1, written into `dir`.
    pub fn for_web(
        mongo_uri: &str,
        server: &crate::web::WebServer,
        dir: &Path,
    ) -> anyhow::Result<ClusterSpec> {
        Self::for_web_at(mongo_uri, server, dir, IpAddr::V4(Ipv4Addr::LOCALHOST))
    }

    /// [`ClusterSpec::for_web`] with the names mapped to `addr`, where the
    /// server listens (a bridge's address, for crawlers in namespaces). The
    /// children trust hosts-file entries, so a private `addr` needs no
    /// `--allow-private-networks`.
    pub fn for_web_at(
        mongo_uri: &str,
        server: &crate::web::WebServer,
        dir: &Path,
        addr: IpAddr,
    ) -> anyhow::Result<ClusterSpec> {
        let web = server.web();
        let seeds = write_lines(dir, "seeds.txt", &web.seed_urls())?;
        let names: Vec<String> = web.host_names().iter().map(|h| format!("{addr} {h}")).collect();
        let mut spec = ClusterSpec::new(mongo_uri, &seeds);
        spec.hosts_file = Some(write_lines(dir, "hosts", &names)?);
        Ok(spec)
    }

    /// The run's debug token file (`shared::debug_token`), beside the
    /// seeds: the processes write it, crawlctl and cluster-profile read it.
    pub fn debug_token_file(&self) -> PathBuf {
        self.run_dir().join(shared::debug_token::DEFAULT_FILE)
    }

    /// The run's folder: the seeds file's.
    pub fn run_dir(&self) -> PathBuf {
        self.seeds_file
            .parent()
            .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
    }

    /// The dispatcher's command line, but for its program name: the spec's
    /// seeds, stores and flags, bound to `endpoint`.
    pub fn dispatcher_argv(&self, endpoint: &str) -> Vec<String> {
        let min_supervisors = self
            .min_supervisors
            .unwrap_or(self.supervisors - self.late_supervisors.min(self.supervisors));
        let mut argv = vec![
            "--bind".to_string(),
            endpoint.to_string(),
            "--seeds".to_string(),
            self.seeds_file.to_string_lossy().into_owned(),
            "--min-supervisors".to_string(),
            min_supervisors.to_string(),
        ];
        argv.extend(self.store_args());
        argv.extend(self.dispatcher_args.iter().cloned());
        argv
    }

    /// Supervisor `i`'s command line, but for its program name: id `sup<i>`,
    /// dialling `endpoint`.
    pub fn supervisor_argv(&self, endpoint: &str, i: usize) -> Vec<String> {
        let mut argv = vec![
            "--dispatcher".to_string(),
            endpoint.to_string(),
            "--id".to_string(),
            format!("sup{i}"),
            "--children".to_string(),
            self.children.to_string(),
        ];
        argv.extend(self.store_args());
        argv.extend(self.supervisor_args.iter().cloned());
        argv.extend(self.per_supervisor_args.get(i).into_iter().flatten().cloned());
        if let Some(h) = &self.hosts_file {
            argv.push("--hosts-file".to_string());
            argv.push(h.to_string_lossy().into_owned());
        }
        argv
    }

    fn store_args(&self) -> Vec<String> {
        let mut v = vec![
            "--mongo-uri".into(),
            self.mongo_uri.clone(),
            "--db".into(),
            self.db.clone(),
            "--robots-db".into(),
            self.robots_db.clone(),
        ];
        if let Some(r) = &self.robots_uri {
            v.extend(["--robots-uri".into(), r.clone()]);
        }
        if let Some(dir) = &self.timing_dir {
            v.extend(["--timing-log".into(), format!("{}/", dir.display())]);
        }
        v
    }
}

/// A fresh cluster secret: 32 random bytes in hex.
pub fn random_secret() -> String {
    use rand::RngCore;
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// How a crawl ended.
#[derive(Debug)]
pub struct CrawlRun {
    pub dispatcher: ExitStatus,
    pub supervisors: Vec<ExitStatus>,
    /// The dispatcher's summary line (JSON).
    pub summary: serde_json::Value,
    pub wall: Duration,
}

/// Runs dispatcher + supervisors to the end of the crawl (or `timeout`).
pub async fn run_crawl(spec: &ClusterSpec, timeout: Duration) -> anyhow::Result<CrawlRun> {
    spawn_crawl(spec).await?.wait(timeout).await
}

/// A crawl started by [`spawn_crawl`] and still running: poke at its processes (debug
/// endpoints, metrics, signals, kills) while it crawls, then [`RunningCrawl::wait`] for it.
/// Dropping it kills the dispatcher and the supervisors.
pub struct RunningCrawl {
    spec: ClusterSpec,
    endpoint: String,
    started: std::time::Instant,
    dispatcher: Child,
    /// `None`: a late supervisor not started yet ([`ClusterSpec::late_supervisors`]).
    supervisors: Vec<Option<Child>>,
    /// Reads the dispatcher's stdout as it comes, so the pipe never fills up.
    stdout: tokio::task::JoinHandle<std::io::Result<String>>,
    /// The dispatcher's debug endpoint (`/debug/cluster`, `/metrics`, `/debug/pprof/...`)
    /// when `--debug-addr` is among [`ClusterSpec::dispatcher_args`] (otherwise the
    /// dispatcher picks a free port and only prints it on stderr). With
    /// [`ClusterSpec::netns`], this address is in the dispatcher's namespace
    /// (its 127.0.0.1 is not the test's).
    pub debug_addr: Option<std::net::SocketAddr>,
}

/// Starts dispatcher + supervisors and returns without waiting for the crawl.
/// Boxed: see the crate's doc.
pub fn spawn_crawl(spec: &ClusterSpec) -> BoxFuture<'_, anyhow::Result<RunningCrawl>> {
    Box::pin(start_processes(spec))
}

async fn start_processes(spec: &ClusterSpec) -> anyhow::Result<RunningCrawl> {
    let started = std::time::Instant::now();
    let debug_addr = flag_value(&spec.dispatcher_args, "--debug-addr")
        .map(|a| a.parse().with_context(|| format!("--debug-addr {a}")))
        .transpose()?;
    let endpoint = match &spec.netns {
        Some(place) => {
            if place.supervisor_ns.len() < spec.supervisors {
                bail!(
                    "NetPlacement names {} supervisor namespaces for {} supervisors",
                    place.supervisor_ns.len(),
                    spec.supervisors
                );
            }
            place.dispatcher_endpoint()
        }
        None => format!("tcp://127.0.0.1:{}", free_port()),
    };
    if spec.late_supervisors > spec.supervisors {
        bail!(
            "{} late supervisors of {}",
            spec.late_supervisors,
            spec.supervisors
        );
    }
    let (dispatcher, stdout) = start_dispatcher(spec, &endpoint)?;
    let now = spec.supervisors - spec.late_supervisors;
    let supervisors = (0..spec.supervisors)
        .map(|i| {
            (i < now)
                .then(|| start_supervisor(spec, &endpoint, i))
                .transpose()
        })
        .collect::<anyhow::Result<_>>()?;
    Ok(RunningCrawl {
        spec: spec.clone(),
        endpoint,
        started,
        dispatcher,
        supervisors,
        stdout,
        debug_addr,
    })
}

type StdoutReader = tokio::task::JoinHandle<std::io::Result<String>>;

/// `program`, in namespace `ns` when given (`ip netns exec`, which execs
/// it: the child's pid is the program's, so kills and `kill_on_drop` reach it).
fn command_in(ns: Option<&str>, program: PathBuf) -> Command {
    match ns {
        Some(ns) => crate::netns::ns_command(ns, program),
        None => Command::new(program),
    }
}

fn start_dispatcher(spec: &ClusterSpec, endpoint: &str) -> anyhow::Result<(Child, StdoutReader)> {
    let ns = spec.netns.as_ref().map(|p| p.dispatcher_ns.as_str());
    let stderr = match &spec.dispatcher_log {
        Some(path) => Stdio::from(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .with_context(|| format!("opening {}", path.display()))?,
        ),
        None => Stdio::inherit(),
    };
    let mut dispatcher = command_in(ns, bin("dispatcher")?)
        .args(spec.dispatcher_argv(endpoint))
        .env(link::cluster_auth::SECRET_ENV, &spec.cluster_secret)
        .env(shared::debug_token::TOKEN_FILE_ENV, spec.debug_token_file())
        .envs(spec.dispatcher_env.iter().map(|(k, v)| (k, v)))
        .stdout(Stdio::piped())
        .stderr(stderr)
        .kill_on_drop(true)
        .spawn()
        .context("starting dispatcher")?;
    let mut stdout = dispatcher.stdout.take().context("dispatcher stdout")?;
    let reader = tokio::spawn(async move {
        use tokio::io::AsyncReadExt;
        let mut out = String::new();
        stdout.read_to_string(&mut out).await?;
        Ok(out)
    });
    Ok((dispatcher, reader))
}

/// Starts supervisor `i`; `endpoint` is the dispatcher's, which it dials
/// unless the placement names another ([`NetPlacement::supervisor_endpoint`]).
fn start_supervisor(spec: &ClusterSpec, endpoint: &str, i: usize) -> anyhow::Result<Child> {
    let (ns, endpoint) = match &spec.netns {
        Some(place) => (
            Some(
                place
                    .supervisor_ns
                    .get(i)
                    .with_context(|| format!("no namespace for supervisor {i}"))?
                    .as_str(),
            ),
            place.supervisor_endpoint.as_deref().unwrap_or(endpoint),
        ),
        None => (None, endpoint),
    };
    let mut cmd = command_in(ns, bin("supervisor")?);
    cmd.args(spec.supervisor_argv(endpoint, i))
        .env(link::cluster_auth::SECRET_ENV, &spec.cluster_secret)
        .env(shared::debug_token::TOKEN_FILE_ENV, spec.debug_token_file())
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .kill_on_drop(true);
    cmd.spawn().context("starting supervisor")
}

/// Sends `signal` to `pid` (ignoring a process that is already gone).
pub fn signal(pid: u32, signal: i32) {
    // SAFETY: kill(2) has no memory-safety preconditions.
    unsafe {
        libc::kill(pid as i32, signal);
    }
}

impl RunningCrawl {
    /// SIGKILLs the dispatcher (and reaps it).
    pub async fn kill_dispatcher(&mut self) -> anyhow::Result<()> {
        self.dispatcher.kill().await?;
        Ok(())
    }

    /// Starts the dispatcher again with the same command line.
    pub fn restart_dispatcher(&mut self) -> anyhow::Result<()> {
        let (dispatcher, stdout) = start_dispatcher(&self.spec, &self.endpoint)?;
        self.dispatcher = dispatcher;
        self.stdout.abort();
        self.stdout = stdout;
        Ok(())
    }

    /// SIGKILLs supervisor `i` (its children die with it) and reaps it.
    pub async fn kill_supervisor(&mut self, i: usize) -> anyhow::Result<()> {
        match self.supervisors.get_mut(i) {
            Some(Some(sup)) => Ok(sup.kill().await?),
            _ => bail!("supervisor {i} was never started"),
        }
    }

    /// Starts supervisor `i` again with the same command line (and id).
    pub fn restart_supervisor(&mut self, i: usize) -> anyhow::Result<()> {
        let sup = self
            .supervisors
            .get_mut(i)
            .with_context(|| format!("no supervisor {i}"))?;
        *sup = Some(start_supervisor(&self.spec, &self.endpoint, i)?);
        Ok(())
    }

    /// Starts late supervisor `i` ([`ClusterSpec::late_supervisors`]), which
    /// joins the running crawl; [`RunningCrawl::wait`] then waits for it too.
    pub fn start_late_supervisor(&mut self, i: usize) -> anyhow::Result<()> {
        match self.supervisors.get(i) {
            None => bail!("no supervisor {i} (the spec has {})", self.supervisors.len()),
            Some(Some(_)) => bail!("supervisor {i} is already running"),
            Some(None) => self.restart_supervisor(i),
        }
    }

    /// The dispatcher's ZeroMQ endpoint (`tcp://127.0.0.1:PORT`, or its
    /// namespace's address with [`ClusterSpec::netns`]).
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The run's debug token file (see [`ClusterSpec::debug_token_file`]).
    pub fn debug_token_file(&self) -> PathBuf {
        self.spec.debug_token_file()
    }

    /// The dispatcher's pid (None once it was reaped).
    pub fn dispatcher_pid(&self) -> Option<u32> {
        self.dispatcher.id()
    }

    /// The pids of the supervisors that run (started and not reaped).
    pub fn supervisor_pids(&self) -> Vec<u32> {
        self.supervisors.iter().flatten().filter_map(Child::id).collect()
    }

    /// The crawler children of supervisor `i` (none if it is not running).
    pub fn child_pids(&self, i: usize) -> Vec<u32> {
        self.supervisors
            .get(i)
            .and_then(|s| s.as_ref()?.id())
            .map(children_of)
            .unwrap_or_default()
    }

    /// Whether the dispatcher has exited (the crawl is over or it died).
    pub fn dispatcher_exited(&mut self) -> bool {
        matches!(self.dispatcher.try_wait(), Ok(Some(_)))
    }

    /// Runs `crawlctl VERB...` against this crawl's dispatcher as an
    /// operator would (its debug address and token file from the
    /// environment); its standard output, or an error with its standard
    /// error when it failed.
    pub fn crawlctl(&self, verb: &[&str]) -> anyhow::Result<String> {
        let out = std::process::Command::new(bin("crawlctl")?)
            .env("CRAWLER_DISPATCHER_DEBUG", self.debug_url()?)
            .env(shared::debug_token::TOKEN_FILE_ENV, self.debug_token_file())
            .args(verb)
            .output()
            .context("running crawlctl")?;
        if !out.status.success() {
            bail!("crawlctl {verb:?}: {}", String::from_utf8_lossy(&out.stderr));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// `http://<dispatcher debug addr>`; fails when the spec did not set `--debug-addr`.
    pub fn debug_url(&self) -> anyhow::Result<String> {
        match self.debug_addr {
            Some(a) => Ok(format!("http://{a}")),
            None => bail!("the dispatcher's --debug-addr was not set in ClusterSpec::dispatcher_args"),
        }
    }

    /// Waits for the crawl to end by itself (or `timeout`; then every process is killed).
    /// [`CrawlRun::supervisors`] has the supervisors that were started, in
    /// order; a late one never started is left out.
    /// Boxed: see the crate's doc.
    pub fn wait(self, timeout: Duration) -> BoxFuture<'static, anyhow::Result<CrawlRun>> {
        Box::pin(self.wait_for_end(timeout))
    }

    async fn wait_for_end(mut self, timeout: Duration) -> anyhow::Result<CrawlRun> {
        let run = async {
            let out = (&mut self.stdout).await.context("dispatcher stdout reader")??;
            let d = self.dispatcher.wait().await?;
            let mut statuses = Vec::new();
            for s in self.supervisors.iter_mut().flatten() {
                statuses.push(s.wait().await?);
            }
            anyhow::Ok((d, statuses, out))
        };
        let (d, statuses, out) = match tokio::time::timeout(timeout, run).await {
            Ok(r) => r?,
            Err(_) => bail!("crawl did not finish within {timeout:?}"),
        };
        let summary = out
            .lines()
            .rev()
            .find_map(|l| serde_json::from_str(l).ok())
            .unwrap_or(serde_json::Value::Null);
        Ok(CrawlRun {
            dispatcher: d,
            supervisors: statuses,
            summary,
            wall: self.started.elapsed(),
        })
    }
}

impl Drop for RunningCrawl {
    /// `kill_on_drop` SIGKILLs the dispatcher and the supervisors when a test fails or
    /// times out; a SIGKILLed supervisor cannot stop its crawler children, which would
    /// then crawl on (and hold the test's stdout open). Kill those first. After a
    /// successful [`RunningCrawl::wait`] every process is reaped and this does nothing.
    fn drop(&mut self) {
        for sup in self.supervisors.iter().flatten() {
            if let Some(pid) = sup.id() {
                kill_children_of(pid);
            }
        }
    }
}

/// SIGKILLs the direct children of `parent`.
fn kill_children_of(parent: u32) {
    for pid in children_of(parent) {
        signal(pid, libc::SIGKILL);
    }
}

/// The direct children of `parent` (found through `/proc/<pid>/stat`).
pub fn children_of(parent: u32) -> Vec<u32> {
    let mut found = Vec::new();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return found;
    };
    for entry in procs.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        if crate::procfs::stat_at(entry.path().join("stat")).is_some_and(|s| s.ppid == parent) {
            found.push(pid);
        }
    }
    found
}

/// The value of `--name value` or `--name=value` in `args` (the last one wins, as with clap).
pub(crate) fn flag_value<'a>(args: &'a [String], name: &str) -> Option<&'a str> {
    let mut found = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == name {
            found = it.next().map(String::as_str);
        } else if let Some(v) = a.strip_prefix(name).and_then(|r| r.strip_prefix('=')) {
            found = Some(v);
        }
    }
    found
}

/// The name of collection `kind` (`store::PAGES`, ...) of the
/// crawl a test runs when it names none (the default `--crawl-id`).
pub fn crawl_coll(kind: &str) -> String {
    store::CrawlId::default().collection(kind)
}

/// Every page of crawl `crawl`, as the crawl's readers see them (boxed:
/// see the crate's doc).
pub fn all_pages<'a>(
    db: &'a mongodb::Database,
    crawl: &'a store::CrawlId,
) -> BoxFuture<'a, anyhow::Result<Vec<store::docs::PageDoc>>> {
    Box::pin(read_all(db.collection(&crawl.collection(store::PAGES))))
}

/// Every document of a collection (boxed: see the crate's doc).
pub fn all_docs<'a>(
    db: &'a mongodb::Database,
    coll: &'a str,
) -> BoxFuture<'a, anyhow::Result<Vec<Document>>> {
    Box::pin(read_all(db.collection(coll)))
}

async fn read_all<T>(coll: mongodb::Collection<T>) -> anyhow::Result<Vec<T>>
where
    T: serde::de::DeserializeOwned + Send + Sync,
{
    let cursor = coll.find(doc! {}).await?;
    Ok(cursor.try_collect().await?)
}

/// Command-line arguments from string literals.
/// Runs `python3 scripts/oprates.py ARGS`, asserts it succeeded and
/// returns its stdout.
pub fn run_oprates(args: &[&str]) -> String {
    let out = std::process::Command::new("python3")
        .arg(repo_root().join("scripts/oprates.py"))
        .args(args)
        .output()
        .expect("running python3 scripts/oprates.py");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "oprates.py {args:?} failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    stdout
}

/// [`run_oprates`] with `--json` among `args`: its output, parsed.
pub fn run_oprates_json(args: &[&str]) -> serde_json::Value {
    let out = run_oprates(args);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("oprates.py {args:?}: not JSON ({e}):\n{out}"))
}

pub fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

/// Command-line arguments from one string, split at whitespace:
/// `flags("--min-delay-ms 10 --max-depth 3")`.
pub fn flags(line: &str) -> Vec<String> {
    line.split_whitespace().map(str::to_string).collect()
}

/// Writes lines to a file in `dir` and returns its path.
pub fn write_lines(dir: &Path, name: &str, lines: &[String]) -> anyhow::Result<PathBuf> {
    let p = dir.join(name);
    std::fs::write(&p, lines.join("\n") + "\n")?;
    Ok(p)
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn free_ports_are_below_the_ephemeral_range_and_never_repeat() {
        let low = ephemeral_port_low();
        let mut seen = HashSet::new();
        for _ in 0..500 {
            let port = free_port();
            assert!(
                port > 0 && port < low,
                "port {port} is not below the ephemeral range ({low}..)"
            );
            assert!(seen.insert(port), "port {port} handed out twice");
            // Free when handed out. (Retried for a moment: the namespace
            // and relay tests running beside this one make and drop sockets,
            // and the kernel can hold a port of the range for an instant.)
            let free = (0..50).any(|_| {
                let ok = std::net::TcpListener::bind(("127.0.0.1", port)).is_ok();
                if !ok {
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                ok
            });
            assert!(free, "port {port} is in use");
        }
    }
}
