//! Start-up: halted domains, the stored frontier (see `crate::resume`),
//! the seeds, and then, in the background, the stored URLs for the
//! seen-set.

use std::time::Instant;

use super::now_ms;
use anyhow::{bail, Context};
use bson::{doc, Document};
use store::docs::DomainDoc;
use store::{decode_each, Stores};

use crate::config::Flags;
use crate::resume::{self, SeenScan, SeenScanTask, Stored};
use crate::seeds;

use super::{halt_update, Dispatcher};

/// The scan's next message (never, without a scan).
pub(super) async fn next_scan(scan: &mut Option<SeenScanTask>) -> Option<SeenScan> {
    match scan {
        Some(s) => s.next().await,
        None => std::future::pending().await,
    }
}

/// Warns when the database holds a crawl stored before crawls had
/// collections of their own (`frontier`, `pages`, ... without a prefix):
/// it is not resumed, and the warning says how to make it resumable.
async fn warn_of_unnamed_crawl(stores: &Stores) {
    let unprefixed = stores.primary.collection::<Document>(store::FRONTIER);
    let old = unprefixed.find_one(doc! {}).projection(doc! {"crawl_id": 1});
    if let Some(Ok(Some(d))) = store::deadline(old).await {
        let name = d.get_str("crawl_id").unwrap_or(store::CrawlId::DEFAULT);
        tracing::warn!(
            "the database holds crawl {name:?} in collections without a crawl prefix (from an earlier version); it is not resumed. To resume it, rename them in mongosh: {}",
            ["seeds", "frontier", "pages", "body_dicts"]
                .map(|kind| format!(
                    "db.{kind}.renameCollection({:?});",
                    store::CrawlId::parse(name)
                        .map(|c| c.collection(kind))
                        .unwrap_or_else(|_| format!("<crawl>__{kind}"))
                ))
                .join(" ")
        );
    }
}

/// Refuses a crawl whose frontier an earlier version stored, one document
/// per URL (`<crawl>__frontier`), with no segments yet: resumed as a new
/// crawl, it would fetch every URL again.
async fn refuse_an_old_frontier(stores: &Stores) -> anyhow::Result<()> {
    let one = |coll: mongodb::Collection<Document>| async move {
        match store::deadline(coll.find_one(doc! {}).projection(doc! {"_id": 1})).await {
            Some(Ok(d)) => Ok(d.is_some()),
            Some(Err(e)) => Err(anyhow::Error::from(e)),
            None => bail!("the store did not answer in time"),
        }
    };
    let segments = stores.segments().clone_with_type::<Document>();
    let old = stores
        .primary
        .collection::<Document>(&stores.crawl().collection(store::FRONTIER));
    if !one(segments).await? && one(old.clone()).await? {
        bail!(
            "crawl {:?} keeps its frontier in {} with one document per URL, as versions before frontier segments did; this version keeps it in {} and cannot resume that crawl. Finish it with the version that started it, or start this one under another --crawl-id",
            stores.crawl().as_str(),
            old.name(),
            stores.crawl().collection(store::SEGMENTS),
        );
    }
    Ok(())
}

impl Dispatcher {
    /// Resumes from the stored frontier, then adds seeds not seen before.
    pub(super) async fn load(&mut self, args: &Flags) -> anyhow::Result<()> {
        for domain in &args.unhalt {
            self.stores
                .domains()
                .update_one(doc! {"_id": domain}, halt_update(None)?)
                .await
                .with_context(|| format!("un-halting {domain}"))?;
            tracing::info!(domain = %domain, "domain un-halted (--unhalt)");
        }
        let mut halted = Vec::new();
        decode_each(
            &self.stores.domains(),
            doc! {DomainDoc::HALTED: true},
            |d: DomainDoc| halted.push(d),
            |d, e| tracing::warn!(document = ?d, error = %e, "skipping a malformed domain document"),
        )
        .await
        .context("reading halted domains")?;
        for d in halted {
            tracing::warn!(
                domain = %d.domain,
                reason = d.halt.as_ref().map_or("?", |h| h.halted_reason.as_str()),
                "domain is HALTED; un-halt it to crawl it"
            );
            self.state.halted_before(&d.domain);
        }
        self.restore_controls().await?;
        warn_of_unnamed_crawl(&self.stores).await;
        refuse_an_old_frontier(&self.stores).await?;
        // The crawl's own frontier (see `store::crawl_id`): another crawl
        // id on the same database starts from nothing.
        let scan = self.resume().await.context("reading the stored frontier")?;
        let (finished, queued) = self.state.resumed();
        if (finished, queued) != (0, 0) {
            tracing::info!(
                finished,
                queued,
                "resuming: {finished} URLs finished before, {queued} still queued"
            );
        }
        let mut from_files = Vec::new();
        for f in &args.seeds {
            from_files.extend(seeds::read_file(f)?);
        }
        // Checked before the seeds are stored, so a refused crawl leaves
        // nothing behind, and again on what the store held already.
        self.check_user_agent(&from_files)?;
        let all = seeds::sync_with_store(&self.stores, &from_files).await?;
        self.check_user_agent(&all)?;
        self.state.seed(&all, now_ms());
        self.apply().await?;
        tracing::info!(
            waiting = self.state.waiting_seeds(),
            "{} seeds, {} URLs queued{}",
            all.len(),
            self.state.frontier().queued(),
            if self.state.waiting_seeds() > 0 {
                " (the seeds wait for the stored URLs' hashes, read in while the crawl runs)"
            } else {
                ""
            }
        );
        if let Some(stored) = scan {
            // Only now: not in the way of the seeds' reads and writes.
            self.seen_scan = Some(resume::scan_seen(
                self.stores.segments(),
                stored,
                self.timing.clone(),
            ));
        }
        Ok(())
    }

