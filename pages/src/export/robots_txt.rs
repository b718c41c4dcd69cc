//! The robots.txt responses a crawl received (`store::docs::RobotsTxtDoc`),
//! after its pages and captures, in the WARC output only: each as the
//! `response`, `request` and `metadata` records a page gets, its
//! `WARC-Target-URI` the URL that answered (a redirect's target for a
//! later hop), so a replay tool or a researcher finds the rules every
//! page was fetched under. JSON lines and CSV describe pages, and leave
//! them out.
//!
//! Read in key order (URL first asked, time, hop); a resumed export goes
//! on after the last one written ([`super::State::last_robots_txt`]).

use bson::{doc, Document};
use store::docs::RobotsTxtDoc;
use store::Stores;

use super::reader::Reader;
use super::{body_of, Run};

/// Writes every response `filter` (the pages' filter, for documents that
/// nest a page) selects after the last one written.
pub(super) async fn export(stores: &Stores, mut filter: Document, run: &mut Run<'_>) -> anyhow::Result<()> {
    if let Some(last) = &run.state.last_robots_txt {
        // From the last URL written; its earlier responses are passed
        // over below (`_id` is a subdocument, see `captures`).
        filter.insert(RobotsTxtDoc::URL, doc! {"$gte": &last.url});
    }
    let sort = doc! {RobotsTxtDoc::URL: 1, RobotsTxtDoc::AT: 1, RobotsTxtDoc::HOP: 1};
    let mut responses =
        Reader::<RobotsTxtDoc>::open(&stores.robots_txt(), filter, sort, "robots.txt responses").await?;
    while let Some(r) = responses.next().await? {
        if run
            .state
            .last_robots_txt
            .as_ref()
            .is_some_and(|last| r.id <= *last)
        {
            continue;
        }
        let body = body_of(stores, &r.page, &mut run.dicts).await?;
        run.write(&r.page, body.as_deref(), None, |state| {
            state.robots_txt += 1;
            state.last_robots_txt = Some(r.id.clone());
        })?;
    }
    Ok(())
}
