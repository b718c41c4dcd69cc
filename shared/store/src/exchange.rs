//! The HTTP exchange behind a stored page, as a WARC record needs it: the
//! response's status line and headers, the request headers sent, the
//! address dialled and when the request went out. Written by the child
//! into the page document (next to the body, see [`crate::page_body`]) and
//! read back by `pages export`; this file is the one place that knows the
//! fields:
//!
//! `fetch_ms`, `ip`, `response_head` and `request_head` of [`PageDoc`];
//! [`content_type`] and [`fetch_started`] read what earlier versions also
//! stored apart (`content_type`, `fetch_started_at`).
//!
//! A head is one string (binary when a header value is not UTF-8, see
//! [`Head`]) rather than an array of pairs: the same bytes, but two
//! elements instead of a few dozen, and a store's work per document grows
//! with its elements.
//!
//! Bodies are kept after HTTP content decoding; reqwest then drops
//! `Content-Encoding` and `Content-Length` from the headers it hands over,
//! so the headers kept describe the decoded body. The status line's reason
//! phrase is the standard one for the code.

use std::net::IpAddr;

use bson::DateTime;

use crate::docs::{Head, PageDoc};

/// The response side of an exchange, borrowed from the HTTP client's types.
pub struct ResponseParts<'a, H> {
    /// `HTTP/1.1 200 OK`.
    pub status_line: &'a str,
    /// Name and raw value of each header, in the order received.
    pub headers: H,
    pub ip: Option<IpAddr>,
    pub started: DateTime,
}

/// Most bytes of a response head kept with a page. Servers send a few
/// hundred bytes to a few KiB; the HTTP client accepts heads of up to
/// about 400 KiB, so without a cap of ours a hostile server could make
/// every page of its site a 400 KiB document. Past it, headers are left
/// out whole, from the first that does not fit, and the page says so
/// (`head_truncated`; its WARC record is marked `WARC-Truncated: length`).
pub const MAX_RESPONSE_HEAD: usize = 64 * 1024;

/// Lines joined by CRLF: `first` (if any), then `name: value` per header.
/// A CR or LF inside a value (which HTTP parsers refuse anyway) becomes a
/// space, so lines stay lines.
pub fn head<'a>(first: Option<&str>, headers: impl IntoIterator<Item = (&'a str, &'a [u8])>) -> Head {
    head_within(first, headers, usize::MAX).0
}

/// [`head`], holding at most `max` bytes (the first line is always kept):
/// the headers that fit, in order, and whether any was left out.
fn head_within<'a>(
    first: Option<&str>,
    headers: impl IntoIterator<Item = (&'a str, &'a [u8])>,
    max: usize,
) -> (Head, bool) {
    let mut out = Vec::with_capacity(256);
    if let Some(first) = first {
        out.extend_from_slice(first.as_bytes());
    }
    for (name, value) in headers {
        let line = name.len().saturating_add(value.len()).saturating_add(4);
        if out.len().saturating_add(line) > max {
            return (Head(out), true);
        }
        if !out.is_empty() {
            out.extend_from_slice(b"\r\n");
        }
        push_header(&mut out, name, value);
    }
    (Head(out), false)
}

/// Appends `name: value` (no line end) to an HTTP head being written; a CR
/// or LF in the value becomes a space, so it cannot end the line or forge
/// another header. Shared by the stored heads and the WARC records.
pub fn push_header(out: &mut Vec<u8>, name: &str, value: &[u8]) {
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b": ");
    out.extend(
        value
            .iter()
            .map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b }),
    );
}

/// Sets the exchange's fields on a page. `request_head` is the child's
/// [`head`] of what its client sends (the same for every request, so built
/// once).
pub fn store<'a, H>(page: &mut PageDoc, response: ResponseParts<'a, H>, request_head: &Head)
where
    H: IntoIterator<Item = (&'a str, &'a [u8])>,
{
    let took = page
        .fetched_at
        .timestamp_millis()
        .saturating_sub(response.started.timestamp_millis());
    page.fetch_ms = Some(i32::try_from(took.max(0)).unwrap_or(i32::MAX));
    page.ip = response.ip.map(|ip| ip.to_string());
    let (response_head, cut) = head_within(Some(response.status_line), response.headers, MAX_RESPONSE_HEAD);
    page.response_head = Some(response_head);
    page.head_truncated = cut;
    page.request_head = Some(request_head.clone());
}

