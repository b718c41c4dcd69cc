//! The life of one URL in a child: robots check → politeness → fetch →
//! parse → store → report.
//!
//! Runs inside one of the domain's tasks (see `worker`; one unless
//! `max_domain_connections` allows more), which share the domain's
//! [`DomainState`] (its pace and robots rules) behind a lock held for the
//! robots check and the politeness wait, not for the fetch. Same-domain
//! redirects are followed here, each hop checked against robots and paced;
//! a redirect to another domain ends the crawl of this URL and hands the
//! target back to the dispatcher as an outlink, so that domain's owner
//! paces it. A URL, or a redirect hop, whose host is an internal address
//! fails as `blocked_address` before anything is requested.
//!
//! Links and cross-domain redirect targets leave the child canonical
//! (`shared::canonical`, the policy's rules); same-domain redirect hops are
//! followed as the server wrote them.
//!
//! This file is the URL's step and its domain's shared state; the request
//! itself is `fetch`, what a response becomes `page`, the site's links and
//! sitemaps `site_links`.

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::FutureExt;
use link::fence::Fence;
use link::protocol::{CrawlPolicy, CrawlResult, FailureKind, Outcome, Revisit, WorkItem};
use shared::canonical::Canonicalizer;
use shared::revisit::RevisitPolicy;
use shared::timing::{Op, TimingLog};
use shared::urls::{self, domain_of, origin_of};
use store::docs::{CaptureKind, PageDoc, Skipped};
use store::page_body;
use store::payload_digest::PayloadDigest;
use tokio::sync::{mpsc, Semaphore};
use url::Url;

use crate::body_dict::BodyDictLearner;
use crate::extract::{extract, ExtractOptions};
use crate::http::{self, FetchError, Fetched, Http};
use crate::metric;
use crate::page_writer::PageWriter;
use crate::politeness::{DomainTimes, Pace};
use crate::recall::{Recalls, Ticket};
use crate::revisit::{self, RevisitWrite};
use crate::robots::{RobotsEntry, RobotsSource};
use crate::robots_meta;
use crate::server_pace::{ServerGate, ServerPaces, Turn};
use crate::sitemap;
use crate::sitemap_due::Lastmod;

mod fetch;
mod page;
mod site_links;

pub(crate) use fetch::record_wait;
use fetch::{fetch, status_class};
use page::{cross_domain_redirect, links_to_keep, page, revisited};
use site_links::{robots_sitemaps, sitemap_links};

/// Everything a domain task needs, shared by all of them.
pub(crate) struct Ctx {
    pub policy: Arc<CrawlPolicy>,
    /// The policy's canonical URL rules, compiled once (see [`canonicalizer`]).
    pub canonical: Canonicalizer,
    pub http: Http,
    pub robots: RobotsSource,
    pub times: DomainTimes,
    pub pages: PageWriter,
    /// The dictionary page bodies are compressed with, learnt from the first ones.
    pub body_dict: Arc<BodyDictLearner>,
    pub report: mpsc::UnboundedSender<CrawlResult>,
    pub timing: TimingLog,
    /// Fetches in progress across all domains of this child.
    pub fetch_slots: Semaphore,
    /// How many `fetch_slots` there are (`--child-concurrency`, or fewer
    /// when the open-file limit is short: see `open_files`).
    pub fetch_slot_count: usize,
    /// Until when this child may start requests (its supervisor's right to
    /// crawl; see `link::fence`): checked before every request.
    pub fence: Fence,
    /// The servers this child paces (see `crate::server_pace`).
    pub servers: ServerPaces,
    /// Fired once when the child stops: every URL not started comes back
    /// (`crate::recall`).
    pub stopping: Recalls,
}

/// Compiles the policy's canonical URL rules. The dispatcher checks them
/// before it sends them, so a list that does not compile is a bug there:
/// the child logs it and keeps links as resolved rather than stopping.
pub(crate) fn canonicalizer(policy: &CrawlPolicy) -> Canonicalizer {
    policy.canonical.compile().unwrap_or_else(|e| {
        tracing::error!(error = %e, "BUG: the crawl policy's canonical URL rules do not compile; links are kept as resolved");
        Canonicalizer::none()
    })
}

