//! `body_dicts`: the zstd dictionaries page bodies are compressed with
//! (see `crate::body_dict`), each stored before any page names it.

use bson::{Binary, DateTime};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BodyDictDoc {
    #[serde(rename = "_id")]
    pub id: String,
    pub crawl_id: String,
    pub created_at: DateTime,
    /// Pages it was learnt from.
    pub samples: i64,
    pub bytes: Binary,
}
