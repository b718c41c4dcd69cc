//! The HTTP exchange behind a stored page, as a WARC record needs it: the
//! request headers sent, the response's version and headers, the address
//! dialled and when the request went out. Written by the child into the
//! page document (next to the body, see [`crate::page_body`]) and read
//! back by `pages export`; this file is the one place that knows the
//! fields:
//!
//! | field | value |
//! |---|---|
//! | `fetch_started_at` | date the request was sent (`fetched_at` is when the answer was complete) |
//! | `http_version` | `"HTTP/1.1"`, `"HTTP/2.0"`, ... |
//! | `ip` | the server address dialled, when known |
//! | `headers` | the response headers in order, each `[name, value]`; a value that is not UTF-8 is binary |
//! | `request_headers` | the request headers sent besides `Host`, each `[name, value]` |
//!
//! Bodies are kept after HTTP content decoding; reqwest then drops
//! `Content-Encoding` and `Content-Length` from the headers it hands over,
//! so the headers kept describe the decoded body.

use std::net::IpAddr;

use bson::{spec::BinarySubtype, Binary, Bson, DateTime, Document};

/// The response side of an exchange, borrowed from the HTTP client's types.
pub struct ResponseParts<'a, H> {
    pub version: &'a str,
    /// Name and raw value of each header, in the order received.
    pub headers: H,
    pub ip: Option<IpAddr>,
    pub started: DateTime,
}

/// Headers as stored: `[[name, value], ...]`.
pub fn headers_bson<'a>(headers: impl IntoIterator<Item = (&'a str, &'a [u8])>) -> Bson {
    Bson::Array(
        headers
            .into_iter()
            .map(|(name, value)| {
                let value = match std::str::from_utf8(value) {
                    Ok(s) => Bson::String(s.to_string()),
                    Err(_) => Bson::Binary(Binary {
                        subtype: BinarySubtype::Generic,
                        bytes: value.to_vec(),
                    }),
                };
                Bson::Array(vec![Bson::String(name.to_string()), value])
            })
            .collect(),
    )
}

/// Sets the exchange's fields on a page document. `request_headers` is
/// the child's [`headers_bson`] of what its client sends (the same for
/// every request, so built once).
pub fn store<'a, H>(doc: &mut Document, response: ResponseParts<'a, H>, request_headers: &Bson)
where
    H: IntoIterator<Item = (&'a str, &'a [u8])>,
{
    doc.insert("fetch_started_at", response.started);
    doc.insert("http_version", response.version);
    if let Some(ip) = response.ip {
        doc.insert("ip", ip.to_string());
    }
    doc.insert("headers", headers_bson(response.headers));
    doc.insert("request_headers", request_headers.clone());
}

/// The exchange read back from a page document; pages stored before
/// these fields existed read as empty (no headers, no address).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Exchange {
    pub started: Option<DateTime>,
    pub http_version: Option<String>,
    pub ip: Option<String>,
    pub headers: Vec<(String, Vec<u8>)>,
    pub request_headers: Vec<(String, Vec<u8>)>,
}

impl Exchange {
    pub fn of(doc: &Document) -> Exchange {
        Exchange {
            started: doc.get_datetime("fetch_started_at").ok().copied(),
            http_version: doc.get_str("http_version").ok().map(str::to_string),
            ip: doc.get_str("ip").ok().map(str::to_string),
            headers: pairs(doc.get_array("headers").ok()),
            request_headers: pairs(doc.get_array("request_headers").ok()),
        }
    }
}

/// `[[name, value], ...]` back to pairs; malformed entries are skipped (a
/// reader must not fail on a document it did not write).
fn pairs(array: Option<&Vec<Bson>>) -> Vec<(String, Vec<u8>)> {
    array
        .into_iter()
        .flatten()
        .filter_map(|pair| match pair {
            Bson::Array(p) => match (p.first(), p.get(1)) {
                (Some(Bson::String(name)), Some(Bson::String(v))) => {
                    Some((name.clone(), v.clone().into_bytes()))
                }
                (Some(Bson::String(name)), Some(Bson::Binary(b))) => Some((name.clone(), b.bytes.clone())),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_exchange_reads_back_as_stored_including_binary_header_values() {
        let mut doc = Document::new();
        let request = headers_bson([("user-agent", &b"bot/1"[..]), ("accept", b"*/*")]);
        let started = DateTime::from_millis(1_700_000_000_000);
        let response = ResponseParts {
            version: "HTTP/1.1",
            headers: [("content-type", &b"text/html"[..]), ("x-odd", b"caf\xe9")],
            ip: Some("127.0.0.9".parse().expect("an address")),
            started,
        };
        store(&mut doc, response, &request);
        let back = Exchange::of(&doc);
        assert_eq!(back.started, Some(started));
        assert_eq!(back.http_version.as_deref(), Some("HTTP/1.1"));
        assert_eq!(back.ip.as_deref(), Some("127.0.0.9"));
        assert_eq!(
            back.headers,
            vec![
                ("content-type".to_string(), b"text/html".to_vec()),
                ("x-odd".to_string(), b"caf\xe9".to_vec())
            ]
        );
        assert_eq!(back.request_headers.len(), 2);
        assert_eq!(Exchange::of(&Document::new()), Exchange::default());
    }
}
