//! Stored entries found finished by their page after a restart, whose
//! links are offered again (see `crate::finished`): the dispatcher that
//! fetched them may have died before it wrote those links to the
//! frontier. Their links are read from the pages once the seen-set is
//! whole, so that the links already known (nearly all) are dropped in
//! memory rather than each costing the store an insert to find out; after
//! the links are offered, the entry is marked `done`, so that a later
//! restart does not read it again.

use crate::finished::LOOK_UP_BATCH;

/// Reads of links under way at most.
const READING_AT_ONCE: usize = 2;

#[derive(Debug, Default)]
pub(crate) struct Relinks {
    /// (URL, depth) whose links are still to be read.
    waiting: Vec<(String, u16)>,
    /// Reads asked for and not answered.
    reading: usize,
}

impl Relinks {
    pub(crate) fn found(&mut self, url: String, depth: u16) {
        self.waiting.push((url, depth));
    }

    /// The next batch to read, if one may be read now.
    pub(crate) fn next_read(&mut self) -> Option<Vec<(String, u16)>> {
        if self.reading >= READING_AT_ONCE || self.waiting.is_empty() {
            return None;
        }
        let from = self.waiting.len().saturating_sub(LOOK_UP_BATCH);
        self.reading += 1;
        Some(self.waiting.split_off(from))
    }

    /// A read came back; `failed`: its URLs, to be read again.
    pub(crate) fn answered(&mut self, failed: Option<Vec<(String, u16)>>) {
        self.reading = self.reading.saturating_sub(1);
        if let Some(urls) = failed {
            self.waiting.extend(urls);
        }
    }

    /// Nothing is waiting or being read.
    pub(crate) fn is_idle(&self) -> bool {
        self.waiting.is_empty() && self.reading == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_go_out_in_batches_two_at_a_time_and_failures_come_back() {
        let mut r = Relinks::default();
        for i in 0..(LOOK_UP_BATCH + 10) {
            r.found(format!("http://a.test/{i}"), 1);
        }
        let first = r.next_read().unwrap();
        let second = r.next_read().unwrap();
        assert_eq!((first.len(), second.len()), (LOOK_UP_BATCH, 10));
        assert!(r.next_read().is_none());
        assert!(!r.is_idle());
        r.answered(Some(second));
        r.answered(None);
        assert_eq!(r.next_read().map(|b| b.len()), Some(10));
        r.answered(None);
        assert!(r.is_idle());
    }
}
