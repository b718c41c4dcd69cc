//! The store read behind [`super::Revisits`]: pages by due time.

use std::time::Duration;

use bson::{doc, RawDocumentBuf};
use link::protocol::Revisit;
use shared::timing::{Op, TimingLog};
use store::docs::{PageDoc, RevisitState};
use store::read::{find_all, Find};

use super::{Due, DueRead};

/// Longest the read may take (a store serving one request at a time
/// answers it after everything queued before it).
const READ_DEADLINE: Duration = Duration::from_secs(120);

/// The pages due from `r.after` on (inclusive), in `(due_ms, _id)` order:
/// one range of the sparse `{due_ms: 1}` index. Only what a lease needs is
/// read. A malformed page is skipped with a warning.
pub(crate) async fn due(
    pages: &mongodb::Collection<PageDoc>,
    r: &DueRead,
    timing: &TimingLog,
) -> Result<Vec<Due>, String> {
    let find = Find {
        filter: doc! {PageDoc::DUE_MS: {"$gte": r.after.due_ms}},
        sort: Some(doc! {PageDoc::DUE_MS: 1, "_id": 1}),
        projection: Some(
            doc! {"_id": 1, "domain": 1, "depth": 1, PageDoc::DUE_MS: 1, RevisitState::FIELD: 1},
        ),
        limit: Some(r.limit),
    };
    let res = find_all(pages, find, READ_DEADLINE, timing, Op::FrontierRead).await;
    Ok(res?.iter().filter_map(decode).collect())
}

#[derive(serde::Deserialize)]
struct DuePage {
    #[serde(rename = "_id")]
    url: String,
    domain: String,
    depth: i32,
    due_ms: i64,
    revisit: RevisitState,
}

fn decode(raw: &RawDocumentBuf) -> Option<Due> {
    let page: DuePage = match bson::from_slice(raw.as_bytes()) {
        Ok(p) => p,
        Err(e) => {
            tracing::warn!(error = %e, "a page with a due time is malformed; not revisited");
            return None;
        }
    };
    let s = page.revisit;
    Some(Due {
        url: page.url,
        domain: page.domain,
        depth: page.depth.clamp(0, i32::from(u16::MAX)) as u16,
        due_ms: page.due_ms,
        revisit: Revisit {
            etag: s.etag,
            last_modified: s.last_modified,
            digest: s.digest.map(|d| *d.bytes()),
            interval_ms: u64::try_from(s.interval_ms).unwrap_or(0),
            body_at_ms: s.body_at.timestamp_millis(),
        },
    })
}