/// A domain idle this long (nothing asked of its pace, and no request
/// due) has its pace read from the second store again before its next
/// request: it may have been crawled by another node meanwhile (the
/// dispatcher moved it, or gave it to another node while this one was cut
/// off), and that node's delay is in the store, and its last request too,
/// or the next request waits a whole delay (`politeness::Pace::resume`).
/// Shorter than the shortest time a domain can be away (two of the
/// dispatcher's 2 s hand-over holds, `frontier::rebalance`), longer than
/// the domain-time flush period (1 s).
const PACE_RELOAD_AFTER: Duration = Duration::from_secs(3);

/// What the child knows about one domain it owns.
pub(crate) struct DomainState {
    domain: String,
    /// Loaded from the second store on first use, and again after the
    /// domain was idle for [`PACE_RELOAD_AFTER`].
    pace: Option<Pace>,
    /// When the pace was last asked for.
    paced_at: tokio::time::Instant,
    robots: HashMap<String, Arc<RobotsEntry>>,
    /// Failures in a row to get an origin's robots.txt (sets the backoff).
    robots_failures: HashMap<String, u32>,
    /// 429/503 answers in a row, for exponential backoff.
    throttles: u32,
    /// Origins whose robots.txt sitemaps this child has offered (see
    /// [`robots_sitemaps`]).
    sitemaps_offered: HashSet<String>,
}

impl DomainState {
    pub(crate) fn new(domain: &str) -> Self {
        DomainState {
            domain: domain.to_string(),
            pace: None,
            paced_at: tokio::time::Instant::now(),
            robots: HashMap::new(),
            robots_failures: HashMap::new(),
            throttles: 0,
            sitemaps_offered: HashSet::new(),
        }
    }

    async fn pace(&mut self, ctx: &Ctx) -> &mut Pace {
        // Idle since the later of the last ask and the next request due.
        let busy_until = self
            .pace
            .as_ref()
            .map_or(self.paced_at, |p| p.next_allowed().max(self.paced_at));
        let now = tokio::time::Instant::now();
        let stale = now.saturating_duration_since(busy_until) > PACE_RELOAD_AFTER;
        self.paced_at = now;
        if self.pace.is_none() || stale {
            let stored = ctx.times.load(&self.domain).await;
            let min = Duration::from_millis(ctx.policy.min_delay_ms);
            let mut pace = match stored {
                Some((last, delay)) => Pace::resume(Some(last), delay.max(min), ctx.policy.max_domain_rps),
                None => Pace::resume(None, min, ctx.policy.max_domain_rps),
            };
            if let Some(old) = self.pace.take() {
                pace.keep_later(&old);
            }
            self.pace = Some(pace);
        }
        self.pace
            .get_or_insert_with(|| Pace::resume(None, Duration::ZERO, 0.0))
    }

    /// The cached rules for `origin`, while they have not expired.
    fn cached_robots(&self, origin: &str) -> Option<Arc<RobotsEntry>> {
        self.robots.get(origin).filter(|e| !e.expired()).cloned()
    }
}

/// The robots rules for `url`'s origin: memory, then the second store,
/// then the web. Fetching robots.txt is a request like any other: it takes
/// all of the domain's connections, so it never overlaps a page request,
/// and is paced as one (`own_min_ms`: see [`delay_for`]).
async fn robots_for(
    ctx: &Ctx,
    st: &SharedDomain,
    url: &Url,
    own_min_ms: Option<u64>,
    server: Option<&Paced>,
    unstarted: Option<Ticket>,
) -> Result<Arc<RobotsEntry>, FetchError> {
    let origin = origin_of(url);
    {
        let mut s = st.state.lock().await;
        if let Some(entry) = s.cached_robots(&origin) {
            return Ok(entry);
        }
        if let Some(entry) = ctx.robots.load(&origin, &s.domain).await {
            let entry = Arc::new(entry);
            s.robots.insert(origin, entry.clone());
            return Ok(entry);
        }
    }
    let _alone = unless_recalled(
        ctx,
        st,
        unstarted,
        st.connections.acquire_many(st.max_connections),
    )
    .await?
    .ok();
    let mut s = unless_recalled(ctx, st, unstarted, st.state.lock()).await?;
    // Another task may have fetched it while this one waited.
    if let Some(entry) = s.cached_robots(&origin) {
        return Ok(entry);
    }
    let domain = s.domain.clone();
    let min = delay_for(&ctx.policy, own_min_ms, None);
    fenced(ctx)?;
    unless_recalled(ctx, st, unstarted, async {
        s.pace(ctx).await.wait(min, &ctx.timing, &domain).await
    })
    .await?;
    let turn = unless_recalled(ctx, st, unstarted, server_turn(ctx, server, &domain)).await?;
    fenced(ctx)?;
    let failures = s.robots_failures.get(&origin).copied().unwrap_or(0);
    let (entry, archived) = ctx.robots.fetch(&ctx.http, &origin, &domain, failures).await;
    drop(turn);
    if entry.failed() {
        s.robots_failures
            .insert(origin.clone(), failures.saturating_add(1));
    } else {
        s.robots_failures.remove(&origin);
    }
    let delay = delay_for(&ctx.policy, own_min_ms, Some(&entry));
    s.pace(ctx).await.request_done(delay);
    ctx.times.touch(&domain, delay);
    let entry = Arc::new(entry);
    s.robots.insert(origin, entry.clone());
    drop(s);
    ctx.pages.submit_robots(archived).await;
    Ok(entry)
}

