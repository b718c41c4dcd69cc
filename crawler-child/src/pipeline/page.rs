//! What a fetched response becomes: the page document (and, on a
//! revisit, a capture), the outcome reported, the links kept.

use super::*;

pub(super) fn base_page(item: &WorkItem, ctx: &Ctx, final_url: &Url, resp: &Fetched) -> PageDoc {
    let mut d = PageDoc::new(
        item.url.clone(),
        item.domain.clone(),
        i32::from(item.depth),
        i32::from(resp.status),
        i64::try_from(resp.body.len()).unwrap_or(i64::MAX),
    );
    d.payload_sha1 = Some(PayloadDigest::of(&resp.body));
    d.truncated = resp.truncated;
    if final_url.as_str() != item.url {
        d.final_url = Some(final_url.to_string());
    }
    resp.record_exchange(&mut d, ctx.http.request_head());
    // After the exchange: the schedule names the response's capture time.
    if let Some(policy) = &ctx.policy.revisit {
        revisit::first_visit(policy, &mut d, &resp.head.headers);
    }
    d
}

/// A revisit's answer (see `crate::revisit`): a changed page is built as
/// on a first visit, links and all (its new links are offered); an
/// unchanged one keeps its status and heads, not its body.
pub(super) fn revisited(
    ctx: &Ctx,
    item: &WorkItem,
    final_url: &Url,
    resp: Fetched,
    rev: &Revisit,
    policy: &RevisitPolicy,
    conditions: &reqwest::header::HeaderMap,
) -> Done {
    // A 304 has no payload to take a digest of.
    let digest = (resp.status != 304).then(|| PayloadDigest::of(&resp.body));
    let kind = revisit::judge(resp.status, digest.as_ref(), rev);
    metric::REVISITS.at([kind_str(kind)]).increment(1);
    let headers = resp.head.headers.clone();
    let (mut doc, result, lastmods) = if kind == CaptureKind::Changed {
        match page(ctx, item, final_url, resp, Vec::new()) {
            Done::Page(doc, result, lastmods) => (*doc, result, lastmods),
            other => return other,
        }
    } else {
        let mut doc = base_page(item, ctx, final_url, &resp);
        doc.payload_sha1 = digest;
        (
            doc,
            result(item, fetched(final_url, item, &resp), Vec::new()),
            Vec::new(),
        )
    };
    doc.request_head = Some(revisit::request_head(ctx.http.request_head(), conditions));
    let write = revisit::visited(policy, rev, kind, doc, &headers);
    Done::Revisit(Box::new(write), result, lastmods)
}

pub(super) fn kind_str(kind: CaptureKind) -> &'static str {
    match kind {
        CaptureKind::Changed => "changed",
        CaptureKind::NotModified => "not_modified",
        CaptureKind::SamePayload => "same_payload",
    }
}

/// Ends the crawl of `item` at a redirect to another domain: its target,
/// made canonical like any link, goes back to the dispatcher as the one
/// outlink, for that domain's owner to crawl.
pub(super) fn cross_domain_redirect(
    ctx: &Ctx,
    item: &WorkItem,
    current: &Url,
    resp: &Fetched,
    mut target: Url,
) -> Done {
    ctx.canonical.apply(&mut target);
    let mut d = base_page(item, ctx, current, resp);
    d.redirect_to = Some(target.to_string());
    d.outlinks = Some(1);
    d.links = store::page_links::pack(&[target.to_string()]);
    let outcome = fetched(current, item, resp);
    Done::Page(
        Box::new(d),
        result(item, outcome, vec![target.into()]),
        Vec::new(),
    )
}

/// Bytes of links a page document keeps (before compression): with the
/// body's 12 MiB (`page_body::MAX_STORED_BYTES`) and the heads, still
/// under the store's 16 MiB. Only a hostile page (over 1,500 links of
/// 2 KiB) reaches it; its links past it reach the dispatcher but are not
/// kept in the page.
pub(super) const MAX_KEPT_LINK_BYTES: usize = 3 * 1024 * 1024;

/// The first of `links` that fit [`MAX_KEPT_LINK_BYTES`].
pub(super) fn links_to_keep(links: &[String]) -> &[String] {
    let mut bytes = 0usize;
    let n = links
        .iter()
        .take_while(|l| {
            bytes = bytes.saturating_add(l.len() + 1);
            bytes <= MAX_KEPT_LINK_BYTES
        })
        .count();
    &links[..n]
}

