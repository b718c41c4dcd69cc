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
//! [`PageDoc`] fields written here: `body` (binary, zstd: `body_encoding`
//! is left out, see [`ZSTD`]), `body_dict` (the id of the zstd dictionary it was
//! compressed with, when there was one; see `body_dict`), `charset` (the
//! WHATWG name the HTML was decoded with) and, when the body had to be cut
//! to fit the store, `truncated: true`. [`raw_of`] reads a body back,
//! [`html_of`] as text.

use bson::spec::BinarySubtype;
use bson::Binary;

use crate::body_dict::{BodyDict, Dictionaries};
use crate::docs::PageDoc;

/// The only body encoding ever written; a page without `body_encoding`
/// (every page since it stopped being written on each) has it.
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

/// Sets `body`, `body_dict` and `charset` on a page,
/// compressing with `dict` when there is one (it must be in the
/// store already, for readers). A body that compresses past
/// [`MAX_STORED_BYTES`] (only possible when `--max-body-bytes` is raised
/// above it) is cut until it fits, and the page is marked `truncated`.
pub fn store(page: &mut PageDoc, raw: &[u8], charset: Option<&str>, dict: Option<&BodyDict>) {
    let mut len = raw.len();
    let packed = loop {
        let packed = compress(&raw[..len], dict);
        if packed.len() <= MAX_STORED_BYTES || len == 0 {
            break packed;
        }
        // Shrink in proportion, with a margin; a few rounds at most.
        len = (len as u128 * MAX_STORED_BYTES as u128 / packed.len() as u128 * 9 / 10) as usize;
        page.truncated = true;
    };
    page.body = Some(Binary {
        subtype: BinarySubtype::Generic,
        bytes: packed,
    });
    page.body_dict = dict.map(|d| d.id.clone());
    page.charset = charset.map(str::to_string);
}

fn compress(raw: &[u8], dict: Option<&BodyDict>) -> Vec<u8> {
    /// A compression context and the dictionary (id) it was made with.
    type Context = (Option<String>, zstd::bulk::Compressor<'static>);
    thread_local! {
        // One context per thread, remade only when the dictionary changes
        // (once in a child's life): making one costs about 20 µs a page.
        static COMPRESSOR: std::cell::RefCell<Option<Context>> = const { std::cell::RefCell::new(None) };
    }
    let id = dict.map(|d| &d.id);
    COMPRESSOR
        .with(|c| {
            let mut c = c.borrow_mut();
            if c.as_ref().is_none_or(|(made_with, _)| made_with.as_ref() != id) {
                let made = match dict {
                    Some(d) => zstd::bulk::Compressor::with_dictionary(LEVEL, &d.bytes),
                    None => zstd::bulk::Compressor::new(LEVEL),
                };
                *c = made.ok().map(|made| (id.cloned(), made));
            }
            c.as_mut().and_then(|(_, c)| c.compress(raw).ok())
        })
        // Compressing into memory cannot fail but for allocation failure;
        // then without the dictionary (the page does not name it).
        .or_else(|| zstd::bulk::compress(raw, LEVEL).ok().filter(|_| dict.is_none()))
        .unwrap_or_default()
}

/// Why a stored body could not be read back.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum BodyError {
    #[error("the page has no stored body")]
    Missing,
    #[error("unknown body encoding {0:?}")]
    Encoding(String),
    #[error("the body's dictionary {0} is not in the store")]
    MissingDictionary(String),
    #[error("the stored body does not decompress: {0}")]
    Corrupt(String),
}

