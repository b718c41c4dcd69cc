//! A page's WARC records: its `response` (or, for an unchanged capture,
//! `revisit`), then the `request` and `metadata` records concurrent to it.

use std::io::Write;

use store::docs::{CaptureDoc, PageDoc};
use store::exchange::Exchange;
use store::payload_digest::PayloadDigest;

use super::captures;
use super::row::Row;
use crate::warc::{self, Record};

/// A page's records: its `response` (a `revisit` for an unchanged
/// capture, see `captures::revisit`), `request` and `metadata`; returns
/// the bytes written.
pub(super) fn write_warc_page(
    out: &mut impl Write,
    page: &PageDoc,
    row: &Row,
    body: Option<&[u8]>,
    capture: Option<&CaptureDoc>,
    warcinfo_id: &str,
) -> anyhow::Result<u64> {
    let ex = Exchange::of(page);
    let target = row.final_url.clone().unwrap_or_else(|| row.url.clone());
    let when = ex.started.unwrap_or(page.fetched_at);
    let date = warc::warc_date(when);
    let payload = body.unwrap_or_default();
    // The head as received, but for the framing: the payload is written
    // whole and decoded, so its length is given and any chunking dropped.
    let revisit = capture.and_then(|c| captures::revisit(c, &target));
    // A revisit record holds the head alone, as received, or nothing.
    let reframe = revisit.is_none();
    let mut headers: Vec<(String, Vec<u8>)> = ex
        .headers
        .iter()
        .filter(|(n, _)| {
            let framing = n.eq_ignore_ascii_case("transfer-encoding")
                || (reframe && n.eq_ignore_ascii_case("content-length"));
            !framing
        })
        .cloned()
        .collect();
    if reframe {
        headers.push(("Content-Length".into(), payload.len().to_string().into_bytes()));
    }
    let status_line = status_line(&ex, row.status);
    let block = match &revisit {
        Some(r) if !r.head_in_block => Vec::new(),
        _ => warc::http_block(&status_line, &headers, payload),
    };
    // The head a revisit's block leaves out, for its metadata record.
    let kept_head = captures::received_head_fields(capture, &ex, &status_line);
    let response_id = warc::record_id();
    let mut response_headers = page_fields(&target, warcinfo_id, None);
    if let Some(ip) = &ex.ip {
        response_headers.push(("WARC-IP-Address", ip.clone()));
    }
    if let Some(r) = revisit {
        response_headers.extend(r.fields);
        let written = Record {
            kind: "revisit",
            id: &response_id,
            date: &date,
            content_type: "application/http;msgtype=response",
            headers: response_headers,
            block: &block,
        }
        .write_gz(out)?;
        let ids = (response_id.as_str(), warcinfo_id);
        return Ok(written + write_warc_companions(out, page, row, &target, &date, ids, &kept_head)?);
    }
    // The digest taken at fetch time when the record holds the whole body
    // received, so a reader checking it checks the stored body against
    // what was fetched; else (a body cut to fit the store, or not kept)
    // that of the payload written.
    let digest = match page.payload_sha1 {
        Some(d) if i64::try_from(payload.len()).is_ok_and(|n| n == row.bytes) => d,
        _ => PayloadDigest::of(payload),
    };
    response_headers.push(("WARC-Payload-Digest", digest.warc()));
    // A body or a head cut to a size limit (`head_truncated`: headers
    // past `store::exchange::MAX_RESPONSE_HEAD` left out).
    if row.truncated || page.head_truncated {
        response_headers.push(("WARC-Truncated", "length".into()));
    } else if (payload.len() as i64) < row.bytes {
        // The body was received but not kept (not HTML, or not a 2xx).
        response_headers.push(("WARC-Truncated", "unspecified".into()));
    }
    let written = Record {
        kind: "response",
        id: &response_id,
        date: &date,
        content_type: "application/http;msgtype=response",
        headers: response_headers,
        block: &block,
    }
    .write_gz(out)?;
    let ids = (response_id.as_str(), warcinfo_id);
    Ok(written + write_warc_companions(out, page, row, &target, &date, ids, &[])?)
}

