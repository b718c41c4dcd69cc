//! A page's body as stored: the bytes the server sent (after HTTP content
//! decoding), compressed with zstd, with the encoding and the charset named
//! in the page document.
//!
//! Why compressed bytes rather than decoded text: HTML compresses about
//! 3.5× (an 18 KB page becomes about 5 KB), which is most of what the store
//! does per page; the bytes are what an archive (WARC) needs, byte for byte;
//! and a body of at most `--max-body-bytes` can never decode past MongoDB's
//! 16 MiB document limit, as text could (every invalid UTF-8 byte becomes a
//! 3-byte U+FFFD).
//!
//! Page document fields written here: `body` (binary), `body_encoding`
//! (`"zstd"`), `charset` (the WHATWG name the HTML was decoded with) and,
//! when the body had to be cut to fit the store, `truncated: true`.
//! [`html_of`] reads a page back as text.

use bson::spec::BinarySubtype;
use bson::{Binary, Bson, Document};

/// The only body encoding written today.
pub const ZSTD: &str = "zstd";
/// zstd level 1: on 18 KB pages (measured on this project's 2-core
/// machines) 75 µs a page against 95 µs at level 3, for 3 % more bytes
/// (5.3 KB instead of 5.2 KB); the crawler's whole budget is about 0.25 ms
/// of CPU a page.
const LEVEL: i32 = 1;
/// Most compressed bytes kept in one page document, leaving room below
/// MongoDB's 16 MiB for every other field.
pub const MAX_STORED_BYTES: usize = 12 * 1024 * 1024;
/// Most bytes a stored body may decompress to when read back: a bound for
/// readers facing a document they did not write.
pub const MAX_DECOMPRESSED_BYTES: usize = 256 * 1024 * 1024;

/// Sets `body`, `body_encoding` and `charset` on a page document. A body
/// that compresses past [`MAX_STORED_BYTES`] (only possible when
/// `--max-body-bytes` is raised above it) is cut until it fits, and the
/// page is marked `truncated`.
pub fn store(doc: &mut Document, raw: &[u8], charset: Option<&str>) {
    let mut len = raw.len();
    let packed = loop {
        let packed = compress(&raw[..len]);
        if packed.len() <= MAX_STORED_BYTES || len == 0 {
            break packed;
        }
        // Shrink in proportion, with a margin; a few rounds at most.
        len = (len as u128 * MAX_STORED_BYTES as u128 / packed.len() as u128 * 9 / 10) as usize;
        doc.insert("truncated", true);
    };
    doc.insert(
        "body",
        Binary {
            subtype: BinarySubtype::Generic,
            bytes: packed,
        },
    );
    doc.insert("body_encoding", ZSTD);
    if let Some(charset) = charset {
        doc.insert("charset", charset);
    }
}

fn compress(raw: &[u8]) -> Vec<u8> {
    thread_local! {
        // One context per thread: making a new one costs about 20 µs a page.
        static COMPRESSOR: std::cell::RefCell<Option<zstd::bulk::Compressor<'static>>> =
            std::cell::RefCell::new(zstd::bulk::Compressor::new(LEVEL).ok());
    }
    COMPRESSOR
        .with(|c| match c.borrow_mut().as_mut() {
            Some(c) => c.compress(raw).ok(),
            None => None,
        })
        // Compressing into memory cannot fail but for allocation failure.
        .or_else(|| zstd::bulk::compress(raw, LEVEL).ok())
        .unwrap_or_default()
}

/// Why a stored body could not be read back.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum BodyError {
    #[error("the page has no stored body")]
    Missing,
    #[error("unknown body encoding {0:?}")]
    Encoding(String),
    #[error("the stored body does not decompress: {0}")]
    Corrupt(String),
}

/// The body bytes as the server sent them (after HTTP content decoding).
pub fn raw_of(doc: &Document) -> Result<Vec<u8>, BodyError> {
    let bytes = match doc.get("body") {
        Some(Bson::Binary(b)) => &b.bytes,
        _ => return Err(BodyError::Missing),
    };
    match doc.get_str("body_encoding") {
        Ok(ZSTD) => {}
        Ok(other) => return Err(BodyError::Encoding(other.to_string())),
        Err(_) => return Err(BodyError::Encoding(String::new())),
    }
    use std::io::Read;
    let corrupt = |e: std::io::Error| BodyError::Corrupt(e.to_string());
    let mut out = Vec::new();
    zstd::stream::read::Decoder::new(bytes.as_slice())
        .map_err(corrupt)?
        .take(MAX_DECOMPRESSED_BYTES as u64 + 1)
        .read_to_end(&mut out)
        .map_err(corrupt)?;
    if out.len() > MAX_DECOMPRESSED_BYTES {
        return Err(BodyError::Corrupt(format!(
            "decompresses past {MAX_DECOMPRESSED_BYTES} bytes"
        )));
    }
    Ok(out)
}

/// The page as text: the body decoded with its recorded charset (UTF-8
/// when none was recorded), invalid bytes replaced.
pub fn html_of(doc: &Document) -> Result<String, BodyError> {
    let raw = raw_of(doc)?;
    let encoding = doc
        .get_str("charset")
        .ok()
        .and_then(|c| encoding_rs::Encoding::for_label(c.as_bytes()))
        .unwrap_or(encoding_rs::UTF_8);
    Ok(encoding.decode_without_bom_handling(&raw).0.into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_round_trip_byte_for_byte_and_decode_with_their_charset() {
        let latin1 = b"<p>caf\xe9</p>".repeat(500);
        let mut d = Document::new();
        store(&mut d, &latin1, Some("windows-1252"));
        assert_eq!(raw_of(&d).unwrap(), latin1);
        assert!(html_of(&d).unwrap().starts_with("<p>café</p>"));
        assert!(matches!(d.get("body"), Some(Bson::Binary(b)) if b.bytes.len() < latin1.len() / 10));
        assert!(d.get("truncated").is_none());
        // Invalid UTF-8 stays bytes in the store; it is replaced only when read as text.
        let mut bad = Document::new();
        store(&mut bad, &[0xff; 1000], Some("UTF-8"));
        assert_eq!(raw_of(&bad).unwrap(), vec![0xff; 1000]);
        assert_eq!(html_of(&bad).unwrap().chars().count(), 1000);
    }

    #[test]
    fn bodies_that_do_not_fit_are_cut_and_marked() {
        // Incompressible bytes, more than the store limit.
        let mut x: u64 = 1;
        let noise: Vec<u8> = (0..MAX_STORED_BYTES + (1 << 20))
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        let mut d = Document::new();
        store(&mut d, &noise, None);
        assert_eq!(d.get_bool("truncated"), Ok(true));
        let raw = raw_of(&d).unwrap();
        assert!(raw.len() < noise.len() && noise.starts_with(&raw));
        assert!(matches!(d.get("body"), Some(Bson::Binary(b)) if b.bytes.len() <= MAX_STORED_BYTES));
    }

    #[test]
    fn unreadable_bodies_are_errors() {
        assert_eq!(raw_of(&Document::new()), Err(BodyError::Missing));
        let mut d = bson::doc! {"body": Binary { subtype: BinarySubtype::Generic, bytes: vec![1, 2, 3] }};
        assert_eq!(raw_of(&d), Err(BodyError::Encoding(String::new())));
        d.insert("body_encoding", ZSTD);
        assert!(matches!(raw_of(&d), Err(BodyError::Corrupt(_))));
    }
}
