//! `pages export`: streams stored pages out as WARC, JSON lines or CSV.
//!
//! Pages are read in `_id` order, so an export can stop anywhere and
//! resume: after every [`CHECKPOINT_PAGES`] pages the output is flushed and
//! `export-state.json` in the output folder records the last URL written
//! and the output file's length. Run the same command again and it cuts
//! the file back to that length and goes on from the next URL; `--restart`
//! starts over.
//!
//! WARC output is WARC/1.1, one gzip member a record: per file a
//! `warcinfo`, then per page a `response` (the HTTP head as received and
//! the body as stored), a `request` and a `metadata` record (depth, title,
//! links counted, ...), the latter two `WARC-Concurrent-To` the response.
//! Files are cut at `--max-file-bytes` (1 GB by default). Each WARC file,
//! once whole, gets its CDXJ index beside it (see `cdxj`).
//!
//! A crawl that revisits has captures besides its pages (later visits;
//! see `store::docs::CaptureDoc`): they follow the pages, in URL and time
//! order (`captures`). A changed one is written as a page; an unchanged
//! one as a `revisit` record referring to the capture whose payload it
//! repeats. The WARC output ends with the robots.txt responses the crawl
//! received (`robots_txt`), as `response` records of their own.
//!
//! This file is the resumable run and its state; the file written is
//! `output`, a page's fields `row`, its WARC records `warc_page`.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use bson::{doc, DateTime, Document, RawDocumentBuf};
use clap::{Args, ValueEnum};
use futures::TryStreamExt;
use serde::{Deserialize, Serialize};
use store::body_dict::Dictionaries;
use store::docs::{CaptureDoc, PageDoc, RobotsTxtId};
use store::page_body::{self, BodyError};
use store::{deadline, Stores};

use crate::cdxj;
use crate::progress::Progress;

mod captures;
mod output;
mod reader;
mod robots_txt;
mod row;
mod warc_page;

use output::{file_name, Output};
pub(crate) use warc_page::status_line;

/// Pages between two checkpoints of the export state.
const CHECKPOINT_PAGES: u64 = 1000;
const STATE_FILE: &str = "export-state.json";

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Format {
    Warc,
    Jsonl,
    Csv,
}

impl Format {
    fn extension(self) -> &'static str {
        match self {
            Format::Warc => "warc.gz",
            Format::Jsonl => "jsonl",
            Format::Csv => "csv",
        }
    }
}

#[derive(Args, Debug)]
pub(crate) struct ExportArgs {
    #[arg(long, value_enum, default_value = "warc")]
    format: Format,
    /// Only pages fetched at or after this time (RFC 3339, e.g. 2026-11-23T00:00:00Z).
    #[arg(long)]
    since: Option<String>,
    /// Folder the files go to (made if missing).
    #[arg(long, default_value = "export")]
    out: PathBuf,
    /// A file is closed and the next one started past this size.
    #[arg(long, default_value_t = 1_000_000_000)]
    max_file_bytes: u64,
    /// Ignore an earlier, unfinished export in `--out` and start over.
    #[arg(long)]
    restart: bool,
    /// Leave out pages that asked not to be archived (`noarchive` in their
    /// robots meta tag or `X-Robots-Tag` header).
    #[arg(long)]
    respect_noarchive: bool,
}

/// A page's `noarchive` directive (see `store::docs::RobotsDirectives`).
const NOARCHIVE: &str = "robots.noarchive";

/// What an export has done so far; saved at each checkpoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct State {
    format: Format,
    crawl_id: String,
    since: Option<String>,
    /// Number of the file being written (0, 1, ...).
    file: u32,
    /// Its length at the checkpoint.
    file_bytes: u64,
    /// The last page written (pages go in `_id` order).
    last_id: Option<String>,
    pages: u64,
    finished: bool,
    /// The `WARC-Record-ID` of the current file's `warcinfo` record, which
    /// every later record of the file names (kept so a resumed export
    /// names the record the file really holds).
    #[serde(default)]
    warcinfo_id: Option<String>,
    /// Captures written, and the last one (URL, time): they follow the
    /// pages, in that order.
    #[serde(default)]
    captures: u64,
    #[serde(default)]
    last_capture: Option<(String, i64)>,
    /// robots.txt responses written (WARC only), and the last one: they
    /// follow the captures.
    #[serde(default)]
    robots_txt: u64,
    #[serde(default)]
    last_robots_txt: Option<RobotsTxtId>,
}

impl State {
    /// Past the pages: a resumed export goes on with what follows them.
    fn past_pages(&self) -> bool {
        self.last_capture.is_some() || self.past_captures()
    }

    fn past_captures(&self) -> bool {
        self.last_robots_txt.is_some()
    }
}

