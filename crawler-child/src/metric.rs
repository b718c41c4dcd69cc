//! The metric families a crawler child emits.

use shared::metric::{Counter, Described, Gauge};

pub(crate) const BLOCKED_REQUESTS: Counter<1> = Counter::new(
    "crawler_blocked_requests_total",
    "Requests refused because their host is or resolves only to an internal address (loopback, private, link-local, ...) and --allow-private-networks is off, by how the address was found (ip_literal, dns).",
    ["via"],
);

pub(crate) const CHILD_PENDING: Gauge = Gauge::new(
    "crawler_child_pending",
    "URLs this child received and has not handed on.",
    [],
);

pub(crate) const DISALLOWED: Counter = Counter::new(
    "crawler_disallowed_total",
    "URLs not fetched because robots.txt disallows them.",
    [],
);

pub(crate) const DNS_CACHE: Counter<1> = Counter::new(
    "crawler_dns_cache_total",
    "Host names asked of the child's DNS cache (overrides aside), by result: hit (addresses kept), negative_hit (a failure or a missing name kept), joined (waited for a lookup already in flight), miss (started a lookup), deadline (gave up waiting).",
    ["result"],
);

pub(crate) const DNS_CACHED: Gauge = Gauge::new(
    "crawler_dns_cached_names",
    "Host names (answers and failures) in the child's DNS cache, set once a second.",
    [],
);

pub(crate) const DNS_LOOKUPS: Counter<1> = Counter::new(
    "crawler_dns_lookups_total",
    "DNS lookups sent to the source (the system's resolver or --dns-server), by outcome (ok, nxdomain, no_address, servfail, timeout, error).",
    ["outcome"],
);

pub(crate) const DNS_LOOKUPS_ACTIVE: Gauge = Gauge::new(
    "crawler_dns_lookups_active",
    "DNS lookups this child has in flight, set once a second.",
    [],
);

pub(crate) const DOMAINS_FORGOTTEN: Counter = Counter::new(
    "crawler_child_domains_forgotten_total",
    "Domains this child forgot after they were idle (60 s, or an hour while backing off): their state, robots rules included, is read again if they come back.",
    [],
);

pub(crate) const DOMAINS_HELD: Gauge = Gauge::new(
    "crawler_child_domains",
    "Domains whose state (pace, robots rules, queue) this child holds, set once a second.",
    [],
);

pub(crate) const FETCH_FAILURES: Counter<1> = Counter::new(
    "crawler_fetch_failures_total",
    "URLs that ended without a page, by kind of failure (timeout, robots unavailable, throttled, ...).",
    ["kind"],
);

pub(crate) const FETCH_SLOTS: Gauge = Gauge::new(
    "crawler_fetch_slots",
    "Fetches a child may have in progress at once (its share of --child-concurrency), set once a second.",
    [],
);

pub(crate) const FETCHED_BYTES: Counter = Counter::new(
    "crawler_fetched_bytes_total",
    "Body bytes read in HTTP responses to page requests, after decompression.",
    [],
);

pub(crate) const FETCHES_ACTIVE: Gauge = Gauge::new(
    "crawler_fetches_active",
    "HTTP requests this child has in progress.",
    [],
);

pub(crate) const LINKS_DROPPED: Counter<1> = Counter::new(
    "crawler_links_dropped_total",
    "Links found on pages and not followed, by reason (a URL rule, or over the per-page cap).",
    ["reason"],
);

pub(crate) const PAGES_STORED: Counter =
    Counter::new("crawler_pages_stored_total", "Pages written to the store.", []);

pub(crate) const PAGES: Counter<1> = Counter::new(
    "crawler_pages_total",
    "HTTP responses to page requests (each redirect hop counts), by status class.",
    ["status"],
);

pub(crate) const ROBOTS_FETCHES: Counter<1> = Counter::new(
    "crawler_robots_fetches_total",
    "robots.txt fetches, by outcome (ok: 2xx, absent: 4xx, unavailable: 5xx or unreachable).",
    ["outcome"],
);