/// A domain's server and its gap, when servers are paced.
struct Paced {
    gate: Arc<ServerGate>,
    gap: Duration,
}

/// The server `item`'s requests are paced by: the one its lease names
/// (see `WorkItem::server`), when the name resolves to it. `Err` with
/// the address found when the lease names no server or another one: the
/// URL goes back to the dispatcher, to be leased with the server's other
/// domains. `None` when servers are not paced (a gap of 0) or the name
/// does not resolve now (the request will say why).
async fn paced_server(ctx: &Ctx, item: &WorkItem, url: &Url) -> Result<Option<Paced>, IpAddr> {
    let Some(found) = ctx.http.server_of(url).await else {
        return Ok(None);
    };
    let gap = Duration::from_millis(if found.named {
        ctx.policy.named_server_delay_ms
    } else {
        ctx.policy.server_delay_ms
    });
    if gap.is_zero() {
        return Ok(None);
    }
    match item.server {
        Some(addr) if found.addrs.contains(&addr) => Ok(Some(Paced {
            gate: ctx.servers.gate(addr, gap),
            gap,
        })),
        _ => Err(found.first),
    }
}

/// The server's turn for a request to `domain`, when its server is paced.
async fn server_turn<'a>(ctx: &Ctx, server: Option<&'a Paced>, domain: &str) -> Option<Turn<'a>> {
    match server {
        Some(p) => Some(p.gate.turn(p.gap, &ctx.timing, domain).await),
        None => None,
    }
}

/// `item` handed back unfetched, naming its domain's server `addr`.
fn regrouped(item: &WorkItem, addr: IpAddr) -> Done {
    let why = format!(
        "{} is served from {addr}; placed with that server's other domains",
        item.domain
    );
    Done::NoPage(CrawlResult {
        server: Some(addr),
        ..result(item, Outcome::failed(FailureKind::Regrouped, why), Vec::new())
    })
}

/// Hands `item` back untouched (`kind` is one of
/// `FailureKind::is_handed_back`): not a failure of the URL.
pub(crate) fn hand_back(ctx: &Ctx, item: &WorkItem, kind: FailureKind, why: &str) {
    let _ = ctx
        .report
        .send(result(item, Outcome::failed(kind, why), Vec::new()));
}

/// `wait` (a wait of a URL whose request has not started: its domain's
/// connections, its turn, its server's turn, a fetch slot), unless its
/// domain is recalled or the child stops first (`crate::recall`). With no
/// ticket (a redirect's later hop: the URL has started) it just waits.
async fn unless_recalled<T>(
    ctx: &Ctx,
    st: &SharedDomain,
    unstarted: Option<Ticket>,
    wait: impl std::future::Future<Output = T>,
) -> Result<T, FetchError> {
    let Some(ticket) = unstarted else {
        return Ok(wait.await);
    };
    if st.recalls.recalled(ticket) || ctx.stopping.recalled(Ticket::FIRST) {
        return Err(FetchError::Recalled("its domain was recalled or the crawl stops"));
    }
    // Most waits are over at once (a free connection or slot, a turn
    // already due): those cost two atomic loads, not the registration of
    // two waiters (one on the child-wide stop signal) that the race below
    // makes and undoes.
    let mut wait = std::pin::pin!(wait);
    if let std::task::Poll::Ready(done) = futures::poll!(wait.as_mut()) {
        return Ok(done);
    }
    tokio::select! {
        biased;
        () = st.recalls.wait(ticket) => Err(FetchError::Recalled("its domain was recalled")),
        () = ctx.stopping.wait(Ticket::FIRST) => Err(FetchError::Recalled("the crawl stops")),
        done = wait => Ok(done),
    }
}