/// Exports the pages of the crawl `stores` is for.
pub(crate) async fn run(stores: &Stores, args: ExportArgs) -> anyhow::Result<()> {
    std::fs::create_dir_all(&args.out).with_context(|| format!("making {}", args.out.display()))?;
    let state_path = args.out.join(STATE_FILE);
    let fresh = State {
        format: args.format,
        crawl_id: stores.crawl().to_string(),
        since: args.since.clone(),
        file: 0,
        file_bytes: 0,
        last_id: None,
        pages: 0,
        finished: false,
        warcinfo_id: None,
        captures: 0,
        last_capture: None,
        robots_txt: 0,
        last_robots_txt: None,
    };
    let mut state = match read_state(&state_path)? {
        Some(old) if !args.restart => {
            if (old.format, &old.crawl_id, &old.since) != (fresh.format, &fresh.crawl_id, &fresh.since) {
                bail!(
                    "{} holds an export with other settings ({:?}, crawl {:?}, since {:?}); use another --out or --restart",
                    args.out.display(),
                    old.format,
                    old.crawl_id,
                    old.since
                );
            }
            // What the export did goes to stderr plainly (as does the
            // progress); warnings go through `tracing`.
            if old.finished {
                eprintln!(
                    "pages: the export in {} is complete ({} pages)",
                    args.out.display(),
                    old.pages
                );
                return Ok(());
            }
            eprintln!(
                "pages: resuming after {} pages, from file {}",
                old.pages,
                file_name(&args.out, old.format, old.file).display()
            );
            old
        }
        _ => fresh,
    };
    let mut filter = Document::new();
    if let Some(since) = &args.since {
        let t = DateTime::parse_rfc3339_str(since)
            .with_context(|| format!("--since {since:?} is not an RFC 3339 time"))?;
        filter.insert(PageDoc::FETCHED_AT, doc! {"$gte": t});
    }
    if args.respect_noarchive {
        filter.insert(NOARCHIVE, doc! {"$ne": true});
        let mut left_out = filter.clone();
        left_out.insert(NOARCHIVE, true);
        if let Some(Ok(n)) = deadline(stores.pages().count_documents(left_out)).await {
            tracing::info!(pages = n, "left out: they asked not to be archived (noarchive)");
        }
    }
    let dicts = Dictionaries::load(&stores.body_dicts()).await?;
    let filtered = args.since.is_some() || args.respect_noarchive;
    let total = pages_in_export(stores, &filter, filtered)
        .await
        .map(|left| left.saturating_add(state.pages));
    let capture_filter = captures::filter(&filter);
    if let Some(last) = &state.last_id {
        filter.insert(PageDoc::URL, doc! {"$gt": last});
    }
    // Raw, so a document this version cannot read is skipped with a
    // warning instead of ending the export.
    let pages = stores.pages().clone_with_type::<RawDocumentBuf>();
    let mut cursor = deadline(pages.find(filter).sort(doc! {PageDoc::URL: 1}))
        .await
        .context("the store did not answer in time")?
        .context("reading pages")?;
    let out = Output::open(&args.out, &state)?;
    state.warcinfo_id = Some(out.warcinfo_id.clone());
    let mut progress = Progress::new(state.pages, total);
    let mut run = Run {
        out,
        state,
        dicts,
        since_checkpoint: 0,
        state_path: &state_path,
        args: &args,
    };
    // Pages, unless a resumed export was past them.
    while !run.state.past_pages() {
        let next = deadline(cursor.try_next())
            .await
            .context("the store did not answer in time")?
            .context("reading pages")?;
        let Some(raw) = next else { break };
        let page: PageDoc = match bson::from_slice(raw.as_bytes()) {
            Ok(page) => page,
            Err(e) => {
                let id = raw.get_str(PageDoc::URL).unwrap_or("?");
                tracing::warn!(page = id, error = %e, "skipping a malformed page document");
                if let Ok(id) = raw.get_str(PageDoc::URL) {
                    run.state.last_id = Some(id.to_string());
                }
                continue;
            }
        };
        let body = body_of(stores, &page, &mut run.dicts).await?;
        run.write(&page, body.as_deref(), None, |state| {
            state.pages += 1;
            state.last_id = Some(page.url.clone());
        })?;
        progress.page(&run.out.path);
    }
    if !run.state.past_captures() {
        captures::export(stores, capture_filter.clone(), &mut run).await?;
    }
    if run.state.format == Format::Warc {
        robots_txt::export(stores, capture_filter, &mut run).await?;
    }
    let Run {
        mut out, mut state, ..
    } = run;
    state.file_bytes = out.flush()?;
    if state.format == Format::Warc {
        index(&out.path)?;
    }
    state.finished = true;
    write_state(&state_path, &state)?;
    let took = progress.finish();
    eprintln!(
        "pages: {} pages, {} later captures and {} robots.txt responses exported to {} in {:.1} s",
        state.pages,
        state.captures,
        state.robots_txt,
        args.out.display(),
        took.as_secs_f64()
    );
    Ok(())
}

