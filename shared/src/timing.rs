//! Per-operation timing: one JSON line per operation, plus a Prometheus
//! histogram of the same name.
//!
//! A crawler of this shape once slowed down over time and the only way to
//! see why was the rate of each operation over time and per node. So every
//! step of a page's life is timed here, under the same name in the logs
//! (`op`), in `/metrics` (`crawler_<op>_duration_seconds`) and, because the
//! functions carry these names, in flamegraphs.
//!
//! Line format (one object per line):
//! `{"ts":1700000000.123456,"node":"n1","role":"crawler-child","pid":42,"op":"fetch","dur_us":1234,"outcome":"ok","domain":"a.test","url":"http://a.test/"}`
//! `domain` and `url` appear only when known; `url` only with `--log-urls`.

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::Context;

/// The steps of a URL's path, named identically everywhere. Each is
/// either work (something is being done for the URL) or a wait (it sits
/// in a queue or behind a limit): the bottleneck report
/// (`scripts/oprates.py bottleneck`) weighs the two along the whole path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// Dispatcher: a URL queued in the frontier until it is leased.
    QueueWait,
    /// Dispatcher: leasing a batch of URLs to a supervisor.
    Dispatch,
    /// Child: from the lease (dispatcher's clock) until the child has the
    /// URL: the relay through the supervisor.
    StartWait,
    RobotsLookup,
    RobotsFetch,
    /// Child: waiting for one of the domain's tasks or connections.
    DomainWait,
    PolitenessWait,
    /// Child: waiting for the domain's server (IP address): its request
    /// in progress and its gap, shared by all of its host names.
    ServerWait,
    /// Child: waiting for one of the child's fetch slots.
    SlotWait,
    Fetch,
    Parse,
    /// Child: a page handed to the writer until its batch write starts.
    StoreWait,
    Store,
    /// Dispatcher: a result sent by a child until the dispatcher reads it.
    ResultWait,
    Report,
    FrontierInsert,
    /// Child: writing the last-crawled times of the domains it paced.
    DomainFlush,
    /// Child: writing the robots.txt rules it fetched, in batches.
    RobotsFlush,
    /// Dispatcher: reading a domain's next queued URLs from the store
    /// into its window.
    FrontierRead,
    /// Dispatcher: after a restart, reading a page of the stored URLs into
    /// the seen-set (or the whole collection at once, when pages cannot
    /// order every stored entry).
    SeenScan,
    /// Child: one DNS lookup of a host name at its source (the system's
    /// resolver or `--dns-server`), not answered from the cache.
    DnsLookup,
}

