//! pages: reads stored pages back, one at a time or as a whole crawl.
//!
//! Page bodies are stored zstd-compressed, as the bytes the server sent
//! (see `store::page_body`); this is the documented way to read them:
//!
//!     pages get http://site.test/p/1          # the HTML, decoded with its charset
//!     pages get --raw http://site.test/p/1    # the bytes as sent
//!     pages get --doc http://site.test/p/1    # the page document, body left out, as JSON
//!     pages get --headers http://site.test/p/1  # the response's status line and headers
//!     pages export --format warc --out DIR    # WARC/1.1 files and their CDXJ indexes (also jsonl, csv); see `export`
//!     pages stats                             # counts by status, domain, type, day; bytes
//!
//! Each reads one crawl: `--crawl-id` (or `CRAWLER_CRAWL_ID`, default
//! `crawl`), the dispatcher's name for it (see `store::crawl_id`).

#![warn(unreachable_pub)]

mod cdxj;
mod export;
mod progress;
mod stats;
mod warc;

use std::io::Write;

use anyhow::{bail, Context};
use bson::doc;
use clap::{Parser, Subcommand};
use store::body_dict::Dictionaries;
use store::docs::PageDoc;
use store::page_body;
use store::StoreArgs;
use store::{CrawlId, Stores};

#[derive(Parser, Debug)]
#[command(version, about = "Reads stored pages back")]
struct Args {
    #[command(flatten)]
    store: StoreArgs,
    /// The crawl to read (the dispatcher's `--crawl-id`).
    #[arg(long, global = true, env = "CRAWLER_CRAWL_ID", default_value = CrawlId::DEFAULT)]
    crawl_id: CrawlId,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Prints one stored page.
    Get {
        /// The page's URL as crawled (its `_id`).
        url: String,
        /// The body bytes as the server sent them, not decoded.
        #[arg(long, conflicts_with = "doc")]
        raw: bool,
        /// The page document (status, features, ...) as JSON, without the body.
        #[arg(long, conflicts_with = "headers")]
        doc: bool,
        /// The response's status line and headers as received.
        #[arg(long, conflicts_with = "raw")]
        headers: bool,
    },
    /// Writes stored pages out as WARC, JSON lines or CSV (resumable).
    Export(export::ExportArgs),
    /// Counts the stored pages by status, domain, content type and day.
    Stats,
}

fn main() -> anyhow::Result<()> {
    shared::logging::init("pages");
    let args = Args::parse();
    shared::runtime()?.block_on(run(args))
}

async fn run(args: Args) -> anyhow::Result<()> {
    let stores = Stores::connect(&args.store, "pages", args.crawl_id).await?;
    let res = command(&stores, args.cmd).await;
    stores.shutdown().await;
    res
}

async fn command(stores: &Stores, cmd: Cmd) -> anyhow::Result<()> {
    match cmd {
        Cmd::Export(export) => export::run(stores, export).await?,
        Cmd::Stats => stats::run(stores).await?,
        Cmd::Get {
            url,
            raw,
            doc,
            headers,
        } => {
            let found = store::deadline(stores.pages().find_one(doc! {PageDoc::URL: &url}))
                .await
                .context("the store did not answer in time")?
                .context("reading the page")?;
            let Some(mut page) = found else {
                bail!("no stored page {url}");
            };
            let mut out = std::io::stdout().lock();
            if headers {
                let ex = store::exchange::Exchange::of(&page);
                writeln!(out, "{}", export::status_line(&ex, page.status))?;
                for (name, value) in ex.headers {
                    out.write_all(name.as_bytes())?;
                    out.write_all(b": ")?;
                    out.write_all(&value)?;
                    out.write_all(b"\n")?;
                }
            } else if doc {
                page.body = None;
                let json = serde_json::to_string_pretty(&bson::to_bson(&page)?.into_relaxed_extjson())?;
                writeln!(out, "{json}")?;
            } else {
                let dicts = Dictionaries::load(&stores.body_dicts()).await?;
                if raw {
                    out.write_all(&page_body::raw_of(&page, &dicts)?)?;
                } else {
                    out.write_all(page_body::html_of(&page, &dicts)?.as_bytes())?;
                }
            }
            out.flush()?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn store_flags_go_before_or_after_the_verb() {
        let before = Args::parse_from(["pages", "--mongo-uri", "mongodb://a/", "--db", "x", "stats"]);
        let after = Args::parse_from([
            "pages",
            "export",
            "--mongo-uri",
            "mongodb://a/",
            "--db",
            "x",
            "--format",
            "csv",
        ]);
        for args in [&before, &after] {
            assert_eq!(args.store.mongo_uri, "mongodb://a/");
            assert_eq!(args.store.db, "x");
        }
        assert!(matches!(after.cmd, Cmd::Export(_)));
        let mut cmd = Args::command();
        cmd.build();
        let help = cmd
            .find_subcommand_mut("export")
            .expect("an export subcommand")
            .render_long_help()
            .to_string();
        assert!(
            help.contains("--mongo-uri") && help.contains("--crawl-id"),
            "{help}"
        );
    }
}
