//! Links held back while the stored URLs are read in after a restart
//! (see `crate::seen`, [`super::intake::Intake::judge`]): in memory up to
//! a bound, past it appended to a file, and handed back once the seen-set
//! is whole: the memory's at once, the file's a slice at a time.
//!
//! Why a file: the read of 10 million stored URLs takes 40–60 s of
//! nx-27017, and a crawl's results bring about 20 links each, nearly all
//! of which the seen-set cannot judge yet. Held only in memory, the links
//! reached any bound worth having (500,000, about 100 MB) within seconds,
//! and leasing then had to stop until the read ended: the restarted crawl
//! ran at the read's pace (0.21 of its rate over the first 300,000
//! results, scripts/scale-measurements.md). Past the bound the links cost
//! disk, not memory, and leasing goes on.
//!
//! The file is the process's own: created in the temporary directory and
//! unlinked at once, so nothing is left behind whatever ends the process.
//! It needs no durability: until every held link is judged, the state
//! records no domain's progress (`CrawlState::record_progress`), so after
//! a crash the pages the links came from are crawled again and their
//! links found again. That is also why a failed write or read loses
//! nothing across runs: it is logged, progress stays unrecorded for the
//! rest of the run ([`HeldLinks::lost`]), and a failed write makes the
//! links stay in memory, past the bound, and leasing stop as it did
//! before the file existed ([`HeldLinks::is_full`]).
//!
//! This is the one file the dispatcher's state writes itself: the links
//! must leave memory when they are judged, and a buffered append to a
//! local file of the process's own is not the store I/O the shell does.

use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::sync::atomic::{AtomicU64, Ordering};

/// Longest URL the file takes back: a record longer than this is
/// corruption, not a link (links are far shorter, see `shared::urls`).
const MAX_URL_BYTES: u32 = 1 << 20;

/// Held links: (URL, depth), oldest first.
pub(crate) struct HeldLinks {
    memory: Vec<(String, u16)>,
    bound: usize,
    spill: Spill,
    /// Written to the file and not read back yet.
    unread: u64,
    /// A write or read of the file failed: some links were not judged.
    lost: bool,
}

/// The file, written while links are held and read once they are judged.
enum Spill {
    /// Not needed yet.
    None,
    Writing(BufWriter<File>),
    Reading(BufReader<File>),
    /// Writing failed: links stay in memory.
    Failed,
}

impl HeldLinks {
    /// Held links that stay in memory up to `bound` (`--held-links-memory`).
    pub(crate) fn with_bound(bound: usize) -> HeldLinks {
        HeldLinks {
            memory: Vec::new(),
            bound,
            spill: Spill::None,
            unread: 0,
            lost: false,
        }
    }

    /// Holds a link; `true` if it went to the file.
    pub(crate) fn hold(&mut self, url: String, depth: u16) -> bool {
        if self.memory.len() < self.bound || matches!(self.spill, Spill::Failed) {
            self.memory.push((url, depth));
            return false;
        }
        match self.append(&url, depth) {
            Ok(()) => {
                self.unread = self.unread.saturating_add(1);
                true
            }
            Err(e) => {
                tracing::error!(
                    error = %e,
                    written = self.unread,
                    "could not write the links held back to a temporary file; the links held from now on stay in memory and no URL is leased while they are over {}; no domain's progress is recorded until the crawl restarts, so that pages whose links may be lost are crawled again then",
                    self.bound
                );
                self.spill = Spill::Failed;
                self.lost = true;
                self.memory.push((url, depth));
                false
            }
        }
    }

    fn append(&mut self, url: &str, depth: u16) -> io::Result<()> {
        if matches!(self.spill, Spill::None) {
            self.spill = Spill::Writing(BufWriter::with_capacity(1 << 16, unlinked_file()?));
        }
        let Spill::Writing(w) = &mut self.spill else {
            return Err(io::Error::other("the file is being read"));
        };
        let len = u32::try_from(url.len())
            .ok()
            .filter(|&n| n <= MAX_URL_BYTES)
            .ok_or_else(|| io::Error::other("a URL too long to hold"))?;
        w.write_all(&depth.to_le_bytes())?;
        w.write_all(&len.to_le_bytes())?;
        w.write_all(url.as_bytes())
    }

    /// The links held in memory, to be judged now (the file's come after,
    /// [`HeldLinks::take_from_file`]).
    pub(crate) fn take_memory(&mut self) -> Vec<(String, u16)> {
        std::mem::take(&mut self.memory)
    }

    /// Up to `max` links from the file, in the order they were held.
    pub(crate) fn take_from_file(&mut self, max: usize) -> Vec<(String, u16)> {
        let mut out = Vec::new();
        if self.unread == 0 {
            return out;
        }
        if let Err(e) = self.read_into(&mut out, max) {
            tracing::error!(
                error = %e,
                unread = self.unread,
                "could not read back the links held in a temporary file; they are not judged in this run, and no domain's progress is recorded until the crawl restarts, so that the pages they came from are crawled again then"
            );
            self.lost = true;
            self.unread = 0;
        }
        if self.unread == 0 {
            // Every link was read back (or cannot be): the file, unlinked, goes.
            self.spill = Spill::None;
        }
        out
    }

