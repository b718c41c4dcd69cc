//! `synthweb`: runs the synthetic web as a standalone server for demos and
//! benchmarks. Writes the seed list and an /etc/hosts-style file, prints one
//! "listening" line, serves until SIGTERM/SIGINT, then optionally dumps the
//! request log as JSON lines. With `--dump DIR` it writes the web to files
//! for nginx instead, and exits.

use std::io::Write as _;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::{Duration, UNIX_EPOCH};

use clap::Parser;
use crawl_tests::dns_server::{Behaviour, DnsServer, Zone};
use crawl_tests::tls::Offer;
use crawl_tests::web::{Changing, Profile, SyntheticWeb, WebExtras, WebServer, WebSpec};

/// Every count is optional: unset ones take the `--profile`'s default.
#[derive(Parser, Debug)]
#[command(about = "Serve a deterministic synthetic web on one local port, routed by Host header")]
struct Args {
    /// `small`: today's test web (20 hosts × 100 pages of 4,000 bytes, 10
    /// random links, a quarter 404s and a quarter redirects); `realistic`:
    /// 200 hosts × 250 pages of 5–32 KiB (mean 18 KiB), 10–40 links, a few
    /// percent 404s, about 1% redirects, robots.txt everywhere, 3 hosts with
    /// `Crawl-delay: 0.5` (see `Profile::Realistic`).
    #[arg(long, default_value = "small")]
    profile: Profile,
    #[arg(long)]
    seed: Option<u64>,
    #[arg(long)]
    hosts: Option<usize>,
    #[arg(long)]
    outside_hosts: Option<usize>,
    #[arg(long)]
    pages_per_host: Option<usize>,
    /// Random links per page (`realistic`: the mean; pages get 2/5..8/5 of it).
    #[arg(long)]
    links_per_page: Option<usize>,
    /// Every k-th host has a Crawl-delay (0 = none). `realistic` default:
    /// ceil(hosts / 3), so 3 hosts whatever `--hosts` is.
    #[arg(long)]
    crawl_delay_every: Option<usize>,
    #[arg(long)]
    crawl_delay_secs: Option<f64>,
    /// Page size (`realistic`: the mean; pages get 5/18..32/18 of it).
    #[arg(long)]
    page_bytes: Option<usize>,
    /// Address to listen on; only loopback makes sense (port 0 = any free port).
    #[arg(long, default_value = "127.0.0.1:0")]
    bind: SocketAddr,
    /// Write the seed URLs here, one per line.
    #[arg(long)]
    write_seeds: Option<PathBuf>,
    /// Write `127.0.0.1 name` lines for every served host here.
    #[arg(long)]
    write_hosts: Option<PathBuf>,
    /// Write a JSON description of the web here: its spec, the hosts with a
    /// Crawl-delay, and the ground truth's counts (URLs to store, by status
    /// and for the hosts without a Crawl-delay).
    #[arg(long)]
    write_info: Option<PathBuf>,
    /// On exit, write every answered request here as JSON lines.
    #[arg(long)]
    request_log: Option<PathBuf>,
    /// Also serve the hostile hosts (hangs, drips, huge bodies, gzip
    /// bombs, redirect loops, robots.txt edge cases; `web/hostile.rs`).
    #[arg(long)]
    hostile: bool,
    /// Also serve one host per trap of the open web (session ids,
    /// tracking parameters, an endless calendar, a faceted search,
    /// stacking relative paths; `web/traps.rs`), to watch a crawl end on them.
    #[arg(long)]
    traps: bool,
    /// Make pages change while serving, to watch a crawler revisit them:
    /// every page gets an ETag and a Last-Modified and answers
    /// If-None-Match / If-Modified-Since with 304 while unchanged, and the
    /// `--changing-share` of them get a new revision (body, ETag,
    /// Last-Modified; same links) every S seconds (whole, at least 1).
    #[arg(long, value_name = "S", value_parser = clap::value_parser!(u64).range(1..))]
    change_every_secs: Option<u64>,
    /// Percent of pages that change with `--change-every-secs` (default 30;
    /// the others keep their first version). Only with `--change-every-secs`.
    #[arg(
        long,
        value_name = "PERCENT",
        requires = "change_every_secs",
        value_parser = clap::value_parser!(u8).range(0..=100)
    )]
    changing_share: Option<u8>,
    /// Every answer but robots.txt (pages, 404s, redirects) comes after
    /// this many milliseconds, as from a site whose pages are made per
    /// request (`scripts/bench.py --web wide`).
    #[arg(long, value_name = "MS", default_value_t = 0)]
    response_delay_ms: u64,
    /// Write the web to files under DIR for nginx to serve, and exit
    /// without serving: one folder per host, robots.txt, the 404 and
    /// redirect bodies, and the nginx includes for the redirects
    /// (`tests/src/web/dump.rs`). Links name the port of `--bind`, which
    /// must not be 0: the port the server will listen on. The `--write-*`
    /// files are written as when serving.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["hostile", "traps", "change_every_secs", "request_log", "response_delay_ms"])]
    dump: Option<PathBuf>,
    /// Serve HTTPS (HTTP/2 and HTTP/1.1 by ALPN) with certificates of a CA
    /// made for this run, one per name as clients ask for it (SNI); the
    /// CA's certificate is written to PATH, for the crawler's `--ca-file`.
    #[arg(long, value_name = "PATH", conflicts_with = "dump")]
    tls_ca_out: Option<PathBuf>,
    /// Also answer the web's names over DNS (UDP) at this address, for the
    /// crawler's `--dns-server`: every name 127.0.0.1 (the server's
    /// address), after 20-100 ms; of the in-scope hosts, 1 % NXDOMAIN and
    /// 0.5 % never answered, chosen by a hash of the name (see
    /// `--write-info`'s `dns_failing_hosts`), as on the open web.
    #[arg(long, value_name = "ADDR", conflicts_with = "dump")]
    dns_listen: Option<SocketAddr>,
    /// On exit, write what the server counted here as JSON: TLS
    /// handshakes (full, resumed, failed), connections, DNS queries.
    #[arg(long, value_name = "PATH")]
    write_stats: Option<PathBuf>,
}

