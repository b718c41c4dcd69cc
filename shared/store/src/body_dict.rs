//! zstd dictionaries for stored page bodies.
//!
//! Pages of the same sites share most of their markup (head, navigation,
//! footer, scripts), which zstd cannot exploit one 18 KB page at a time. A
//! dictionary trained on a child's first pages (its sites are always its
//! own: domains have one owner) holds that markup once: bodies are
//! smaller at the same compression speed, and the store's work per page
//! follows its bytes (on mongod, bytes journaled, cached and written).
//!
//! A dictionary is stored in the primary store (`body_dicts`, keyed by a
//! random id) before any page uses it, and a page names it in `body_dict`,
//! so every stored body can be read back: [`Dictionaries`] loads them for
//! readers.

use std::collections::HashMap;

use anyhow::Context;
use bson::spec::BinarySubtype;
use bson::{doc, Binary, DateTime};

use crate::decode_each;
use crate::docs::BodyDictDoc;

/// Size of a trained dictionary: on the realistic pages 32 KiB compressed
/// as well as 64 or 112 KiB and trains in a fifth of the time.
pub const DICT_BYTES: usize = 32 * 1024;

/// A trained dictionary and the id pages name it by.
#[derive(Clone, Debug, PartialEq)]
pub struct BodyDict {
    pub id: String,
    pub bytes: Vec<u8>,
}

impl BodyDict {
    /// Trains a dictionary on `samples` (page bodies). Fails when zstd
    /// finds nothing to learn (too few or too small samples).
    pub fn train<S: AsRef<[u8]>>(samples: &[S]) -> anyhow::Result<BodyDict> {
        let bytes = zstd::dict::from_samples(samples, DICT_BYTES).context("training a body dictionary")?;
        Ok(BodyDict {
            id: format!("{:016x}", rand::random::<u64>()),
            bytes,
        })
    }

    /// Its document in `body_dicts`.
    pub fn to_doc(&self, crawl_id: &str, samples: usize) -> BodyDictDoc {
        BodyDictDoc {
            id: self.id.clone(),
            crawl_id: crawl_id.to_string(),
            created_at: DateTime::now(),
            samples: samples as i64,
            bytes: Binary {
                subtype: BinarySubtype::Generic,
                bytes: self.bytes.clone(),
            },
        }
    }
}

/// The dictionaries of a store, by id, for reading bodies back.
#[derive(Clone, Debug, Default)]
pub struct Dictionaries(HashMap<String, Vec<u8>>);

impl Dictionaries {
    /// Every dictionary of a crawl, from its `body_dicts` collection (one
    /// per child that trained one; a few tens of KB each).
    pub async fn load(coll: &mongodb::Collection<BodyDictDoc>) -> anyhow::Result<Dictionaries> {
        let mut all = Dictionaries::default();
        decode_each(
            coll,
            doc! {},
            |d| {
                all.0.insert(d.id, d.bytes.bytes);
            },
            // Its pages read as `MissingDictionary`, each on its own.
            |_, e| tracing::warn!(error = %e, "skipping a malformed body dictionary"),
        )
        .await
        .context("reading body dictionaries")?;
        Ok(all)
    }

    /// The bytes of dictionary `id`.
    pub fn get(&self, id: &str) -> Option<&[u8]> {
        self.0.get(id).map(Vec::as_slice)
    }

    /// Adds one (for tests and tools that already hold it).
    pub fn insert(&mut self, dict: BodyDict) {
        self.0.insert(dict.id, dict.bytes);
    }
}
