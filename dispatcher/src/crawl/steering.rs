//! The shell's side of an operator's commands (see `crate::control`):
//! what they change is written to the crawl's `control` collection, added
//! seeds to its `seeds`, and both are read back at start-up.

use anyhow::Context;
use bson::doc;
use store::docs::{ControlDoc, SeedDoc};
use store::{decode_each, only_duplicates};

use super::{now_ms, Dispatcher};

impl Dispatcher {
    /// Reads what an operator set in an earlier run of this crawl.
    pub(super) async fn restore_controls(&mut self) -> anyhow::Result<()> {
        let mut docs = Vec::new();
        decode_each(
            &self.stores.control(),
            doc! {},
            |d: ControlDoc| docs.push(d),
            |d, e| tracing::warn!(document = ?d, error = %e, "skipping a malformed control document"),
        )
        .await
        .context("reading the crawl's control documents")?;
        self.state.restore_controls(&docs, now_ms());
        let c = self.state.controls();
        if c.paused || !c.blocked.is_empty() || !c.delays.is_empty() {
            tracing::warn!(
                paused = c.paused,
                blocked = c.blocked.len(),
                delays = c.delays.len(),
                "an operator's changes from an earlier run stand (crawlctl status lists them)"
            );
        }
        Ok(())
    }

    /// Writes an operator's change, retrying until the store takes it.
    pub(super) fn record_control(&self, d: ControlDoc) {
        let control = self.stores.control();
        tokio::spawn(async move {
            let mut backoff = store::Backoff::default();
            loop {
                let write = control.replace_one(doc! {"_id": &d.id}, &d).upsert(true);
                match store::deadline(write).await {
                    Some(Ok(_)) => break,
                    Some(Err(e)) => backoff.wait("recording an operator's change", &e).await,
                    None => {
                        backoff
                            .note("recording an operator's change", "no answer in time")
                            .await
                    }
                }
            }
        });
    }

    /// Stores seeds an operator added, so that a restart starts from them too.
    pub(super) fn store_seeds(&self, seeds: Vec<String>) {
        let coll = self.stores.seeds();
        tokio::spawn(async move {
            let docs: Vec<SeedDoc> = seeds.into_iter().map(|url| SeedDoc { url }).collect();
            let mut backoff = store::Backoff::default();
            loop {
                match store::deadline(coll.insert_many(&docs).ordered(false)).await {
                    Some(Ok(_)) => break,
                    Some(Err(e)) if only_duplicates(&e) => break,
                    Some(Err(e)) => backoff.wait("storing added seeds", &e).await,
                    None => backoff.note("storing added seeds", "no answer in time").await,
                }
            }
        });
    }
}
