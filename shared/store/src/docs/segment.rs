//! `<crawl>__segments`: the crawl's frontier, every URL it admitted, in
//! segments. A segment is a batch of one domain's newly admitted URLs,
//! written once by the dispatcher and never updated: the URLs packed in
//! one compressed field (as a page's links are, `crate::page_links`), and
//! each one's place in the crawl's admission order (`seq`) and depth
//! packed beside them.
//!
//! Why batches and not one document per URL: a page's new links were one
//! insert each, so the store wrote two documents for every page it kept
//! (each also an `_id` and a queue index entry on mongod, and a journal
//! write); crawlers that keep big frontiers on disk (BUbiNG's per-host
//! disk queues, Heritrix's per-queue records) append a host's URLs in
//! blocks too. A segment is keyed by the highest `seq` it holds, so a
//! domain's queue is its queued segments in `seq` order: one range of the
//! `{domain, seq, state}` index, and a segment whose `seq` is past a
//! reader's cursor holds the URLs after it.
//!
//! What a segment does not say is whether its URLs are finished: a fetched
//! URL's page says so (`PageDoc`), a failed or disallowed one's outcome
//! (`OutcomeDoc`), and each domain's progress (`ProgressDoc`) says below
//! which `seq` every URL of the domain is finished, so a restarted
//! dispatcher reads its queues from there. A URL found over one of the
//! crawl's budgets is stored in a `deferred` segment, with the budget it
//! was over, so that a later run with a larger budget takes it up (in a
//! new queued segment, under a new `seq`).

use bson::spec::BinarySubtype;
use bson::{Binary, RawDocument};
use serde::{Deserialize, Serialize};

use super::frontier::Deferral;

/// Whether a segment's URLs are in their domain's queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SegmentState {
    Queued,
    /// Found over a budget; known, not crawled (see [`Deferral`]).
    Deferred,
}

impl SegmentState {
    pub fn as_str(self) -> &'static str {
        match self {
            SegmentState::Queued => "queued",
            SegmentState::Deferred => "deferred",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SegmentDoc {
    /// The highest `seq` of its URLs: unique over the crawl, since every
    /// URL has its own `seq`, so a retried insert of the same segment is
    /// a duplicate the store refuses.
    #[serde(rename = "_id")]
    pub id: i64,
    pub domain: String,
    /// The same highest `seq`, for the queue index and the shard key.
    pub seq: i64,
    /// The lowest `seq` of its URLs.
    pub first: i64,
    /// URLs in it.
    pub n: i32,
    pub state: SegmentState,
    /// Why a `deferred` segment waits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deferred: Option<Deferral>,
    /// The URLs, newline-joined and zstd-compressed (`crate::page_links`).
    pub urls: Binary,
    /// Each URL's `seq` and depth, in order: unsigned LEB128 varints, the
    /// `seq` as its distance from the one before (from `first` for the
    /// first URL), then the depth.
    pub places: Binary,
}

/// One URL of a segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentEntry {
    pub url: String,
    pub seq: i64,
    pub depth: u16,
}

/// Most URLs a segment read back may hold: the dispatcher writes at most
/// a few hundred; more is not ours, and is refused rather than unpacked.
pub const MAX_READ_URLS: usize = 65_536;

impl SegmentDoc {
    pub const ID: &'static str = "_id";
    pub const DOMAIN: &'static str = "domain";
    pub const SEQ: &'static str = "seq";
    pub const FIRST: &'static str = "first";
    pub const N: &'static str = "n";
    pub const STATE: &'static str = "state";
    pub const DEFERRED: &'static str = "deferred";
    pub const URLS: &'static str = "urls";
    pub const PLACES: &'static str = "places";

    /// A segment of `domain`'s `entries`, in increasing `seq` order (the
    /// order they were admitted in); `None` for none, or for `seq`s out
    /// of order.
    pub fn new(
        domain: String,
        state: SegmentState,
        deferred: Option<Deferral>,
        entries: &[SegmentEntry],
    ) -> Option<SegmentDoc> {
        let mut b = SegmentBuilder::new(domain, state, deferred);
        for e in entries {
            if !b.push(&e.url, e.seq, e.depth) {
                return None;
            }
        }
        b.build()
    }

