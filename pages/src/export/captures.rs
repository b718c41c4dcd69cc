//! The captures of a crawl that revisits (`store::docs::CaptureDoc`), after
//! its pages: each later visit of a URL as WARC records. A changed one is
//! written as a page is (`response`, `request`, `metadata`); an unchanged
//! one as a `revisit` record with the profile that says why (WARC 1.1
//! §6.7): `server-not-modified` for a 304, `identical-payload-digest` for
//! a 200 (or any status) with the payload's digest of before. Either refers
//! to the capture holding that payload by URL and date
//! (`WARC-Refers-To-Target-URI`, `WARC-Refers-To-Date`, the `WARC-Date` of
//! its `response`), which is what replay tools (pywb) look up; record ids
//! are made at export time, so `WARC-Refers-To` is left out.
//!
//! A `server-not-modified` record's block is empty, as Heritrix writes it
//! (its `RevisitRecordBuilder` keeps the head only for
//! `identical-payload-digest`): pywb 2.10 answers a revisit whose own HTTP
//! head has a 3xx status with that head and no payload (the redirect
//! shortcut of its `ResolvingLoader`, in `pywb.warcserver.resource`), so a
//! 304 head in the block would replay as an empty 304; with no head it
//! takes the head and payload of the capture referred to, which is what a
//! 304 says the page still is. The 304 is not lost: its status line and
//! headers, as received, go into the `metadata` record concurrent to the
//! revisit ([`received_head_fields`]), and JSON lines and CSV keep its
//! status. WARC 1.1 §6.7.3 leaves what the block holds to the writer.
//!
//! Captures are read in `(URL, time)` order; a resumed export goes on
//! after the last one written ([`super::State::last_capture`]).

use bson::{doc, Document};
use store::docs::{CaptureDoc, CaptureKind};
use store::exchange::Exchange;
use store::Stores;

use super::reader::Reader;
use super::Run;
use crate::warc;

const NOT_MODIFIED: &str = "http://netpreserve.org/warc/1.1/revisit/server-not-modified";
const IDENTICAL_PAYLOAD: &str = "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest";

/// The pages' filter (`--since`, `--respect-noarchive`) for captures,
/// whose page is a field of theirs.
pub(super) fn filter(pages: &Document) -> Document {
    pages
        .iter()
        .map(|(k, v)| (format!("page.{k}"), v.clone()))
        .collect()
}

pub(super) fn kind_str(kind: CaptureKind) -> &'static str {
    match kind {
        CaptureKind::Changed => "changed",
        CaptureKind::NotModified => "not_modified",
        CaptureKind::SamePayload => "same_payload",
    }
}