/// A name's DNS answer under `--dns-listen`: (permille bucket, latency ms).
fn dns_draw(name: &str) -> (u64, u64) {
    // FNV-1a: stable across runs and machines.
    let h = name.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    (h % 1000, 20 + (h >> 20) % 81)
}

/// How `--dns-listen` answers `name` (an in-scope host or not).
fn dns_behaviour(name: &str, in_scope: bool) -> (Behaviour, Duration) {
    let (bucket, ms) = dns_draw(name);
    let behaviour = match bucket {
        0..=9 if in_scope => Behaviour::NxDomain,
        10..=14 if in_scope => Behaviour::Silent,
        _ => Behaviour::Answer {
            addrs: vec![IpAddr::from([127, 0, 0, 1])],
            ttl: 3600,
        },
    };
    (behaviour, Duration::from_millis(ms))
}

/// `--changing-share` when only `--change-every-secs` is given: enough
/// pages change for a revisit to see both outcomes often.
const DEFAULT_CHANGING_SHARE: u8 = 30;

impl Args {
    /// The changing web the flags ask for, if any.
    fn changing(&self) -> Option<Changing> {
        self.change_every_secs.map(|secs| Changing {
            every: Duration::from_secs(secs),
            share_percent: self.changing_share.unwrap_or(DEFAULT_CHANGING_SHARE),
        })
    }

    /// The profile's spec with the counts given on the command line.
    fn spec(&self) -> WebSpec {
        let base = match self.profile {
            Profile::Small => WebSpec::default(),
            Profile::Realistic => {
                let hosts = self.hosts.unwrap_or(WebSpec::realistic().hosts);
                let pages = self.pages_per_host.unwrap_or(WebSpec::realistic().pages_per_host);
                WebSpec::realistic_sized(hosts, pages)
            }
        };
        WebSpec {
            seed: self.seed.unwrap_or(base.seed),
            hosts: self.hosts.unwrap_or(base.hosts),
            outside_hosts: self.outside_hosts.unwrap_or(base.outside_hosts),
            pages_per_host: self.pages_per_host.unwrap_or(base.pages_per_host),
            links_per_page: self.links_per_page.unwrap_or(base.links_per_page),
            crawl_delay_every: self.crawl_delay_every.unwrap_or(base.crawl_delay_every),
            crawl_delay_secs: self.crawl_delay_secs.unwrap_or(base.crawl_delay_secs),
            page_bytes: self.page_bytes.unwrap_or(base.page_bytes),
            profile: self.profile,
        }
    }
}

