//! A bounded read, whole, within a deadline and timed: the shape of every
//! read that feeds a writer or the dispatcher's state (a domain's queue,
//! the pages due for a revisit, the schedules a sitemap moves). Documents
//! come back raw, so each caller decodes them one by one and passes over
//! one it cannot read instead of losing the batch.

use std::time::{Duration, Instant};

use bson::{Document, RawDocumentBuf};
use futures::TryStreamExt;
use mongodb::Collection;
use shared::timing::{Op, TimingLog};

/// What to find: a filter, and optionally an order, the fields wanted
/// and a bound.
#[derive(Debug, Clone, Default)]
pub struct Find {
    pub filter: Document,
    pub sort: Option<Document>,
    pub projection: Option<Document>,
    pub limit: Option<usize>,
}

/// Runs `find` on `coll` and reads every document it selects, giving up
/// after `within`; timed as one batch of `op` (the documents read).
pub async fn find_all<T: Send + Sync>(
    coll: &Collection<T>,
    find: Find,
    within: Duration,
    timing: &TimingLog,
    op: Op,
) -> Result<Vec<RawDocumentBuf>, String> {
    let start = Instant::now();
    let raw = coll.clone_with_type::<RawDocumentBuf>();
    let query = async {
        let mut action = raw.find(find.filter);
        if let Some(sort) = find.sort {
            action = action.sort(sort);
        }
        if let Some(projection) = find.projection {
            action = action.projection(projection);
        }
        if let Some(limit) = find.limit {
            action = action.limit(i64::try_from(limit).unwrap_or(i64::MAX));
        }
        action.await?.try_collect::<Vec<RawDocumentBuf>>().await
    };
    let res = match tokio::time::timeout(within, query).await {
        Ok(Ok(docs)) => Ok(docs),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!("no answer within {within:?}")),
    };
    let (outcome, n) = match &res {
        Ok(docs) => ("ok", docs.len()),
        Err(_) => ("error", 0),
    };
    timing.record_batch(op, start.elapsed(), outcome, n);
    res
}
