//! Checks of a finished crawl against the synthetic web's ground truth,
//! shared by the end-to-end tests: what was stored, what was requested,
//! and whether the stored frontier is finished.

use std::collections::{BTreeMap, BTreeSet};

use bson::doc;

use crate::harness::{all_pages, crawl_coll, CrawlRun};
use crate::web::{Expected, RequestRecord};

/// Stored URL → status from the default crawl's pages; fails if a URL was
/// stored twice.
pub async fn stored_statuses(db: &mongodb::Database) -> anyhow::Result<BTreeMap<String, i32>> {
    stored_statuses_of(db, &Default::default()).await
}

/// [`stored_statuses`] of crawl `crawl`.
pub async fn stored_statuses_of(
    db: &mongodb::Database,
    crawl: &store::CrawlId,
) -> anyhow::Result<BTreeMap<String, i32>> {
    let pages = all_pages(db, crawl).await?;
    let mut stored = BTreeMap::new();
    for d in pages {
        anyhow::ensure!(
            stored.insert(d.url.clone(), d.status).is_none(),
            "{} stored twice",
            d.url
        );
    }
    Ok(stored)
}

/// Every expected page is stored once with its status, and nothing else is.
pub fn assert_pages_match(stored: &BTreeMap<String, i32>, expected: &Expected) {
    let missing: Vec<_> = expected
        .pages
        .keys()
        .filter(|u| !stored.contains_key(*u))
        .collect();
    let extra: Vec<_> = stored
        .keys()
        .filter(|u| !expected.pages.contains_key(*u))
        .take(10)
        .collect();
    assert!(
        missing.is_empty(),
        "{} expected pages missing, e.g. {:?}",
        missing.len(),
        &missing[..missing.len().min(10)]
    );
    assert!(extra.is_empty(), "unexpected pages stored, e.g. {extra:?}");
    for (url, status) in &expected.pages {
        assert_eq!(stored[url], *status as i32, "status of {url}");
    }
}

/// No request went out of `in_scope` or to a URL robots.txt forbids.
pub fn assert_nothing_forbidden_fetched(
    requests: &[RequestRecord],
    expected: &Expected,
    in_scope: &BTreeSet<String>,
    port: u16,
) {
    assert!(
        !expected.must_not_fetch.is_empty(),
        "the web has no disallowed URLs to test"
    );
    for r in requests {
        assert!(
            in_scope.contains(&r.host),
            "out-of-scope request to {}{}",
            r.host,
            r.path
        );
        let url = format!("http://{}:{port}{}", r.host, r.path);
        assert!(
            !expected.must_not_fetch.contains(&url),
            "fetched disallowed {url}"
        );
    }
}

/// A frontier entry's state as a reader must take it: a fetched URL is
/// not marked (its stored page says it is finished, issue 45:
/// `dispatcher/src/finished.rs`), so `queued` with a stored page is `done`.
pub fn effective_state(state: &str, page_stored: bool) -> &str {
    if state == store::docs::UrlState::Queued.as_str() && page_stored {
        store::docs::UrlState::Done.as_str()
    } else {
        state
    }
}

/// The `_id`s of the default crawl's stored pages.
pub async fn stored_page_urls(db: &mongodb::Database) -> anyhow::Result<std::collections::HashSet<String>> {
    use futures::TryStreamExt;
    let pages = db.collection::<bson::Document>(&crawl_coll(store::PAGES));
    let docs: Vec<bson::Document> = pages
        .find(doc! {})
        .projection(doc! {"_id": 1})
        .await?
        .try_collect()
        .await?;
    Ok(docs
        .iter()
        .filter_map(|d| d.get_str("_id").ok().map(str::to_string))
        .collect())
}

/// No URL is left unfinished in the default crawl's stored frontier: every
/// entry still `queued` has its page stored.
pub async fn assert_frontier_finished(db: &mongodb::Database) -> anyhow::Result<()> {
    use futures::TryStreamExt;
    let queued: Vec<bson::Document> = db
        .collection::<bson::Document>(&crawl_coll(store::FRONTIER))
        .find(doc! {store::docs::FrontierDoc::STATE: store::docs::UrlState::Queued.as_str()})
        .projection(doc! {"_id": 1})
        .await?
        .try_collect()
        .await?;
    let pages = stored_page_urls(db).await?;
    let unfinished: Vec<&str> = queued
        .iter()
        .filter_map(|d| d.get_str("_id").ok())
        .filter(|u| !pages.contains(*u))
        .collect();
    anyhow::ensure!(
        unfinished.is_empty(),
        "{} URLs still queued in the stored frontier without a page, e.g. {:?}",
        unfinished.len(),
        unfinished.iter().take(5).collect::<Vec<_>>()
    );
    Ok(())
}

/// Failed expectations, reported together at the end, so one run shows
/// every behaviour that is off, not just the first.
#[derive(Default)]
pub struct Findings(Vec<String>);

impl Findings {
    pub fn check(&mut self, ok: bool, what: impl FnOnce() -> String) {
        if !ok {
            let msg = what();
            eprintln!("FINDING: {msg}");
            self.0.push(msg);
        }
    }

    /// The crawl ended by itself: every process exited 0, nothing left in the frontier.
    pub fn check_run_ok(&mut self, run: &CrawlRun) {
        self.check(run.dispatcher.success(), || {
            format!("dispatcher exited {:?}", run.dispatcher)
        });
        for s in &run.supervisors {
            self.check(s.success(), || format!("supervisor exited {s:?}"));
        }
        let left = &run.summary["frontier_left"];
        self.check(*left == 0, || format!("frontier left: {}", run.summary));
    }

    pub fn assert_none(self) {
        assert!(
            self.0.is_empty(),
            "{} findings:\n  {}",
            self.0.len(),
            self.0.join("\n  ")
        );
    }
}

/// `check!(findings, cond, "format", args...)`: [`Findings::check`] with a
/// message formatted only when `cond` fails.
#[macro_export]
macro_rules! check {
    ($f:expr, $ok:expr, $($msg:tt)+) => {
        $f.check($ok, || format!($($msg)+))
    };
}

/// The dispatcher and every supervisor exited 0.
pub fn assert_exited_ok(run: &CrawlRun) {
    assert!(run.dispatcher.success(), "dispatcher: {:?}", run.dispatcher);
    assert!(
        run.supervisors.iter().all(|s| s.success()),
        "supervisors: {:?}",
        run.supervisors
    );
}

/// [`assert_exited_ok`], and the crawl left nothing in its frontier.
pub fn assert_finished(run: &CrawlRun) {
    assert_exited_ok(run);
    assert_eq!(run.summary["frontier_left"], 0, "summary: {}", run.summary);
}
