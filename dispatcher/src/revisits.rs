//! Revisits: which stored pages are due again, held apart from the
//! frontier's new URLs. No I/O here; the shell reads what is due
//! ([`read::due`]) when [`Revisits::want_read`] asks, and hands it back.
//!
//! The truth about what is due is in the store: each page's `due_ms`
//! (set by the child at its first visit and moved by every later one; see
//! `crawler-child/src/revisit.rs`). The dispatcher reads it in `due_ms`
//! order, behind a cursor, and queues each due URL in memory in its
//! domain's window, with the domain's politeness, ownership and leases
//! like any URL. Nothing is written to the frontier for a revisit: the
//! URL's frontier entry says it was crawled once, and a dispatcher killed
//! with revisits queued reads them again from `due_ms`, which only a
//! visit moves.
//!
//! Why a cursor and not "everything due": pages out on a revisit lease are
//! still due until the child's write lands; reading from the start each
//! time would read them again and again. The cursor only moves over due
//! times already past, and every due time written later is in the future
//! (one interval, at least a second, after a visit), so no page is passed
//! over. A restart starts from the beginning.
//!
//! The URLs queued here are bounded ([`MAX_QUEUED`]): a crawl of millions
//! of pages all due at once reads them a batch at a time as revisits end.

use std::collections::HashMap;

use link::protocol::Revisit;

pub(crate) mod read;

/// Revisits queued or out at most (their lease details in memory: a few
/// hundred bytes each).
pub(crate) const MAX_QUEUED: usize = 20_000;
/// Pages asked for per read.
const READ_BATCH: usize = 1_000;
/// Longest wait between two reads when nothing is due: a page stored
/// meanwhile is due one interval after its visit, and a read this often
/// finds it at most this late.
const MAX_IDLE_MS: u64 = 5_000;
/// After a failed read.
const RETRY_MS: u64 = 2_000;

/// Where the last read ended: the due time (Unix ms) and URL of the last
/// page taken, in the order read.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Cursor {
    pub due_ms: i64,
    pub url: String,
}

/// A read of pages due after `after`, in `(due_ms, _id)` order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DueRead {
    pub after: Cursor,
    pub limit: usize,
}

/// A page with a due time, as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Due {
    pub url: String,
    pub domain: String,
    pub depth: u16,
    pub due_ms: i64,
    pub revisit: Revisit,
}

#[derive(Debug, Default)]
pub(crate) struct Revisits {
    /// The revisits queued or out, by URL: what their leases carry.
    queued: HashMap<String, Revisit>,
    cursor: Cursor,
    reading: bool,
    /// Unix ms before which no read is asked for.
    next_read_ms: u64,
    /// Revisits queued since the start, for the progress line.
    pub(crate) started: u64,
}

impl Revisits {
    /// A read of what is due, if one is wanted now.
    pub(crate) fn want_read(&mut self, now_ms: u64) -> Option<DueRead> {
        if self.reading || now_ms < self.next_read_ms || self.queued.len() > MAX_QUEUED / 2 {
            return None;
        }
        self.reading = true;
        Some(DueRead {
            after: self.cursor.clone(),
            limit: READ_BATCH.min(MAX_QUEUED - self.queued.len()),
        })
    }

    /// A read's answer: the pages due by `now_ms` that are not queued
    /// already, to queue (in due order). The cursor moves past them.
    pub(crate) fn answered(
        &mut self,
        asked: &DueRead,
        found: Result<Vec<Due>, String>,
        now_ms: u64,
    ) -> Vec<Due> {
        self.reading = false;
        let found = match found {
            Ok(found) => found,
            Err(e) => {
                tracing::warn!(error = %e, "reading the pages due for a revisit failed; will retry");
                self.next_read_ms = now_ms.saturating_add(RETRY_MS);
                return Vec::new();
            }
        };
        let full = found.len() >= asked.limit;
        let now = i64::try_from(now_ms).unwrap_or(i64::MAX);
        let mut next_due = None;
        let mut out = Vec::new();
        for due in found {
            if due.due_ms > now {
                next_due = Some(due.due_ms);
                break;
            }
            if (due.due_ms, due.url.as_str()) <= (self.cursor.due_ms, self.cursor.url.as_str()) {
                // At the cursor itself (the read is from it, inclusive).
                continue;
            }
            self.cursor = Cursor {
                due_ms: due.due_ms,
                url: due.url.clone(),
            };
            if self.queued.contains_key(&due.url) {
                continue;
            }
            self.queued.insert(due.url.clone(), due.revisit.clone());
            self.started += 1;
            out.push(due);
        }
        self.next_read_ms = match next_due {
            // Wake when the next page is due, or sooner for pages stored meanwhile.
            Some(ms) => u64::try_from(ms)
                .unwrap_or(0)
                .min(now_ms.saturating_add(MAX_IDLE_MS)),
            // A full page of due pages: more may be due behind it.
            None if full => now_ms,
            None => now_ms.saturating_add(MAX_IDLE_MS),
        };
        out
    }

