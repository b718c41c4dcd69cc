//! crawlctl: steers a running crawl through its dispatcher's control
//! endpoints (`dispatcher/src/control/http.rs`).
//!
//! A binary of its own rather than a `dispatcher ctl` subcommand: the
//! dispatcher's command line is a crawl's settings (and `--config`), and a
//! mistyped control command must never start a crawl.
//!
//! The dispatcher's debug address comes from `--dispatcher` or
//! `$CRAWLER_DISPATCHER_DEBUG`; its token only from `$CRAWLER_DEBUG_TOKEN`,
//! or else the run's token file (`$CRAWLER_DEBUG_TOKEN_FILE`, by default
//! `./debug_token`: see `shared::debug_token`), never the command line,
//! which every user of the machine can read.

use std::time::Duration;

use anyhow::{bail, Context};
use clap::{Parser, Subcommand};
use dispatcher::control_request::{parse_delay_ms, seed_lines, BlockEnd, ControlRequest};

#[derive(Parser)]
#[command(name = "crawlctl", about = "Steer a running crawl")]
struct Cli {
    /// The dispatcher's debug URL, as it printed at start (http://host:port).
    #[arg(long, env = "CRAWLER_DISPATCHER_DEBUG")]
    dispatcher: String,
    #[command(subcommand)]
    verb: Verb,
}

#[derive(Subcommand)]
enum Verb {
    /// What stands: paused or not, blocked domains, delays, counts.
    Status,
    /// Hand out nothing new (leases out finish).
    Pause,
    Resume,
    /// Stop the crawl as SIGTERM does (queued URLs stay for the next run).
    Stop,
    /// Fetch nothing more from DOMAIN (its URLs stay queued).
    Block {
        domain: String,
        /// Only for this long: 90s, 30m, 12h, 2d.
        #[arg(long = "for", value_parser = shared::revisit::parse_duration)]
        for_: Option<Duration>,
        #[arg(long, default_value = "")]
        reason: String,
    },
    /// Let DOMAIN crawl again (also lifts a circuit breaker's halt).
    Unblock {
        domain: String,
    },
    /// DOMAIN's minimum gap between requests in ms, or `default`.
    Delay {
        domain: String,
        #[arg(value_parser = |v: &str| parse_delay_ms(v).map(Ms))]
        ms: Ms,
    },
    /// Add seeds: URLs, or @FILE for a file of one URL per line.
    Seeds {
        #[arg(required = true)]
        seeds: Vec<String>,
    },
}

/// A delay in ms, or none for `default` (a plain `Option` would make the
/// argument optional to clap).
#[derive(Clone, Debug)]
struct Ms(Option<u64>);

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::process::ExitCode {
    // One line for a person, not an error report with a backtrace.
    match run(Cli::parse()).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("crawlctl: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// The typed request the dispatcher's endpoint reads back
/// (`dispatcher/src/control/request.rs`).
fn request_of(verb: Verb) -> anyhow::Result<ControlRequest> {
    Ok(match verb {
        Verb::Status => ControlRequest::Status,
        Verb::Pause => ControlRequest::Pause,
        Verb::Resume => ControlRequest::Resume,
        Verb::Stop => ControlRequest::Stop,
        Verb::Block { domain, for_, reason } => ControlRequest::Block {
            domain,
            end: for_.map(|d| BlockEnd::AfterSecs(d.as_secs())),
            reason,
        },
        Verb::Unblock { domain } => ControlRequest::Unblock { domain },
        Verb::Delay { domain, ms: Ms(ms) } => ControlRequest::Delay { domain, ms },
        Verb::Seeds { seeds } => {
            let mut urls = Vec::new();
            for s in seeds {
                match s.strip_prefix('@') {
                    Some(file) => {
                        let text =
                            std::fs::read_to_string(file).with_context(|| format!("reading {file}"))?;
                        urls.extend(seed_lines(&text));
                    }
                    None => urls.push(s),
                }
            }
            ControlRequest::Seeds(urls)
        }
    })
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    let base = cli.dispatcher.trim_end_matches('/');
    let form = request_of(cli.verb)?.to_http();
    let http = shared::http_client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(60))
        .build()
        .context("making an HTTP client")?;
    let url = url::Url::parse_with_params(&format!("{base}{}", form.verb.path()), &form.query).with_context(
        || format!("{base} is not a URL (give the dispatcher's debug URL, http://host:port)"),
    )?;
    let mut req = if form.verb.reads_only() {
        http.get(url)
    } else {
        http.post(url).body(form.body)
    };
    if let Some(token) = shared::debug_token::for_client(None) {
        req = req.bearer_auth(token);
    }
    let resp = req
        .send()
        .await
        .with_context(|| format!("reaching the dispatcher at {base}"))?;
    let status = resp.status();
    let text = resp.text().await.unwrap_or_default();
    if !status.is_success() {
        bail!("{status}: {}", text.trim());
    }
    println!("{}", text.trim());
    Ok(())
}