/// An export under way: the file being written, what it has done, and
/// what it needs to go on (pages, then `captures`, then `robots_txt`).
struct Run<'a> {
    out: Output,
    state: State,
    dicts: Dictionaries,
    since_checkpoint: u64,
    state_path: &'a Path,
    args: &'a ExportArgs,
}

impl Run<'_> {
    /// Writes one page or capture (in the next file when this one is
    /// full), lets `done` note it in the state, then checkpoints.
    fn write(
        &mut self,
        page: &PageDoc,
        body: Option<&[u8]>,
        capture: Option<&CaptureDoc>,
        done: impl FnOnce(&mut State),
    ) -> anyhow::Result<()> {
        next_file_if_full(&mut self.out, &mut self.state, self.args)?;
        self.out.page(page, body, capture)?;
        done(&mut self.state);
        checkpoint(
            &mut self.since_checkpoint,
            &mut self.out,
            &mut self.state,
            self.state_path,
        )
    }
}

/// A page's body as received (`None` when it was not kept, or cannot be
/// read back: that is logged, and the page exported without it).
async fn body_of(
    stores: &Stores,
    page: &PageDoc,
    dicts: &mut Dictionaries,
) -> anyhow::Result<Option<Vec<u8>>> {
    let body = match page_body::raw_of(page, dicts) {
        Err(BodyError::MissingDictionary(_)) => {
            // Written by a child that learnt its dictionary after this
            // export began.
            *dicts = Dictionaries::load(&stores.body_dicts()).await?;
            page_body::raw_of(page, dicts)
        }
        other => other,
    };
    Ok(match body {
        Ok(b) => Some(b),
        Err(BodyError::Missing) => None,
        Err(e) => {
            tracing::warn!(page = %page.url, error = %e, "body left out of the export");
            None
        }
    })
}

/// Closes the WARC file once it is past `--max-file-bytes` (with its
/// index) and opens the next.
fn next_file_if_full(out: &mut Output, state: &mut State, args: &ExportArgs) -> anyhow::Result<()> {
    if out.bytes >= args.max_file_bytes && state.format == Format::Warc {
        out.flush()?;
        index(&out.path)?;
        state.file += 1;
        state.file_bytes = 0;
        *out = Output::open(&args.out, state)?;
        state.warcinfo_id = Some(out.warcinfo_id.clone());
    }
    Ok(())
}

/// Every [`CHECKPOINT_PAGES`] records: the output flushed and the state saved.
fn checkpoint(since: &mut u64, out: &mut Output, state: &mut State, path: &Path) -> anyhow::Result<()> {
    *since += 1;
    if *since >= CHECKPOINT_PAGES {
        *since = 0;
        state.file_bytes = out.flush()?;
        write_state(path, state)?;
    }
    Ok(())
}

/// Writes the CDXJ index of the whole WARC file at `warc` beside it.
fn index(warc: &Path) -> anyhow::Result<()> {
    let lines = cdxj::write_index(warc).with_context(|| format!("indexing {}", warc.display()))?;
    tracing::debug!(file = %warc.display(), lines, "CDXJ index written");
    Ok(())
}

/// How many pages `filter` selects, for the progress bar: counted when the
/// export is of a time span, else the store's estimate, which
/// costs nothing. `None` (a spinner instead) when the store does not answer.
async fn pages_in_export(stores: &Stores, filter: &Document, filtered: bool) -> Option<u64> {
    let count = if filtered {
        deadline(stores.pages().count_documents(filter.clone())).await
    } else {
        deadline(stores.pages().estimated_document_count()).await
    };
    match count {
        Some(Ok(n)) => Some(n),
        Some(Err(e)) => {
            tracing::warn!(error = %e, "could not count the pages to export");
            None
        }
        None => None,
    }
}

fn read_state(path: &Path) -> anyhow::Result<Option<State>> {
    match std::fs::read(path) {
        Ok(bytes) => Ok(Some(
            serde_json::from_slice(&bytes).with_context(|| format!("reading {}", path.display()))?,
        )),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
    }
}

/// Written to a temporary file and renamed, so a crash leaves the old
/// state or the new one, never half of one.
fn write_state(path: &Path, state: &State) -> anyhow::Result<()> {
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, serde_json::to_vec_pretty(state)?)
        .with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}
