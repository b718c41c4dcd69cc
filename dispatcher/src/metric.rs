//! The metric families the dispatcher emits.

use shared::metric::{Counter, Described, Gauge};

pub(crate) const CREDITS_CAPACITY: Gauge = Gauge::new(
    "crawler_credits_capacity",
    "The most URLs live supervisors may hold leased at once.",
    [],
);

pub(crate) const CREDITS_HELD: Gauge =
    Gauge::new("crawler_credits_held", "URLs leased to live supervisors.", []);

pub(crate) const CRAWL_PAUSED: Gauge = Gauge::new(
    "crawler_crawl_paused",
    "1 while an operator has paused the crawl (crawlctl pause): nothing new is leased. Set once a second.",
    [],
);

pub(crate) const DOMAINS_BLOCKED_BY_OPERATOR: Gauge = Gauge::new(
    "crawler_domains_blocked_by_operator",
    "Domains an operator blocked (crawlctl block), set once a second.",
    [],
);

pub(crate) const SERVERS_SHARED: Gauge = Gauge::new(
    "crawler_servers_shared",
    "Servers (IP addresses) that several of the domains held are served from: each is owned, with all its domains, by one supervisor and paced as a whole (--min-ip-delay-ms). Set once a second.",
    [],
);

pub(crate) const DOMAIN_DELAYS_SET: Gauge = Gauge::new(
    "crawler_domain_delays_set",
    "Domains whose minimum delay an operator set (crawlctl delay), set once a second.",
    [],
);

pub(crate) const DISPATCHER_RESULTS: Counter<1> = Counter::new(
    "crawler_dispatcher_results_total",
    "Crawl results the dispatcher recorded, by outcome (fetched, disallowed, failed).",
    ["outcome"],
);

pub(crate) const DOMAIN_HALTS: Counter = Counter::new(
    "crawler_domain_halts_total",
    "Times the circuit breaker halted a domain until an operator un-halts it.",
    [],
);

pub(crate) const DOMAIN_PAUSES: Counter = Counter::new(
    "crawler_domain_pauses_total",
    "Times the circuit breaker paused a domain after too many errors in its recent outcomes.",
    [],
);

pub(crate) const DOMAINS_MOVED: Counter = Counter::new(
    "crawler_domains_moved_total",
    "Domains moved from one supervisor to another to give a node that joined a running crawl its share (each once nothing of it was in flight).",
    [],
);

pub(crate) const FRONTIER_DOMAINS: Gauge = Gauge::new(
    "crawler_frontier_domains",
    "Domains the dispatcher holds: those with URLs queued or out, or a result in the last --forget-idle-domains-ms or two; set once a second.",
    [],
);

pub(crate) const FRONTIER_DOMAINS_ACTIVE: Gauge = Gauge::new(
    "crawler_frontier_domains_active",
    "Domains holding a window of their queue in memory or a read of it (at most --frontier-memory-urls over twice --max-inflight-per-domain, and at least 1,024, while memory is at --frontier-memory-urls), set once a second.",
    [],
);

pub(crate) const FRONTIER_DOMAINS_FORGOTTEN: Counter = Counter::new(
    "crawler_frontier_domains_forgotten_total",
    "Domains forgotten because nothing was left of them (met again, a domain starts afresh and counts again), set once a second.",
    [],
);

pub(crate) const FRONTIER_DOMAINS_PARKED: Gauge = Gauge::new(
    "crawler_frontier_domains_parked",
    "Domains with URLs queued only in the store, waiting for their turn to hold a window, set once a second.",
    [],
);

pub(crate) const FRONTIER_IN_FLIGHT: Gauge = Gauge::new(
    "crawler_frontier_in_flight",
    "URLs leased to supervisors whose results have not come back, set once a second.",
    [],
);

pub(crate) const REVISITS_QUEUED: Gauge = Gauge::new(
    "crawler_revisits_queued",
    "Stored pages due again, queued or out on a revisit lease (crawls that revisit), set once a second.",
    [],
);

pub(crate) const REVISITS_STARTED: Counter = Counter::new(
    "crawler_revisits_started_total",
    "Revisits queued since the dispatcher started (crawls that revisit).",
    [],
);

pub(crate) const FRONTIER_IN_STORE: Gauge = Gauge::new(
    "crawler_frontier_in_store",
    "Queued URLs only in the store, not yet read into their domain's window in memory, set once a second.",
    [],
);

pub(crate) const FRONTIER_QUEUED: Gauge = Gauge::new(
    "crawler_frontier_queued",
    "URLs in the frontier waiting to be leased, set once a second.",
    [],
);

pub(crate) const FRONTIER_READY: Gauge = Gauge::new(
    "crawler_frontier_ready",
    "URLs that could be leased right now: their domain is owned by a live supervisor, not paused, below its in-flight cap.",
    [],
);

pub(crate) const FRONTIER_REJECTED: Counter = Counter::new(
    "crawler_frontier_rejected_total",
    "Frontier entries the store refused to write; those URLs are not resumed after a restart.",
    [],
);

