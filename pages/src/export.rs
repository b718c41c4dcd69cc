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

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Seek, Write};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use bson::{doc, DateTime, Document, RawDocumentBuf};
use clap::{Args, ValueEnum};
use futures::TryStreamExt;
use serde::{Deserialize, Serialize};
use store::body_dict::Dictionaries;
use store::docs::{CaptureDoc, PageDoc, RobotsTxtId};
use store::exchange::Exchange;
use store::page_body::{self, BodyError};
use store::payload_digest::PayloadDigest;
use store::{deadline, Stores};

use crate::cdxj;
use crate::progress::Progress;
use crate::warc::{self, Record};

mod captures;
mod reader;
mod robots_txt;

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

fn file_name(dir: &Path, format: Format, n: u32) -> PathBuf {
    dir.join(format!("pages-{n:05}.{}", format.extension()))
}

/// The file being written.
struct Output {
    path: PathBuf,
    file: BufWriter<File>,
    format: Format,
    bytes: u64,
    warcinfo_id: String,
    /// The crawl exported, for its rows (pages do not repeat it: their
    /// collection names it).
    crawl_id: String,
}

impl Output {
    /// Opens file `state.file`, cut back to `state.file_bytes` (what the
    /// last checkpoint saw written; anything after it is written again).
    fn open(dir: &Path, state: &State) -> anyhow::Result<Output> {
        let path = file_name(dir, state.format, state.file);
        let mut file = OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(false)
            .open(&path)
            .with_context(|| format!("opening {}", path.display()))?;
        file.set_len(state.file_bytes)
            .with_context(|| format!("cutting {} back to its last checkpoint", path.display()))?;
        file.seek(std::io::SeekFrom::End(0))?;
        let mut out = Output {
            path,
            file: BufWriter::with_capacity(1 << 20, file),
            format: state.format,
            bytes: state.file_bytes,
            warcinfo_id: match &state.warcinfo_id {
                Some(id) if state.file_bytes > 0 => id.clone(),
                _ => warc::record_id(),
            },
            crawl_id: state.crawl_id.clone(),
        };
        if out.bytes == 0 {
            out.start(state)?;
        }
        Ok(out)
    }

    /// What a file begins with: a `warcinfo` record, or the CSV header.
    fn start(&mut self, state: &State) -> anyhow::Result<()> {
        match self.format {
            Format::Warc => {
                let mut info = format!(
                    "software: synthcrawler pages {}\r\nformat: WARC File Format 1.1\r\nconformsTo: http://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/\r\n",
                    env!("CARGO_PKG_VERSION")
                );
                info.push_str(&format!("isPartOf: {}\r\n", warc::field_value(&state.crawl_id)));
                let name = self
                    .path
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                let record = Record {
                    kind: "warcinfo",
                    id: &self.warcinfo_id,
                    date: &warc::warc_date(DateTime::now()),
                    content_type: "application/warc-fields",
                    headers: vec![("WARC-Filename", name)],
                    block: info.as_bytes(),
                };
                self.bytes += record.write_gz(&mut self.file)?;
            }
            Format::Csv => {
                let line = format!("{}\n", Row::COLUMNS.join(","));
                self.file.write_all(line.as_bytes())?;
                self.bytes += line.len() as u64;
            }
            Format::Jsonl => {}
        }
        Ok(())
    }

    /// A page, or (`capture`) a later visit of one.
    fn page(
        &mut self,
        page: &PageDoc,
        body: Option<&[u8]>,
        capture: Option<&CaptureDoc>,
    ) -> anyhow::Result<()> {
        let mut row = Row::of(page, &self.crawl_id);
        row.capture = capture.map(|c| captures::kind_str(c.kind).to_string());
        match self.format {
            Format::Warc => {
                self.bytes += write_warc_page(&mut self.file, page, &row, body, capture, &self.warcinfo_id)?
            }
            Format::Jsonl => {
                let mut line = serde_json::to_vec(&row)?;
                line.push(b'\n');
                self.file.write_all(&line)?;
                self.bytes += line.len() as u64;
            }
            Format::Csv => {
                let line = row.csv_line();
                self.file.write_all(line.as_bytes())?;
                self.bytes += line.len() as u64;
            }
        }
        Ok(())
    }

    /// Flushes to the file and returns its length.
    fn flush(&mut self) -> anyhow::Result<u64> {
        self.file.flush()?;
        self.file.get_ref().sync_data()?;
        Ok(self.bytes)
    }
}

