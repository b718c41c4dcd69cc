//! The store read behind [`super::Revisits`]: pages by due time.

use std::time::{Duration, Instant};

use bson::{doc, RawDocumentBuf};
use futures::TryStreamExt;
use link::protocol::Revisit;
use shared::timing::{Op, TimingLog};
use store::docs::{PageDoc, RevisitState};

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
    let start = Instant::now();
    let filter = doc! {PageDoc::DUE_MS: {"$gte": r.after.due_ms}};
    let fields = doc! {"_id": 1, "domain": 1, "depth": 1, PageDoc::DUE_MS: 1, RevisitState::FIELD: 1};
    let query = async {
        let cursor = pages
            .clone_with_type::<RawDocumentBuf>()
            .find(filter)
            .sort(doc! {PageDoc::DUE_MS: 1, "_id": 1})
            .projection(fields)
            .limit(i64::try_from(r.limit).unwrap_or(i64::MAX))
            .await?;
        cursor.try_collect::<Vec<RawDocumentBuf>>().await
    };
    let res = match tokio::time::timeout(READ_DEADLINE, query).await {
        Ok(Ok(docs)) => Ok(docs),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!("no answer within {READ_DEADLINE:?}")),
    };
    let (outcome, n) = match &res {
        Ok(docs) => ("ok", docs.len()),
        Err(_) => ("error", 0),
    };
    timing.record_batch(Op::FrontierRead, start.elapsed(), outcome, n);
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
