//! A revisit in the child: the conditional request it sends, what the
//! answer means, and what is written for it. No I/O here; the pipeline
//! fetches, the page writer writes.
//!
//! A revisit lease carries the last capture's validators and payload
//! digest (`link::protocol::Revisit`), so nothing is read from the store.
//! What a visit found:
//! - 304 Not Modified: unchanged, no body was sent;
//! - an answer whose payload has the same SHA-1: unchanged (a server that
//!   ignores conditional requests, or whose validators change anyway; an
//!   error page that says the same again);
//! - anything else: changed, and the capture holds it like a page.
//!
//! Every visit moves the page's schedule (`store::docs::RevisitState` on
//! its `pages` document: the next due time, the validators of the latest
//! content); every visit but an unchanged one under
//! `--revisit-changes-only` is also a capture (`store::docs::CaptureDoc`).

use bson::DateTime;
use link::protocol::Revisit;
use reqwest::header::{HeaderMap, HeaderValue, ETAG, IF_MODIFIED_SINCE, IF_NONE_MATCH, LAST_MODIFIED};
use shared::revisit::RevisitPolicy;
use store::docs::{CaptureDoc, CaptureId, CaptureKind, Head, PageDoc, RevisitState, MAX_VALIDATOR_BYTES};
use store::payload_digest::PayloadDigest;

/// What the page writer writes for one revisit: the capture (unless it is
/// not kept) and the page's new schedule.
#[derive(Debug)]
pub(crate) struct RevisitWrite {
    pub url: String,
    pub capture: Option<CaptureDoc>,
    /// Unix ms.
    pub due_ms: i64,
    pub state: RevisitState,
}

impl RevisitWrite {
    /// The `$set` that moves the page's schedule.
    pub(crate) fn schedule(&self) -> Result<bson::Document, bson::ser::Error> {
        Ok(bson::doc! {
            PageDoc::DUE_MS: self.due_ms,
            RevisitState::FIELD: bson::to_bson(&self.state)?,
        })
    }
}

/// The conditional headers for a revisit: the validators it carries that
/// are valid header values (one that is not is left out, not mangled).
pub(crate) fn conditions(rev: &Revisit) -> HeaderMap {
    let mut h = HeaderMap::new();
    let value = |v: &Option<String>| v.as_deref().and_then(|v| HeaderValue::from_str(v).ok());
    if let Some(v) = value(&rev.etag) {
        h.insert(IF_NONE_MATCH, v);
    }
    if let Some(v) = value(&rev.last_modified) {
        h.insert(IF_MODIFIED_SINCE, v);
    }
    h
}

/// The request head stored for a conditional request: the usual one and
/// the conditions, as sent.
pub(crate) fn request_head(base: &Head, conditions: &HeaderMap) -> Head {
    if conditions.is_empty() {
        return base.clone();
    }
    let extra = store::exchange::head(None, conditions.iter().map(|(n, v)| (n.as_str(), v.as_bytes())));
    let mut bytes = base.0.clone();
    if !bytes.is_empty() {
        bytes.extend_from_slice(b"\r\n");
    }
    bytes.extend_from_slice(&extra.0);
    Head(bytes)
}

/// What a visit found (see the module's doc).
pub(crate) fn judge(status: u16, digest: Option<&PayloadDigest>, rev: &Revisit) -> CaptureKind {
    let same = matches!((digest, rev.digest), (Some(d), Some(old)) if *d.bytes() == old);
    if status == 304 {
        CaptureKind::NotModified
    } else if same {
        CaptureKind::SamePayload
    } else {
        CaptureKind::Changed
    }
}

/// A validator as kept: a header that is text and not over-long.
fn validator(headers: &HeaderMap, name: reqwest::header::HeaderName) -> Option<String> {
    let v = headers.get(name)?.to_str().ok()?;
    (v.len() <= MAX_VALIDATOR_BYTES).then(|| v.to_string())
}

/// Unix ms one interval after `from`.
fn due(from: DateTime, interval_ms: u64) -> i64 {
    let ms = i64::try_from(interval_ms).unwrap_or(i64::MAX);
    from.timestamp_millis().saturating_add(ms)
}

