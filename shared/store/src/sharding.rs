//! Running on a sharded MongoDB cluster: the crawler talks to `mongos` like
//! to any server, and the dispatcher shards its crawl's two big
//! collections when it starts (before they grow):
//!
//! - `<crawl>__pages` by hashed `_id` (the URL): page writes, the bulk of
//!   the store's work, spread evenly over the shards, and a page read by
//!   URL (`pages get`, the exchange's duplicate check) goes to one shard.
//! - `<crawl>__segments` (the frontier) by `{domain: 1, seq: 1}`: a
//!   domain's queue lives in one range, and the dispatcher's window reads,
//!   which carry the domain, go to one shard. The shard key is a prefix of
//!   the queue index `{domain, seq, state}` that `Stores::ensure_indexes`
//!   makes first, so no index of its own is built. Segments are never
//!   updated, so no key changes.
//!
//! What is not targeted: the resume scans read every shard (as they read
//! every segment); seeds, outcomes, progress, body dictionaries are small
//! and stay on the primary shard; the second store's robots and domains
//! collections are keyed by origin and domain and small enough for one
//! server. `_id` is unique per shard only when it is not the shard key's
//! prefix; segment inserts stay idempotent because a retried insert
//! carries the same `{domain, seq}` and lands on the same shard.

use bson::{doc, Document};

use crate::{queue_order, Stores, PAGES, SEGMENTS};

/// `(namespace, shard key)` of each collection the dispatcher shards.
pub fn shard_keys(stores: &Stores) -> Vec<(String, Document)> {
    let ns = |kind: &str| format!("{}.{}", stores.primary.name(), stores.crawl().collection(kind));
    vec![(ns(PAGES), doc! {"_id": "hashed"}), (ns(SEGMENTS), queue_order())]
}

/// Shards the crawl's collections when the primary store is a `mongos`
/// (it answers `hello` with `msg: "isdbgrid"`); does nothing otherwise.
/// Sharding a collection again with the same key is a no-op for mongos;
/// a refusal (another key, no rights) is logged and the crawl goes on
/// unsharded there. Returns whether the store is a mongos.
pub async fn shard_collections(stores: &Stores) -> anyhow::Result<bool> {
    let hello = stores.primary.run_command(doc! {"hello": 1}).await?;
    if hello.get_str("msg").ok() != Some("isdbgrid") {
        return Ok(false);
    }
    let admin = stores.primary.client().database("admin");
    for (ns, key) in shard_keys(stores) {
        let cmd = doc! {"shardCollection": &ns, "key": key.clone()};
        match admin.run_command(cmd).await {
            Ok(_) => tracing::info!(collection = %ns, key = %key, "sharded"),
            Err(e) => {
                tracing::warn!(collection = %ns, key = %key, error = %e, "could not shard; it stays where it is")
            }
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::StoreArgs;
    use crate::crawl_id::CrawlId;

    #[tokio::test]
    async fn pages_by_hashed_url_and_the_frontier_by_domain_then_seq() {
        // Connecting does not reach a server (the driver connects lazily).
        let args = StoreArgs {
            mongo_uri: "mongodb://127.0.0.1:1".into(),
            robots_uri: None,
            db: "crawler".into(),
            robots_db: "crawler_robots".into(),
        };
        let crawl: CrawlId = "news-2026".parse().unwrap();
        let stores = Stores::connect(&args, "test", crawl).await.unwrap();
        let keys = shard_keys(&stores);
        assert_eq!(
            keys,
            vec![
                ("crawler.news_2d2026__pages".to_string(), doc! {"_id": "hashed"}),
                (
                    "crawler.news_2d2026__segments".to_string(),
                    doc! {"domain": 1, "seq": 1}
                ),
            ]
        );
    }
}
