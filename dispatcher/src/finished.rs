//! A URL whose page is stored is finished.
//!
//! The child stores the page before it reports (`crawler-child`'s
//! `page_writer`), so the `pages` collection already records every URL
//! that was fetched, and the frontier (segments, written once) records
//! nothing more for it: a page costs the store its own insert and its
//! share of its new links' segments. URLs that finish without a page are
//! recorded as outcomes, and each domain's progress says below which
//! `seq` all of its URLs are finished (`frontier::progress`).
//!
//! What a reader of the frontier must do, then: treat a URL from before
//! this run (`seq` up to the resumed frontier's last) and past its
//! domain's progress as finished when its page is stored or its outcome
//! recorded. The page look-up is one `_id` query per batch of URLs
//! ([`stored_among`]), by the primary key of `pages`, on mongod and
//! nx-27017 alike; URLs admitted in this run are never looked up (the
//! dispatcher knows which of those it leased).
//!
//! A page also carries the links it led to (`PageDoc::links`): the
//! dispatcher may have been killed after the page was stored but before
//! those links were in the frontier. A resumed dispatcher offers the links
//! of every finished URL it finds this way again ([`links_of`], a
//! [`Relink`](crate::frontier::Relink) each), once its seen-set is whole
//! (so that known links cost no store write); until then the URL holds its
//! domain's progress back, so a later restart finds it again. A crawl that
//! is not interrupted reads none.

use std::collections::HashSet;

use bson::{doc, RawDocumentBuf};
use futures::TryStreamExt;
use mongodb::Collection;
use shared::timing::{Op, TimingLog};
use store::docs::PageDoc;

use crate::state::LOOK_UP_BATCH;

/// Which of `urls` have a stored page, one `_id` query per
/// [`LOOK_UP_BATCH`]. An error (or no answer in time) is for the caller
/// to retry: nothing may be taken as unfinished on a guess.
pub(crate) async fn stored_among(
    pages: &Collection<PageDoc>,
    urls: &[&str],
    timing: &TimingLog,
) -> Result<HashSet<String>, String> {
    let mut stored = HashSet::new();
    for chunk in urls.chunks(LOOK_UP_BATCH) {
        for raw in find(pages, chunk, doc! {"_id": 1}, timing).await? {
            if let Ok(url) = raw.get_str(PageDoc::URL) {
                stored.insert(url.to_string());
            }
        }
    }
    Ok(stored)
}

/// The links each stored page of `urls` led to: (URL, links); a URL
/// without a stored page is left out.
pub(crate) async fn links_of(
    pages: &Collection<PageDoc>,
    urls: &[&str],
    timing: &TimingLog,
) -> Result<Vec<(String, Vec<String>)>, String> {
    let mut out = Vec::with_capacity(urls.len());
    for chunk in urls.chunks(LOOK_UP_BATCH) {
        for raw in find(pages, chunk, doc! {"_id": 1, PageDoc::LINKS: 1}, timing).await? {
            let Ok(url) = raw.get_str(PageDoc::URL) else {
                continue;
            };
            let links = match raw.get_binary(PageDoc::LINKS) {
                Ok(b) => store::page_links::unpack(b.bytes).unwrap_or_else(|e| {
                    tracing::warn!(url, error = %e, "a stored page's links do not read back; they are not offered again");
                    Vec::new()
                }),
                // None: a page without links, or stored by an older version.
                Err(_) => Vec::new(),
            };
            out.push((url.to_string(), links));
        }
    }
    Ok(out)
}

async fn find(
    pages: &Collection<PageDoc>,
    urls: &[&str],
    projection: bson::Document,
    timing: &TimingLog,
) -> Result<Vec<RawDocumentBuf>, String> {
    let start = std::time::Instant::now();
    let query = async {
        let cursor = pages
            .clone_with_type::<RawDocumentBuf>()
            .find(doc! {"_id": {"$in": urls}})
            .projection(projection)
            .await?;
        cursor.try_collect::<Vec<RawDocumentBuf>>().await
    };
    let res = match store::deadline(query).await {
        Some(Ok(docs)) => Ok(docs),
        Some(Err(e)) => Err(e.to_string()),
        None => Err(format!("no answer within {:?}", store::OP_TIMEOUT)),
    };
    let outcome = if res.is_ok() { "ok" } else { "error" };
    timing.record_batch(Op::FrontierRead, start.elapsed(), outcome, urls.len());
    res
}
