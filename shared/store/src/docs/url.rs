//! `<crawl>__urls`: with `--seen-check store` only, every URL the crawl
//! admitted, by itself, keyed by the URL: the unique `_id` index is the
//! exact seen-set that the dispatcher's 64-bit hashes are checked against
//! when a hash alone cannot be trusted (`dispatcher::seen`). Segments
//! hold many URLs a document, so they cannot be that set.

use bson::RawDocument;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UrlDoc {
    #[serde(rename = "_id")]
    pub url: String,
    /// Its place in the frontier: a URL stored with another `seq` than
    /// the one an insert carried was there before that insert.
    pub seq: i64,
}

impl UrlDoc {
    pub const SEQ: &'static str = "seq";

    /// The URL and `seq` of a raw document, whatever integer width the
    /// store used.
    pub fn raw_url_and_seq(raw: impl AsRef<RawDocument>) -> Option<(String, i64)> {
        let raw = raw.as_ref();
        let url = raw.get_str("_id").ok()?.to_string();
        let seq = match raw.get(Self::SEQ).ok()?? {
            bson::RawBsonRef::Int64(n) => n,
            bson::RawBsonRef::Int32(n) => i64::from(n),
            _ => return None,
        };
        Some((url, seq))
    }
}