/// When a visit's response was captured as its WARC record says (the
/// request's start): what a later `revisit` record refers to.
fn response_date(page: &PageDoc) -> DateTime {
    store::exchange::fetch_started(page).unwrap_or(page.fetched_at)
}

/// Gives a page of a first visit its schedule.
pub(crate) fn first_visit(policy: &RevisitPolicy, page: &mut PageDoc, headers: &HeaderMap) {
    let interval = policy.next_interval_ms(0, true);
    page.due_ms = Some(due(page.fetched_at, interval));
    page.revisit = Some(RevisitState {
        interval_ms: i64::try_from(interval).unwrap_or(i64::MAX),
        etag: validator(headers, ETAG),
        last_modified: validator(headers, LAST_MODIFIED),
        digest: page.payload_sha1,
        body_at: response_date(page),
    });
}

/// The write for a revisit that got an answer: `page` is the visit as a
/// page (with its body and links when it changed), `kind` what it found.
pub(crate) fn visited(
    policy: &RevisitPolicy,
    rev: &Revisit,
    kind: CaptureKind,
    mut page: PageDoc,
    headers: &HeaderMap,
) -> RevisitWrite {
    let changed = kind == CaptureKind::Changed;
    let interval = policy.next_interval_ms(rev.interval_ms, changed);
    let at = page.fetched_at;
    let old_body_at = DateTime::from_millis(rev.body_at_ms);
    // A 304 may name new validators (RFC 9110 §15.4.5); without them the
    // old ones still stand.
    let (etag, last_modified) = if changed {
        (validator(headers, ETAG), validator(headers, LAST_MODIFIED))
    } else {
        (
            validator(headers, ETAG).or_else(|| rev.etag.clone()),
            validator(headers, LAST_MODIFIED).or_else(|| rev.last_modified.clone()),
        )
    };
    let state = RevisitState {
        interval_ms: i64::try_from(interval).unwrap_or(i64::MAX),
        etag,
        last_modified,
        digest: if changed {
            page.payload_sha1
        } else {
            rev.digest.map(PayloadDigest::from_bytes)
        },
        body_at: if changed {
            response_date(&page)
        } else {
            old_body_at
        },
    };
    let url = page.url.clone();
    page.due_ms = None;
    page.revisit = None;
    let capture = (changed || policy.record_unchanged).then(|| CaptureDoc {
        id: CaptureId {
            url: url.clone(),
            at: at.timestamp_millis(),
        },
        kind,
        refers_to: (!changed).then_some(old_body_at),
        page,
    });
    RevisitWrite {
        url,
        capture,
        due_ms: due(at, interval),
        state,
    }
}

