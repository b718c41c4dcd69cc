//! `control`: what an operator changed in a running crawl (see the
//! dispatcher's `control`), so that a restarted dispatcher keeps it. One
//! document for the crawl ([`ControlDoc::CRAWL`]) and one per domain an
//! operator blocked or paced; the dispatcher is the only writer.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ControlDoc {
    /// [`ControlDoc::CRAWL`], or a domain.
    #[serde(rename = "_id")]
    pub id: String,
    /// The crawl: nothing new is handed out.
    #[serde(default)]
    pub paused: bool,
    /// The domain: nothing of it is handed out, until `blocked_until_ms`
    /// if set.
    #[serde(default)]
    pub blocked: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocked_until_ms: Option<i64>,
    /// What the operator said about the block.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// The domain's minimum gap between requests (robots.txt's
    /// Crawl-delay still raises it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_delay_ms: Option<i64>,
    /// When the operator last changed it (Unix ms).
    #[serde(default)]
    pub changed_ms: i64,
}

impl ControlDoc {
    /// The crawl's own document: `@` is in no host name, so no domain's
    /// document can take this id.
    pub const CRAWL: &'static str = "@crawl";
}
