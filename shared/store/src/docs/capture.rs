//! `captures`: every visit of a URL after its first, when the crawl
//! revisits (`--revisit-after`). Written once by the child that made the
//! visit (an insert keyed by URL and time, so a retried write stores it
//! once); read by `pages export`, which writes each as a WARC record.
//!
//! Why `pages` keeps the first capture and this collection the later ones,
//! rather than `pages` the latest: captures are then append-only, like
//! the WARC files made of them. A change costs one insert here, where
//! keeping the latest in `pages` would cost a read of the old document,
//! its insert here and its replacement there; and every reader of
//! `pages` (the export, `pages stats`, a resumed dispatcher's look-up of
//! finished URLs) reads the crawl's first pass as before. The latest
//! content of a URL is its capture with the greatest `fetched_at` here,
//! else its page; the page's schedule ([`RevisitState::body_at`]) names
//! the date of the capture holding it.

use bson::DateTime;
use serde::{Deserialize, Serialize};

use super::PageDoc;

/// What a visit found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CaptureKind {
    /// New content (another payload digest, or another status): the
    /// capture holds it, body and all, like a page.
    Changed,
    /// The server answered 304 Not Modified: no body was sent (a WARC
    /// revisit record, profile `server-not-modified`).
    NotModified,
    /// A 200 whose payload has the digest of the last one: the body is
    /// not kept again (profile `identical-payload-digest`).
    SamePayload,
}

/// A capture's key: the URL and the time of the visit, in a subdocument so
/// that the URL's captures are one `_id` range.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CaptureId {
    pub url: String,
    /// Unix ms of the visit (its page's `fetched_at`).
    pub at: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CaptureDoc {
    #[serde(rename = "_id")]
    pub id: CaptureId,
    pub kind: CaptureKind,
    /// For an unchanged capture: when the payload it repeats was captured
    /// ([`RevisitState::body_at`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refers_to: Option<DateTime>,
    /// The visit as a page: status, heads and times always; the body and
    /// what was extracted from it for a [`CaptureKind::Changed`] one only.
    pub page: PageDoc,
}

impl CaptureDoc {
    pub const URL: &'static str = "_id.url";
    pub const AT: &'static str = "_id.at";
}

/// A page's revisit schedule, kept on its `pages` document and moved by
/// every visit: what the next one sends and when it is due.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RevisitState {
    /// The URL's interval (see `shared::revisit`).
    pub interval_ms: i64,
    /// The validators of the latest content, at most
    /// [`MAX_VALIDATOR_BYTES`] each (longer ones are not kept: a
    /// conditional request with half a validator would never match).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etag: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_modified: Option<String>,
    /// The latest payload's SHA-1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<crate::payload_digest::PayloadDigest>,
    /// When the latest content was captured: the `WARC-Date` of its
    /// `response` record (the request's start), which a `revisit` record
    /// refers to.
    pub body_at: DateTime,
}

impl RevisitState {
    pub const FIELD: &'static str = "revisit";
}

/// Longest validator kept: ETags and dates are tens of bytes; a server
/// sending kilobytes would have them sent back with every revisit.
pub const MAX_VALIDATOR_BYTES: usize = 256;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_capture_round_trips_with_its_page_nested() {
        let page = PageDoc::new("http://a.test/".into(), "a.test".into(), 0, 304, 0);
        let c = CaptureDoc {
            id: CaptureId {
                url: page.url.clone(),
                at: 5,
            },
            kind: CaptureKind::NotModified,
            refers_to: Some(DateTime::from_millis(1)),
            page,
        };
        let d = bson::to_document(&c).unwrap();
        assert_eq!(
            d.get_document("_id").unwrap().get_str("url"),
            Ok("http://a.test/")
        );
        assert_eq!(d.get_str("kind"), Ok("not_modified"));
        let back: CaptureDoc = bson::from_document(d).unwrap();
        assert_eq!(back, c);
    }
}
