//! Seeds: from a file (one URL per line, `#` comments) and from the
//! `seeds` collection. File seeds are also written to the collection, so
//! the store records what a crawl started from.

use std::path::Path;

use anyhow::Context;
use bson::{doc, Document};
use futures::TryStreamExt;
use shared::store::{only_duplicates, Stores};
use shared::urls;

/// Reads a seeds file; bad lines are reported and skipped, never fatal.
pub fn read_file(path: &Path) -> anyhow::Result<Vec<String>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading seeds file {}", path.display()))?;
    let mut seeds = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or_default().trim();
        if line.is_empty() {
            continue;
        }
        match urls::parse(line) {
            Ok(u) => seeds.push(u.to_string()),
            Err(why) => eprintln!(
                "dispatcher: {}:{}: skipping seed {line:?}: {}",
                path.display(),
                n + 1,
                why.as_str()
            ),
        }
    }
    Ok(seeds)
}

/// Stores `seeds` in the collection and returns every stored seed.
pub async fn sync_with_store(stores: &Stores, seeds: &[String]) -> anyhow::Result<Vec<String>> {
    if !seeds.is_empty() {
        let docs: Vec<Document> = seeds.iter().map(|s| doc! {"_id": s}).collect();
        if let Err(e) = stores.seeds().insert_many(docs).ordered(false).await {
            if !only_duplicates(&e) {
                return Err(e).context("writing seeds");
            }
        }
    }
    let mut out = Vec::new();
    let mut cursor = stores.seeds().find(doc! {}).await.context("reading seeds")?;
    while let Some(d) = cursor.try_next().await.context("reading seeds")? {
        match d.get_str("_id").ok().map(urls::parse) {
            Some(Ok(u)) => out.push(u.to_string()),
            _ => eprintln!("dispatcher: skipping malformed seed document {d}"),
        }
    }
    Ok(out)
}
