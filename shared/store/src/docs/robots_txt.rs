//! `robots_txt`: every robots.txt response a crawl's children received,
//! each hop of a redirect its own, kept so that `pages export` writes them
//! as WARC records: an archive shows the rules a page was fetched under
//! (Heritrix and Common Crawl keep them too). Written once by the child
//! that asked (an insert keyed by URL, time and hop, so a retried write
//! stores it once); append-only, like captures.
//!
//! Why a collection of the crawl's own rather than more fields on the
//! second store's `robots` document: that one is shared by every crawl and
//! keeps only the latest rules of an origin, overwritten when they expire,
//! while an archive wants each response as received, once per fetch. A
//! crawl that found an origin's rules already in the second store (fetched
//! by another crawl, or by this one before a restart) fetched nothing and
//! records nothing.

use serde::{Deserialize, Serialize};

use super::PageDoc;

/// A response's key: the robots.txt URL of the origin asked, when the
/// fetch began, and which response of its redirects this one is.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct RobotsTxtId {
    /// `<origin>/robots.txt`, the URL first asked for.
    pub url: String,
    /// Unix ms when the first request went out.
    pub at: i64,
    /// 0 for the first response, then one more per redirect followed.
    pub hop: i32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RobotsTxtDoc {
    #[serde(rename = "_id")]
    pub id: RobotsTxtId,
    /// The response as a page: the URL asked in `url` (a redirect's target
    /// in `final_url`), status, heads, times, the body (at most 500 KiB,
    /// compressed like a page's) and its digest.
    pub page: PageDoc,
}

impl RobotsTxtDoc {
    pub const URL: &'static str = "_id.url";
    pub const AT: &'static str = "_id.at";
    pub const HOP: &'static str = "_id.hop";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_robots_response_round_trips_with_its_key_nested() {
        let page = PageDoc::new("http://a.test/robots.txt".into(), "a.test".into(), 0, 200, 9);
        let d = RobotsTxtDoc {
            id: RobotsTxtId {
                url: page.url.clone(),
                at: 5,
                hop: 1,
            },
            page,
        };
        let raw = bson::to_document(&d).unwrap();
        assert_eq!(raw.get_document("_id").unwrap().get_i32("hop"), Ok(1));
        let back: RobotsTxtDoc = bson::from_document(raw).unwrap();
        assert_eq!(back, d);
    }
}
