//! A CDXJ index of a WARC file, written beside it (`pages-00000.cdxj`
//! for `pages-00000.warc.gz`), as pywb, cdxj-indexer and Common Crawl write
//! them: one line per `response` (and `revisit`) record,
//! `URLKEY TIMESTAMP {"url", "mime", "status", "digest", "length",
//! "offset", "filename"}`, sorted, so a replay tool or a researcher finds a
//! capture by its URL and reads that one gzip member at its offset instead
//! of the whole file.
//!
//! The index is made from the finished WARC file itself, not noted while
//! writing: the file is what the offsets must fit, an export resumed after
//! a crash cuts it back and writes part of it again, and an index made
//! from it is right whatever happened before. Reading a file back is
//! decompression only: no compression, no store reads.
//!
//! The URL key is the SURT form of the `surt` library's default, which
//! pywb and cdxj-indexer look captures up by: scheme dropped, host
//! reversed and without `www`, the port if not the scheme's, path and
//! query lower-cased, query arguments sorted, a trailing slash dropped.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Seek, Write};
use std::path::{Path, PathBuf};

use flate2::bufread::GzDecoder;
use serde::Serialize;
use url::{Host, Url};

/// The index's path for the WARC file at `warc`.
pub(crate) fn path_for(warc: &Path) -> PathBuf {
    let name = warc
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let stem = name.strip_suffix(".warc.gz").unwrap_or(&name);
    warc.with_file_name(format!("{stem}.cdxj"))
}

/// Writes the index of the WARC file at `warc` beside it (through a
/// temporary file, so an index is whole or absent); the lines written.
pub(crate) fn write_index(warc: &Path) -> io::Result<usize> {
    let filename = warc
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut lines = index_lines(BufReader::with_capacity(1 << 20, File::open(warc)?), &filename)?;
    lines.sort_unstable();
    let path = path_for(warc);
    let tmp = path.with_extension("cdxj.tmp");
    let mut out = io::BufWriter::new(File::create(&tmp)?);
    for line in &lines {
        out.write_all(line.as_bytes())?;
        out.write_all(b"\n")?;
    }
    out.into_inner().map_err(|e| e.into_error())?.sync_data()?;
    std::fs::rename(&tmp, &path)?;
    Ok(lines.len())
}

/// The index lines (unsorted) of the gzip members read from `file`.
fn index_lines<R: BufRead + Seek>(mut file: R, filename: &str) -> io::Result<Vec<String>> {
    let mut lines = Vec::new();
    loop {
        let offset = file.stream_position()?;
        if file.fill_buf()?.is_empty() {
            return Ok(lines);
        }
        // A bufread decoder consumes exactly one member of the reader.
        let mut member = GzDecoder::new(file);
        let mut record = Vec::new();
        member.read_to_end(&mut record)?;
        file = member.into_inner();
        let length = file.stream_position()? - offset;
        if let Some(line) = line_of(&record, offset, length, filename) {
            lines.push(line);
        }
    }
}

/// What one index line says after its key and timestamp (the fields and
/// their order as cdxj-indexer writes them; values are text there too).
#[derive(Serialize)]
struct Fields<'a> {
    url: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    mime: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    digest: Option<&'a str>,
    length: String,
    offset: String,
    filename: &'a str,
}

/// The index line of one record (its uncompressed bytes), if it is a
/// capture: a `response` or a `revisit`.
fn line_of(record: &[u8], offset: u64, length: u64, filename: &str) -> Option<String> {
    let (head, block) = split_head(record)?;
    let head = std::str::from_utf8(head).ok()?;
    let field = |name: &str| header(head, name);
    let kind = field("WARC-Type")?;
    if kind != "response" && kind != "revisit" {
        return None;
    }
    let url = field("WARC-Target-URI")?;
    let (http_head, _) = split_head(block).unwrap_or((block, &[]));
    let http_head = std::str::from_utf8(http_head).unwrap_or_default();
    let status = http_head.lines().next().and_then(|l| l.split_whitespace().nth(1));
    let mime = if kind == "revisit" {
        Some("warc/revisit")
    } else {
        header(http_head, "Content-Type")
            .and_then(|v| v.split([';', ' ', '\t']).next())
            .filter(|m| !m.is_empty())
    };
    let fields = Fields {
        url,
        mime,
        status,
        digest: field("WARC-Payload-Digest"),
        length: length.to_string(),
        offset: offset.to_string(),
        filename,
    };
    let json = serde_json::to_string(&fields).ok()?;
    Some(format!(
        "{} {} {json}",
        url_key(url),
        timestamp(field("WARC-Date")?)
    ))
}

