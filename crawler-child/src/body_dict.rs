//! The child's body dictionary (see `store::body_dict`): learnt from the
//! first HTML pages it stores, written to the store, then used for every
//! page after.
//!
//! Training runs once, on a blocking thread, off the crawl's path (about
//! 0.1 s of CPU for 100 samples); until the dictionary is in the store,
//! pages are compressed without one. A child restarted later learns a new
//! one: each is a few tens of KB.

use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use store::body_dict::BodyDict;
use store::{self, Stores};

/// HTML bodies learnt from: on the realistic pages 100 compressed as well
/// as 300 or 1,000.
const SAMPLES: usize = 100;
/// Bytes kept of each sample, so a few huge pages cannot make training
/// slow or big.
const SAMPLE_BYTES: usize = 64 * 1024;
/// Tries to store the dictionary before the child goes on without one.
const STORE_TRIES: u32 = 5;

pub(crate) struct BodyDictLearner {
    /// Samples so far; `None` once they went to training.
    samples: Mutex<Option<Vec<Vec<u8>>>>,
    ready: OnceLock<BodyDict>,
    stores: Stores,
    crawl_id: String,
}

impl BodyDictLearner {
    pub(crate) fn new(stores: Stores, crawl_id: String) -> Self {
        BodyDictLearner {
            samples: Mutex::new(Some(Vec::with_capacity(SAMPLES))),
            ready: OnceLock::new(),
            stores,
            crawl_id,
        }
    }

    /// The dictionary to compress with, once it is in the store.
    pub(crate) fn current(&self) -> Option<&BodyDict> {
        self.ready.get()
    }

    /// Takes `body` as a sample while samples are wanted; with the last
    /// one, starts training and storing the dictionary in the background.
    pub(crate) fn learn(self: &Arc<Self>, body: &[u8]) {
        let Some(samples) = self.offer(body) else {
            return;
        };
        let this = self.clone();
        tokio::spawn(async move {
            let n = samples.len();
            let trained = tokio::task::spawn_blocking(move || BodyDict::train(&samples)).await;
            match trained {
                Ok(Ok(dict)) => this.store_and_use(dict, n).await,
                Ok(Err(e)) => {
                    tracing::warn!(
                        error = format!("{e:#}"),
                        "no body dictionary; pages are compressed without"
                    )
                }
                Err(e) => tracing::error!(error = %e, "BUG: training the body dictionary failed"),
            }
        });
    }

    /// Adds a sample; returns all of them when this one completes the set.
    fn offer(&self, body: &[u8]) -> Option<Vec<Vec<u8>>> {
        let mut guard = self.samples.lock().ok()?;
        let samples = guard.as_mut()?;
        samples.push(body[..body.len().min(SAMPLE_BYTES)].to_vec());
        if samples.len() < SAMPLES {
            return None;
        }
        guard.take()
    }

    /// Stores `dict` (retrying while the store is down, a few times), then
    /// makes it the one pages are compressed with: a page may only name a
    /// dictionary that readers can find.
    async fn store_and_use(&self, dict: BodyDict, samples: usize) {
        let doc = dict.to_doc(&self.crawl_id, samples);
        let mut pause = Duration::from_millis(200);
        for _ in 0..STORE_TRIES {
            match store::deadline(self.stores.body_dicts().insert_one(&doc)).await {
                Some(Ok(_)) => {
                    let _ = self.ready.set(dict);
                    return;
                }
                Some(Err(e)) if store::only_duplicates(&e) => {
                    let _ = self.ready.set(dict);
                    return;
                }
                Some(Err(e)) => tracing::warn!(error = %e, "storing the body dictionary failed"),
                None => tracing::warn!("storing the body dictionary: no answer in time"),
            }
            tokio::time::sleep(pause).await;
            pause *= 4;
        }
        tracing::warn!("the body dictionary was not stored; pages are compressed without");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn samples_are_handed_over_once_when_complete() {
        // Never connects: the driver connects on first use.
        let args = store::StoreArgs {
            mongo_uri: "mongodb://127.0.0.1:9".into(),
            db: "t".into(),
            robots_uri: None,
            robots_db: "t".into(),
        };
        let stores = Stores::connect(&args, "test", Default::default()).await.unwrap();
        let learner = BodyDictLearner::new(stores, "t".into());
        for i in 0..SAMPLES - 1 {
            assert!(learner.offer(&vec![b'x'; i]).is_none());
        }
        let big = vec![b'y'; SAMPLE_BYTES * 3];
        let samples = learner.offer(&big).expect("the last sample completes the set");
        assert_eq!(samples.len(), SAMPLES);
        assert_eq!(samples[SAMPLES - 1].len(), SAMPLE_BYTES);
        assert!(learner.offer(b"more").is_none(), "samples are taken once");
        assert!(learner.current().is_none());
    }
}
