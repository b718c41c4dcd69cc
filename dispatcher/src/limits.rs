//! Defaults of the crawl's limits that more than the dispatcher names: the
//! test webs are built to exceed them, and the summary's readers compare
//! against them.

/// `--max-pages-per-domain`: URLs admitted per domain (host and port).
///
/// Heritrix (`queue-total-budget`), Nutch (`generate.max.count`) and
/// StormCrawler leave this unlimited by default and leave traps to the
/// operator; a first crawl of the open web then meets them on day one. A
/// research crawl wants many sites rather than all of a few: 10,000 pages
/// hold the whole of most sites and, at the default 1 s gap, are under
/// three hours of one server's time; the pages past it of a site that really is larger are
/// kept as deferred entries, so a later run with a larger budget crawls
/// them. Every trap no rule recognises costs its host at most this much.
pub const DEFAULT_MAX_PAGES_PER_DOMAIN: u32 = 10_000;

/// `--max-query-variants`: distinct queries admitted per path of a domain.
///
/// A calendar (`/cal?month=…`) or a faceted search (every combination of
/// its filters and sorts) is one path with queries without end. 1,000
/// lets an ordinary script path (`/item?id=…`, `/viewtopic.php?t=…`) bring
/// a tenth of its domain's default budget, and keeps a trap on one path
/// from spending the rest of it; a site that serves all its pages from one
/// script needs it raised.
pub const DEFAULT_MAX_QUERY_VARIANTS: u32 = 1_000;