/// The header and the rest of a message (WARC or HTTP), split at the
/// first empty line.
fn split_head(bytes: &[u8]) -> Option<(&[u8], &[u8])> {
    let at = bytes.windows(4).position(|w| w == b"\r\n\r\n")?;
    Some((&bytes[..at], &bytes[at + 4..]))
}

/// The value of header `name` (any case) in a header block.
fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.split("\r\n").find_map(|line| {
        let (n, v) = line.split_once(':')?;
        n.trim().eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

/// A WARC date (`2026-11-23T10:00:05Z`) as a CDX timestamp (`20261123100005`).
fn timestamp(date: &str) -> String {
    let digits: String = date.chars().filter(char::is_ascii_digit).take(14).collect();
    format!("{digits:0<14}")
}

/// The SURT key of `url` (see the module's doc); the URL itself when it
/// does not parse, as cdxj-indexer does.
pub(crate) fn url_key(url: &str) -> String {
    let Ok(u) = Url::parse(url) else {
        return url.to_string();
    };
    let mut key = String::with_capacity(url.len());
    match u.host() {
        Some(Host::Domain(name)) => {
            let labels: Vec<&str> = name.split('.').filter(|l| !l.is_empty()).collect();
            let labels = match labels.split_first() {
                Some((first, rest)) if !rest.is_empty() && is_www(first) => rest,
                _ => &labels[..],
            };
            key.push_str(&labels.iter().rev().copied().collect::<Vec<_>>().join(","));
        }
        Some(Host::Ipv4(ip)) => {
            let octets: Vec<String> = ip.octets().iter().rev().map(u8::to_string).collect();
            key.push_str(&octets.join(","));
        }
        Some(Host::Ipv6(ip)) => key.push_str(&ip.to_string()),
        None => {}
    }
    if let Some(port) = u.port() {
        key.push(':');
        key.push_str(&port.to_string());
    }
    key.push(')');
    let mut path = canonical_part(u.path());
    while path.contains("//") {
        path = path.replace("//", "/");
    }
    match path.strip_suffix('/') {
        Some(trimmed) if !trimmed.is_empty() => key.push_str(trimmed),
        _ => key.push_str(&path),
    }
    if let Some(query) = u.query() {
        let query = canonical_part(query);
        let mut args: Vec<&str> = query.split('&').filter(|a| !a.is_empty()).collect();
        args.sort_unstable();
        if !args.is_empty() {
            key.push('?');
            key.push_str(&args.join("&"));
        }
    }
    key
}

/// A path or query as the `surt` library writes it: percent-escapes
/// undone (repeatedly, as far as they go), then only control bytes, space,
/// `#`, `%` and non-ASCII escaped again; all lower-cased.
fn canonical_part(part: &str) -> String {
    let mut bytes = part.as_bytes().to_vec();
    for _ in 0..4 {
        let decoded = percent_decode(&bytes);
        if decoded == bytes {
            break;
        }
        bytes = decoded;
    }
    let mut out = String::with_capacity(bytes.len());
    for b in bytes {
        if b <= 0x20 || b >= 0x7f || b == b'#' || b == b'%' {
            out.push_str(&format!("%{b:02x}"));
        } else {
            out.push(char::from(b.to_ascii_lowercase()));
        }
    }
    out
}

/// `%XX` sequences turned into their bytes; a `%` not followed by two hex
/// digits stays.
fn percent_decode(bytes: &[u8]) -> Vec<u8> {
    let hex = |b: u8| char::from(b).to_digit(16);
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let pair = bytes
            .get(i + 1..i + 3)
            .and_then(|p| Some(hex(p[0])? * 16 + hex(p[1])?));
        match (bytes[i], pair) {
            (b'%', Some(v)) => {
                // Two hex digits make at most 255.
                out.push(u8::try_from(v).unwrap_or(b'%'));
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    out
}

/// `www`, `www1`, `www2`, ...: left out of a key, as the `surt` library does.
fn is_www(label: &str) -> bool {
    label
        .strip_prefix("www")
        .is_some_and(|rest| rest.chars().all(|c| c.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::warc::{http_block, Record};

    #[test]
    /// Each as `surt.surt(url)` (surt 0.3, cdxj-indexer's) gives it.
    fn keys_are_the_surt_librarys() {
        for (url, key) in [
            ("http://www.Example.com/A/B/?b=2&a=1", "com,example)/a/b?a=1&b=2"),
            ("https://site3.test:8443/", "test,site3:8443)/"),
            ("http://127.0.0.1:81/x", "1,0,0,127:81)/x"),
            ("http://www2.example.org", "org,example)/"),
            (
                "http://site0.test:33941/p/12?Z=1&a=",
                "test,site0:33941)/p/12?a=&z=1",
            ),
            ("http://a.test/x;jsessionid=1?q=%41", "test,a)/x;jsessionid=1?q=a"),
            (
                "http://a.test/x%2Fy%3Fz?q=a%20b&r=%E2%82%AC",
                "test,a)/x/y?z?q=a%20b&r=%e2%82%ac",
            ),
            ("http://a.test/%7Euser/caf%C3%A9", "test,a)/~user/caf%c3%a9"),
            ("http://a.test/a b", "test,a)/a%20b"),
            ("http://[::1]:8080/x", "::1:8080)/x"),
            ("http://a.test/?", "test,a)/"),
            ("http://a.test/x/?b&a", "test,a)/x?a&b"),
            ("https://a.test:443/", "test,a)/"),
            ("http://a.test/x#frag", "test,a)/x"),
            ("http://a.test//x//", "test,a)/x"),
            ("not a url", "not a url"),
        ] {
            assert_eq!(url_key(url), key, "{url}");
        }
    }

    #[test]
    fn timestamps_are_fourteen_digits() {
        assert_eq!(timestamp("2026-11-23T10:00:05Z"), "20261123100005");
    }

    #[test]
    fn responses_are_indexed_at_their_member_and_other_records_not() {
        let mut file = Vec::new();
        let mut members = Vec::new();
        for (kind, uri, body) in [
            ("warcinfo", "", &b"software: x\r\n"[..]),
            ("response", "http://b.test/", &b"<p>b</p>"[..]),
            ("request", "http://b.test/", &b""[..]),
            ("response", "http://a.test/x", &b"<p>a</p>"[..]),
        ] {
            let block = if kind == "response" {
                http_block(
                    "HTTP/1.1 200 OK",
                    &[("Content-Type".into(), b"text/html; charset=utf-8".to_vec())],
                    body,
                )
            } else {
                body.to_vec()
            };
            let headers = if uri.is_empty() {
                vec![]
            } else {
                vec![
                    ("WARC-Target-URI", uri.to_string()),
                    ("WARC-Payload-Digest", "sha1:AAAA".to_string()),
                ]
            };
            let at = file.len() as u64;
            let n = Record {
                kind,
                id: "<urn:uuid:1>",
                date: "2026-11-23T10:00:05Z",
                content_type: "application/http;msgtype=response",
                headers,
                block: &block,
            }
            .write_gz(&mut file)
            .unwrap();
            members.push((kind, at, n));
        }
        let mut lines = index_lines(io::Cursor::new(&file), "f.warc.gz").unwrap();
        lines.sort();
        assert_eq!(lines.len(), 2);
        let (_, a_at, a_len) = members[3];
        assert_eq!(
            lines[0],
            format!(
                "test,a)/x 20261123100005 {{\"url\":\"http://a.test/x\",\"mime\":\"text/html\",\"status\":\"200\",\"digest\":\"sha1:AAAA\",\"length\":\"{a_len}\",\"offset\":\"{a_at}\",\"filename\":\"f.warc.gz\"}}"
            )
        );
        assert!(lines[1].starts_with("test,b)/ 20261123100005 "));
        assert!(lines[1].contains(&format!("\"offset\":\"{}\"", members[1].1)));
    }

    #[test]
    fn the_index_sits_beside_its_file() {
        assert_eq!(
            path_for(Path::new("/x/pages-00002.warc.gz")),
            Path::new("/x/pages-00002.cdxj")
        );
    }
}