/// The write for a revisit that got no answer (failed, or disallowed by
/// robots.txt now): no capture, and the page is due again one interval
/// from now, its validators kept. Without it the page would stay due,
/// and be leased again at once.
pub(crate) fn unanswered(rev: &Revisit, url: String) -> RevisitWrite {
    RevisitWrite {
        url,
        capture: None,
        due_ms: due(DateTime::now(), rev.interval_ms),
        state: RevisitState {
            interval_ms: i64::try_from(rev.interval_ms).unwrap_or(i64::MAX),
            etag: rev.etag.clone(),
            last_modified: rev.last_modified.clone(),
            digest: rev.digest.map(PayloadDigest::from_bytes),
            body_at: DateTime::from_millis(rev.body_at_ms),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn rev(digest: &[u8]) -> Revisit {
        Revisit {
            etag: Some("\"v1\"".into()),
            last_modified: Some("Sun, 29 Nov 2026 10:00:00 GMT".into()),
            digest: Some(*PayloadDigest::of(digest).bytes()),
            interval_ms: 10_000,
            body_at_ms: 1_000,
        }
    }

    fn page(status: i32, body: &[u8]) -> PageDoc {
        let mut p = PageDoc::new("http://a.test/".into(), "a.test".into(), 0, status, 0);
        p.payload_sha1 = Some(PayloadDigest::of(body));
        p
    }

    #[test]
    fn a_revisit_asks_with_the_validators_it_has_and_leaves_out_bad_ones() {
        let h = conditions(&rev(b"x"));
        assert_eq!(h.get(IF_NONE_MATCH).unwrap(), "\"v1\"");
        assert!(h.get(IF_MODIFIED_SINCE).is_some());
        let bad = Revisit {
            etag: Some("a\nb".into()),
            last_modified: None,
            ..rev(b"x")
        };
        assert!(conditions(&bad).is_empty());
        let head = request_head(&Head(b"user-agent: x".to_vec()), &h);
        let text = String::from_utf8(head.0).unwrap();
        assert!(
            text.starts_with("user-agent: x\r\nif-none-match: \"v1\"\r\n"),
            "{text}"
        );
    }

    #[test]
    fn unchanged_is_a_304_or_the_same_payload_and_anything_else_changed() {
        let r = rev(b"old");
        let old = PayloadDigest::of(b"old");
        let new = PayloadDigest::of(b"new");
        assert_eq!(judge(304, None, &r), CaptureKind::NotModified);
        assert_eq!(judge(200, Some(&old), &r), CaptureKind::SamePayload);
        assert_eq!(judge(200, Some(&new), &r), CaptureKind::Changed);
        assert_eq!(judge(404, Some(&old), &r), CaptureKind::SamePayload);
    }

    #[test]
    fn a_change_keeps_the_new_body_and_validators_and_shortens_an_adaptive_interval() {
        let policy = RevisitPolicy {
            adaptive: true,
            min_ms: 1_000,
            max_ms: 100_000,
            ..RevisitPolicy::every(Duration::from_secs(10))
        };
        let mut headers = HeaderMap::new();
        headers.insert(ETAG, HeaderValue::from_static("\"v2\""));
        let p = page(200, b"new");
        let at = p.fetched_at;
        let w = visited(&policy, &rev(b"old"), CaptureKind::Changed, p, &headers);
        assert_eq!(w.state.interval_ms, 8_000);
        assert_eq!(w.state.etag.as_deref(), Some("\"v2\""));
        assert_eq!(w.state.last_modified, None);
        assert_eq!(w.state.digest, Some(PayloadDigest::of(b"new")));
        assert_eq!(w.state.body_at, at);
        assert_eq!(w.due_ms, at.timestamp_millis() + 8_000);
        let c = w.capture.unwrap();
        assert_eq!((c.kind, c.refers_to), (CaptureKind::Changed, None));
        assert_eq!(c.id.at, at.timestamp_millis());
    }

    #[test]
    fn an_unchanged_visit_refers_to_the_old_capture_and_may_go_unrecorded() {
        let mut policy = RevisitPolicy::every(Duration::from_secs(10));
        let w = visited(
            &policy,
            &rev(b"old"),
            CaptureKind::NotModified,
            page(304, b""),
            &HeaderMap::new(),
        );
        assert_eq!(w.state.etag.as_deref(), Some("\"v1\""));
        assert_eq!(w.state.digest, Some(PayloadDigest::of(b"old")));
        assert_eq!(w.state.body_at, DateTime::from_millis(1_000));
        let c = w.capture.unwrap();
        assert_eq!(c.refers_to, Some(DateTime::from_millis(1_000)));
        assert!(c.page.due_ms.is_none() && c.page.revisit.is_none());
        policy.record_unchanged = false;
        let w = visited(
            &policy,
            &rev(b"old"),
            CaptureKind::SamePayload,
            page(200, b"old"),
            &HeaderMap::new(),
        );
        assert!(w.capture.is_none());
        assert!(w.schedule().unwrap().contains_key("revisit"));
    }

    #[test]
    fn a_first_visit_is_due_one_interval_later_with_what_it_was_served_with() {
        let policy = RevisitPolicy::every(Duration::from_secs(60));
        let mut headers = HeaderMap::new();
        headers.insert(
            LAST_MODIFIED,
            HeaderValue::from_static("Sun, 29 Nov 2026 10:00:00 GMT"),
        );
        headers.insert(
            ETAG,
            HeaderValue::from_str(&"x".repeat(MAX_VALIDATOR_BYTES + 1)).unwrap(),
        );
        let mut p = page(200, b"body");
        first_visit(&policy, &mut p, &headers);
        let s = p.revisit.clone().unwrap();
        assert_eq!(s.etag, None, "an over-long validator is not kept");
        assert!(s.last_modified.is_some());
        assert_eq!(p.due_ms, Some(p.fetched_at.timestamp_millis() + 60_000));
    }
}