/// A page's fields for JSON lines and CSV (and the WARC metadata record).
#[derive(Debug, Serialize)]
struct Row {
    url: String,
    final_url: Option<String>,
    status: i32,
    content_type: Option<String>,
    fetched_at: Option<String>,
    ip: Option<String>,
    bytes: i64,
    truncated: bool,
    domain: String,
    depth: i32,
    crawl_id: String,
    title: Option<String>,
    description: Option<String>,
    canonical: Option<String>,
    lang: Option<String>,
    charset: Option<String>,
    outlinks: i32,
    redirect_to: Option<String>,
    /// The page's robots directives that matter here, comma-joined
    /// (`noindex,nofollow,noarchive`); none when it gave none.
    robots: Option<String>,
    /// The SHA-1 of the body as received, as WARC writes it
    /// (`sha1:BASE32`): equal digests, equal bodies.
    payload_digest: Option<String>,
    /// `urlset` or `index` when the body was a sitemap.
    sitemap: Option<String>,
    /// For a later visit (a crawl that revisits): what it found,
    /// `changed`, `not_modified` (a 304) or `same_payload`; none for a
    /// page's first visit.
    capture: Option<String>,
}

impl Row {
    const COLUMNS: [&'static str; 22] = [
        "url",
        "final_url",
        "status",
        "content_type",
        "fetched_at",
        "ip",
        "bytes",
        "truncated",
        "domain",
        "depth",
        "crawl_id",
        "title",
        "description",
        "canonical",
        "lang",
        "charset",
        "outlinks",
        "redirect_to",
        "robots",
        "payload_digest",
        "sitemap",
        "capture",
    ];

    fn of(d: &PageDoc, crawl_id: &str) -> Row {
        Row {
            url: d.url.clone(),
            final_url: d.final_url.clone(),
            status: d.status,
            content_type: store::exchange::content_type(d),
            fetched_at: d.fetched_at.try_to_rfc3339_string().ok(),
            ip: d.ip.clone(),
            bytes: d.bytes,
            truncated: d.truncated,
            domain: d.domain.clone(),
            depth: d.depth,
            crawl_id: crawl_id.to_string(),
            title: d.title.clone(),
            description: d.description.clone(),
            canonical: d.canonical.clone(),
            lang: d.lang.clone(),
            charset: d.charset.clone(),
            outlinks: d.outlinks.unwrap_or(0),
            redirect_to: d.redirect_to.clone(),
            robots: robots_field(d.robots),
            payload_digest: d.payload_sha1.map(|h| h.warc()),
            sitemap: d.sitemap.map(|k| k.as_str().to_string()),
            capture: None,
        }
    }

    /// One CSV line (RFC 4180: fields with a comma, quote or line break
    /// are quoted, quotes doubled).
    fn csv_line(&self) -> String {
        let opt = |v: &Option<String>| v.clone().unwrap_or_default();
        let fields = [
            self.url.clone(),
            opt(&self.final_url),
            self.status.to_string(),
            opt(&self.content_type),
            opt(&self.fetched_at),
            opt(&self.ip),
            self.bytes.to_string(),
            self.truncated.to_string(),
            self.domain.clone(),
            self.depth.to_string(),
            self.crawl_id.clone(),
            opt(&self.title),
            opt(&self.description),
            opt(&self.canonical),
            opt(&self.lang),
            opt(&self.charset),
            self.outlinks.to_string(),
            opt(&self.redirect_to),
            opt(&self.robots),
            opt(&self.payload_digest),
            opt(&self.sitemap),
            opt(&self.capture),
        ];
        let mut line = fields.iter().map(|f| csv_field(f)).collect::<Vec<_>>().join(",");
        line.push('\n');
        line
    }
}

fn robots_field(r: store::docs::RobotsDirectives) -> Option<String> {
    let set: Vec<&str> = [
        (r.noindex, "noindex"),
        (r.nofollow, "nofollow"),
        (r.noarchive, "noarchive"),
    ]
    .into_iter()
    .filter_map(|(on, name)| on.then_some(name))
    .collect();
    (!set.is_empty()).then(|| set.join(","))
}

/// One CSV cell. A cell a spreadsheet would take for a formula (it
/// starts with `=`, `+`, `-`, `@`, a tab or a carriage return: a page's
/// title or URL is anyone's text, e.g. `=HYPERLINK(...)`), and is not a
/// plain number, is written as text: a `'` before it, and quoted.
fn csv_field(f: &str) -> String {
    // A plain number (`-1`) is a number to a spreadsheet, not a formula.
    let formula = f.starts_with(['=', '+', '-', '@', '\t', '\r']) && f.parse::<f64>().is_err();
    if formula {
        format!("\"'{}\"", f.replace('"', "\"\""))
    } else if f.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", f.replace('"', "\"\""))
    } else {
        f.to_string()
    }
}

