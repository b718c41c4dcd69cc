//! A sitemap's `<lastmod>`s in a crawl that revisits: a page the sitemap
//! says changed after the capture we hold is due at once, rather than
//! when its interval runs out. No I/O here; the page writer reads the
//! pages' schedules ([`query`]) and runs the statements ([`statements`])
//! after the sitemap's own write.
//!
//! - Only pages already stored, and scheduled, move (a URL not crawled yet
//!   is crawled anyway, as the sitemap's link); one whose capture is as
//!   new as the lastmod, or that is due sooner, stays as it is.
//! - "At once" is a second from now: the least interval, so the due time
//!   is still ahead of the dispatcher's cursor (which passes only due
//!   times already past; see `dispatcher/src/revisits.rs`).
//! - A lastmod in the future counts as now: it cannot be a change yet,
//!   but it says one is newer than anything captured before now.
//! - The sitemap vouches for its own site only: only the `<loc>`s kept as
//!   its links count.
//! - Per chunk of [`CHUNK`] URLs, one read (`_id` in the list, two fields
//!   each) and one `update` command of many statements
//!   (`store::write::update_each`): a sitemap of 50,000 URLs costs the
//!   store a few round trips, not 50,000.
//! - Each statement names the due time it read: a page revisited between
//!   the read and the write has another, and is left alone. The capture
//!   times are compared here, not in the store's filter: nx-27017 0.8.1
//!   passed over, in an `update`, pages whose `revisit.body_at` a `find`
//!   with the same filter returned; due times are plain numbers, which
//!   both stores compare alike.
//!
//! Why trust a lastmod at all: a revisit that finds nothing new costs a
//! 304 at most, and one that finds a change early is what the sitemap is
//! for. Sites that stamp every URL with the time of the request make
//! every page of the sitemap due whenever the sitemap is read; the
//! sitemap's own interval bounds that, and each page's interval grows
//! with every visit that finds nothing (`shared::revisit`).

use std::collections::HashMap;

use bson::{doc, DateTime, Document};
use serde::Deserialize;
use store::docs::{PageDoc, RevisitState};

/// URLs per read and per `update` command: 10,000 statements of a few
/// hundred bytes each stay well under a command's 16 MiB.
pub(crate) const CHUNK: usize = 10_000;
/// How far ahead of now a lastmod sets a page's due time.
const SOON_MS: i64 = 1_000;

/// A page of the sitemap, by URL as its link, and when the sitemap says
/// it last changed (Unix ms).
pub(crate) type Lastmod = (String, i64);

/// A stored page's schedule, as [`query`] reads it.
#[derive(Debug, Deserialize)]
pub(crate) struct Scheduled {
    #[serde(rename = "_id")]
    url: String,
    due_ms: i64,
    revisit: Capture,
}

#[derive(Debug, Deserialize)]
struct Capture {
    body_at: DateTime,
}

/// The filter and projection that read the schedules of `lastmods`' pages.
pub(crate) fn query(lastmods: &[Lastmod]) -> (Document, Document) {
    let urls: Vec<&str> = lastmods.iter().map(|(url, _)| url.as_str()).collect();
    (
        doc! {"_id": {"$in": urls}, PageDoc::DUE_MS: {"$exists": true}},
        // The whole `revisit` (a few dozen bytes): nx-27017 answers a
        // dotted projection with a flat field.
        doc! {"_id": 1, PageDoc::DUE_MS: 1, RevisitState::FIELD: 1},
    )
}

/// The `update` statements that make due, at `now_ms`, the pages of
/// `scheduled` that `lastmods` says changed since their capture.
pub(crate) fn statements(lastmods: &[Lastmod], scheduled: &[Scheduled], now_ms: i64) -> Vec<Document> {
    let due = now_ms.saturating_add(SOON_MS);
    let changed: HashMap<&str, i64> = lastmods
        .iter()
        .map(|(url, at)| (url.as_str(), (*at).min(now_ms)))
        .collect();
    scheduled
        .iter()
        .filter(|s| s.due_ms > due)
        .filter(|s| {
            changed
                .get(s.url.as_str())
                .is_some_and(|&at| s.revisit.body_at.timestamp_millis() < at)
        })
        .map(|s| {
            doc! {
                "q": {"_id": &s.url, PageDoc::DUE_MS: s.due_ms},
                "u": {"$set": {PageDoc::DUE_MS: due}},
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(url: &str, due_ms: i64, body_at: i64) -> Scheduled {
        Scheduled {
            url: url.into(),
            due_ms,
            revisit: Capture {
                body_at: DateTime::from_millis(body_at),
            },
        }
    }

    #[test]
    fn a_page_is_made_due_soon_only_if_changed_after_its_capture_and_not_due_sooner() {
        let now = 1_000_000;
        let lastmods = vec![
            ("http://a.test/changed".to_string(), 900_000),
            ("http://a.test/future".to_string(), 5_000_000),
            ("http://a.test/older".to_string(), 100_000),
            ("http://a.test/due-soon".to_string(), 900_000),
            ("http://a.test/unlisted-lastmod".to_string(), 900_000),
        ];
        let scheduled = vec![
            page("http://a.test/changed", 9_000_000, 800_000),
            // A lastmod in the future counts as now: after a capture at 999,999.
            page("http://a.test/future", 9_000_000, 999_999),
            page("http://a.test/older", 9_000_000, 800_000),
            page("http://a.test/due-soon", now + 500, 800_000),
            page("http://a.test/not-in-the-sitemap", 9_000_000, 0),
        ];
        let s = statements(&lastmods, &scheduled, now);
        let moved: Vec<&str> = s
            .iter()
            .map(|st| st.get_document("q").unwrap().get_str("_id").unwrap())
            .collect();
        assert_eq!(moved, ["http://a.test/changed", "http://a.test/future"]);
        // Only if its due time is still the one read.
        let q = s[0].get_document("q").unwrap();
        assert_eq!(q.get_i64("due_ms"), Ok(9_000_000));
        let set = s[0].get_document("u").unwrap().get_document("$set").unwrap();
        assert_eq!(set.get_i64("due_ms"), Ok(now + SOON_MS));
    }

    #[test]
    fn the_read_asks_for_the_listed_pages_schedules_only() {
        let (filter, projection) = query(&[("http://a.test/x".into(), 1)]);
        assert_eq!(
            filter
                .get_document("_id")
                .unwrap()
                .get_array("$in")
                .unwrap()
                .len(),
            1
        );
        assert!(projection.contains_key("revisit"));
    }
}