/// The exchange read back from a page document; pages stored before
/// these fields existed read as empty (no status line, no headers).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Exchange {
    pub started: Option<DateTime>,
    pub ip: Option<String>,
    pub status_line: Option<String>,
    pub headers: Vec<(String, Vec<u8>)>,
    pub request_headers: Vec<(String, Vec<u8>)>,
}

impl Exchange {
    pub fn of(page: &PageDoc) -> Exchange {
        let (status_line, headers) = match page.response_head.as_ref().map(|h| h.0.as_slice()) {
            Some(head) => {
                let mut lines = head.split(|&b| b == b'\n');
                let first = lines
                    .next()
                    .map(|l| String::from_utf8_lossy(trim_cr(l)).into_owned());
                (first, lines.filter_map(header).collect())
            }
            None => (None, Vec::new()),
        };
        let request_headers = page
            .request_head
            .as_ref()
            .map(|h| h.0.as_slice())
            .map(|head| head.split(|&b| b == b'\n').filter_map(header).collect())
            .unwrap_or_default();
        Exchange {
            started: fetch_started(page),
            ip: page.ip.clone(),
            status_line,
            headers,
            request_headers,
        }
    }

    /// The HTTP version of the status line (`HTTP/1.1` when unknown).
    pub fn http_version(&self) -> &str {
        self.status_line
            .as_deref()
            .and_then(|l| l.split(' ').next())
            .filter(|v| v.starts_with("HTTP/"))
            .unwrap_or("HTTP/1.1")
    }
}

/// When the request went out: `fetch_ms` before `fetched_at`, or as pages
/// of earlier versions stored it; `None` for pages from before either.
pub fn fetch_started(page: &PageDoc) -> Option<DateTime> {
    let took = page.fetch_ms.map(|ms| {
        DateTime::from_millis(
            page.fetched_at
                .timestamp_millis()
                .saturating_sub(i64::from(ms.max(0))),
        )
    });
    took.or(page.fetch_started_at)
}

/// The response's Content-Type, as the child read it: the first
/// `content-type` header of `response_head` whose value is visible ASCII
/// (what an HTTP client hands over as text), or the field pages of earlier
/// versions stored besides the head.
pub fn content_type(page: &PageDoc) -> Option<String> {
    let Some(head) = &page.response_head else {
        return page.content_type.clone();
    };
    head.0
        .split(|&b| b == b'\n')
        .skip(1)
        .filter_map(header)
        .find(|(name, _)| name.eq_ignore_ascii_case("content-type"))
        .and_then(|(_, value)| {
            let text = value.iter().all(|&b| b == b'\t' || (b' '..=b'~').contains(&b));
            text.then(|| String::from_utf8(value).ok()).flatten()
        })
        .or_else(|| page.content_type.clone())
}

fn trim_cr(line: &[u8]) -> &[u8] {
    line.strip_suffix(b"\r").unwrap_or(line)
}