/// What `--write-info` writes.
fn info(web: &SyntheticWeb) -> serde_json::Value {
    let spec = web.spec();
    let exp = web.expected_crawl();
    let port = web.port();
    let delayed: Vec<String> = web
        .in_scope_host_names()
        .into_iter()
        .filter(|h| web.crawl_delay(h).is_some())
        .collect();
    let host_of = |url: &str| -> String {
        let rest = url
            .strip_prefix("http://")
            .or_else(|| url.strip_prefix("https://"))
            .unwrap_or(url);
        rest.split(['/', ':']).next().unwrap_or("").to_string()
    };
    let without_delay = exp
        .pages
        .keys()
        .filter(|u| !delayed.contains(&host_of(u)))
        .count();
    // Pages by status, of the URLs `keep` keeps.
    let by_status_of = |keep: &dyn Fn(&str) -> bool| {
        let mut counts = std::collections::BTreeMap::<String, u64>::new();
        for (url, status) in &exp.pages {
            if keep(url) {
                *counts.entry(status.to_string()).or_default() += 1;
            }
        }
        counts
    };
    let by_status = by_status_of(&|_| true);
    let mut info = serde_json::json!({
        "profile": spec.profile.name(),
        "port": port,
        "spec": {
            "seed": spec.seed,
            "hosts": spec.hosts,
            "outside_hosts": spec.outside_hosts,
            "pages_per_host": spec.pages_per_host,
            "links_per_page": spec.links_per_page,
            "crawl_delay_every": spec.crawl_delay_every,
            "crawl_delay_secs": spec.crawl_delay_secs,
            "page_bytes": spec.page_bytes,
        },
        "crawl_delay_hosts": delayed,
        "expected_pages": exp.pages.len(),
        "expected_pages_without_crawl_delay": without_delay,
        "expected_by_status": by_status,
        "must_not_fetch": exp.must_not_fetch.len(),
    });
    // The URLs robots.txt forbids, as the request log names a request
    // (host without port, path and query): for a check of every request.
    let forbidden: Vec<String> = exp
        .must_not_fetch
        .iter()
        .filter_map(|u| url::Url::parse(u).ok())
        .map(|u| {
            let query = u.query().map(|q| format!("?{q}")).unwrap_or_default();
            format!("{}{}{query}", u.host_str().unwrap_or(""), u.path())
        })
        .collect();
    info["must_not_fetch_requests"] = serde_json::json!(forbidden);
    // Under --dns-listen: the in-scope hosts whose names fail, and the
    // pages a crawl can store without them.
    let failing: std::collections::BTreeSet<String> = web
        .in_scope_host_names()
        .into_iter()
        .filter(|h| !matches!(dns_behaviour(h, true).0, Behaviour::Answer { .. }))
        .collect();
    let resolving_by_status = by_status_of(&|url| !failing.contains(&host_of(url)));
    let resolving: u64 = resolving_by_status.values().sum();
    info["dns_failing_hosts"] = serde_json::json!(failing);
    info["expected_pages_resolving"] = serde_json::json!(resolving);
    info["expected_by_status_resolving"] = serde_json::json!(resolving_by_status);
    if let Some(ch) = web.extras().changing {
        info["changing"] = serde_json::json!({
            "every_secs": ch.every_secs(),
            "share_percent": ch.share_percent,
        });
    }
    info
}

fn lines(items: impl IntoIterator<Item = String>) -> String {
    items.into_iter().map(|s| s + "\n").collect()
}

async fn wait_for_signal() -> anyhow::Result<()> {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        r = tokio::signal::ctrl_c() => r?,
        _ = term.recv() => {}
    }
    Ok(())
}

/// Writes the `--write-seeds`, `--write-hosts` and `--write-info` files
/// (the hosts at `ip`); returns the number of URLs a crawl stores.
fn write_files(args: &Args, web: &SyntheticWeb, ip: IpAddr) -> anyhow::Result<usize> {
    if let Some(path) = &args.write_seeds {
        std::fs::write(path, lines(web.seed_urls()))?;
    }
    if let Some(path) = &args.write_hosts {
        std::fs::write(
            path,
            lines(web.host_names().into_iter().map(|h| format!("{ip} {h}"))),
        )?;
    }
    Ok(if let Some(path) = &args.write_info {
        let info = info(web);
        std::fs::write(path, serde_json::to_string_pretty(&info)? + "\n")?;
        info["expected_pages"].as_u64().unwrap_or(0) as usize
    } else {
        web.expected_crawl().pages.len()
    })
}