    /// The URLs of a stored segment, read in place from its raw document
    /// (the queue reader and the scans decode nothing else); an error
    /// names what is wrong with one that is not what [`SegmentDoc::new`]
    /// writes.
    pub fn entries(raw: &RawDocument) -> Result<Vec<SegmentEntry>, String> {
        let int = |field: &str| match raw.get(field) {
            Ok(Some(bson::RawBsonRef::Int64(n))) => Ok(n),
            Ok(Some(bson::RawBsonRef::Int32(n))) => Ok(i64::from(n)),
            _ => Err(format!("no integer {field}")),
        };
        let (first, last, n) = (int(Self::FIRST)?, int(Self::SEQ)?, int(Self::N)?);
        let n = usize::try_from(n)
            .ok()
            .filter(|&n| n <= MAX_READ_URLS)
            .ok_or_else(|| format!("{n} URLs is not a segment's count"))?;
        let binary = |field: &str| {
            raw.get_binary(field)
                .map(|b| b.bytes)
                .map_err(|_| format!("no binary {field}"))
        };
        let urls = crate::page_links::unpack(binary(Self::URLS)?)?;
        if urls.len() != n {
            return Err(format!("{} URLs where the segment counts {n}", urls.len()));
        }
        let mut places = binary(Self::PLACES)?;
        let mut out = Vec::with_capacity(n);
        let mut seq = first;
        for (i, url) in urls.into_iter().enumerate() {
            let gap = take_varint(&mut places).ok_or("its places end early")?;
            let depth = take_varint(&mut places).ok_or("its places end early")?;
            seq = i64::try_from(gap)
                .ok()
                .and_then(|g| seq.checked_add(g))
                .filter(|&s| s <= last && (i == 0 || gap > 0))
                .ok_or("a seq out of its range")?;
            out.push(SegmentEntry {
                url,
                seq,
                depth: u16::try_from(depth).unwrap_or(u16::MAX),
            });
        }
        Ok(out)
    }

    /// The highest `seq` of a raw segment, whatever integer width the
    /// store hands back (nx-27017 returns small 64-bit numbers as 32-bit
    /// ones).
    pub fn raw_seq(raw: &RawDocument) -> Option<i64> {
        match raw.get(Self::SEQ).ok()?? {
            bson::RawBsonRef::Int64(n) => Some(n),
            bson::RawBsonRef::Int32(n) => Some(i64::from(n)),
            _ => None,
        }
    }
}

/// A segment being filled, its URLs packed as they come (joined, with
/// their places), so that one waiting to be written holds about the bytes
/// of its URLs and no more (the dispatcher holds a domain's newest URLs
/// for a while, many thousands at once).
#[derive(Debug)]
pub struct SegmentBuilder {
    domain: String,
    state: SegmentState,
    deferred: Option<Deferral>,
    /// The URLs so far, newline-joined.
    urls: Vec<u8>,
    /// Their places, as [`SegmentDoc::places`] holds them.
    places: Vec<u8>,
    first: i64,
    last: i64,
    n: u32,
}

impl SegmentBuilder {
    pub fn new(domain: String, state: SegmentState, deferred: Option<Deferral>) -> SegmentBuilder {
        SegmentBuilder {
            domain,
            state,
            deferred,
            urls: Vec::new(),
            places: Vec::new(),
            first: 0,
            last: 0,
            n: 0,
        }
    }

    /// Adds a URL; false (and nothing added) if its `seq` is not above the
    /// last one's.
    pub fn push(&mut self, url: &str, seq: i64, depth: u16) -> bool {
        let gap = if self.n == 0 {
            self.first = seq;
            0
        } else {
            match seq.checked_sub(self.last).and_then(|g| u64::try_from(g).ok()) {
                Some(g) if g > 0 => g,
                _ => return false,
            }
        };
        if self.n > 0 {
            self.urls.push(b'\n');
        }
        self.urls.extend_from_slice(url.as_bytes());
        put_varint(&mut self.places, gap);
        put_varint(&mut self.places, u64::from(depth));
        self.last = seq;
        self.n = self.n.saturating_add(1);
        true
    }

    /// URLs in it.
    pub fn len(&self) -> usize {
        self.n as usize
    }

    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Bytes of URLs in it.
    pub fn bytes(&self) -> usize {
        self.urls.len()
    }

    /// The lowest `seq` in it (0 while empty).
    pub fn first(&self) -> i64 {
        self.first
    }