/// A page's records: its `response` (a `revisit` for an unchanged
/// capture, see `captures::revisit`), `request` and `metadata`; returns
/// the bytes written.
fn write_warc_page(
    out: &mut impl Write,
    page: &PageDoc,
    row: &Row,
    body: Option<&[u8]>,
    capture: Option<&CaptureDoc>,
    warcinfo_id: &str,
) -> anyhow::Result<u64> {
    let ex = Exchange::of(page);
    let target = row.final_url.clone().unwrap_or_else(|| row.url.clone());
    let when = ex.started.unwrap_or(page.fetched_at);
    let date = warc::warc_date(when);
    let payload = body.unwrap_or_default();
    // The head as received, but for the framing: the payload is written
    // whole and decoded, so its length is given and any chunking dropped.
    let revisit = capture.and_then(|c| captures::revisit(c, &target));
    // A revisit record holds the head alone, as received, or nothing.
    let reframe = revisit.is_none();
    let mut headers: Vec<(String, Vec<u8>)> = ex
        .headers
        .iter()
        .filter(|(n, _)| {
            let framing = n.eq_ignore_ascii_case("transfer-encoding")
                || (reframe && n.eq_ignore_ascii_case("content-length"));
            !framing
        })
        .cloned()
        .collect();
    if reframe {
        headers.push(("Content-Length".into(), payload.len().to_string().into_bytes()));
    }
    let status_line = status_line(&ex, row.status);
    let block = match &revisit {
        Some(r) if !r.head_in_block => Vec::new(),
        _ => warc::http_block(&status_line, &headers, payload),
    };
    // The head a revisit's block leaves out, for its metadata record.
    let kept_head = captures::received_head_fields(capture, &ex, &status_line);
    let response_id = warc::record_id();
    let mut response_headers = vec![
        ("WARC-Target-URI", target.clone()),
        ("WARC-Warcinfo-ID", warcinfo_id.to_string()),
    ];
    if let Some(ip) = &ex.ip {
        response_headers.push(("WARC-IP-Address", ip.clone()));
    }
    if let Some(r) = revisit {
        response_headers.extend(r.fields);
        let written = Record {
            kind: "revisit",
            id: &response_id,
            date: &date,
            content_type: "application/http;msgtype=response",
            headers: response_headers,
            block: &block,
        }
        .write_gz(out)?;
        let ids = (response_id.as_str(), warcinfo_id);
        return Ok(written + write_warc_companions(out, page, row, &target, &date, ids, &kept_head)?);
    }
    // The digest taken at fetch time when the record holds the whole body
    // received, so a reader checking it checks the stored body against
    // what was fetched; else (a body cut to fit the store, or not kept)
    // that of the payload written.
    let digest = match page.payload_sha1 {
        Some(d) if i64::try_from(payload.len()).is_ok_and(|n| n == row.bytes) => d,
        _ => PayloadDigest::of(payload),
    };
    response_headers.push(("WARC-Payload-Digest", digest.warc()));
    // A body or a head cut to a size limit (`head_truncated`: headers
    // past `store::exchange::MAX_RESPONSE_HEAD` left out).
    if row.truncated || page.head_truncated {
        response_headers.push(("WARC-Truncated", "length".into()));
    } else if (payload.len() as i64) < row.bytes {
        // The body was received but not kept (not HTML, or not a 2xx).
        response_headers.push(("WARC-Truncated", "unspecified".into()));
    }
    let written = Record {
        kind: "response",
        id: &response_id,
        date: &date,
        content_type: "application/http;msgtype=response",
        headers: response_headers,
        block: &block,
    }
    .write_gz(out)?;
    let ids = (response_id.as_str(), warcinfo_id);
    Ok(written + write_warc_companions(out, page, row, &target, &date, ids, &[])?)
}

/// The `request` and `metadata` records of a `response` (or `revisit`)
/// record, `WARC-Concurrent-To` it (`ids`: its record id and the
/// `warcinfo`'s); `extra` are further metadata fields, after the row's.
fn write_warc_companions(
    out: &mut impl Write,
    page: &PageDoc,
    row: &Row,
    target: &str,
    date: &str,
    (response_id, warcinfo_id): (&str, &str),
    extra: &[(&str, String)],
) -> anyhow::Result<u64> {
    let ex = Exchange::of(page);
    let target = target.to_string();
    let request = request_block(&target, &ex.request_headers);
    let mut written = Record {
        kind: "request",
        id: &warc::record_id(),
        date,
        content_type: "application/http;msgtype=request",
        headers: vec![
            ("WARC-Target-URI", target.clone()),
            ("WARC-Warcinfo-ID", warcinfo_id.to_string()),
            ("WARC-Concurrent-To", response_id.to_string()),
        ],
        block: &request,
    }
    .write_gz(out)?;

    let mut fields = String::new();
    let mut field = |name: &str, value: &str| {
        fields.push_str(name);
        fields.push_str(": ");
        fields.push_str(&warc::field_value(value));
        fields.push_str("\r\n");
    };
    field("via", &row.url);
    field("depth", &row.depth.to_string());
    field("outlinks", &row.outlinks.to_string());
    field("crawl-id", &row.crawl_id);
    for (name, value) in [
        ("title", &row.title),
        ("description", &row.description),
        ("canonical", &row.canonical),
        ("lang", &row.lang),
        ("charset", &row.charset),
        ("redirect-to", &row.redirect_to),
        ("robots", &row.robots),
        ("sitemap", &row.sitemap),
        ("capture", &row.capture),
    ] {
        if let Some(v) = value {
            field(name, v);
        }
    }
    for (name, value) in extra {
        field(name, value);
    }
    written += Record {
        kind: "metadata",
        id: &warc::record_id(),
        date,
        content_type: "application/warc-fields",
        headers: vec![
            ("WARC-Target-URI", target.clone()),
            ("WARC-Warcinfo-ID", warcinfo_id.to_string()),
            ("WARC-Concurrent-To", response_id.to_string()),
        ],
        block: fields.as_bytes(),
    }
    .write_gz(out)?;
    Ok(written)
}

