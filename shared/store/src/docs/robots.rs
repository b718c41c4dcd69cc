//! `robots` (second store): each origin's robots.txt as fetched, keyed by
//! origin, shared by every child (a domain moving to another child does not
//! fetch it again).

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RobotsDoc {
    /// The origin (`http://host:port`). Left out of a `$set`.
    #[serde(rename = "_id", default, skip_serializing_if = "String::is_empty")]
    pub origin: String,
    /// HTTP status; 0 when no answer came.
    pub status: i32,
    /// The body as text (robots.txt is UTF-8; anything else is lossy).
    #[serde(default)]
    pub body: String,
    /// Unix milliseconds (see `domain` for why not dates).
    pub fetched_at_ms: i64,
    /// When to fetch it again; carries the backoff of an unavailable one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at_ms: Option<i64>,
    /// Why the TLS handshake failed when no answer came for that reason
    /// (the certificate did not verify): the origin's URLs then fail as
    /// `tls`, not as an unavailable robots.txt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_failure: Option<String>,
}