impl Op {
    pub const ALL: [Op; 21] = [
        Op::QueueWait,
        Op::Dispatch,
        Op::StartWait,
        Op::RobotsLookup,
        Op::RobotsFetch,
        Op::DomainWait,
        Op::PolitenessWait,
        Op::ServerWait,
        Op::SlotWait,
        Op::Fetch,
        Op::Parse,
        Op::StoreWait,
        Op::Store,
        Op::ResultWait,
        Op::Report,
        Op::FrontierInsert,
        Op::DomainFlush,
        Op::RobotsFlush,
        Op::FrontierRead,
        Op::SeenScan,
        Op::DnsLookup,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Op::QueueWait => "queue_wait",
            Op::Dispatch => "dispatch",
            Op::StartWait => "start_wait",
            Op::RobotsLookup => "robots_lookup",
            Op::RobotsFetch => "robots_fetch",
            Op::DomainWait => "domain_wait",
            Op::PolitenessWait => "politeness_wait",
            Op::ServerWait => "server_wait",
            Op::SlotWait => "slot_wait",
            Op::Fetch => "fetch",
            Op::Parse => "parse",
            Op::StoreWait => "store_wait",
            Op::Store => "store",
            Op::ResultWait => "result_wait",
            Op::Report => "report",
            Op::FrontierInsert => "frontier_insert",
            Op::DomainFlush => "domain_flush",
            Op::RobotsFlush => "robots_flush",
            Op::FrontierRead => "frontier_read",
            Op::SeenScan => "seen_scan",
            Op::DnsLookup => "dns_lookup",
        }
    }

    /// The Prometheus histogram: `crawler_<name>_duration_seconds`.
    pub fn metric(self) -> &'static str {
        match self {
            Op::QueueWait => "crawler_queue_wait_duration_seconds",
            Op::Dispatch => "crawler_dispatch_duration_seconds",
            Op::StartWait => "crawler_start_wait_duration_seconds",
            Op::RobotsLookup => "crawler_robots_lookup_duration_seconds",
            Op::RobotsFetch => "crawler_robots_fetch_duration_seconds",
            Op::DomainWait => "crawler_domain_wait_duration_seconds",
            Op::PolitenessWait => "crawler_politeness_wait_duration_seconds",
            Op::ServerWait => "crawler_server_wait_duration_seconds",
            Op::SlotWait => "crawler_slot_wait_duration_seconds",
            Op::Fetch => "crawler_fetch_duration_seconds",
            Op::Parse => "crawler_parse_duration_seconds",
            Op::StoreWait => "crawler_store_wait_duration_seconds",
            Op::Store => "crawler_store_duration_seconds",
            Op::ResultWait => "crawler_result_wait_duration_seconds",
            Op::Report => "crawler_report_duration_seconds",
            Op::FrontierInsert => "crawler_frontier_insert_duration_seconds",
            Op::DomainFlush => "crawler_domain_flush_duration_seconds",
            Op::RobotsFlush => "crawler_robots_flush_duration_seconds",
            Op::FrontierRead => "crawler_frontier_read_duration_seconds",
            Op::SeenScan => "crawler_seen_scan_duration_seconds",
            Op::DnsLookup => "crawler_dns_lookup_duration_seconds",
        }
    }

    /// Whether the step waits rather than works.
    pub fn is_wait(self) -> bool {
        matches!(
            self,
            Op::QueueWait
                | Op::StartWait
                | Op::DomainWait
                | Op::PolitenessWait
                | Op::ServerWait
                | Op::SlotWait
                | Op::StoreWait
                | Op::ResultWait
        )
    }

    /// The `/metrics` HELP text of [`Op::metric`].
    pub fn help(self) -> &'static str {
        match self {
            Op::QueueWait => "Wait: a URL queued in the dispatcher's frontier until it is leased.",
            Op::Dispatch => "Work: the dispatcher leasing one batch of URLs to a supervisor.",
            Op::StartWait => "Wait: a URL leased by the dispatcher until a child has it (the relay through the supervisor).",
            Op::RobotsLookup => "Work: finding a URL's robots.txt rules (memory, then the store).",
            Op::RobotsFetch => "Work: fetching one robots.txt.",
            Op::DomainWait => "Wait: a URL in a child waiting for one of its domain's tasks or connections.",
            Op::PolitenessWait => "Wait: a URL waiting for its domain's delay since the last request.",
            Op::ServerWait => "Wait: a URL waiting for its server (IP address): the request in progress there and the per-server delay.",
            Op::SlotWait => "Wait: a URL waiting for one of the child's fetch slots.",
            Op::Fetch => "Work: one HTTP request, until the whole body is read.",
            Op::Parse => "Work: extracting links and features from one page.",
            Op::StoreWait => "Wait: a page handed to the child's writer until its batch write starts.",
            Op::Store => "Work: writing one batch of pages to the store.",
            Op::ResultWait => "Wait: a result sent by a child until the dispatcher reads it.",
            Op::Report => "Work: the dispatcher recording one batch of results.",
            Op::FrontierInsert => "Work: writing one batch of frontier changes to the store.",
            Op::DomainFlush => "Work: writing the last-crawled times of the domains a child paced since its last flush.",
            Op::RobotsFlush => "Work: writing the robots.txt rules a child fetched since its last flush, in one command per batch.",
            Op::FrontierRead => "Work: reading a domain's next queued URLs from the store into the dispatcher's window.",
            Op::SeenScan => "Work: after a restart, reading a page of the stored URLs into the dispatcher's seen-set.",
            Op::DnsLookup => "Work: one DNS lookup of a host name at its source (the system's resolver or --dns-server), by outcome (ok, nxdomain, no_address, servfail, timeout, error); answers from the child's cache are not counted here.",
        }
    }
}

/// Cheap to clone; all clones write to one buffered file.
#[derive(Clone)]
pub struct TimingLog {
    inner: Arc<Inner>,
}