/// The response's status line as stored, or (for pages stored before it
/// was) made from the status with the standard reason phrase.
pub(crate) fn status_line(ex: &Exchange, status: i32) -> String {
    if let Some(line) = &ex.status_line {
        return line.clone();
    }
    let status = u16::try_from(status).unwrap_or(0);
    let reason = http::StatusCode::from_u16(status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .unwrap_or("");
    format!("{} {status} {reason}", ex.http_version())
        .trim_end()
        .to_string()
}

/// The request as sent: `GET`, the path and query, `Host`, then the
/// headers the client sends on every request.
fn request_block(target: &str, headers: &[(String, Vec<u8>)]) -> Vec<u8> {
    let (path, host) = match url::Url::parse(target) {
        Ok(u) => {
            let mut path = u.path().to_string();
            if let Some(q) = u.query() {
                path.push('?');
                path.push_str(q);
            }
            let host = match (u.host_str(), u.port()) {
                (Some(h), Some(p)) => format!("{h}:{p}"),
                (Some(h), None) => h.to_string(),
                _ => String::new(),
            };
            (path, host)
        }
        Err(_) => ("/".to_string(), String::new()),
    };
    let mut all = vec![("Host".to_string(), host.into_bytes())];
    all.extend(headers.iter().cloned());
    warc::http_block(&format!("GET {path} HTTP/1.1"), &all, b"")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The WARC records of `page` (with `body`), as text.
    fn records_of(page: &PageDoc, body: &[u8]) -> String {
        let mut out = Vec::new();
        let row = Row::of(page, "c");
        write_warc_page(&mut out, page, &row, Some(body), None, "<urn:uuid:x>").expect("records");
        let mut text = String::new();
        std::io::Read::read_to_string(&mut flate2::read::MultiGzDecoder::new(&out[..]), &mut text)
            .expect("gzip");
        text
    }

    #[test]
    fn a_page_whose_head_was_cut_is_marked_truncated_in_its_warc_record() {
        let body = b"<p>hi</p>";
        let mut page = PageDoc::new(
            "http://a.test/".into(),
            "a.test".into(),
            0,
            200,
            body.len() as i64,
        );
        page.response_head = Some(store::exchange::head(
            Some("HTTP/1.1 200 OK"),
            [("x-a", &b"1"[..])],
        ));
        assert!(!records_of(&page, body).contains("WARC-Truncated"));
        page.head_truncated = true;
        assert!(records_of(&page, body).contains("WARC-Truncated: length\r\n"));
    }

    #[test]
    fn csv_fields_with_commas_quotes_or_breaks_are_quoted() {
        assert_eq!(csv_field("plain"), "plain");
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(csv_field("two\nlines"), "\"two\nlines\"");
        // What a spreadsheet would run is text.
        assert_eq!(csv_field("=1+2"), "\"'=1+2\"");
        assert_eq!(
            csv_field("=HYPERLINK(\"http://x\")"),
            "\"'=HYPERLINK(\"\"http://x\"\")\""
        );
        assert_eq!(csv_field("-1"), "-1");
        for f in ["+1+1", "-1+cmd", "@SUM(A1)", "\tx", "\rx"] {
            assert!(csv_field(f).starts_with("\"'"), "{f:?}");
        }
        assert_eq!(csv_field("a=b"), "a=b");
    }

    #[test]
    fn requests_name_the_host_and_port_and_keep_the_query() {
        let block = request_block(
            "http://a.test:8080/p/1?x=2#frag",
            &[("user-agent".into(), b"bot".to_vec())],
        );
        assert_eq!(
            String::from_utf8(block).expect("ascii"),
            "GET /p/1?x=2 HTTP/1.1\r\nHost: a.test:8080\r\nuser-agent: bot\r\n\r\n"
        );
    }
}
