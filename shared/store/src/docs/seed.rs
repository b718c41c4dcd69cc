//! `seeds`: the crawl's starting URLs, normalised, as given.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeedDoc {
    #[serde(rename = "_id")]
    pub url: String,
}
