//! Turns the store's documents into the frontier's pages: one read's
//! answer ([`page_of`]), or one batched read's, split per domain
//! ([`split`]).
//!
//! A batched read asks for many domains' queues at once (`$in` on the
//! domain, sorted by domain and `seq`, with one limit for all of them),
//! because a store that answers a range read by scanning the collection
//! scans once for all of them: on nx-27017 with 1 million stored URLs one
//! domain's window took 2.2 s to read, and 100 domains' 2.1 s. The query
//! cannot bound each domain's range or count on its own, so this module
//! does, and says which domains the answer does not settle.
//!
//! One `$eq` query per domain instead (which nx-27017 answers from the
//! index, see `one_domain`) was tried on 2026-11-26 with
//! `scripts/bench-dispatcher.sh` and a budget of 100,000: a crawl to a
//! million URLs ran at 6,485 URLs/s against 320–640 for the batches
//! (each a scan of the index), but 20,000 results after a restart on a
//! million stored URLs took 322 s against 83 s. Why is not known yet:
//! that each small query waits behind the seen-set rebuild's scan batches
//! (8,192 documents) did not hold, as batches of 1,024 took 326 s. About
//! 625 reads in 322 s is half a second a read, as slow as a scan, so the
//! plan nx-27017 picks there may differ. Not kept for that.

use std::collections::HashMap;

use bson::{RawBsonRef, RawDocument, RawDocumentBuf};
use shared::docs::FrontierDoc;

use crate::frontier::{ReadPage, Refill, Stored};

/// Decodes each document on its own: a malformed one is skipped with a
/// warning, and still moves the queue past it (`last_seq`).
pub(super) fn page_of<'a>(docs: impl ExactSizeIterator<Item = &'a RawDocument>, limit: usize) -> ReadPage {
    let mut page = ReadPage {
        urls: Vec::with_capacity(docs.len()),
        full: docs.len() >= limit,
        last_seq: 0,
    };
    for raw in docs {
        let seq = FrontierDoc::raw_seq(raw).unwrap_or(0);
        page.last_seq = page.last_seq.max(seq);
        match bson::from_slice::<FrontierDoc>(raw.as_bytes()) {
            Ok(d) => page.urls.push(Stored {
                url: d.url,
                depth: d.depth.clamp(0, i32::from(u16::MAX)) as u16,
                seq: d.seq,
            }),
            Err(e) => tracing::warn!(document = ?raw, error = %e, "skipping a malformed frontier entry"),
        }
    }
    page
}

/// The answer to a batched read of `refills`: the documents of those
/// domains with a `seq` in (lowest `after`, highest `upto`], sorted by
/// domain and `seq`, and whether the store stopped at the query's limit
/// (`cut`). Gives each refill its page, or `None` when the answer does not
/// settle it, so it must be asked again.
///
/// - A domain's documents outside its own `(after, upto]` are left out, and
///   at most its own `limit` are kept: its page is what reading it alone
///   would have returned.
/// - When the answer was cut, only the domains before the last one it
///   reaches are whole. The last one gets the URLs it has, as a full page
///   (more may follow after them), or `None` if none of them is in its
///   range. A domain the cut answer does not reach gets `None`: it is not
///   known to be empty. Nothing here relies on how the store orders
///   domains, only on each domain's documents coming together, in `seq`
///   order.
pub(super) fn split(refills: &[Refill], docs: &[RawDocumentBuf], cut: bool) -> Vec<Option<ReadPage>> {
    let mut by_domain: HashMap<&str, Vec<&RawDocument>> = HashMap::new();
    let mut last = None;
    for raw in docs {
        if let Ok(Some(RawBsonRef::String(domain))) = raw.get(FrontierDoc::DOMAIN) {
            by_domain.entry(domain).or_default().push(raw);
            last = Some(domain);
        }
    }
    refills
        .iter()
        .map(|r| {
            let docs = by_domain.get(r.domain.as_str()).map_or(&[][..], Vec::as_slice);
            let in_range: Vec<&RawDocument> = docs
                .iter()
                .copied()
                .filter(|raw| FrontierDoc::raw_seq(raw).is_some_and(|s| s > r.after && s <= r.upto))
                .take(r.limit)
                .collect();
            let partial = cut && (docs.is_empty() || last == Some(r.domain.as_str()));
            if partial && in_range.is_empty() {
                return None;
            }
            let mut page = page_of(in_range.into_iter(), r.limit);
            page.full |= partial;
            Some(page)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::rawdoc;

    fn doc(domain: &str, seq: i64) -> RawDocumentBuf {
        rawdoc! {
            "_id": format!("http://{domain}/{seq}"),
            "domain": domain,
            "depth": 1,
            "state": "queued",
            "seq": seq,
        }
    }

    fn seqs(page: &Option<ReadPage>) -> Option<(Vec<i64>, bool, i64)> {
        page.as_ref()
            .map(|p| (p.urls.iter().map(|u| u.seq).collect(), p.full, p.last_seq))
    }

    #[test]
    fn each_domain_gets_its_own_range_and_limit() {
        let refills = [
            Refill::for_test("a.test", 1, 9, 2),
            Refill::for_test("b.test", 0, 4, 10),
            Refill::for_test("c.test", 0, 100, 5),
        ];
        let docs = [
            doc("a.test", 1), // at `after`: not asked for
            doc("a.test", 3),
            doc("a.test", 5),
            doc("a.test", 7), // past the limit
            doc("b.test", 2),
            doc("b.test", 6), // past `upto`
        ];
        let pages = split(&refills, &docs, false);
        assert_eq!(seqs(&pages[0]), Some((vec![3, 5], true, 5)));
        assert_eq!(seqs(&pages[1]), Some((vec![2], false, 2)));
        // Not in a whole answer: nothing queued in its range.
        assert_eq!(seqs(&pages[2]), Some((vec![], false, 0)));
    }

    #[test]
    fn a_cut_answer_settles_only_the_domains_it_passed() {
        let refills = [
            Refill::for_test("a.test", 0, 100, 10),
            Refill::for_test("b.test", 0, 100, 10),
            Refill::for_test("c.test", 0, 100, 10),
        ];
        let docs = [doc("a.test", 1), doc("a.test", 2), doc("b.test", 3)];
        let pages = split(&refills, &docs, true);
        // Passed: whole, and short of its limit, so nothing more is queued.
        assert_eq!(seqs(&pages[0]), Some((vec![1, 2], false, 2)));
        // Reached last: what it has, but more may follow.
        assert_eq!(seqs(&pages[1]), Some((vec![3], true, 3)));
        // Not reached: unknown, not empty.
        assert_eq!(pages[2], None);
    }

    #[test]
    fn a_cut_answer_whose_last_domain_has_nothing_in_range_settles_nothing_of_it() {
        let refills = [Refill::for_test("a.test", 5, 100, 10)];
        let docs = [doc("a.test", 4), doc("a.test", 5)];
        assert_eq!(split(&refills, &docs, true), vec![None]);
    }

    #[test]
    fn malformed_documents_are_skipped_but_move_the_queue_on() {
        let refills = [Refill::for_test("a.test", 0, 100, 10)];
        let bad = rawdoc! {"_id": "http://a.test/4", "domain": "a.test", "depth": "deep", "seq": 4_i64};
        let no_domain = rawdoc! {"_id": "x", "seq": 2_i64};
        let docs = [doc("a.test", 1), bad, no_domain];
        let pages = split(&refills, &docs, false);
        assert_eq!(seqs(&pages[0]), Some((vec![1], false, 4)));
    }
}