    /// Resumes from a summary of the stored frontier, then reads back
    /// every queued URL when they fit in memory (see `crate::resume`).
    /// What the seen-set must still read in from the store, if anything.
    async fn resume(&mut self) -> anyhow::Result<Option<Stored>> {
        let started = Instant::now();
        // Said first: on a big frontier it takes a while, with nothing else to show.
        tracing::info!("summarising the stored frontier (inside the store)");
        let mut stored = resume::summarize(&self.stores).await?;
        if self.state.queues_fit(&stored) {
            stored.read_whole();
        }
        tracing::info!(
            domains = stored.queues.len(),
            urls = stored.urls,
            progress = stored.progress.len(),
            ended = stored.ended.len(),
            secs = started.elapsed().as_secs_f64(),
            "summarised the stored frontier"
        );
        self.state.resume_summary(&stored);
        if stored.whole && stored.queued() > 0 {
            tracing::info!(
                urls = stored.queued(),
                "reading back the queued URLs (they fit in memory)"
            );
            let timing = self.timing.clone();
            resume::read_back(&self.stores, &stored, &timing, |d, finished| {
                self.state.resume(d, finished)
            })
            .await?;
        }
        let (urls, last_seq) = (stored.urls, stored.last_seq);
        let _ = self.ended.set(stored.ended);
        Ok((urls > 0).then_some(Stored { urls, last_seq }))
    }

    /// A batch (or the end) of the background read of stored URLs. At the
    /// end, the seeds that waited for it are offered (their inserts are
    /// effects for the caller to apply).
    pub(super) fn on_seen_scan(&mut self, msg: Option<SeenScan>) {
        match msg {
            Some(SeenScan::Urls(urls)) => self.state.seen_stored(urls),
            Some(SeenScan::Done) => {
                self.state.seen_rebuilt(now_ms());
                let secs = self
                    .seen_scan
                    .take()
                    .map_or(0.0, |s| s.started.elapsed().as_secs_f64());
                let counts = &self.state.stats().counts;
                tracing::info!(
                    seen = self.state.seen_count(),
                    secs,
                    held_links = counts.held_links,
                    held_links_in_file = counts.held_links_in_file,
                    "read the stored URLs into the seen-set; it judges URLs without the store again"
                );
            }
            None => {
                self.seen_scan = None;
                tracing::error!("the read of stored URLs for the seen-set ended early; the links held back are judged without the URLs it did not read, which may be crawled again");
                self.state.seen_scan_failed(now_ms());
            }
        }
    }

    /// Refuses to crawl a seed on the open web under the default user
    /// agent, which names no one a site owner could reach.
    fn check_user_agent(&self, seeds: &[String]) -> anyhow::Result<()> {
        if self.policy.user_agent != crate::DEFAULT_USER_AGENT {
            return Ok(());
        }
        match seeds::on_the_open_web(seeds) {
            Some(seed) => bail!(
                "seed {seed} is on the open web, and the default user agent names no one: give --user-agent (or user-agent in --config) naming the crawler and how to reach its operator, e.g. \"examplebot/1.0 (+https://example.org/bot; bot@example.org)\""
            ),
            None => Ok(()),
        }
    }
}