/// What the `revisit` record of an unchanged capture says.
pub(super) struct Revisit {
    /// Its WARC fields beyond those of every response (see the module's doc).
    pub(super) fields: Vec<(&'static str, String)>,
    /// Whether its block holds the response head as received: not for a
    /// 304, whose head stays in the `metadata` record (the module's doc).
    pub(super) head_in_block: bool,
}

/// The `revisit` record an unchanged capture is written as; `None` for a
/// changed one (written as a `response`).
pub(super) fn revisit(c: &CaptureDoc, target: &str) -> Option<Revisit> {
    let profile = match c.kind {
        CaptureKind::Changed => return None,
        CaptureKind::NotModified => NOT_MODIFIED,
        CaptureKind::SamePayload => IDENTICAL_PAYLOAD,
    };
    let mut fields = vec![
        ("WARC-Profile", profile.to_string()),
        ("WARC-Refers-To-Target-URI", target.to_string()),
    ];
    if let Some(at) = c.refers_to {
        fields.push(("WARC-Refers-To-Date", warc::warc_date(at)));
    }
    if let Some(d) = c.page.payload_sha1 {
        // The payload the record does not repeat (a 304 had none).
        fields.push(("WARC-Payload-Digest", d.warc()));
    }
    Some(Revisit {
        fields,
        head_in_block: c.kind != CaptureKind::NotModified,
    })
}

/// The `metadata` fields that keep a 304's head, as received, when its
/// `revisit` record's block does not (see [`Revisit::head_in_block`]):
/// `response-status-line` (`HTTP/1.1 304 Not Modified`), then a
/// `response-header` (`name: value`) per header, in order. None for any
/// other record.
pub(super) fn received_head_fields(
    c: Option<&CaptureDoc>,
    ex: &Exchange,
    status_line: &str,
) -> Vec<(&'static str, String)> {
    if c.is_none_or(|c| c.kind != CaptureKind::NotModified) {
        return Vec::new();
    }
    let mut fields = vec![("response-status-line", status_line.to_string())];
    for (name, value) in &ex.headers {
        fields.push((
            "response-header",
            format!("{name}: {}", String::from_utf8_lossy(value)),
        ));
    }
    fields
}

/// Writes every capture `filter` selects after the last one written.
pub(super) async fn export(stores: &Stores, mut filter: Document, run: &mut Run<'_>) -> anyhow::Result<()> {
    if let Some((url, _)) = &run.state.last_capture {
        // From the last URL written, its earlier captures passed over
        // below: `_id` is a subdocument, which not every store compares.
        filter.insert(CaptureDoc::URL, doc! {"$gte": url});
    }
    let sort = doc! {CaptureDoc::URL: 1, CaptureDoc::AT: 1};
    let mut captures = Reader::<CaptureDoc>::open(&stores.captures(), filter, sort, "captures").await?;
    while let Some(capture) = captures.next().await? {
        let key = (capture.id.url.clone(), capture.id.at);
        if run.state.last_capture.as_ref().is_some_and(|last| key <= *last) {
            continue;
        }
        let body = if capture.kind == CaptureKind::Changed {
            super::body_of(stores, &capture.page, &mut run.dicts).await?
        } else {
            None
        };
        run.write(&capture.page, body.as_deref(), Some(&capture), |state| {
            state.captures += 1;
            state.last_capture = Some(key);
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::DateTime;
    use store::docs::{CaptureId, PageDoc};
    use store::payload_digest::PayloadDigest;

    fn capture(kind: CaptureKind) -> CaptureDoc {
        let mut page = PageDoc::new("http://a.test/".into(), "a.test".into(), 0, 200, 3);
        page.payload_sha1 = (kind != CaptureKind::NotModified).then(|| PayloadDigest::of(b"abc"));
        CaptureDoc {
            id: CaptureId {
                url: page.url.clone(),
                at: 2_000,
            },
            kind,
            refers_to: (kind != CaptureKind::Changed).then(|| DateTime::from_millis(1_000)),
            page,
        }
    }

    #[test]
    fn the_pages_filter_applies_to_a_captures_page() {
        let f = filter(&doc! {"fetched_at": {"$gte": 1}, "robots.noarchive": {"$ne": true}});
        assert_eq!(
            f,
            doc! {"page.fetched_at": {"$gte": 1}, "page.robots.noarchive": {"$ne": true}}
        );
    }

    #[test]
    fn unchanged_captures_become_revisit_records_that_refer_to_the_payload_they_repeat() {
        assert!(revisit(&capture(CaptureKind::Changed), "http://a.test/").is_none());
        let r = revisit(&capture(CaptureKind::NotModified), "http://a.test/").unwrap();
        let f = &r.fields;
        assert_eq!(f[0], ("WARC-Profile", NOT_MODIFIED.to_string()));
        assert!(f.contains(&("WARC-Refers-To-Target-URI", "http://a.test/".to_string())));
        assert!(f
            .iter()
            .any(|(k, v)| *k == "WARC-Refers-To-Date" && v == "1970-01-01T00:00:01Z"));
        assert!(
            !f.iter().any(|(k, _)| *k == "WARC-Payload-Digest"),
            "a 304 had no payload"
        );
        assert!(!r.head_in_block, "a 304's head would replay as an empty 304");
        let r = revisit(&capture(CaptureKind::SamePayload), "http://a.test/").unwrap();
        assert_eq!(r.fields[0], ("WARC-Profile", IDENTICAL_PAYLOAD.to_string()));
        assert!(r
            .fields
            .contains(&("WARC-Payload-Digest", PayloadDigest::of(b"abc").warc())));
        assert!(r.head_in_block);
    }

    #[test]
    fn a_304s_head_is_kept_in_metadata_fields_and_nothing_else_is() {
        let ex = Exchange {
            headers: vec![
                ("etag".into(), b"\"v1\"".to_vec()),
                ("last-modified".into(), b"Sun, 06 Dec 2026 10:00:00 GMT".to_vec()),
            ],
            ..Exchange::default()
        };
        let line = "HTTP/1.1 304 Not Modified";
        let c = capture(CaptureKind::NotModified);
        assert_eq!(
            received_head_fields(Some(&c), &ex, line),
            vec![
                ("response-status-line", line.to_string()),
                ("response-header", "etag: \"v1\"".to_string()),
                (
                    "response-header",
                    "last-modified: Sun, 06 Dec 2026 10:00:00 GMT".to_string()
                ),
            ]
        );
        let same = capture(CaptureKind::SamePayload);
        assert!(received_head_fields(Some(&same), &ex, line).is_empty());
        assert!(received_head_fields(None, &ex, line).is_empty());
    }
}
