//! Checks of a finished crawl against the synthetic web's ground truth,
//! shared by the end-to-end tests: what was stored, what was requested,
//! and whether the stored frontier is finished.

use std::collections::{BTreeMap, BTreeSet};

use bson::doc;
use futures::future::BoxFuture;

use crate::harness::{all_pages, crawl_coll, CrawlRun};
use crate::in_process::InProcessRun;
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

/// One URL of a crawl's stored frontier (`store::docs::SegmentDoc`), and
/// where it stands as a reader must take it: `deferred` (in a deferred
/// segment), `failed` or `disallowed` (its outcome), `done` (its page is
/// stored: a fetched URL is not recorded otherwise, issue 45), or
/// `queued`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrontierUrl {
    pub url: String,
    pub domain: String,
    pub depth: u16,
    pub seq: i64,
    pub state: &'static str,
    /// Why a failed URL failed.
    pub failure: Option<String>,
    /// Which budget a deferred URL was over.
    pub deferred: Option<String>,
}

/// Every URL of crawl `crawl`'s stored frontier, in `seq` order (a
/// segment that does not read back, as one a test wrote by hand, is
/// passed over). Boxed: see the crate's doc.
pub fn frontier_urls<'a>(
    db: &'a mongodb::Database,
    crawl: &'a store::CrawlId,
) -> BoxFuture<'a, anyhow::Result<Vec<FrontierUrl>>> {
    Box::pin(read_frontier(db, crawl))
}

async fn read_frontier(db: &mongodb::Database, crawl: &store::CrawlId) -> anyhow::Result<Vec<FrontierUrl>> {
    use futures::TryStreamExt;
    use store::docs::{OutcomeDoc, SegmentDoc, SegmentState};
    let pages: std::collections::HashSet<String> =
        all_pages(db, crawl).await?.into_iter().map(|p| p.url).collect();
    let outcomes: Vec<OutcomeDoc> = db
        .collection::<OutcomeDoc>(&crawl.collection(store::OUTCOMES))
        .find(doc! {})
        .await?
        .try_collect()
        .await?;
    let ended: std::collections::HashMap<i64, store::docs::Outcome> = outcomes
        .into_iter()
        .flat_map(|o| o.urls)
        .map(|u| (u.seq, u))
        .collect();
    let segments: Vec<bson::RawDocumentBuf> = db
        .collection::<bson::RawDocumentBuf>(&crawl.collection(store::SEGMENTS))
        .find(doc! {})
        .await?
        .try_collect()
        .await?;
    let mut out = Vec::new();
    for raw in segments {
        let domain = raw.get_str(SegmentDoc::DOMAIN).unwrap_or("?").to_string();
        let deferred = raw.get_str(SegmentDoc::STATE) == Ok(SegmentState::Deferred.as_str());
        let why = raw.get_str(SegmentDoc::DEFERRED).ok().map(str::to_string);
        let Ok(entries) = SegmentDoc::entries(&raw) else {
            continue;
        };
        for e in entries {
            let outcome = ended.get(&e.seq);
            let state = match (deferred, outcome) {
                (true, _) => "deferred",
                (false, Some(o)) => o.state.as_str(),
                (false, None) if pages.contains(&e.url) => "done",
                (false, None) => "queued",
            };
            out.push(FrontierUrl {
                failure: outcome.and_then(|o| o.failure).map(|k| k.as_str().to_string()),
                deferred: why.clone(),
                url: e.url,
                domain: domain.clone(),
                depth: e.depth,
                seq: e.seq,
                state,
            });
        }
    }
    out.sort_by_key(|u| u.seq);
    Ok(out)
}

/// How many URLs of crawl `crawl`'s stored frontier are still queued,
/// counted cheaply (no page read): the URLs in queued segments, less the
/// stored pages and the outcomes (each finishes one of them). Boxed: see
/// the crate's doc.
pub fn queued_count<'a>(
    db: &'a mongodb::Database,
    crawl: &'a store::CrawlId,
) -> BoxFuture<'a, anyhow::Result<u64>> {
    Box::pin(count_queued(db, crawl))
}

