//! The links a page leads to that stay on its site, and the sitemaps
//! robots.txt names for it (or `/sitemap.xml`, guessed): what the URL step
//! offers the dispatcher besides the page's own links.

use super::*;

/// Where a site's sitemap is, by convention, when robots.txt does not say.
const GUESSED_SITEMAP: &str = "/sitemap.xml";

/// robots.txt's `Sitemap:` lines for `url`'s origin (`/sitemap.xml` when
/// it names none and the policy says to guess), once per origin in
/// this child's life, as links ([`same_site_links`]). They ride with
/// the first page the child stores for the origin, kept in its `links`,
/// so a dispatcher killed before it queued them offers them again from
/// there; a later child offers them again too, and the seen-set makes
/// that cost nothing.
pub(super) async fn robots_sitemaps(
    ctx: &Ctx,
    st: &SharedDomain,
    item: &WorkItem,
    url: &Url,
    robots: &RobotsEntry,
) -> Vec<String> {
    if !st.state.lock().await.sitemaps_offered.insert(origin_of(url)) {
        return Vec::new();
    }
    if robots.sitemaps.is_empty() {
        return same_site_links(ctx, item, url, &[GUESSED_SITEMAP.to_string()]).0;
    }
    same_site_links(ctx, item, url, &robots.sitemaps).0
}

/// `href` as a link of `item`'s domain (resolved against `base`, made
/// canonical), or `None`.
pub(super) fn site_link(ctx: &Ctx, item: &WorkItem, base: &Url, href: &str) -> Option<String> {
    let mut u = urls::resolve(base, href)
        .ok()
        .filter(|u| domain_of(u) == item.domain)?;
    ctx.canonical.apply(&mut u);
    Some(u.to_string())
}

/// `hrefs` as links of `item`'s domain: resolved against `base`, made
/// canonical like a page's links, sorted and without repeats; and how
/// many were malformed or on another domain (a robots.txt or a sitemap
/// vouches for its own site only, as sitemaps.org says).
pub(super) fn same_site_links(
    ctx: &Ctx,
    item: &WorkItem,
    base: &Url,
    hrefs: &[String],
) -> (Vec<String>, u64) {
    let mut links: Vec<String> = hrefs
        .iter()
        .filter_map(|href| site_link(ctx, item, base, href))
        .collect();
    let dropped = u64::try_from(hrefs.len().saturating_sub(links.len())).unwrap_or(u64::MAX);
    links.sort_unstable();
    links.dedup();
    (links, dropped)
}

/// A sitemap's `<loc>`s as the page's links ([`same_site_links`]);
/// records the sitemap on the page. In a crawl that revisits, also the
/// lastmods of the links kept (see `crate::sitemap_due`).
pub(super) fn sitemap_links(
    ctx: &Ctx,
    item: &WorkItem,
    base: &Url,
    d: &mut PageDoc,
    map: sitemap::Sitemap,
) -> (Vec<String>, Vec<Lastmod>) {
    let (mut links, off_site) = same_site_links(ctx, item, base, &map.locs);
    // Handed on as the page keeps them: at most MAX_KEPT_LINK_BYTES, so a
    // sitemap's result is no bigger than a hostile page's (2,000 links of
    // 2 KiB) and a restarted dispatcher offers again exactly what it got.
    let kept = links_to_keep(&links).len();
    let past_kept = links.len().saturating_sub(kept);
    links.truncate(kept);
    let outcome = if map.stopped.is_some() { "stopped" } else { "read" };
    metric::SITEMAPS.at([map.kind.as_str(), outcome]).increment(1);
    if let Some(why) = &map.stopped {
        tracing::info!(url = %base, why = %why, urls = links.len(), "sitemap read only in part");
    }
    let dropped = map
        .dropped
        .saturating_add(off_site)
        .saturating_add(u64::try_from(past_kept).unwrap_or(u64::MAX));
    d.sitemap = Some(map.kind);
    d.sitemap_stopped = map.stopped;
    d.outlinks = Some(i32::try_from(links.len()).unwrap_or(i32::MAX));
    d.outlinks_dropped = (dropped > 0).then(|| i64::try_from(dropped).unwrap_or(i64::MAX));
    d.links = store::page_links::pack(&links);
    let lastmods = if ctx.policy.revisit.is_some() {
        map.lastmods
            .iter()
            .filter_map(|(loc, at)| Some((site_link(ctx, item, base, loc)?, *at)))
            .filter(|(link, _)| links.binary_search(link).is_ok())
            .collect()
    } else {
        Vec::new()
    };
    (links, lastmods)
}