/// `--dump DIR`: the web as files, for the port of `--bind`.
fn dump(args: &Args, spec: WebSpec, extras: WebExtras, dir: &Path) -> anyhow::Result<()> {
    let port = args.bind.port();
    anyhow::ensure!(
        port != 0,
        "--dump needs the port the server will listen on: --bind 127.0.0.1:PORT"
    );
    let web = SyntheticWeb::with_extras(spec, extras, port);
    let pages = write_files(args, &web, args.bind.ip())?;
    let d = web.dump(dir)?;
    println!(
        "synthweb dumped {} hosts, {} files of {} bytes, {} redirects to {} for port {port} pages={pages} profile={}",
        d.hosts,
        d.files,
        d.bytes,
        d.redirects,
        dir.display(),
        web.spec().profile.name()
    );
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let spec = args.spec();
    let extras = WebExtras {
        hostile: args.hostile,
        traps: args.traps,
        changing: args.changing(),
        response_delay_ms: args.response_delay_ms,
        tls: args.tls_ca_out.is_some().then_some(Offer::Http2),
        ..WebExtras::default()
    };
    if let Some(dir) = &args.dump {
        return dump(&args, spec, extras, dir);
    }
    let server = WebServer::start_with(spec, extras, args.bind).await?;
    let web = server.web();
    let pages = write_files(&args, &web, server.addr().ip())?;
    if let (Some(path), Some(ca)) = (&args.tls_ca_out, server.ca()) {
        std::fs::write(path, &ca.ca_pem)?;
    }
    let dns = match args.dns_listen {
        Some(addr) => {
            let in_scope: std::collections::HashSet<String> = web.in_scope_host_names().into_iter().collect();
            let mut zone = Zone::default();
            zone.pattern(move |name| Some(dns_behaviour(name, in_scope.contains(name))));
            Some(DnsServer::start(zone, addr).await?)
        }
        None => None,
    };
    {
        let mut out = std::io::stdout().lock();
        writeln!(
            out,
            "synthweb listening on {} pages={pages} profile={}",
            server.addr(),
            web.spec().profile.name()
        )?;
        out.flush()?;
    }

    wait_for_signal().await?;
    let log = server.requests();
    {
        // After the request log is complete: read by scripts/bench.py.
        let mut out = std::io::stdout().lock();
        writeln!(
            out,
            "synthweb served {} requests on {} connections",
            log.len(),
            server.connections_accepted()
        )?;
        out.flush()?;
    }
    if let Some(path) = &args.write_stats {
        use std::sync::atomic::Ordering::Relaxed;
        let hs = server.handshakes();
        let queries = dns.as_ref().map(|d| d.query_counts()).unwrap_or_default();
        let answers = |name: &str| matches!(dns_behaviour(name, true).0, Behaviour::Answer { .. });
        let stats = serde_json::json!({
            "connections": server.connections_accepted(),
            "handshakes": {
                "full": hs.full.load(Relaxed),
                "resumed": hs.resumed.load(Relaxed),
                "failed": hs.failed.load(Relaxed),
            },
            "dns": {
                "names_asked": queries.len(),
                "queries": queries.values().map(|(q, _)| q).sum::<u64>(),
                "datagrams": queries.values().map(|(_, d)| d).sum::<u64>(),
                // The names that answer, apart: a failing name is asked
                // again when its URLs are retried.
                "answering_names_asked": queries.keys().filter(|n| answers(n)).count(),
                "answering_queries": queries.iter().filter(|(n, _)| answers(n)).map(|(_, (q, _))| q).sum::<u64>(),
            },
        });
        std::fs::write(path, serde_json::to_string_pretty(&stats)? + "\n")?;
    }
    drop(dns);
    server.stop(Duration::from_secs(2)).await;
    if let Some(path) = &args.request_log {
        let mut out = std::io::BufWriter::new(std::fs::File::create(path)?);
        for r in log {
            let at_ms =
                r.at.duration_since(UNIX_EPOCH)
                    .map_or(0, |d| d.as_millis() as u64);
            let line = serde_json::json!({
                "host": r.host,
                "path": r.path,
                "status": r.status,
                "at_ms": at_ms,
            });
            writeln!(out, "{line}")?;
        }
        out.flush()?;
    }
    Ok(())
}