async fn count_queued(db: &mongodb::Database, crawl: &store::CrawlId) -> anyhow::Result<u64> {
    use futures::TryStreamExt;
    let n = |d: &bson::Document| match d.get("n") {
        Some(bson::Bson::Int32(n)) => u64::try_from(*n).unwrap_or(0),
        Some(bson::Bson::Int64(n)) => u64::try_from(*n).unwrap_or(0),
        _ => 0,
    };
    let segments: Vec<bson::Document> = db
        .collection::<bson::Document>(&crawl.collection(store::SEGMENTS))
        .find(doc! {"state": "queued"})
        .projection(doc! {"n": 1})
        .await?
        .try_collect()
        .await?;
    let outcomes: Vec<bson::Document> = db
        .collection::<bson::Document>(&crawl.collection(store::OUTCOMES))
        .find(doc! {})
        .await?
        .try_collect()
        .await?;
    let ended: u64 = outcomes
        .iter()
        .map(|o| o.get_array("urls").map_or(0, |a| a.len() as u64))
        .sum();
    let pages = db
        .collection::<bson::Document>(&crawl.collection(store::PAGES))
        .count_documents(doc! {})
        .await?;
    let queued: u64 = segments.iter().map(n).sum();
    Ok(queued.saturating_sub(pages).saturating_sub(ended))
}

/// The `_id`s of the default crawl's stored pages (boxed: see the crate's doc).
pub fn stored_page_urls(
    db: &mongodb::Database,
) -> BoxFuture<'_, anyhow::Result<std::collections::HashSet<String>>> {
    Box::pin(read_page_urls(db))
}

async fn read_page_urls(db: &mongodb::Database) -> anyhow::Result<std::collections::HashSet<String>> {
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
/// queued one has its page stored or its outcome.
pub async fn assert_frontier_finished(db: &mongodb::Database) -> anyhow::Result<()> {
    let frontier = frontier_urls(db, &Default::default()).await?;
    let unfinished: Vec<&str> = frontier
        .iter()
        .filter(|u| u.state == "queued")
        .map(|u| u.url.as_str())
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

    /// The crawl ended by itself: every role ended well, nothing left in the frontier.
    pub fn check_run_ok(&mut self, run: &impl Ended) {
        for failed in run.failed_roles() {
            self.check(false, || failed);
        }
        let left = &run.summary()["frontier_left"];
        self.check(*left == 0, || format!("frontier left: {}", run.summary()));
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

/// How a crawl's roles ended, as processes ([`CrawlRun`]) or as tasks of
/// the test ([`InProcessRun`]): the checks below take either.
pub trait Ended {
    /// Each role that did not end well, said how.
    fn failed_roles(&self) -> Vec<String>;
    /// The dispatcher's summary.
    fn summary(&self) -> &serde_json::Value;
}

impl Ended for CrawlRun {
    fn failed_roles(&self) -> Vec<String> {
        let dispatcher =
            (!self.dispatcher.success()).then(|| format!("dispatcher exited {:?}", self.dispatcher));
        let supervisors = self.supervisors.iter().enumerate().filter(|(_, s)| !s.success());
        dispatcher
            .into_iter()
            .chain(supervisors.map(|(i, s)| format!("supervisor {i} exited {s:?}")))
            .collect()
    }

    fn summary(&self) -> &serde_json::Value {
        &self.summary
    }
}

impl Ended for InProcessRun {
    fn failed_roles(&self) -> Vec<String> {
        let dispatcher = self.dispatcher.as_ref().err().map(|e| format!("dispatcher: {e}"));
        let supervisors = self.supervisors.iter().enumerate();
        let supervisors =
            supervisors.filter_map(|(i, s)| s.as_ref().err().map(|e| format!("supervisor {i}: {e}")));
        dispatcher.into_iter().chain(supervisors).collect()
    }

    fn summary(&self) -> &serde_json::Value {
        &self.summary
    }
}

/// The dispatcher and every supervisor ended well (exited 0, or returned Ok).
pub fn assert_exited_ok(run: &impl Ended) {
    let failed = run.failed_roles();
    assert!(failed.is_empty(), "{}", failed.join("; "));
}

/// [`assert_exited_ok`], and the crawl left nothing in its frontier.
pub fn assert_finished(run: &impl Ended) {
    assert_exited_ok(run);
    assert_eq!(run.summary()["frontier_left"], 0, "summary: {}", run.summary());
}
