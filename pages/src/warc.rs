//! WARC/1.1 records (ISO 28500), each written as its own gzip member so
//! readers can seek to any record (the layout Heritrix, Common Crawl and
//! warcio use).
//!
//! Written by hand rather than with the `warc` crate (0.4): that crate
//! gzips a whole file as one stream (no per-record members), computes no
//! digests, and would bring chrono and libflate for about a hundred lines
//! of formatting.

use std::io::{self, Write};

use bson::DateTime;
use flate2::{write::GzEncoder, Compression};
use store::payload_digest::PayloadDigest;

/// A fresh `WARC-Record-ID`.
pub(crate) fn record_id() -> String {
    format!("<urn:uuid:{}>", uuid::Uuid::new_v4())
}

/// A WARC date: UTC, to the second, as WARC/1.1 readers expect.
pub(crate) fn warc_date(t: DateTime) -> String {
    let s = t
        .try_to_rfc3339_string()
        .unwrap_or_else(|_| "1970-01-01T00:00:00Z".into());
    // bson writes milliseconds ("...:05.123Z"); WARC-Date is to the second
    // unless more precision is known to matter.
    match s.find('.') {
        Some(dot) => format!("{}Z", &s[..dot]),
        None => s,
    }
}

/// A header value safe to write: a CR or LF in a value would end the
/// header (and could forge another), so they become spaces.
pub(crate) fn field_value(v: &str) -> String {
    v.replace(['\r', '\n'], " ")
}

/// One record: its named headers (besides WARC-Block-Digest and
/// Content-Length, which are computed) and its block.
pub(crate) struct Record<'a> {
    pub kind: &'static str,
    pub id: &'a str,
    pub date: &'a str,
    pub content_type: &'a str,
    /// Further headers, in order (`WARC-Target-URI`, ...).
    pub headers: Vec<(&'static str, String)>,
    pub block: &'a [u8],
}

impl Record<'_> {
    /// The record's uncompressed bytes.
    pub(crate) fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.block.len() + 512);
        out.extend_from_slice(b"WARC/1.1\r\n");
        let mut header = |name: &str, value: &str| {
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(b": ");
            out.extend_from_slice(field_value(value).as_bytes());
            out.extend_from_slice(b"\r\n");
        };
        header("WARC-Type", self.kind);
        header("WARC-Record-ID", self.id);
        header("WARC-Date", self.date);
        for (name, value) in &self.headers {
            header(name, value);
        }
        header("WARC-Block-Digest", &PayloadDigest::of(self.block).warc());
        header("Content-Type", self.content_type);
        header("Content-Length", &self.block.len().to_string());
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(self.block);
        out.extend_from_slice(b"\r\n\r\n");
        out
    }

    /// Writes the record as one gzip member; returns the bytes written.
    pub(crate) fn write_gz(&self, out: &mut impl Write) -> io::Result<u64> {
        let mut gz = GzEncoder::new(Vec::new(), Compression::new(6));
        gz.write_all(&self.to_bytes())?;
        let member = gz.finish()?;
        out.write_all(&member)?;
        Ok(member.len() as u64)
    }
}

/// An HTTP message block: start line, headers, blank line, body.
pub(crate) fn http_block(start_line: &str, headers: &[(String, Vec<u8>)], body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len() + 64 * (headers.len() + 1));
    out.extend_from_slice(start_line.as_bytes());
    out.extend_from_slice(b"\r\n");
    for (name, value) in headers {
        store::exchange::push_header(&mut out, name, value);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(body);
    out
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::*;

    #[test]
    fn a_record_is_one_gzip_member_with_its_length_and_digest() {
        let block = http_block(
            "HTTP/1.1 200 OK",
            &[("content-type".into(), b"text/html\r\nX-Forged: 1".to_vec())],
            b"<p>hi</p>",
        );
        let id = record_id();
        let record = Record {
            kind: "response",
            id: &id,
            date: "2026-11-23T10:00:00Z",
            content_type: "application/http;msgtype=response",
            headers: vec![("WARC-Target-URI", "http://a.test/\r\nWARC-Type: x".into())],
            block: &block,
        };
        let mut file = Vec::new();
        let n = record.write_gz(&mut file).expect("in memory");
        assert_eq!(n as usize, file.len());
        let mut text = Vec::new();
        flate2::read::GzDecoder::new(&file[..])
            .read_to_end(&mut text)
            .expect("gzip");
        let text = String::from_utf8(text).expect("utf-8");
        assert!(text.starts_with("WARC/1.1\r\nWARC-Type: response\r\n"));
        assert!(text.contains(&format!("Content-Length: {}\r\n", block.len())));
        assert!(text.contains(&format!(
            "WARC-Block-Digest: {}\r\n",
            PayloadDigest::of(&block).warc()
        )));
        // Line breaks in values cannot forge headers.
        assert!(!text.contains("\r\nWARC-Type: x"));
        assert!(!text.contains("\r\nX-Forged"));
        assert!(text.ends_with("<p>hi</p>\r\n\r\n"));
    }

    #[test]
    fn dates_are_to_the_second() {
        assert_eq!(
            warc_date(DateTime::from_millis(1_700_000_000_123)),
            "2023-11-14T22:13:20Z"
        );
    }
}
