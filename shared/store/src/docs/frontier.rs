//! `<crawl>__frontier`: every URL the crawl admitted, and where it stands.
//! Written by the dispatcher: inserted `queued`; marked when it fails, is
//! disallowed or deferred, with why. A fetched URL is not marked: its page
//! in `pages` says it is finished (`dispatcher::finished`; one found after
//! a restart is marked `done` then, once). It is also
//! the queue: the dispatcher keeps only a window of each domain's queued
//! URLs in memory and reads the next ones by `{domain, seq, state}` (see
//! `dispatcher::frontier`). (Documents stored before crawls had collections of
//! their own carry a `crawl_id`, which is ignored.) A URL found over one of
//! the crawl's budgets is stored `deferred`, with the budget it was over,
//! so that a later run with a larger budget takes it up
//! (`dispatcher::admission`).

use serde::{Deserialize, Serialize};

use shared::failure::FailureKind;

/// Where a URL stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UrlState {
    Queued,
    Done,
    Disallowed,
    Failed,
    /// Found over a budget; not crawled (see [`Deferral`]).
    Deferred,
}

impl UrlState {
    pub fn as_str(self) -> &'static str {
        match self {
            UrlState::Queued => "queued",
            UrlState::Done => "done",
            UrlState::Disallowed => "disallowed",
            UrlState::Failed => "failed",
            UrlState::Deferred => "deferred",
        }
    }
}

/// Which budget a `deferred` URL was over when it was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Deferral {
    /// Its domain had taken `--max-pages-per-domain` URLs.
    DomainBudget,
    /// Its path had taken `--max-query-variants` distinct queries.
    QueryBudget,
}

impl Deferral {
    pub fn as_str(self) -> &'static str {
        match self {
            Deferral::DomainBudget => "domain_budget",
            Deferral::QueryBudget => "query_budget",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FrontierDoc {
    #[serde(rename = "_id")]
    pub url: String,
    pub domain: String,
    pub depth: i32,
    pub state: UrlState,
    /// Why a `failed` URL failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<FailureKind>,
    /// Why a `deferred` URL waits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deferred: Option<Deferral>,
    /// Admission order, increasing over the whole crawl (restarts too): a
    /// domain's queue is its queued URLs in `seq` order. 0 in documents
    /// stored before queues lived in the store (read whole on resume).
    #[serde(default)]
    pub seq: i64,
}

impl FrontierDoc {
    /// The `seq` of a raw frontier document, without decoding the rest
    /// (nx-27017 hands small 64-bit numbers back as 32-bit ones).
    pub fn raw_seq(raw: &bson::RawDocument) -> Option<i64> {
        Self::raw_int(raw, Self::SEQ)
    }

    /// An integer field of a raw frontier document, whichever width the
    /// store used.
    pub fn raw_int(raw: &bson::RawDocument, field: &str) -> Option<i64> {
        match raw.get(field).ok()?? {
            bson::RawBsonRef::Int64(n) => Some(n),
            bson::RawBsonRef::Int32(n) => Some(i64::from(n)),
            _ => None,
        }
    }

    pub const URL: &'static str = "_id";
    pub const DEPTH: &'static str = "depth";

    pub const STATE: &'static str = "state";
    pub const FAILURE: &'static str = "failure";
    pub const DOMAIN: &'static str = "domain";
    pub const SEQ: &'static str = "seq";
    pub const DEFERRED: &'static str = "deferred";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_and_failures_are_stored_by_their_names() {
        for s in [
            UrlState::Queued,
            UrlState::Done,
            UrlState::Disallowed,
            UrlState::Failed,
            UrlState::Deferred,
        ] {
            assert_eq!(bson::to_bson(&s).unwrap(), bson::Bson::String(s.as_str().into()));
        }
        for k in FailureKind::ALL {
            assert_eq!(bson::to_bson(&k).unwrap(), bson::Bson::String(k.as_str().into()));
        }
        let d = FrontierDoc {
            url: "http://a.test/".into(),
            domain: "a.test".into(),
            depth: 2,
            state: UrlState::Failed,
            failure: Some(FailureKind::BlockedAddress),
            deferred: None,
            seq: 7,
        };
        let stored = bson::to_document(&d).unwrap();
        assert_eq!(stored.get_str("_id"), Ok("http://a.test/"));
        assert_eq!(stored.get_str("state"), Ok("failed"));
        assert_eq!(stored.get_str("failure"), Ok("blocked_address"));
        assert_eq!(bson::from_document::<FrontierDoc>(stored).unwrap(), d);
        let deferred = FrontierDoc {
            state: UrlState::Deferred,
            failure: None,
            deferred: Some(Deferral::QueryBudget),
            ..d
        };
        let stored = bson::to_document(&deferred).unwrap();
        assert_eq!(stored.get_str("state"), Ok("deferred"));
        assert_eq!(stored.get_str("deferred"), Ok("query_budget"));
        assert_eq!(bson::from_document::<FrontierDoc>(stored).unwrap(), deferred);
    }
}
