//! Stored URLs found finished by their page after a restart (or when a
//! lease ended unanswered), whose links are offered again (see
//! `crate::finished`): the dispatcher that fetched them may have died
//! before it wrote those links to the frontier. Their links are read from
//! the pages once the seen-set is whole, so that the links already known
//! (nearly all) are dropped in memory rather than each costing the store
//! a write. Until its links are offered, such a URL is open: its domain's
//! progress stays below it (`frontier::progress`), so a later restart
//! still finds it.

use std::collections::HashMap;

use super::inputs::LOOK_UP_BATCH;
use crate::frontier::Relink;

/// Reads of links under way at most.
const READING_AT_ONCE: usize = 2;

#[derive(Debug, Default)]
pub(crate) struct Relinks {
    /// Whose links are still to be read.
    waiting: Vec<Relink>,
    /// Reads asked for and not answered.
    reading: usize,
    /// The domain and `seq` of the URLs being read, by `seq` (those in
    /// the stored frontier).
    read_seqs: HashMap<i64, String>,
}

impl Relinks {
    pub(crate) fn found(&mut self, r: Relink) {
        self.waiting.push(r);
    }

    /// The next batch to read, if one may be read now.
    pub(crate) fn next_read(&mut self) -> Option<Vec<Relink>> {
        if self.reading >= READING_AT_ONCE || self.waiting.is_empty() {
            return None;
        }
        let from = self.waiting.len().saturating_sub(LOOK_UP_BATCH);
        self.reading += 1;
        let batch = self.waiting.split_off(from);
        for r in batch.iter().filter(|r| r.seq > 0) {
            self.read_seqs.insert(r.seq, r.domain.clone());
        }
        Some(batch)
    }

    /// A read of `asked` came back; `failed`: its URLs are read again.
    pub(crate) fn answered(&mut self, asked: &[Relink], failed: bool) {
        self.reading = self.reading.saturating_sub(1);
        for r in asked {
            self.read_seqs.remove(&r.seq);
        }
        if failed {
            self.waiting.extend_from_slice(asked);
        }
    }

    /// Nothing is waiting or being read.
    pub(crate) fn is_idle(&self) -> bool {
        self.waiting.is_empty() && self.reading == 0
    }

    /// The lowest `seq` of each domain's URLs whose links wait, by name.
    pub(crate) fn lowest_open(&self, low: &mut HashMap<String, i64>) {
        let waiting = self.waiting.iter().map(|r| (&r.domain, r.seq));
        let reading = self.read_seqs.iter().map(|(s, d)| (d, *s));
        for (domain, seq) in waiting.chain(reading).filter(|(_, s)| *s > 0) {
            match low.get_mut(domain.as_str()) {
                Some(m) => *m = (*m).min(seq),
                None => {
                    low.insert(domain.clone(), seq);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(i: usize) -> Relink {
        Relink {
            url: format!("http://a.test/{i}"),
            depth: 1,
            domain: "a.test".into(),
            seq: i as i64 + 1,
        }
    }

    #[test]
    fn reads_go_out_in_batches_two_at_a_time_and_failures_come_back() {
        let mut relinks = Relinks::default();
        for i in 0..(LOOK_UP_BATCH + 10) {
            relinks.found(r(i));
        }
        let first = relinks.next_read().unwrap();
        let second = relinks.next_read().unwrap();
        assert_eq!((first.len(), second.len()), (LOOK_UP_BATCH, 10));
        assert!(relinks.next_read().is_none());
        assert!(!relinks.is_idle());
        relinks.answered(&second, true);
        relinks.answered(&first, false);
        assert_eq!(relinks.next_read().map(|b| b.len()), Some(10));
        let mut low = HashMap::new();
        relinks.lowest_open(&mut low);
        assert_eq!(low.get("a.test"), Some(&1));
        relinks.answered(&second, false);
        assert!(relinks.is_idle());
        let mut low = HashMap::new();
        relinks.lowest_open(&mut low);
        assert!(low.is_empty());
    }
}