/// An error when this child may not start a request now (see
/// `link::fence`): checked before a politeness wait, so held URLs come
/// back at once, and again after it, just before the request.
fn fenced(ctx: &Ctx) -> Result<(), FetchError> {
    if ctx.fence.allows() {
        Ok(())
    } else {
        Err(FetchError::Fenced)
    }
}

impl DomainState {
    /// Whether forgetting the domain would lose a backoff: 429/503 answers
    /// or robots.txt failures in a row, which set how long it waits next.
    pub(crate) fn backing_off(&self) -> bool {
        self.throttles > 0 || !self.robots_failures.is_empty()
    }

    /// On 429 and 503 the domain waits: as long as `Retry-After` says
    /// (capped), or with exponential backoff from one second when it says
    /// nothing. Returns the wait, or `None` for any other status.
    async fn throttled(&mut self, ctx: &Ctx, resp: &Fetched, delay: Duration) -> Option<Duration> {
        if resp.status != 429 && resp.status != 503 {
            self.throttles = 0;
            return None;
        }
        self.throttles = self.throttles.saturating_add(1);
        let backoff = delay
            .max(Duration::from_secs(1))
            .saturating_mul(2u32.saturating_pow(self.throttles - 1));
        let wait = http::retry_after(resp.retry_after.as_deref())
            .unwrap_or(backoff)
            .min(MAX_THROTTLE_WAIT);
        self.pace(ctx).await.hold(wait);
        metric::THROTTLED.at([status_class(resp.status)]).increment(1);
        Some(wait)
    }
}

/// Longest a 429/503 can make a domain wait.
const MAX_THROTTLE_WAIT: Duration = Duration::from_secs(3600);

/// The gap between two requests to a domain: our minimum (the domain's
/// own when an operator set one, see `WorkItem::min_delay_ms`), raised by
/// the site's Crawl-delay (already capped when parsed).
fn delay_for(policy: &CrawlPolicy, own_min_ms: Option<u64>, robots: Option<&RobotsEntry>) -> Duration {
    let min = Duration::from_millis(own_min_ms.unwrap_or(policy.min_delay_ms));
    robots.and_then(|r| r.crawl_delay).map_or(min, |d| d.max(min))
}

/// A domain's state, shared by its tasks, and its connections.
pub(crate) struct SharedDomain {
    state: tokio::sync::Mutex<DomainState>,
    /// One permit per connection the policy allows the domain. A request
    /// to a domain with a delay takes all of them: with a delay, requests
    /// go one at a time and the next starts at least the delay after the
    /// last response ended, so no two requests reach the server closer
    /// than the delay, whenever the server logs them (arrival or end) and
    /// however long each one takes. Parallel requests would each keep the
    /// delay from the previous start, yet arrive or end closer than it.
    connections: tokio::sync::Semaphore,
    max_connections: u32,
    /// Fired when the domain is recalled (`crate::recall`).
    pub(crate) recalls: Recalls,
}

impl SharedDomain {
    /// Whether the domain may be forgotten, as far as its state says: no
    /// request holds it, and it is not backing off. (`None`: busy.)
    pub(crate) fn backing_off(&self) -> Option<bool> {
        if self.connections.available_permits() < self.max_connections as usize {
            return None;
        }
        self.state.try_lock().ok().map(|s| s.backing_off())
    }

    /// Puts the domain in a 429 backoff, as an answer would (tests).
    #[cfg(test)]
    pub(crate) fn throttle(&self) {
        if let Ok(mut s) = self.state.try_lock() {
            s.throttles = 1;
        }
    }

    pub(crate) fn new(domain: &str, max_connections: u32) -> SharedDomain {
        let max_connections = max_connections.clamp(1, tokio::sync::Semaphore::MAX_PERMITS as u32);
        SharedDomain {
            state: tokio::sync::Mutex::new(DomainState::new(domain)),
            connections: tokio::sync::Semaphore::new(max_connections as usize),
            max_connections,
            recalls: Recalls::default(),
        }
    }
}