pub(super) fn fetched(final_url: &Url, item: &WorkItem, resp: &Fetched) -> Outcome {
    Outcome::Fetched {
        status: resp.status,
        final_url: (final_url.as_str() != item.url).then(|| final_url.to_string()),
        content_type: resp.content_type.clone(),
        bytes: resp.body.len() as u64,
    }
}

/// Builds the page document: HTML pages with a 2xx status are parsed and
/// their HTML kept; other 2xx bodies that are sitemaps are read for their
/// URLs; the rest are recorded as skipped. `sitemaps`: robots.txt's, when
/// this page is the first of its origin in this child.
pub(super) fn page(
    ctx: &Ctx,
    item: &WorkItem,
    final_url: &Url,
    resp: Fetched,
    sitemaps: Vec<String>,
) -> Done {
    let mut d = base_page(item, ctx, final_url, &resp);
    for value in resp.head.headers.get_all("x-robots-tag") {
        if let Ok(value) = value.to_str() {
            robots_meta::add_header(&mut d.robots, value, &ctx.policy.robots_agent);
        }
    }
    let mut outlinks = Vec::new();
    let mut lastmods = Vec::new();
    let html = http::is_html(resp.content_type.as_deref());
    if !html {
        let map = (200..300)
            .contains(&resp.status)
            .then(|| sitemap::parse(&resp.body))
            .flatten();
        match map {
            Some(map) => (outlinks, lastmods) = sitemap_links(ctx, item, final_url, &mut d, map),
            None => {
                d.skipped = Some(Skipped::ContentType);
                metric::SKIPPED.at(["content_type"]).increment(1);
            }
        }
        if ctx.policy.keep_non_html_bodies {
            // No charset (not text to decode) and no dictionary: the
            // dictionaries are learnt from HTML.
            page_body::store(&mut d, &resp.body, None, None);
        }
    } else if (200..300).contains(&resp.status) {
        let start = Instant::now();
        let encoding = http::charset(resp.content_type.as_deref(), &resp.body);
        let options = ExtractOptions {
            skip_nofollow: ctx.policy.skip_nofollow,
            robots_agent: &ctx.policy.robots_agent,
            max_links: ctx.policy.max_outlinks_per_page as usize,
            canonical: Some(&ctx.canonical),
        };
        let mut f = extract(&resp.body, final_url, encoding, options);
        d.robots.add(f.robots);
        if d.robots.nofollow {
            // Said by the header (the meta tag's were never resolved).
            f.links.clear();
        }
        #[cfg(feature = "fault-injection")]
        {
            crate::fault::slow_parse();
            crate::fault::burn_parse();
        }
        for reason in &f.rejected {
            metric::LINKS_DROPPED.at([reason.as_str()]).increment(1);
        }
        if f.over_cap > 0 {
            metric::LINKS_DROPPED
                .at(["over_page_cap"])
                .increment(f.over_cap as u64);
            d.outlinks_dropped = Some(i64::try_from(f.over_cap).unwrap_or(i64::MAX));
        }
        // The bytes as sent, compressed; read back with `pages get` or
        // `store::page_body::html_of` (decompress, decode with `charset`).
        let charset = encoding.unwrap_or(encoding_rs::UTF_8).name();
        page_body::store(&mut d, &resp.body, Some(charset), ctx.body_dict.current());
        ctx.body_dict.learn(&resp.body);
        d.title = f.title;
        d.description = f.description;
        d.canonical = f.canonical;
        d.lang = f.lang;
        d.outlinks = Some(i32::try_from(f.links.len()).unwrap_or(i32::MAX));
        d.links = store::page_links::pack(links_to_keep(&f.links));
        outlinks = f.links;
        ctx.timing
            .record(Op::Parse, start.elapsed(), "ok", Some(&item.domain), None);
    }
    if !sitemaps.is_empty() {
        // robots.txt's, kept with the page's own (`d.outlinks` counts
        // those only).
        outlinks.extend(sitemaps);
        d.links = store::page_links::pack(links_to_keep(&outlinks));
    }
    let outcome = fetched(final_url, item, &resp);
    Done::Page(Box::new(d), result(item, outcome, outlinks), lastmods)
}
