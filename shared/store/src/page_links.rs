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
        static CONTEXT: ContextCell<zstd::bulk::Compressor<'static>> =
            const { std::cell::RefCell::new(None) };
    }
    let bytes = with_context(
        &CONTEXT,
        || zstd::bulk::Compressor::new(LEVEL),
        |c| c.compress(joined),
    )
    .ok()?;
    Some(Binary {
        subtype: BinarySubtype::Generic,
        bytes,
    })
}

/// The links [`pack`] stored; an error for a field that is not what
/// `pack` writes (decompresses past [`MAX_UNPACKED_BYTES`], or is not
/// UTF-8).
pub fn unpack(bytes: &[u8]) -> Result<Vec<String>, String> {
    let raw = decompress(bytes)?;
    let text = String::from_utf8(raw).map_err(|_| "links are not UTF-8".to_string())?;
    Ok(text
        .split('\n')
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect())
}

/// One frame, decompressed with this thread's context into a buffer of
/// the size its header gives (as `pack` writes it; at most
/// [`MAX_UNPACKED_BYTES`], which is also the buffer for a frame that
/// gives none). Why not `zstd::bulk::decompress`: it makes a context and
/// a buffer of the whole limit for every call, and a restarted
/// dispatcher reading its stored frontier spent 13% of its CPU making
/// contexts, one a segment (perf, `scripts/bench_dispatcher.py --urls
/// 10000000`, 2026-12-07).
fn decompress(bytes: &[u8]) -> Result<Vec<u8>, String> {
    thread_local! {
        static CONTEXT: ContextCell<zstd::bulk::Decompressor<'static>> =
            const { std::cell::RefCell::new(None) };
    }
    let size = match zstd::zstd_safe::get_frame_content_size(bytes) {
        Ok(Some(n)) if n <= MAX_UNPACKED_BYTES as u64 => n as usize,
        Ok(Some(n)) => {
            return Err(format!(
                "links decompress to {n} bytes, past {MAX_UNPACKED_BYTES}"
            ))
        }
        Ok(None) => MAX_UNPACKED_BYTES,
        Err(_) => return Err("links are not a zstd frame".to_string()),
    };
    let mut out = Vec::with_capacity(size);
    with_context(&CONTEXT, zstd::bulk::Decompressor::new, |d| {
        d.decompress_to_buffer(bytes, &mut out)
    })
    .map_err(|e| format!("links do not decompress: {e}"))?;
    Ok(out)
}

/// A zstd context kept by each thread.
type ContextCell<T> = std::cell::RefCell<Option<T>>;

/// Runs `f` with this thread's context, made by `make` the first time:
/// making a context per call cost three times the compression of a page's
/// links (pagebench: 11.3 µs a page against 3.5), and a restarted
/// dispatcher 13% of its CPU to decompress its segments.
fn with_context<T, R>(
    key: &'static std::thread::LocalKey<ContextCell<T>>,
    make: impl FnOnce() -> std::io::Result<T>,
    f: impl FnOnce(&mut T) -> std::io::Result<R>,
) -> std::io::Result<R> {
    key.with(|cell| {
        let mut slot = cell
            .try_borrow_mut()
            .map_err(|_| std::io::Error::other("the zstd context is in use"))?;
        let context = match &mut *slot {
            Some(c) => c,
            empty => empty.insert(make()?),
        };
        f(context)
    })
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
        // A frame whose header does not give its size is held to the
        // limit as it decompresses.
        let mut unsized_bomb = Vec::new();
        let mut enc = zstd::stream::write::Encoder::new(&mut unsized_bomb, 1).unwrap();
        enc.include_contentsize(false).unwrap();
        std::io::Write::write_all(&mut enc, &vec![b'a'; MAX_UNPACKED_BYTES + 1]).unwrap();
        enc.finish().unwrap();
        assert!(unpack(&unsized_bomb).is_err());
        let mut small = Vec::new();
        let mut enc = zstd::stream::write::Encoder::new(&mut small, 1).unwrap();
        enc.include_contentsize(false).unwrap();
        std::io::Write::write_all(&mut enc, b"http://a.test/\nhttp://b.test/").unwrap();
        enc.finish().unwrap();
        assert_eq!(unpack(&small).unwrap(), vec!["http://a.test/", "http://b.test/"]);
        // A header that says less than the frame holds (a one-byte size
        // after the magic number and the frame header's descriptor).
        let mut lying = zstd::bulk::compress(b"http://a.test/", 1).unwrap();
        assert_eq!(lying[5], 14, "the frame's layout: {lying:?}");
        lying[5] = 3;
        assert!(unpack(&lying).is_err());
    }
}
