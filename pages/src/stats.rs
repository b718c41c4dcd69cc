//! `pages stats`: what the store holds, counted by status, domain, content
//! type and day, with the bytes stored.
//!
//! It reads every page document once (as raw BSON, so it measures the
//! stored size, then as a `PageDoc`, bodies left compressed): about as
//! long as an export without the writing. Counting in the client keeps to what both mongod
//! and the nx-27017 stand-in answer.

use std::collections::BTreeMap;

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
        *self.by_status.entry(d.status).or_default() += 1;
        *self.by_domain.entry(d.domain).or_default() += 1;
        // The media type without its parameters (`text/html; charset=...`).
        let ct = d.content_type.as_deref().unwrap_or("(none)");
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
