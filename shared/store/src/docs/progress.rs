//! `<crawl>__progress`: per domain, the `seq` below which every URL of
//! the domain's queue is finished (fetched, failed, disallowed), so that a
//! restarted dispatcher reads each queue from there instead of looking up
//! the page of every URL the crawl ever admitted (at 10 million stored
//! URLs that look-up was most of a restart's cost). Written by the
//! dispatcher every few seconds, for the domains that went on by enough
//! since (and for all of them when it stops), as one `update` command of
//! many statements, after the segments and outcomes it relies on.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProgressDoc {
    #[serde(rename = "_id")]
    pub domain: String,
    /// Every URL of the domain with a lower `seq` is finished.
    pub below: i64,
}

impl ProgressDoc {
    pub const BELOW: &'static str = "below";
}