pub(crate) const SITEMAPS: Counter<2> = Counter::new(
    "crawler_sitemaps_read_total",
    "Sitemaps read from fetched bodies, by what they were (urlset, index) and whether reading stopped early (an XML error, a bound: outcome=stopped).",
    ["kind", "outcome"],
);

pub(crate) const SITEMAP_DUE: Counter = Counter::new(
    "crawler_sitemap_due_total",
    "Stored pages made due at once by a sitemap's lastmod newer than their capture (crawls that revisit).",
    [],
);

pub(crate) const REVISITS: Counter<1> = Counter::new(
    "crawler_revisits_total",
    "Revisits answered, by what they found (not_modified: a 304; same_payload: a 2xx with the last payload's SHA-1; changed: anything else).",
    ["result"],
);

pub(crate) const SKIPPED: Counter<1> = Counter::new(
    "crawler_skipped_total",
    "Fetched pages recorded but not parsed, by reason (content_type: not HTML).",
    ["reason"],
);

pub(crate) const SERVERS_PACED: Gauge = Gauge::new(
    "crawler_servers_paced",
    "Servers (IP addresses) this child paces as a whole, across their host names (--min-ip-delay-ms), set once a second.",
    [],
);

pub(crate) const STORE_QUEUE: Gauge = Gauge::new(
    "crawler_store_queue",
    "Pages waiting in this child's page writer for their batch write.",
    [],
);

pub(crate) const STORE_REJECTED: Counter = Counter::new(
    "crawler_store_rejected_total",
    "Pages the store refused to write (reported as failed with store_rejected).",
    [],
);

pub(crate) const TLS_FAILURES: Counter<1> = Counter::new(
    "crawler_tls_failures_total",
    "Requests whose TLS handshake failed (failed as `tls`), by why: unknown_issuer (see --ca-file), wrong_name, expired, bad_certificate, alert, other.",
    ["why"],
);

pub(crate) const TLS_HANDSHAKES: Counter<1> = Counter::new(
    "crawler_tls_handshakes_total",
    "TLS handshakes this child made, by kind: full (the server's certificate verified) or resumed (a session ticket or id accepted).",
    ["kind"],
);

pub(crate) const THROTTLED: Counter<1> = Counter::new(
    "crawler_throttled_total",
    "429 and 503 responses after which the domain waits (Retry-After or backoff), by status class.",
    ["status"],
);

/// Describes every family a child emits, its own and the store's, so
/// `/metrics` has a HELP line for each.
pub(crate) fn describe() {
    for families in [FAMILIES, store::metric::FAMILIES] {
        shared::metric::describe(families);
    }
    shared::timing::describe();
}

/// Every family this crate emits, for `/metrics`' HELP lines.
pub(crate) static FAMILIES: &[&dyn Described] = &[
    &BLOCKED_REQUESTS,
    &CHILD_PENDING,
    &DISALLOWED,
    &DNS_CACHE,
    &DNS_CACHED,
    &DNS_LOOKUPS,
    &DNS_LOOKUPS_ACTIVE,
    &DOMAINS_FORGOTTEN,
    &DOMAINS_HELD,
    &FETCH_FAILURES,
    &FETCH_SLOTS,
    &FETCHED_BYTES,
    &FETCHES_ACTIVE,
    &LINKS_DROPPED,
    &PAGES_STORED,
    &PAGES,
    &REVISITS,
    &ROBOTS_FETCHES,
    &SERVERS_PACED,
    &SITEMAPS,
    &SITEMAP_DUE,
    &SKIPPED,
    &STORE_QUEUE,
    &STORE_REJECTED,
    &THROTTLED,
    &TLS_FAILURES,
    &TLS_HANDSHAKES,
];

#[cfg(test)]
mod tests {
    #[test]
    fn families_are_fit_for_metrics() {
        shared::metric::check(super::FAMILIES).unwrap();
    }
}