/// Crawls one URL and hands its result on (to the page writer, which
/// reports after storing, or straight to the report channel). A panic
/// while crawling it fails this URL alone (kind `internal`): the domain's
/// task, its other URLs and the child go on. `ticket`: when the URL left
/// its queue; a recall after that, or the child's stop, hands it back if
/// its request has not started (`crate::recall`).
pub(crate) async fn crawl(ctx: &Ctx, st: &SharedDomain, item: WorkItem, ticket: Ticket) {
    #[cfg(feature = "fault-injection")]
    crate::fault::freeze_on(&item.url);
    if let Err(e) = fenced(ctx) {
        hand_back(ctx, &item, e.kind(), &e.to_string());
        return;
    }
    if st.recalls.recalled(ticket) || ctx.stopping.recalled(Ticket::FIRST) {
        hand_back(
            ctx,
            &item,
            FailureKind::Recalled,
            "not started: recalled or stopping",
        );
        return;
    }
    let done = match AssertUnwindSafe(crawl_url(ctx, st, &item, ticket))
        .catch_unwind()
        .await
    {
        Ok(done) => done,
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            tracing::error!(url = %item.url, panic = %what, "BUG: crawling a URL panicked");
            failed(&item, FailureKind::Internal, format!("panic: {what}"))
        }
    };
    match done {
        Done::Page(page, result, lastmods) => match (&item.revisit, &ctx.policy.revisit) {
            // A revisit that ended at a redirect to another domain: a
            // capture like any other (its digest is the redirect's body).
            (Some(rev), Some(policy)) => {
                let status = u16::try_from(page.status).unwrap_or(0);
                let kind = revisit::judge(status, page.payload_sha1.as_ref(), rev);
                let write = revisit::visited(policy, rev, kind, *page, &Default::default());
                ctx.pages.submit_revisit(write, result).await
            }
            _ => {
                ctx.pages.submit(*page, result).await;
                ctx.pages.submit_lastmods(lastmods).await
            }
        },
        Done::Revisit(write, result, lastmods) => {
            ctx.pages.submit_revisit(*write, result).await;
            ctx.pages.submit_lastmods(lastmods).await
        }
        Done::NoPage(result) => match &item.revisit {
            // A revisit without an answer still moves the page's due time
            // (`revisit::unanswered`); one handed back was not tried.
            Some(rev) if !matches!(result.outcome, Outcome::Failed { kind, .. } if kind.is_handed_back()) => {
                let write = revisit::unanswered(rev, item.url.clone());
                ctx.pages.submit_revisit(write, result).await
            }
            _ => {
                let _ = ctx.report.send(result);
            }
        },
    }
}

enum Done {
    /// Boxed: a page is a few hundred bytes, a result alone far less.
    /// With a sitemap's lastmods, in a crawl that revisits.
    Page(Box<PageDoc>, CrawlResult, Vec<Lastmod>),
    /// A revisit that got an answer: its capture and the page's schedule
    /// (and lastmods, as a page's).
    Revisit(Box<RevisitWrite>, CrawlResult, Vec<Lastmod>),
    NoPage(CrawlResult),
}

fn result(item: &WorkItem, outcome: Outcome, outlinks: Vec<String>) -> CrawlResult {
    // Stamped when the result is sent.
    CrawlResult::of(item, outcome, outlinks)
}

fn failed(item: &WorkItem, kind: FailureKind, message: impl Into<String>) -> Done {
    // A URL handed back (fenced, recalled) did not fail: not counted.
    if !kind.is_handed_back() {
        metric::FETCH_FAILURES.at([kind.as_str()]).increment(1);
    }
    Done::NoPage(result(item, Outcome::failed(kind, message), Vec::new()))
}

