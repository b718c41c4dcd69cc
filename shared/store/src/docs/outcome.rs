//! `<crawl>__outcomes`: the URLs that finished without a page, and why:
//! failed for good (with the kind of failure) or disallowed by robots.txt.
//! Appended by the dispatcher, one document per batch of its writer (a
//! few a second at most), never updated.
//!
//! A fetched URL needs no record here: its page says it is finished. The
//! frontier's segments are never updated, so these records are what tells
//! a restarted dispatcher which of a domain's URLs after its progress
//! (`ProgressDoc`) are finished without a page; they are also the crawl's
//! account of its failures, for an operator or a researcher
//! (`db.<crawl>__outcomes.find({"urls.failure": "timeout"})`).

use bson::oid::ObjectId;
use bson::DateTime;
use serde::{Deserialize, Serialize};

use shared::failure::FailureKind;

use super::frontier::UrlState;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OutcomeDoc {
    /// Made by the writer, so a retried insert is a duplicate.
    #[serde(rename = "_id")]
    pub id: ObjectId,
    pub at: DateTime,
    pub urls: Vec<Outcome>,
}

/// One URL's end.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outcome {
    pub url: String,
    /// Its place in the frontier (`SegmentDoc`).
    pub seq: i64,
    /// `failed` or `disallowed`.
    pub state: UrlState,
    /// Why a failed URL failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<FailureKind>,
}

impl OutcomeDoc {
    pub const URLS: &'static str = "urls";
}
