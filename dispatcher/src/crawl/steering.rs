//! The shell's side of an operator's commands (see `crate::control`):
//! what they change is written to the crawl's `control` collection, added
//! seeds to its `seeds`, and both are read back at start-up.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use bson::doc;
use mongodb::Collection;
use store::docs::{ControlDoc, SeedDoc};
use store::{decode_each, only_duplicates};
use tokio::sync::Notify;

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

    /// Writes an operator's change (see [`ControlWriter`]).
    pub(super) fn record_control(&self, d: ControlDoc) {
        self.control_writer.record(d);
    }

    /// Stores seeds an operator added, so that a restart starts from them too.
    pub(super) fn store_seeds(&self, seeds: Vec<String>) {
        let coll = self.stores.seeds();
        tokio::spawn(async move {
            let docs: Vec<SeedDoc> = seeds.into_iter().map(|url| SeedDoc { url }).collect();
            store::until_taken("storing added seeds", || async {
                match coll.insert_many(&docs).ordered(false).await {
                    Err(e) if only_duplicates(&e) => Ok(()),
                    other => other.map(drop),
                }
            })
            .await;
        });
    }
}

/// Writes the crawl's control documents one at a time, each id's latest
/// version last: an operator's block and quick unblock cannot land in
/// the other order, as two writes racing each other could. A document
/// stays pending until the store took it (retried with backoff), so a
/// store that is away loses nothing, and the pending set is bounded by
/// the documents there are (one per domain changed, one for the crawl).
pub(super) struct ControlWriter {
    pending: Arc<Mutex<BTreeMap<String, ControlDoc>>>,
    wake: Arc<Notify>,
}

impl ControlWriter {
    pub(super) fn start(coll: Collection<ControlDoc>) -> ControlWriter {
        let pending: Arc<Mutex<BTreeMap<String, ControlDoc>>> = Arc::default();
        let wake = Arc::new(Notify::new());
        let (todo, woken) = (pending.clone(), wake.clone());
        tokio::spawn(async move {
            loop {
                woken.notified().await;
                while let Some(d) = first(&todo) {
                    write(&coll, &d).await;
                    let mut todo = todo.lock().unwrap_or_else(|e| e.into_inner());
                    // A newer version that came meanwhile stays for the next turn.
                    if todo.get(&d.id) == Some(&d) {
                        todo.remove(&d.id);
                    }
                }
            }
        });
        ControlWriter { pending, wake }
    }

    pub(super) fn record(&self, d: ControlDoc) {
        self.pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(d.id.clone(), d);
        self.wake.notify_one();
    }

    /// Waits until every change is written, or `patience` passes (a
    /// stopping dispatcher does not wait on a store that is away; the
    /// change is then lost with this run, and logged).
    pub(super) async fn settle(&self, patience: Duration) {
        let deadline = tokio::time::Instant::now() + patience;
        loop {
            let left = self.pending.lock().unwrap_or_else(|e| e.into_inner()).len();
            if left == 0 {
                return;
            }
            if tokio::time::Instant::now() >= deadline {
                tracing::error!(left, "an operator's changes were not recorded before the stop");
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

fn first(todo: &Mutex<BTreeMap<String, ControlDoc>>) -> Option<ControlDoc> {
    let todo = todo.lock().unwrap_or_else(|e| e.into_inner());
    todo.values().next().cloned()
}

async fn write(coll: &Collection<ControlDoc>, d: &ControlDoc) {
    store::until_taken("recording an operator's change", || {
        coll.replace_one(doc! {"_id": &d.id}, d).upsert(true)
    })
    .await;
}