async fn crawl_url(ctx: &Ctx, st: &SharedDomain, item: &WorkItem, ticket: Ticket) -> Done {
    #[cfg(feature = "fault-injection")]
    crate::fault::panic_on(&item.url);
    let url = match urls::parse(&item.url) {
        Ok(u) => u,
        Err(reason) => return failed(item, FailureKind::BadUrl, reason.as_str()),
    };
    let mut current = url.clone();
    let mut hops: Vec<Url> = vec![url.clone()];
    let mut server = None;
    // A revisit asks conditionally at every hop: the validators are of the
    // answer the last visit ended at, and a redirect ignores them.
    let conditions = item.revisit.as_ref().map(revisit::conditions).unwrap_or_default();
    loop {
        // An internal address is refused before robots.txt is asked for it
        // (see `http::Http::admit`); each redirect hop is checked again.
        if let Err(e) = ctx.http.admit(&current).await {
            return failed(item, e.kind(), e.to_string());
        }
        if hops.len() == 1 {
            // Same-domain hops go to the same server.
            server = match paced_server(ctx, item, &current).await {
                Ok(paced) => paced,
                Err(found) => return regrouped(item, found),
            };
        }
        // Until its first request, the URL can be recalled.
        let unstarted = (hops.len() == 1).then_some(ticket);
        let robots = match robots_for(ctx, st, &current, item.min_delay_ms, server.as_ref(), unstarted).await
        {
            Ok(robots) => robots,
            Err(e) => return failed(item, e.kind(), e.to_string()),
        };
        if let Some(why) = robots.tls_failure() {
            return failed(
                item,
                FailureKind::Tls,
                format!("TLS handshake failed (robots.txt): {why}"),
            );
        }
        if robots.is_unavailable() {
            return failed(
                item,
                FailureKind::RobotsUnavailable,
                "robots.txt could not be fetched; retry later",
            );
        }
        if !robots.allowed(&current) {
            if hops.len() == 1 {
                metric::DISALLOWED.get().increment(1);
                return Done::NoPage(result(item, Outcome::Disallowed, Vec::new()));
            }
            return failed(
                item,
                FailureKind::RedirectDisallowed,
                format!("redirect to {current} is disallowed by robots.txt"),
            );
        }
        let delay = delay_for(&ctx.policy, item.min_delay_ms, Some(&robots));
        let resp = fetch(ctx, st, &current, delay, server.as_ref(), &conditions, unstarted).await;
        let resp = match resp {
            Ok(r) => r,
            Err(e) => return failed(item, e.kind(), e.to_string()),
        };
        if let Some(wait) = st.state.lock().await.throttled(ctx, &resp, delay).await {
            let msg = format!("HTTP {}; domain waits {wait:?}", resp.status);
            return failed(item, FailureKind::Throttled, msg);
        }
        if (300..400).contains(&resp.status) {
            if let Some(target) = resp
                .location
                .as_deref()
                .and_then(|l| urls::resolve(&current, l).ok())
            {
                if domain_of(&target) != item.domain {
                    return cross_domain_redirect(ctx, item, &current, &resp, target);
                }
                // A same-domain hop is followed literally, never made
                // canonical: a server that sends `/p` to `/p;jsessionid=X`
                // would send the stripped URL back there, a loop.
                if hops.contains(&target) {
                    return failed(
                        item,
                        FailureKind::RedirectLoop,
                        format!("redirect loop at {target}"),
                    );
                }
                if hops.len() > ctx.policy.max_redirects as usize {
                    return failed(
                        item,
                        FailureKind::TooManyRedirects,
                        format!("more than {} redirects", ctx.policy.max_redirects),
                    );
                }
                hops.push(target.clone());
                current = target;
                continue;
            }
        }
        if let (Some(rev), Some(policy)) = (&item.revisit, &ctx.policy.revisit) {
            return revisited(ctx, item, &current, resp, rev, policy, &conditions);
        }
        let sitemaps = if robots.sitemaps.is_empty() && !ctx.policy.guess_sitemap {
            Vec::new()
        } else {
            robots_sitemaps(ctx, st, item, &current, &robots).await
        };
        return page(ctx, item, &current, resp, sitemaps);
    }
}

#[cfg(test)]
mod tests {
    use super::page::MAX_KEPT_LINK_BYTES;
    use super::*;

    #[test]
    fn a_page_keeps_its_links_up_to_a_bound() {
        let few = vec!["http://a.test/1".to_string(), "http://a.test/2".to_string()];
        assert_eq!(links_to_keep(&few), few);
        let long = format!("http://a.test/{}", "x".repeat(2000));
        let many = vec![long; 5000];
        let kept = links_to_keep(&many);
        assert!(kept.len() < many.len() && !kept.is_empty());
        assert!(kept.iter().map(|l| l.len() + 1).sum::<usize>() <= MAX_KEPT_LINK_BYTES);
    }

    #[test]
    fn a_rule_list_that_does_not_compile_keeps_links_as_resolved() {
        let mut policy = crate::robots::tests::policy();
        let mut u = Url::parse("http://a.test/p?sid=1").unwrap();
        assert!(canonicalizer(&policy).apply(&mut u));
        assert_eq!(u.as_str(), "http://a.test/p");
        policy.canonical.strip_params.push("*".into());
        let mut u = Url::parse("http://a.test/p?sid=1").unwrap();
        assert!(!canonicalizer(&policy).apply(&mut u));
        assert_eq!(u.as_str(), "http://a.test/p?sid=1");
    }
}
