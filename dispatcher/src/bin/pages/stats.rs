//! `pages stats`: what the store holds, counted by status, domain, content
//! type and day, with the bytes stored.
//!
//! It reads every page document once (as raw BSON, so it measures the
//! stored size without parsing bodies): about as long as an export
//! without the writing. Counting in the client keeps to what both mongod
//! and the nx-27017 stand-in answer.

use std::collections::BTreeMap;

use anyhow::Context;
use bson::{doc, RawDocumentBuf};
use futures::TryStreamExt;
use shared::store::{deadline, Stores};

/// Domains listed by name; the rest are summed.
const TOP_DOMAINS: usize = 20;

#[derive(Default)]
struct Tally {
    pages: u64,
    stored_bytes: u64,
    body_bytes: u64,
    fetched_bytes: u64,
    by_status: BTreeMap<i32, u64>,
    by_domain: BTreeMap<String, u64>,
    by_type: BTreeMap<String, u64>,
    by_day: BTreeMap<String, u64>,
}

impl Tally {
    fn add(&mut self, d: &RawDocumentBuf) {
        self.pages += 1;
        self.stored_bytes += d.as_bytes().len() as u64;
        if let Ok(b) = d.get_binary("body") {
            self.body_bytes += b.bytes.len() as u64;
        }
        if let Ok(n) = d.get_i64("bytes") {
            self.fetched_bytes += n.max(0) as u64;
        }
        let status = d.get_i32("status").ok().unwrap_or(0);
        *self.by_status.entry(status).or_default() += 1;
        let domain = d.get_str("domain").ok().unwrap_or("(none)");
        *self.by_domain.entry(domain.to_string()).or_default() += 1;
        // The media type without its parameters (`text/html; charset=...`).
        let ct = d.get_str("content_type").ok().unwrap_or("(none)");
        let ct = ct.split(';').next().unwrap_or(ct).trim().to_ascii_lowercase();
        *self.by_type.entry(ct).or_default() += 1;
        if let Ok(t) = d.get_datetime("fetched_at") {
            let day = t
                .try_to_rfc3339_string()
                .ok()
                .and_then(|s| s.get(..10).map(str::to_string));
            *self.by_day.entry(day.unwrap_or_default()).or_default() += 1;
        }
    }

    fn print(&self) {
        println!("pages: {}", self.pages);
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

pub(crate) async fn run(stores: &Stores, crawl_id: Option<String>) -> anyhow::Result<()> {
    let filter = match crawl_id {
        Some(id) => doc! {"crawl_id": id},
        None => doc! {},
    };
    let pages = stores.primary.collection::<RawDocumentBuf>(shared::store::PAGES);
    let mut cursor = deadline(pages.find(filter))
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