/// The body bytes as the server sent them (after HTTP content decoding);
/// `dicts`: the store's dictionaries (`Dictionaries::load`).
pub fn raw_of(page: &PageDoc, dicts: &Dictionaries) -> Result<Vec<u8>, BodyError> {
    let bytes = match &page.body {
        Some(b) => &b.bytes,
        None => return Err(BodyError::Missing),
    };
    match page.body_encoding.as_deref() {
        None | Some(ZSTD) => {}
        Some(other) => return Err(BodyError::Encoding(other.to_string())),
    }
    use std::io::Read;
    let corrupt = |e: std::io::Error| BodyError::Corrupt(e.to_string());
    let dict: &[u8] = match &page.body_dict {
        Some(id) => dicts
            .get(id)
            .ok_or_else(|| BodyError::MissingDictionary(id.to_string()))?,
        None => &[],
    };
    let mut out = Vec::new();
    zstd::stream::read::Decoder::with_dictionary(bytes.as_slice(), dict)
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
pub fn html_of(page: &PageDoc, dicts: &Dictionaries) -> Result<String, BodyError> {
    let raw = raw_of(page, dicts)?;
    let encoding = page
        .charset
        .as_deref()
        .and_then(|c| encoding_rs::Encoding::for_label(c.as_bytes()))
        .unwrap_or(encoding_rs::UTF_8);
    Ok(encoding.decode_without_bom_handling(&raw).0.into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn none() -> Dictionaries {
        Dictionaries::default()
    }

    fn empty_page() -> PageDoc {
        PageDoc::new("http://a.test/".into(), "a.test".into(), 0, 200, 0)
    }

    #[test]
    fn bodies_compressed_with_a_dictionary_need_it_to_be_read() {
        // Pages of one site: the same frame around different text.
        let page = |i: usize| {
            format!(
                "<html><head><title>Page {i}</title><script src=/app.js></script></head><body>\
                 <nav><a href=/>Home</a><a href=/about>About us</a><a href=/contact>Contact</a></nav>\
                 <p>{}</p><footer>Copyright Example Ltd. All rights reserved.</footer></body></html>",
                format!("item {} ", i * 7919 % 1000).repeat(20)
            )
            .into_bytes()
        };
        let samples: Vec<Vec<u8>> = (0..200).map(page).collect();
        let dict = BodyDict::train(&samples).unwrap();
        let body = page(1000);
        let (mut with, mut without) = (empty_page(), empty_page());
        store(&mut with, &body, None, Some(&dict));
        store(&mut without, &body, None, None);
        assert_eq!(with.body_dict.as_deref(), Some(dict.id.as_str()));
        assert!(without.body_dict.is_none());
        let size = |d: &PageDoc| d.body.as_ref().unwrap().bytes.len();
        assert!(
            size(&with) < size(&without),
            "{} vs {}",
            size(&with),
            size(&without)
        );
        assert_eq!(
            raw_of(&with, &none()),
            Err(BodyError::MissingDictionary(dict.id.clone()))
        );
        let mut dicts = none();
        dicts.insert(dict);
        assert_eq!(raw_of(&with, &dicts).unwrap(), body);
        assert_eq!(raw_of(&without, &dicts).unwrap(), body);
    }

    #[test]
    fn bodies_round_trip_byte_for_byte_and_decode_with_their_charset() {
        let latin1 = b"<p>caf\xe9</p>".repeat(500);
        let mut d = empty_page();
        store(&mut d, &latin1, Some("windows-1252"), None);
        assert_eq!(raw_of(&d, &none()).unwrap(), latin1);
        assert!(html_of(&d, &none()).unwrap().starts_with("<p>café</p>"));
        assert!(matches!(&d.body, Some(b) if b.bytes.len() < latin1.len() / 10));
        assert!(!d.truncated);
        // Invalid UTF-8 stays bytes in the store; it is replaced only when read as text.
        let mut bad = empty_page();
        store(&mut bad, &[0xff; 1000], Some("UTF-8"), None);
        assert_eq!(raw_of(&bad, &none()).unwrap(), vec![0xff; 1000]);
        assert_eq!(html_of(&bad, &none()).unwrap().chars().count(), 1000);
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
        let mut d = empty_page();
        store(&mut d, &noise, None, None);
        assert!(d.truncated);
        let raw = raw_of(&d, &none()).unwrap();
        assert!(raw.len() < noise.len() && noise.starts_with(&raw));
        assert!(matches!(&d.body, Some(b) if b.bytes.len() <= MAX_STORED_BYTES));
    }

    #[test]
    fn unreadable_bodies_are_errors() {
        assert_eq!(raw_of(&empty_page(), &none()), Err(BodyError::Missing));
        let mut d = empty_page();
        d.body = Some(Binary {
            subtype: BinarySubtype::Generic,
            bytes: vec![1, 2, 3],
        });
        assert!(matches!(raw_of(&d, &none()), Err(BodyError::Corrupt(_))));
        d.body_encoding = Some("br".into());
        assert_eq!(raw_of(&d, &none()), Err(BodyError::Encoding("br".into())));
        // As earlier versions named it.
        d.body_encoding = Some(ZSTD.into());
        assert!(matches!(raw_of(&d, &none()), Err(BodyError::Corrupt(_))));
    }
}