    fn read_into(&mut self, out: &mut Vec<(String, u16)>, max: usize) -> io::Result<()> {
        self.spill = match std::mem::replace(&mut self.spill, Spill::None) {
            Spill::Writing(w) => {
                let mut file = w.into_inner().map_err(|e| e.into_error())?;
                file.seek(SeekFrom::Start(0))?;
                Spill::Reading(BufReader::with_capacity(1 << 16, file))
            }
            other => other,
        };
        let Spill::Reading(r) = &mut self.spill else {
            return Err(io::Error::other("the file was not written"));
        };
        while out.len() < max && self.unread > 0 {
            let mut head = [0u8; 6];
            r.read_exact(&mut head)?;
            let depth = u16::from_le_bytes([head[0], head[1]]);
            let len = u32::from_le_bytes([head[2], head[3], head[4], head[5]]);
            if len > MAX_URL_BYTES {
                return Err(io::Error::other(format!("a record of {len} bytes")));
            }
            let mut url = vec![0u8; len as usize];
            r.read_exact(&mut url)?;
            let url = String::from_utf8(url).map_err(io::Error::other)?;
            out.push((url, depth));
            self.unread -= 1;
        }
        Ok(())
    }

    /// No link is held, in memory or in the file.
    pub(crate) fn is_empty(&self) -> bool {
        self.memory.is_empty() && self.unread == 0
    }

    /// The file failed and the memory is at its bound: no more links
    /// should come (no URL leased) until they are judged.
    pub(crate) fn is_full(&self) -> bool {
        matches!(self.spill, Spill::Failed) && self.memory.len() >= self.bound
    }

    /// Some held links could not be written or read back: the crawl must
    /// record no progress for the rest of this run (see the module doc).
    pub(crate) fn lost(&self) -> bool {
        self.lost
    }
}

/// A new file in the temporary directory, unlinked at once: the process
/// holds the only handle to it.
fn unlinked_file() -> io::Result<File> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let path = std::env::temp_dir().join(format!("crawler-dispatcher-held-{}-{n}", std::process::id()));
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&path)?;
    std::fs::remove_file(&path)?;
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn past_the_bound_links_go_to_the_file_and_come_back_in_order_and_in_slices() {
        let mut held = HeldLinks::with_bound(2);
        for i in 0..7u16 {
            let to_file = held.hold(format!("http://a.test/{i}"), i);
            assert_eq!(to_file, i >= 2);
        }
        assert_eq!(held.unread, 5);
        assert!(!held.is_full(), "the file takes what memory does not");
        let memory = held.take_memory();
        assert_eq!(
            memory,
            vec![
                ("http://a.test/0".to_string(), 0),
                ("http://a.test/1".to_string(), 1)
            ]
        );
        assert!(!held.is_empty());
        let first = held.take_from_file(3);
        assert_eq!(first.iter().map(|(_, d)| *d).collect::<Vec<_>>(), vec![2, 3, 4]);
        assert_eq!(first[0].0, "http://a.test/2");
        let rest = held.take_from_file(100);
        assert_eq!(
            rest,
            vec![
                ("http://a.test/5".to_string(), 5),
                ("http://a.test/6".to_string(), 6)
            ]
        );
        assert!(held.is_empty() && !held.lost());
        assert!(held.take_from_file(10).is_empty());
    }

    #[test]
    fn the_file_is_unlinked_while_in_use() {
        use std::os::unix::fs::MetadataExt;
        let mut held = HeldLinks::with_bound(0);
        held.hold("http://a.test/".into(), 0);
        // This holder's own file has no name left. (Not a look at the
        // temporary directory: the tests beside this one open files of
        // the same process there, each named for a moment.)
        let Spill::Writing(file) = &held.spill else {
            panic!("the link did not go to a file");
        };
        assert_eq!(file.get_ref().metadata().unwrap().nlink(), 0);
        assert_eq!(held.take_from_file(1).len(), 1);
    }

    #[test]
    fn a_file_that_cannot_be_read_back_loses_its_links_for_this_run_only_and_says_so() {
        let mut held = HeldLinks::with_bound(0);
        held.hold("http://a.test/".into(), 0);
        held.hold("http://b.test/".into(), 0);
        // The file's end is cut off: the second record is not there.
        let Spill::Writing(w) = std::mem::replace(&mut held.spill, Spill::None) else {
            panic!("writing")
        };
        let file = w.into_inner().unwrap();
        let len = file.metadata().unwrap().len();
        file.set_len(len - 3).unwrap();
        held.spill = Spill::Writing(BufWriter::new(file));
        let got = held.take_from_file(10);
        assert_eq!(got, vec![("http://a.test/".to_string(), 0)]);
        assert!(held.lost() && held.is_empty());
    }

    #[test]
    fn a_file_that_cannot_be_written_keeps_links_in_memory_and_is_full_at_the_bound() {
        let mut held = HeldLinks::with_bound(1);
        held.hold("http://a.test/".into(), 0);
        held.spill = Spill::Failed;
        assert!(!held.hold("http://b.test/".into(), 0));
        assert!(held.is_full());
        assert_eq!(held.take_memory().len(), 2);
    }
}