/// The `request` and `metadata` records of a `response` (or `revisit`)
/// record, `WARC-Concurrent-To` it (`ids`: its record id and the
/// `warcinfo`'s); `extra` are further metadata fields, after the row's.
fn write_warc_companions(
    out: &mut impl Write,
    page: &PageDoc,
    row: &Row,
    target: &str,
    date: &str,
    (response_id, warcinfo_id): (&str, &str),
    extra: &[(&str, String)],
) -> anyhow::Result<u64> {
    let ex = Exchange::of(page);
    let request = request_block(target, &ex.request_headers);
    let mut written = Record {
        kind: "request",
        id: &warc::record_id(),
        date,
        content_type: "application/http;msgtype=request",
        headers: page_fields(target, warcinfo_id, Some(response_id)),
        block: &request,
    }
    .write_gz(out)?;

    let mut fields = String::new();
    let mut field = |name: &str, value: &str| {
        fields.push_str(name);
        fields.push_str(": ");
        fields.push_str(&warc::field_value(value));
        fields.push_str("\r\n");
    };
    field("via", &row.url);
    field("depth", &row.depth.to_string());
    field("outlinks", &row.outlinks.to_string());
    field("crawl-id", &row.crawl_id);
    for (name, value) in [
        ("title", &row.title),
        ("description", &row.description),
        ("canonical", &row.canonical),
        ("lang", &row.lang),
        ("charset", &row.charset),
        ("redirect-to", &row.redirect_to),
        ("robots", &row.robots),
        ("sitemap", &row.sitemap),
        ("capture", &row.capture),
    ] {
        if let Some(v) = value {
            field(name, v);
        }
    }
    for (name, value) in extra {
        field(name, value);
    }
    written += Record {
        kind: "metadata",
        id: &warc::record_id(),
        date,
        content_type: "application/warc-fields",
        headers: page_fields(target, warcinfo_id, Some(response_id)),
        block: fields.as_bytes(),
    }
    .write_gz(out)?;
    Ok(written)
}

/// The fields every record of a page starts with: the URL it is of, the
/// `warcinfo` record it belongs to and, for the `request` and `metadata`
/// records, the `response` (or `revisit`) they are concurrent to.
fn page_fields(target: &str, warcinfo_id: &str, concurrent_to: Option<&str>) -> Vec<(&'static str, String)> {
    let mut fields = vec![
        ("WARC-Target-URI", target.to_string()),
        ("WARC-Warcinfo-ID", warcinfo_id.to_string()),
    ];
    if let Some(id) = concurrent_to {
        fields.push(("WARC-Concurrent-To", id.to_string()));
    }
    fields
}

/// The response's status line as stored, or (for pages stored before it
/// was) made from the status with the standard reason phrase.
pub(crate) fn status_line(ex: &Exchange, status: i32) -> String {
    if let Some(line) = &ex.status_line {
        return line.clone();
    }
    let status = u16::try_from(status).unwrap_or(0);
    let reason = http::StatusCode::from_u16(status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .unwrap_or("");
    format!("{} {status} {reason}", ex.http_version())
        .trim_end()
        .to_string()
}

/// The request as sent: `GET`, the path and query, `Host`, then the
/// headers the client sends on every request.
fn request_block(target: &str, headers: &[(String, Vec<u8>)]) -> Vec<u8> {
    let (path, host) = match url::Url::parse(target) {
        Ok(u) => {
            let mut path = u.path().to_string();
            if let Some(q) = u.query() {
                path.push('?');
                path.push_str(q);
            }
            let host = match (u.host_str(), u.port()) {
                (Some(h), Some(p)) => format!("{h}:{p}"),
                (Some(h), None) => h.to_string(),
                _ => String::new(),
            };
            (path, host)
        }
        Err(_) => ("/".to_string(), String::new()),
    };
    let mut all = vec![("Host".to_string(), host.into_bytes())];
    all.extend(headers.iter().cloned());
    warc::http_block(&format!("GET {path} HTTP/1.1"), &all, b"")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The WARC records of `page` (with `body`), as text.
    fn records_of(page: &PageDoc, body: &[u8]) -> String {
        let mut out = Vec::new();
        let row = Row::of(page, "c");
        write_warc_page(&mut out, page, &row, Some(body), None, "<urn:uuid:x>").expect("records");
        let mut text = String::new();
        std::io::Read::read_to_string(&mut flate2::read::MultiGzDecoder::new(&out[..]), &mut text)
            .expect("gzip");
        text
    }

    #[test]
    fn a_page_whose_head_was_cut_is_marked_truncated_in_its_warc_record() {
        let body = b"<p>hi</p>";
        let mut page = PageDoc::new(
            "http://a.test/".into(),
            "a.test".into(),
            0,
            200,
            body.len() as i64,
        );
        page.response_head = Some(store::exchange::head(
            Some("HTTP/1.1 200 OK"),
            [("x-a", &b"1"[..])],
        ));
        assert!(!records_of(&page, body).contains("WARC-Truncated"));
        page.head_truncated = true;
        assert!(records_of(&page, body).contains("WARC-Truncated: length\r\n"));
    }

    #[test]
    fn requests_name_the_host_and_port_and_keep_the_query() {
        let block = request_block(
            "http://a.test:8080/p/1?x=2#frag",
            &[("user-agent".into(), b"bot".to_vec())],
        );
        assert_eq!(
            String::from_utf8(block).expect("ascii"),
            "GET /p/1?x=2 HTTP/1.1\r\nHost: a.test:8080\r\nuser-agent: bot\r\n\r\n"
        );
    }
}