pub(crate) const FRONTIER_SEEN: Gauge = Gauge::new(
    "crawler_frontier_seen",
    "Distinct URLs the frontier has seen (its duplicate filter), set once a second.",
    [],
);

pub(crate) const FRONTIER_SEEN_BYTES: Gauge = Gauge::new(
    "crawler_frontier_seen_bytes",
    "Heap bytes of the duplicate filter's URL hashes (about 6.4 a URL), set once a second.",
    [],
);

pub(crate) const FRONTIER_WRITE_BACKLOG: Gauge = Gauge::new(
    "crawler_frontier_write_backlog",
    "Frontier inserts and state changes not yet written to the store; past 100,000 the dispatcher leases nothing until it catches up. Set once a second.",
    [],
);

pub(crate) const LINKS_REFUSED: Counter<1> = Counter::new(
    "crawler_links_refused_total",
    "New links the dispatcher did not admit, by reason: out_of_scope, denied_by_rule and not_allowed_by_rule (the operator's --deny/--allow rules), too_many_segments and repeated_segments (path traps), over_domain_budget and over_query_budget (stored as deferred, for a later run with a larger budget).",
    ["reason"],
);

pub(crate) const SUPERVISOR_CREDITS_CAPACITY: Gauge<1> = Gauge::new(
    "crawler_supervisor_credits_capacity",
    "The most URLs one supervisor may hold (label supervisor), set once a second by the dispatcher.",
    ["supervisor"],
)
.logged_as("credits_capacity");

pub(crate) const SUPERVISOR_CREDITS_HELD: Gauge<1> = Gauge::new(
    "crawler_supervisor_credits_held",
    "URLs leased to one supervisor (label supervisor), set once a second by the dispatcher.",
    ["supervisor"],
)
.logged_as("credits_held");

pub(crate) const SUPERVISOR_DOMAINS: Gauge<1> = Gauge::new(
    "crawler_supervisor_domains",
    "Domains a supervisor owns, by supervisor, set once a second.",
    ["supervisor"],
)
.logged_as("domains");

pub(crate) const SUPERVISOR_RESULTS: Counter<1> = Counter::new(
    "crawler_dispatcher_results_received_total",
    "Crawl results the dispatcher received, by the supervisor that sent them (each supervisor counts what it sent in crawler_supervisor_results_total).",
    ["supervisor"],
);

pub(crate) const SUPERVISORS_LIVE: Gauge = Gauge::new(
    "crawler_supervisors_live",
    "Supervisors the dispatcher currently hears from, set once a second.",
    [],
);

pub(crate) const ZMQ_PEERS_DROPPED: Counter<1> = Counter::new(
    "crawler_zmq_peers_dropped_total",
    "Cluster-link connections the dispatcher closed: its queue of messages to the peer was full (send_queue_full), or a peer that proved the secret never said what it holds (never_joined).",
    ["why"],
);

/// Describes every family a dispatcher emits, its own and those of the
/// link and the store, so `/metrics` has a HELP line for each.
pub(crate) fn describe() {
    for families in [FAMILIES, link::metric::FAMILIES, store::metric::FAMILIES] {
        shared::metric::describe(families);
    }
    shared::timing::describe();
}

/// Every family this crate emits, for `/metrics`' HELP lines.
pub(crate) static FAMILIES: &[&dyn Described] = &[
    &CREDITS_CAPACITY,
    &CREDITS_HELD,
    &CRAWL_PAUSED,
    &DISPATCHER_RESULTS,
    &DOMAIN_DELAYS_SET,
    &SERVERS_SHARED,
    &DOMAIN_HALTS,
    &DOMAIN_PAUSES,
    &DOMAINS_BLOCKED_BY_OPERATOR,
    &DOMAINS_MOVED,
    &FRONTIER_DOMAINS,
    &FRONTIER_DOMAINS_ACTIVE,
    &FRONTIER_DOMAINS_FORGOTTEN,
    &FRONTIER_DOMAINS_PARKED,
    &FRONTIER_IN_FLIGHT,
    &FRONTIER_IN_STORE,
    &FRONTIER_QUEUED,
    &FRONTIER_READY,
    &FRONTIER_REJECTED,
    &FRONTIER_SEEN,
    &FRONTIER_SEEN_BYTES,
    &FRONTIER_WRITE_BACKLOG,
    &LINKS_REFUSED,
    &REVISITS_QUEUED,
    &REVISITS_STARTED,
    &SUPERVISOR_CREDITS_CAPACITY,
    &SUPERVISOR_CREDITS_HELD,
    &SUPERVISOR_DOMAINS,
    &SUPERVISOR_RESULTS,
    &SUPERVISORS_LIVE,
    &ZMQ_PEERS_DROPPED,
];

#[cfg(test)]
mod tests {
    #[test]
    fn families_are_fit_for_metrics() {
        shared::metric::check(super::FAMILIES).unwrap();
    }
}
