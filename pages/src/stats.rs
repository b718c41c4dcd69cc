//! `pages stats`: what the store holds, counted by status, domain, content
//! type and day, with the bytes stored.
//!
//! It reads every page document once (as raw BSON, so it measures the
//! stored size, then as a `PageDoc`, bodies left compressed): about as
//! long as an export without the writing. Counting in the client keeps to what both mongod
//! and the nx-27017 stand-in answer.

use std::collections::{BTreeMap, HashSet};

use anyhow::Context;
use bson::{doc, RawDocumentBuf};
use futures::TryStreamExt;
use store::docs::PageDoc;
use store::{deadline, Stores};

/// Domains listed by name; the rest are summed.
const TOP_DOMAINS: usize = 20;

#[derive(Default)]
struct Tally {
    pages: u64,
    /// Documents that are not pages as this version writes them.
    malformed: u64,
    stored_bytes: u64,
    body_bytes: u64,
    fetched_bytes: u64,
    by_status: BTreeMap<i32, u64>,
    by_domain: BTreeMap<String, u64>,
    by_type: BTreeMap<String, u64>,
    by_day: BTreeMap<String, u64>,
    /// 2xx pages with a non-empty body and its fetch-time digest.
    digested: u64,
    /// Those digests, by their first 64 bits: 8 bytes a page (a chance
    /// of about 3e-4 that two of 10^8 bodies collide), rather than 20.
    bodies: HashSet<u64>,
}

impl Tally {
    fn add(&mut self, raw: &RawDocumentBuf) {
        self.stored_bytes += raw.as_bytes().len() as u64;
        let d: PageDoc = match bson::from_slice(raw.as_bytes()) {
            Ok(d) => d,
            Err(_) => {
                self.malformed += 1;
                return;
            }
        };
        self.pages += 1;
        self.body_bytes += d.body.as_ref().map_or(0, |b| b.bytes.len() as u64);
        self.fetched_bytes += u64::try_from(d.bytes).unwrap_or(0);
        if let Some(digest) = d
            .payload_sha1
            .filter(|_| (200..300).contains(&d.status) && d.bytes > 0)
        {
            self.digested += 1;
            let mut first = [0u8; 8];
            first.copy_from_slice(&digest.bytes()[..8]);
            self.bodies.insert(u64::from_le_bytes(first));
        }
        *self.by_status.entry(d.status).or_default() += 1;
        // The media type without its parameters (`text/html; charset=...`).
        let ct = store::exchange::content_type(&d);
        *self.by_domain.entry(d.domain).or_default() += 1;
        let ct = ct.as_deref().unwrap_or("(none)");
        let ct = ct.split(';').next().unwrap_or(ct).trim().to_ascii_lowercase();
        *self.by_type.entry(ct).or_default() += 1;
        let day = d
            .fetched_at
            .try_to_rfc3339_string()
            .ok()
            .and_then(|s| s.get(..10).map(str::to_string));
        *self.by_day.entry(day.unwrap_or_default()).or_default() += 1;
    }

    fn print(&self) {
        println!("pages: {}", self.pages);
        if self.malformed > 0 {
            println!("malformed documents (not counted below): {}", self.malformed);
        }
        println!(
            "bytes: {} stored ({} of them bodies), {} fetched",
            self.stored_bytes, self.body_bytes, self.fetched_bytes
        );
        if self.digested > 0 {
            let distinct = self.bodies.len() as u64;
            println!(
                "bodies (2xx, by the SHA-1 taken at fetch time): {} pages, {distinct} distinct, {} repeat a body another page had",
                self.digested,
                self.digested.saturating_sub(distinct)
            );
        }
        println!("by status:");
        for (s, n) in &self.by_status {
            println!("  {s}: {n}");
        }
        println!("by content type:");
        for (t, n) in &self.by_type {
            println!("  {t}: {n}");
        }
        println!("by day:");
        for (d, n) in &self.by_day {
            println!("  {d}: {n}");
        }
        let mut domains: Vec<_> = self.by_domain.iter().collect();
        domains.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        println!("by domain ({} domains):", domains.len());
        for (d, n) in domains.iter().take(TOP_DOMAINS) {
            println!("  {d}: {n}");
        }
        if domains.len() > TOP_DOMAINS {
            let rest: u64 = domains[TOP_DOMAINS..].iter().map(|(_, n)| **n).sum();
            println!("  ({} more): {rest}", domains.len() - TOP_DOMAINS);
        }
    }
}

/// Counts the pages of the crawl `stores` is for.
pub(crate) async fn run(stores: &Stores) -> anyhow::Result<()> {
    let pages = stores.pages().clone_with_type::<RawDocumentBuf>();
    let mut cursor = deadline(pages.find(doc! {}))
        .await
        .context("the store did not answer in time")?
        .context("reading pages")?;
    let mut tally = Tally::default();
    while let Some(d) = deadline(cursor.try_next())
        .await
        .context("the store did not answer in time")?
        .context("reading pages")?
    {
        tally.add(&d);
    }
    tally.print();
    Ok(())
}

#[cfg(test)]
mod tests {
    use store::payload_digest::PayloadDigest;

    use super::*;

    fn page(url: &str, status: i32, body: &[u8]) -> RawDocumentBuf {
        let mut p = PageDoc::new(url.into(), "a.test".into(), 0, status, body.len() as i64);
        p.payload_sha1 = Some(PayloadDigest::of(body));
        RawDocumentBuf::from_document(&bson::to_document(&p).expect("a page")).expect("raw")
    }

    #[test]
    fn duplicate_bodies_are_counted_among_2xx_pages_with_a_body() {
        let mut t = Tally::default();
        t.add(&page("http://a.test/1", 200, b"same"));
        t.add(&page("http://a.test/2", 200, b"same"));
        t.add(&page("http://a.test/3", 200, b"other"));
        // Empty bodies and errors are not bodies to compare.
        t.add(&page("http://a.test/4", 200, b""));
        t.add(&page("http://a.test/5", 404, b"same"));
        assert_eq!((t.pages, t.digested, t.bodies.len()), (5, 3, 2));
    }
}
