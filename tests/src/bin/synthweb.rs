//! `synthweb`: runs the synthetic web as a standalone server for demos and
//! benchmarks. Writes the seed list and an /etc/hosts-style file, prints one
//! "listening" line, serves until SIGTERM/SIGINT, then optionally dumps the
//! request log as JSON lines.

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, UNIX_EPOCH};

use clap::Parser;
use crawl_tests::web::{WebServer, WebSpec};

#[derive(Parser, Debug)]
#[command(about = "Serve a deterministic synthetic web on one local port, routed by Host header")]
struct Args {
    #[arg(long, default_value_t = WebSpec::default().seed)]
    seed: u64,
    #[arg(long, default_value_t = WebSpec::default().hosts)]
    hosts: usize,
    #[arg(long, default_value_t = WebSpec::default().outside_hosts)]
    outside_hosts: usize,
    #[arg(long, default_value_t = WebSpec::default().pages_per_host)]
    pages_per_host: usize,
    #[arg(long, default_value_t = WebSpec::default().links_per_page)]
    links_per_page: usize,
    #[arg(long, default_value_t = WebSpec::default().crawl_delay_every)]
    crawl_delay_every: usize,
    #[arg(long, default_value_t = WebSpec::default().crawl_delay_secs)]
    crawl_delay_secs: f64,
    #[arg(long, default_value_t = WebSpec::default().page_bytes)]
    page_bytes: usize,
    /// Address to listen on; only loopback makes sense (port 0 = any free port).
    #[arg(long, default_value = "127.0.0.1:0")]
    bind: SocketAddr,
    /// Write the seed URLs here, one per line.
    #[arg(long)]
    write_seeds: Option<PathBuf>,
    /// Write `127.0.0.1 name` lines for every served host here.
    #[arg(long)]
    write_hosts: Option<PathBuf>,
    /// On exit, write every answered request here as JSON lines.
    #[arg(long)]
    request_log: Option<PathBuf>,
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

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let spec = WebSpec {
        seed: args.seed,
        hosts: args.hosts,
        outside_hosts: args.outside_hosts,
        pages_per_host: args.pages_per_host,
        links_per_page: args.links_per_page,
        crawl_delay_every: args.crawl_delay_every,
        crawl_delay_secs: args.crawl_delay_secs,
        page_bytes: args.page_bytes,
    };
    let server = WebServer::start(spec, args.bind).await?;
    let web = server.web();
    if let Some(path) = &args.write_seeds {
        std::fs::write(path, lines(web.seed_urls()))?;
    }
    if let Some(path) = &args.write_hosts {
        let ip = server.addr().ip();
        std::fs::write(
            path,
            lines(web.host_names().into_iter().map(|h| format!("{ip} {h}"))),
        )?;
    }
    let pages = web.expected_crawl().pages.len();
    {
        let mut out = std::io::stdout().lock();
        writeln!(out, "synthweb listening on {} pages={pages}", server.addr())?;
        out.flush()?;
    }

    wait_for_signal().await?;
    let log = server.requests();
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
