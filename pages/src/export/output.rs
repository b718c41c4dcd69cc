//! The file an export writes: opened where the last checkpoint left it,
//! begun with a `warcinfo` record or the CSV header, and given one page
//! (or capture) at a time in the export's format.

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Seek, Write};
use std::path::{Path, PathBuf};

use anyhow::Context;
use bson::DateTime;
use store::docs::{CaptureDoc, PageDoc};

use super::row::Row;
use super::warc_page::write_warc_page;
use super::{captures, Format, State};
use crate::warc::{self, Record};

pub(super) fn file_name(dir: &Path, format: Format, n: u32) -> PathBuf {
    dir.join(format!("pages-{n:05}.{}", format.extension()))
}

/// The file being written.
pub(super) struct Output {
    pub(super) path: PathBuf,
    pub(super) file: BufWriter<File>,
    pub(super) format: Format,
    pub(super) bytes: u64,
    pub(super) warcinfo_id: String,
    /// The crawl exported, for its rows (pages do not repeat it: their
    /// collection names it).
    pub(super) crawl_id: String,
}

impl Output {
    /// Opens file `state.file`, cut back to `state.file_bytes` (what the
    /// last checkpoint saw written; anything after it is written again).
    pub(super) fn open(dir: &Path, state: &State) -> anyhow::Result<Output> {
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
    pub(super) fn page(
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
    pub(super) fn flush(&mut self) -> anyhow::Result<u64> {
        self.file.flush()?;
        self.file.get_ref().sync_data()?;
        Ok(self.bytes)
    }
}
