//! `domains` (second store): per domain, when it was last crawled and
//! with which delay (children, so a restarted crawl keeps its pace), and
//! whether the circuit breaker halted it (dispatcher). Each writer sets
//! only its own fields (`$set` upserts of [`DomainPace`] or [`DomainHalt`]).
//!
//! Times are Unix milliseconds rather than BSON dates: nx-27017 turns dates
//! into strings when `$set` updates an existing document.

use serde::{Deserialize, Serialize};

/// The two writers' parts, each absent until its writer set it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DomainDoc {
    #[serde(rename = "_id")]
    pub domain: String,
    #[serde(flatten)]
    pub pace: Option<DomainPace>,
    #[serde(flatten)]
    pub halt: Option<DomainHalt>,
}

/// What a child records after each fetch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DomainPace {
    pub last_crawled_ms: i64,
    #[serde(default)]
    pub crawl_delay_ms: i64,
}

/// What the dispatcher records when it halts or un-halts a domain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DomainHalt {
    pub halted: bool,
    pub halted_reason: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub halted_at_ms: Option<i64>,
}

impl DomainDoc {
    pub const HALTED: &'static str = "halted";
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    #[test]
    fn a_domain_reads_with_or_without_each_writers_fields() {
        let paced: DomainDoc =
            bson::from_document(doc! {"_id": "a.test", "last_crawled_ms": 5i64, "crawl_delay_ms": 10i64})
                .unwrap();
        assert_eq!(
            paced.pace,
            Some(DomainPace {
                last_crawled_ms: 5,
                crawl_delay_ms: 10
            })
        );
        assert!(!paced.halt.is_some_and(|h| h.halted));
        let halted: DomainDoc = bson::from_document(
            doc! {"_id": "b.test", "halted": true, "halted_reason": "errors", "halted_at_ms": 1i64},
        )
        .unwrap();
        assert_eq!(halted.pace, None);
        let halt = halted.halt.expect("its halt");
        assert!(halt.halted);
        assert_eq!(halt.halted_reason, "errors");
    }
}