    /// What a lease of `url` carries, if it is a revisit.
    pub(crate) fn lease_of(&self, url: &str) -> Option<Revisit> {
        self.queued.get(url).cloned()
    }

    #[cfg(test)]
    pub(crate) fn is_revisit(&self, url: &str) -> bool {
        self.queued.contains_key(url)
    }

    /// `url`'s crawl is over (answered, or given up on): whether it was a
    /// revisit, which is then forgotten (the child has moved its due time).
    pub(crate) fn finished(&mut self, url: &str) -> bool {
        self.queued.remove(url).is_some()
    }

    pub(crate) fn queued(&self) -> usize {
        self.queued.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn due(url: &str, due_ms: i64) -> Due {
        Due {
            url: url.into(),
            domain: "a.test".into(),
            depth: 0,
            due_ms,
            revisit: Revisit {
                etag: None,
                last_modified: None,
                digest: None,
                interval_ms: 1000,
                body_at_ms: 0,
            },
        }
    }

    #[test]
    fn due_pages_are_queued_once_and_the_cursor_moves_past_them() {
        let mut r = Revisits::default();
        let ask = r.want_read(100).unwrap();
        assert_eq!(ask.after, Cursor::default());
        assert!(r.want_read(100).is_none(), "one read at a time");
        let got = r.answered(&ask, Ok(vec![due("a", 10), due("b", 20), due("c", 500)]), 100);
        assert_eq!(got.iter().map(|d| d.url.as_str()).collect::<Vec<_>>(), ["a", "b"]);
        assert!(r.lease_of("a").is_some() && r.lease_of("c").is_none());
        // Nothing more is due before 500.
        assert!(r.want_read(499).is_none());
        let ask = r.want_read(500).unwrap();
        assert_eq!(
            ask.after,
            Cursor {
                due_ms: 20,
                url: "b".into()
            }
        );
        // The store answers from the cursor inclusive; "b" is not queued twice.
        let got = r.answered(&ask, Ok(vec![due("b", 20), due("c", 500)]), 500);
        assert_eq!(got.len(), 1);
        assert!(r.finished("a"));
        assert!(!r.finished("a"), "forgotten once over");
        assert!(!r.is_revisit("a") && r.is_revisit("b"));
        assert_eq!((r.queued(), r.started), (2, 3));
    }

    #[test]
    fn a_full_read_is_followed_at_once_and_a_failed_one_later() {
        let mut r = Revisits::default();
        let mut ask = r.want_read(1000).unwrap();
        ask.limit = 2;
        r.answered(&ask, Ok(vec![due("a", 1), due("b", 2)]), 1000);
        assert!(r.want_read(1000).is_some());
        let ask = DueRead {
            after: Cursor::default(),
            limit: 2,
        };
        assert!(r.answered(&ask, Err("down".into()), 1000).is_empty());
        assert!(r.want_read(1000).is_none());
        assert!(r.want_read(1000 + RETRY_MS).is_some());
    }

    #[test]
    fn reads_stop_while_many_revisits_are_queued() {
        let mut r = Revisits::default();
        for i in 0..=MAX_QUEUED / 2 {
            r.queued.insert(format!("u{i}"), due("x", 0).revisit);
        }
        assert!(r.want_read(0).is_none());
        assert!(r.finished("u0"));
        assert!(r.want_read(0).is_some());
    }
}