/// `name: value` back to a pair; a line without a colon is skipped (a
/// reader must not fail on a document it did not write).
fn header(line: &[u8]) -> Option<(String, Vec<u8>)> {
    let line = trim_cr(line);
    let colon = line.iter().position(|&b| b == b':')?;
    let name = String::from_utf8_lossy(&line[..colon]).into_owned();
    let value = &line[colon + 1..];
    let value = value.strip_prefix(b" ").unwrap_or(value);
    Some((name, value.to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_response_head_past_the_cap_keeps_whole_headers_and_says_it_was_cut() {
        let value = vec![b'v'; 1000];
        let names: Vec<String> = (0..200).map(|i| format!("x-h{i}")).collect();
        let store_with = |n: usize| {
            let mut page = PageDoc::new("http://a.test/".into(), "a.test".into(), 0, 200, 0);
            let response = ResponseParts {
                status_line: "HTTP/1.1 200 OK",
                headers: names.iter().take(n).map(|name| (name.as_str(), value.as_slice())),
                ip: None,
                started: page.fetched_at,
            };
            store(&mut page, response, &head(None, []));
            page
        };
        let page = store_with(200);
        let stored = page.response_head.as_ref().map(|h| h.0.len()).unwrap_or(0);
        assert!(
            stored <= MAX_RESPONSE_HEAD && stored > MAX_RESPONSE_HEAD - 1100,
            "{stored}"
        );
        assert!(page.head_truncated);
        let kept = Exchange::of(&page).headers;
        assert_eq!(kept.len(), 64, "every header kept is whole, in order");
        assert!(kept
            .iter()
            .enumerate()
            .all(|(i, (n, v))| *n == names[i] && *v == value));
        let doc = bson::to_document(&page).expect("a document");
        assert_eq!(doc.get_bool("head_truncated"), Ok(true));
        // Under the cap nothing is cut, and nothing says so.
        let page = store_with(60);
        assert!(!page.head_truncated);
        assert_eq!(Exchange::of(&page).headers.len(), 60);
        assert!(bson::to_document(&page)
            .expect("a document")
            .get("head_truncated")
            .is_none());
    }

    #[test]
    fn an_exchange_reads_back_as_stored_including_binary_header_values() {
        let mut page = PageDoc::new("http://a.test/".into(), "a.test".into(), 0, 200, 0);
        page.fetched_at = DateTime::from_millis(1_700_000_000_120);
        let request = head(None, [("user-agent", &b"bot/1"[..]), ("accept", b"*/*")]);
        assert_eq!(request.0, b"user-agent: bot/1\r\naccept: */*");
        let started = DateTime::from_millis(1_700_000_000_000);
        let response = ResponseParts {
            status_line: "HTTP/1.1 200 OK",
            headers: [
                ("content-type", &b"text/html"[..]),
                ("x-odd", b"caf\xe9"),
                ("x-split", b"a\r\nforged: 1"),
            ],
            ip: Some("127.0.0.9".parse().expect("an address")),
            started,
        };
        store(&mut page, response, &request);
        let back = Exchange::of(&page);
        assert_eq!(back.started, Some(started));
        assert_eq!(content_type(&page).as_deref(), Some("text/html"));
        assert_eq!(back.status_line.as_deref(), Some("HTTP/1.1 200 OK"));
        assert_eq!(back.http_version(), "HTTP/1.1");
        assert_eq!(back.ip.as_deref(), Some("127.0.0.9"));
        assert_eq!(
            back.headers,
            vec![
                ("content-type".to_string(), b"text/html".to_vec()),
                ("x-odd".to_string(), b"caf\xe9".to_vec()),
                ("x-split".to_string(), b"a  forged: 1".to_vec()),
            ]
        );
        assert_eq!(
            back.request_headers,
            vec![
                ("user-agent".to_string(), b"bot/1".to_vec()),
                ("accept".to_string(), b"*/*".to_vec())
            ]
        );
        let old = PageDoc::new("http://a.test/".into(), "a.test".into(), 0, 200, 0);
        assert_eq!(Exchange::of(&old), Exchange::default());
    }

    #[test]
    fn what_earlier_versions_stored_apart_still_reads_and_is_no_longer_written() {
        let fetched = DateTime::from_millis(1_700_000_000_250);
        let old = bson::doc! {
            "_id": "http://a.test/", "domain": "a.test", "depth": 0, "status": 200,
            "fetched_at": fetched, "crawl_id": "c", "bytes": 0i64,
            "content_type": "text/plain", "fetch_started_at": DateTime::from_millis(1_700_000_000_000),
            "response_head": "HTTP/1.1 200 OK\r\ndate: x", "body_encoding": "zstd",
        };
        let page: PageDoc = bson::from_document(old).unwrap();
        assert_eq!(content_type(&page).as_deref(), Some("text/plain"));
        let started = Some(DateTime::from_millis(1_700_000_000_000));
        assert_eq!(fetch_started(&page), started);
        assert_eq!(Exchange::of(&page).started, started);

        let mut new = PageDoc::new("http://a.test/".into(), "a.test".into(), 0, 200, 0);
        new.fetched_at = fetched;
        let response = ResponseParts {
            status_line: "HTTP/1.1 200 OK",
            // Not visible ASCII: no content type, as the client gave none.
            headers: [("content-type", &b"text/html; x=\xe9"[..])],
            ip: None,
            started: DateTime::from_millis(1_700_000_000_000),
        };
        store(&mut new, response, &Head::default());
        let stored = bson::to_document(&new).unwrap();
        for gone in ["crawl_id", "content_type", "fetch_started_at", "body_encoding"] {
            assert!(stored.get(gone).is_none(), "{gone} is stored");
        }
        assert_eq!(stored.get_i32("fetch_ms"), Ok(250));
        let back: PageDoc = bson::from_document(stored).unwrap();
        assert_eq!(fetch_started(&back), started);
        assert_eq!(content_type(&back), None);
    }
}