    /// The document; `None` for an empty segment.
    pub fn build(self) -> Option<SegmentDoc> {
        if self.n == 0 {
            return None;
        }
        Some(SegmentDoc {
            id: self.last,
            domain: self.domain,
            seq: self.last,
            first: self.first,
            n: i32::try_from(self.n).ok()?,
            state: self.state,
            deferred: self.deferred,
            urls: crate::page_links::pack_joined(&self.urls)?,
            places: Binary {
                subtype: BinarySubtype::Generic,
                bytes: self.places,
            },
        })
    }
}

/// Appends `v` as an unsigned LEB128 varint.
fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8 & 0x7f) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Takes an unsigned LEB128 varint off the front of `bytes`; `None` if it
/// ends early or runs past 64 bits.
fn take_varint(bytes: &mut &[u8]) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let (&b, rest) = bytes.split_first()?;
        *bytes = rest;
        let part = u64::from(b & 0x7f);
        if shift == 63 && part > 1 {
            return None;
        }
        v |= part << shift;
        if b & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(url: &str, seq: i64, depth: u16) -> SegmentEntry {
        SegmentEntry {
            url: url.to_string(),
            seq,
            depth,
        }
    }

    fn raw(d: &SegmentDoc) -> bson::RawDocumentBuf {
        bson::RawDocumentBuf::from_document(&bson::to_document(d).unwrap()).unwrap()
    }

    #[test]
    fn a_segment_reads_back_as_written() {
        let entries = vec![
            entry("http://a.test/", 7, 0),
            entry("http://a.test/x", 8, 1),
            entry("http://a.test/y?q=1", 1_000_000_000_007, 300),
        ];
        let d = SegmentDoc::new("a.test".into(), SegmentState::Queued, None, &entries).unwrap();
        assert_eq!(
            (d.id, d.seq, d.first, d.n),
            (1_000_000_000_007, 1_000_000_000_007, 7, 3)
        );
        let stored = bson::to_document(&d).unwrap();
        assert_eq!(stored.get_str("state"), Ok("queued"));
        assert_eq!(bson::from_document::<SegmentDoc>(stored).unwrap(), d);
        assert_eq!(SegmentDoc::entries(&raw(&d)).unwrap(), entries);
        assert_eq!(SegmentDoc::raw_seq(&raw(&d)), Some(1_000_000_000_007));
    }

    #[test]
    fn seqs_must_increase() {
        let e = |s| entry("http://a.test/", s, 0);
        assert!(SegmentDoc::new("a".into(), SegmentState::Queued, None, &[e(3), e(3)]).is_none());
        assert!(SegmentDoc::new("a".into(), SegmentState::Queued, None, &[e(3), e(2)]).is_none());
        assert!(SegmentDoc::new("a".into(), SegmentState::Queued, None, &[]).is_none());
        let deferred = SegmentDoc::new(
            "a".into(),
            SegmentState::Deferred,
            Some(Deferral::DomainBudget),
            &[e(9)],
        )
        .unwrap();
        let stored = bson::to_document(&deferred).unwrap();
        assert_eq!(stored.get_str("deferred"), Ok("domain_budget"));
    }

    #[test]
    fn a_segment_that_lies_is_an_error_not_a_panic() {
        let good = SegmentDoc::new(
            "a".into(),
            SegmentState::Queued,
            None,
            &[entry("http://a/1", 5, 0), entry("http://a/2", 6, 0)],
        )
        .unwrap();
        let mut d = good.clone();
        d.n = 3;
        assert!(SegmentDoc::entries(&raw(&d)).is_err());
        let mut d = good.clone();
        d.seq = 5; // the second URL's seq is past it
        assert!(SegmentDoc::entries(&raw(&d)).is_err());
        let mut d = good.clone();
        d.places.bytes.truncate(3);
        assert!(SegmentDoc::entries(&raw(&d)).is_err());
        let mut d = good.clone();
        d.places.bytes = vec![0xff; 12];
        assert!(SegmentDoc::entries(&raw(&d)).is_err());
        let mut d = good;
        d.n = -1;
        assert!(SegmentDoc::entries(&raw(&d)).is_err());
    }

    #[test]
    fn varints_round_trip_and_refuse_overlong_input() {
        for v in [0, 1, 127, 128, 300, u64::from(u32::MAX), u64::MAX] {
            let mut b = Vec::new();
            put_varint(&mut b, v);
            let mut s = b.as_slice();
            assert_eq!(take_varint(&mut s), Some(v));
            assert!(s.is_empty());
        }
        assert_eq!(take_varint(&mut &[0x80u8; 11][..]), None);
        assert_eq!(take_varint(&mut &[0x80u8][..]), None);
    }
}