struct Inner {
    file: Option<Mutex<BufWriter<File>>>,
    /// The constant part of every line: `"node":..,"role":..,"pid":..`.
    prefix: String,
    /// Write one line in `sample_every` (1 = every operation).
    sample_every: u64,
    counter: AtomicU64,
    log_urls: bool,
}

/// Where and how much to log.
#[derive(Debug, Clone, Default)]
pub struct TimingConfig {
    pub path: Option<std::path::PathBuf>,
    pub node: String,
    pub role: String,
    /// Fraction of operations written, 0 < rate ≤ 1.
    pub sample_rate: f64,
    pub log_urls: bool,
}

impl TimingLog {
    pub fn open(cfg: &TimingConfig) -> anyhow::Result<Self> {
        let file = match &cfg.path {
            Some(path) => Some(Mutex::new(BufWriter::with_capacity(
                64 * 1024,
                open_append(path)?,
            ))),
            None => None,
        };
        let rate = if cfg.sample_rate > 0.0 && cfg.sample_rate <= 1.0 {
            cfg.sample_rate
        } else {
            1.0
        };
        let prefix = format!(
            "\"node\":{},\"role\":{},\"pid\":{}",
            json_str(&cfg.node),
            json_str(&cfg.role),
            std::process::id()
        );
        Ok(TimingLog {
            inner: Arc::new(Inner {
                file,
                prefix,
                sample_every: (1.0 / rate).round().max(1.0) as u64,
                counter: AtomicU64::new(0),
                log_urls: cfg.log_urls,
            }),
        })
    }

    /// A log that only feeds metrics (unit tests, tools).
    pub fn disabled() -> Self {
        Self::open(&TimingConfig::default()).expect("a log without a file cannot fail to open")
    }

    /// Records one operation.
    pub fn record(
        &self,
        op: Op,
        dur: Duration,
        outcome: &'static str,
        domain: Option<&str>,
        url: Option<&str>,
    ) {
        self.write(op, dur, outcome, domain, url, None);
    }

    /// Records one operation that covered `n` items (a batch of pages,
    /// URLs or results): the line gets `"n":N`, so per-item costs and batch
    /// sizes can be read back.
    pub fn record_batch(&self, op: Op, dur: Duration, outcome: &'static str, n: usize) {
        metrics::histogram!(BATCH_METRIC, "op" => op.name()).record(n as f64);
        self.write(op, dur, outcome, None, None, Some(n));
    }

    fn write(
        &self,
        op: Op,
        dur: Duration,
        outcome: &'static str,
        domain: Option<&str>,
        url: Option<&str>,
        n: Option<usize>,
    ) {
        histogram(op, outcome).record(dur.as_secs_f64());
        if self.inner.file.is_none() {
            return;
        }
        let count = self.inner.counter.fetch_add(1, Ordering::Relaxed);
        if !count.is_multiple_of(self.inner.sample_every) {
            return;
        }
        let mut line = self.line_start();
        use std::fmt::Write as _;
        // Integer formatting only: this runs several times per page.
        let _ = write!(
            line,
            ",\"op\":\"{}\",\"dur_us\":{},\"outcome\":\"{outcome}\"",
            op.name(),
            dur.as_micros()
        );
        if let Some(n) = n {
            let _ = write!(line, ",\"n\":{n}");
        }
        if let Some(d) = domain {
            line.push_str(",\"domain\":");
            push_json_str(&mut line, d);
        }
        if let (true, Some(u)) = (self.inner.log_urls, url) {
            line.push_str(",\"url\":");
            push_json_str(&mut line, u);
        }
        line.push_str("}\n");
        self.append(&line);
    }

    /// Writes one gauge line, `{"ts":..,"node":..,"role":..,"pid":..,
    /// "gauges":{"name":value,..}}`: the state of the process (queues,
    /// credits, CPU seconds) once a second, never sampled away.
    pub fn gauges<S: AsRef<str>>(&self, values: &[(S, f64)]) {
        if self.inner.file.is_none() {
            return;
        }
        let mut line = self.line_start();
        line.push_str(",\"gauges\":{");
        for (i, (name, value)) in values.iter().enumerate() {
            if i > 0 {
                line.push(',');
            }
            push_json_str(&mut line, name.as_ref());
            line.push(':');
            // JSON has no NaN or infinity.
            if value.is_finite() {
                use std::fmt::Write as _;
                let _ = write!(line, "{value}");
            } else {
                line.push_str("null");
            }
        }
        line.push_str("}}\n");
        self.append(&line);
    }

