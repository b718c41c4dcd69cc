//! The links a page led to, as its document keeps them (`PageDoc::links`):
//! one zstd frame of the URLs joined by newlines (a parsed URL holds no
//! newline), stored as binary.
//!
//! Why not an array of strings: the store decodes every element of a
//! document it takes, so an array of 30 links cost more store CPU per page
//! than a whole extra write, and the links were a seventh of the page's
//! bytes; compressed in one field they are about a quarter of that and
//! one element. On mongod a binary field is also cheaper to validate and
//! store than 30 strings.
//! [`unpack`] reads them back (the `pages` exports do not show them yet).

use bson::spec::BinarySubtype;
use bson::Binary;

/// zstd level: links compress well at the fastest level already.
const LEVEL: i32 = 1;
/// Most bytes the links of one page may decompress to: the child keeps
/// at most 3 MiB of them (`crawler-child`'s pipeline); more is not ours.
pub const MAX_UNPACKED_BYTES: usize = 4 * 1024 * 1024;

/// `links` as one compressed field; `None` for none (or, which does not
/// happen with an in-memory encoder, if compression fails).
pub fn pack<S: AsRef<str>>(links: &[S]) -> Option<Binary> {
    let mut joined = String::with_capacity(links.iter().map(|l| l.as_ref().len() + 1).sum());
    for (i, l) in links.iter().enumerate() {
        if i > 0 {
            joined.push('\n');
        }
        joined.push_str(l.as_ref());
    }
    pack_joined(joined.as_bytes())
}

/// Links already joined by newlines (as [`pack`] joins them), as one
/// compressed field; `None` for none.
pub fn pack_joined(joined: &[u8]) -> Option<Binary> {
    if joined.is_empty() {
        return None;
    }
    thread_local! {
        // A compression context per thread: making one per page cost
        // three times the compression itself (pagebench: 11.3 µs a page
        // against 3.5).
        static CONTEXT: std::cell::RefCell<Option<zstd::bulk::Compressor<'static>>> =
            const { std::cell::RefCell::new(None) };
    }
    let bytes = CONTEXT.with(|c| {
        let mut c = c.try_borrow_mut().ok()?;
        if c.is_none() {
            *c = zstd::bulk::Compressor::new(LEVEL).ok();
        }
        c.as_mut()?.compress(joined).ok()
    })?;
    Some(Binary {
        subtype: BinarySubtype::Generic,
        bytes,
    })
}

/// The links [`pack`] stored; an error for a field that is not what
/// `pack` writes (decompresses past [`MAX_UNPACKED_BYTES`], or is not
/// UTF-8).
pub fn unpack(bytes: &[u8]) -> Result<Vec<String>, String> {
    let raw = zstd::bulk::decompress(bytes, MAX_UNPACKED_BYTES)
        .map_err(|e| format!("links do not decompress: {e}"))?;
    let text = String::from_utf8(raw).map_err(|_| "links are not UTF-8".to_string())?;
    Ok(text
        .split('\n')
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_come_back_as_they_went_in() {
        let links: Vec<String> = (0..40).map(|i| format!("http://a.test/p/{i}?q=1")).collect();
        let packed = pack(&links).unwrap();
        assert!(packed.bytes.len() < links.iter().map(String::len).sum::<usize>() / 3);
        assert_eq!(unpack(&packed.bytes).unwrap(), links);
        assert!(pack::<String>(&[]).is_none());
    }

    #[test]
    fn a_field_that_is_not_packed_links_is_an_error_not_a_panic() {
        assert!(unpack(b"not zstd").is_err());
        let bomb = zstd::bulk::compress(&vec![b'a'; MAX_UNPACKED_BYTES + 1], 1).unwrap();
        assert!(unpack(&bomb).is_err());
    }
}