    /// `{"ts":..,` and the constant part.
    fn line_start(&self) -> String {
        let ts = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
        let mut line = String::with_capacity(192);
        use std::fmt::Write as _;
        let _ = write!(
            line,
            "{{\"ts\":{}.{:06},{}",
            ts.as_secs(),
            ts.subsec_micros(),
            self.inner.prefix
        );
        line
    }

    fn append(&self, line: &str) {
        if let Some(file) = &self.inner.file {
            if let Ok(mut w) = file.lock() {
                let _ = w.write_all(line.as_bytes());
            }
        }
    }

    pub fn flush(&self) {
        if let Some(file) = &self.inner.file {
            if let Ok(mut w) = file.lock() {
                let _ = w.flush();
            }
        }
    }

    /// Flushes once a second so `tail -f` and the rate scripts see fresh data.
    pub fn spawn_flusher(&self) {
        let log = self.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            loop {
                tick.tick().await;
                log.flush();
            }
        });
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Some(file) = &self.file {
            if let Ok(mut w) = file.lock() {
                let _ = w.flush();
            }
        }
    }
}

fn open_append(path: &Path) -> anyhow::Result<File> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .with_context(|| format!("opening timing log {}", path.display()))
}

fn json_str(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    push_json_str(&mut out, s);
    out
}

/// Appends `s` as a JSON string; domains and URLs almost never need
/// escaping, so that case is a plain copy.
fn push_json_str(out: &mut String, s: &str) {
    if s.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        out.push('"');
        out.push_str(s);
        out.push('"');
    } else {
        out.push_str(&serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into()));
    }
}

/// Items per batch operation (`record_batch`), labelled by `op`.
/// Gives the per-operation histograms and [`BATCH_METRIC`] their HELP
/// lines in `/metrics` (their names are made at run time, from [`Op`]).
pub fn describe() {
    for op in Op::ALL {
        metrics::describe_histogram!(op.metric(), op.help());
    }
    metrics::describe_histogram!(
        BATCH_METRIC,
        "Items per batch operation, by op (pages per store write, URLs per lease batch, ...)."
    );
}

pub const BATCH_METRIC: &str = "crawler_batch_items";

/// The histogram of `op`; the handles for the common "ok" outcome are
/// looked up once, not on every call (the registry lookup hashes the name
/// and labels each time).
fn histogram(op: Op, outcome: &'static str) -> metrics::Histogram {
    static OK: [OnceLock<metrics::Histogram>; Op::ALL.len()] = [const { OnceLock::new() }; Op::ALL.len()];
    if outcome == "ok" {
        OK[op as usize]
            .get_or_init(|| metrics::histogram!(op.metric(), "outcome" => "ok"))
            .clone()
    } else {
        metrics::histogram!(op.metric(), "outcome" => outcome)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_one_parsable_line_per_sampled_operation() {
        let dir = std::env::temp_dir().join(format!("timing-test-{}", std::process::id()));
        let path = dir.join("t.jsonl");
        let log = TimingLog::open(&TimingConfig {
            path: Some(path.clone()),
            node: "n\"1".into(),
            role: "crawler-child".into(),
            sample_rate: 0.5,
            log_urls: true,
        })
        .unwrap();
        for _ in 0..4 {
            log.record(
                Op::Fetch,
                Duration::from_micros(1500),
                "ok",
                Some("a.test"),
                Some("http://a.test/\"q"),
            );
        }
        drop(log);
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0]["op"], "fetch");
        assert_eq!(lines[0]["dur_us"], 1500);
        assert_eq!(lines[0]["node"], "n\"1");
        assert_eq!(lines[0]["domain"], "a.test");
        assert_eq!(lines[0]["url"], "http://a.test/\"q");
        assert!(lines[0]["ts"].as_f64().unwrap() > 1.6e9);
        let _ = std::fs::remove_dir_all(dir);
    }
}
