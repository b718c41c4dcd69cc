//! The HELP text of every metric family the crawler's processes put in `/metrics`.
//!
//! A scraper shows HELP next to each family; without it a reader of a dashboard has to find
//! the line of code that counts, and a name such as `crawler_frontier_in_flight` does not say
//! whether it is URLs or batches. One table for all processes, because several families are
//! emitted by more than one (a description for a family a process never emits costs nothing
//! and is not rendered). The test below reads the workspace's sources and fails when a family
//! is emitted without being described here.

use metrics::{describe_counter, describe_gauge, describe_histogram};

use crate::timing::{Op, BATCH_METRIC};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Counter,
    Gauge,
    Histogram,
}

/// Every family with a literal name: (name, kind, HELP). The per-operation histograms and
/// [`BATCH_METRIC`], named at run time, are added by [`families`].
const FAMILIES: &[(&str, Kind, &str)] = &[
    // Dispatcher.
    (
        "crawler_cluster_refusals_total",
        Kind::Counter,
        "What the dispatcher refused on its cluster link, by reason: messages from peers that have not proven the cluster secret (unauthenticated, bad_proof, no_challenge, malformed_join, oversized, undecodable, version), messages of an admitted connection whose seal does not hold (bad_seal, replayed, unsealed), results for leases it did not issue to the sender or about another URL than the lease's (unknown_lease, foreign_lease, lease_url_mismatch), held URLs it would not adopt (unadoptable_lease) and challenges dropped by a flood of Hellos (challenge_evicted).",
    ),
    (
        "crawler_dispatcher_results_total",
        Kind::Counter,
        "Crawl results the dispatcher recorded, by outcome (fetched, disallowed, failed).",
    ),
    (
        "crawler_frontier_queued",
        Kind::Gauge,
        "URLs in the frontier waiting to be leased, set once a second.",
    ),
    (
        "crawler_frontier_in_store",
        Kind::Gauge,
        "Queued URLs only in the store, not yet read into their domain's window in memory, set once a second.",
    ),
    (
        "crawler_frontier_write_backlog",
        Kind::Gauge,
        "Frontier inserts and state changes not yet written to the store; past 100,000 the dispatcher leases nothing until it catches up. Set once a second.",
    ),
    (
        "crawler_frontier_in_flight",
        Kind::Gauge,
        "URLs leased to supervisors whose results have not come back, set once a second.",
    ),
    (
        "crawler_frontier_seen",
        Kind::Gauge,
        "Distinct URLs the frontier has seen (its duplicate filter), set once a second.",
    ),
    (
        "crawler_frontier_domains",
        Kind::Gauge,
        "Domains the dispatcher holds: those with URLs queued or out, or a result in the last --forget-idle-domains-ms or two; set once a second.",
    ),
    (
        "crawler_frontier_domains_active",
        Kind::Gauge,
        "Domains holding a window of their queue in memory or a read of it (at most --frontier-memory-urls over twice --max-inflight-per-domain, and at least 1,024, while memory is at --frontier-memory-urls), set once a second.",
    ),
    (
        "crawler_frontier_domains_parked",
        Kind::Gauge,
        "Domains with URLs queued only in the store, waiting for their turn to hold a window, set once a second.",
    ),
    (
        "crawler_domains_moved_total",
        Kind::Counter,
        "Domains moved from one supervisor to another to give a node that joined a running crawl its share (each once nothing of it was in flight).",
    ),
    (
        "crawler_supervisor_domains",
        Kind::Gauge,
        "Domains a supervisor owns, by supervisor, set once a second.",
    ),
    (
        "crawler_frontier_domains_forgotten_total",
        Kind::Counter,
        "Domains forgotten because nothing was left of them (met again, a domain starts afresh and counts again), set once a second.",
    ),
    (
        "crawler_frontier_seen_bytes",
        Kind::Gauge,
        "Heap bytes of the duplicate filter's URL hashes (about 6.4 a URL), set once a second.",
    ),
    (
        "crawler_frontier_ready",
        Kind::Gauge,
        "URLs that could be leased right now: their domain is owned by a live supervisor, not paused, below its in-flight cap.",
    ),
    (
        "crawler_frontier_rejected_total",
        Kind::Counter,
        "Frontier entries the store refused to write; those URLs are not resumed after a restart.",
    ),
    (
        "crawler_fetch_slots",
        Kind::Gauge,
        "Fetches a child may have in progress at once (its share of --child-concurrency), set once a second.",
    ),
    (
        "crawler_supervisor_credits_held",
        Kind::Gauge,
        "URLs leased to one supervisor (label supervisor), set once a second by the dispatcher.",
    ),
    (
        "crawler_supervisor_credits_capacity",
        Kind::Gauge,
        "The most URLs one supervisor may hold (label supervisor), set once a second by the dispatcher.",
    ),
    (
        "crawler_supervisors_live",
        Kind::Gauge,
        "Supervisors the dispatcher currently hears from, set once a second.",
    ),
    (
        "crawler_credits_held",
        Kind::Gauge,
        "URLs leased to live supervisors.",
    ),
    (
        "crawler_credits_capacity",
        Kind::Gauge,
        "The most URLs live supervisors may hold leased at once.",
    ),
    (
        "crawler_domain_pauses_total",
        Kind::Counter,
        "Times the circuit breaker paused a domain after too many errors in its recent outcomes.",
    ),
    (
        "crawler_domain_halts_total",
        Kind::Counter,
        "Times the circuit breaker halted a domain until an operator un-halts it.",
    ),
    (
        "crawler_zmq_send_timeouts_total",
        Kind::Counter,
        "Messages the dispatcher dropped because a supervisor did not take them within the send deadline.",
    ),
    // Dispatcher and supervisors.
    (
        "crawler_zmq_messages_sent_total",
        Kind::Counter,
        "Messages sent over the dispatcher-supervisor link, counted by the sender.",
    ),
    (
        "crawler_zmq_messages_received_total",
        Kind::Counter,
        "Messages received over the dispatcher-supervisor link, counted by the receiver.",
    ),
    (
        "crawler_supervisor_results_total",
        Kind::Counter,
        "Crawl results sent by a supervisor to the dispatcher (in the dispatcher: received, by supervisor).",
    ),
    // Supervisors.
    (
        "crawler_supervisor_in_flight",
        Kind::Gauge,
        "URLs this supervisor has handed to its children and not yet had results for, set once a second.",
    ),
    (
        "crawler_supervisor_results_acked_total",
        Kind::Counter,
        "Results the dispatcher acknowledged (until then the supervisor keeps them and sends them again on its next connection).",
    ),
    (
        "crawler_supervisor_results_unacked",
        Kind::Gauge,
        "Results sent on the current connection and not yet acknowledged by the dispatcher, set at each heartbeat.",
    ),
    (
        "crawler_supervisor_results_waiting",
        Kind::Gauge,
        "Results not yet sent on the current connection (the link is down, or the window of unacknowledged messages is full), set at each heartbeat.",
    ),
    (
        "crawler_supervisor_right_seconds",
        Kind::Gauge,
        "Seconds this node's right to crawl still runs (renewed by the dispatcher's acknowledgements; 0 = lapsed, no request starts), set at each heartbeat.",
    ),
    (
        "crawler_supervisor_fenced_total",
        Kind::Counter,
        "URLs this node's children handed back unfetched because its right to crawl had run out.",
    ),
    (
        "crawler_child_restarts_total",
        Kind::Counter,
        "Crawler children restarted after they crashed or stopped answering.",
    ),
    (
        "crawler_dispatcher_reconnects_total",
        Kind::Counter,
        "Times this supervisor re-opened its link to the dispatcher after losing it.",
    ),
    // Crawler children.
    (
        "crawler_child_pending",
        Kind::Gauge,
        "URLs this child received and has not handed on.",
    ),
    (
        "crawler_fetches_active",
        Kind::Gauge,
        "HTTP requests this child has in progress.",
    ),
    (
        "crawler_store_queue",
        Kind::Gauge,
        "Pages waiting in this child's page writer for their batch write.",
    ),
    (
        "crawler_pages_total",
        Kind::Counter,
        "HTTP responses to page requests (each redirect hop counts), by status class.",
    ),
    (
        "crawler_fetched_bytes_total",
        Kind::Counter,
        "Body bytes read in HTTP responses to page requests, after decompression.",
    ),
    (
        "crawler_fetch_failures_total",
        Kind::Counter,
        "URLs that ended without a page, by kind of failure (timeout, robots unavailable, throttled, ...).",
    ),
    (
        "crawler_blocked_requests_total",
        Kind::Counter,
        "Requests refused because their host is or resolves only to an internal address (loopback, private, link-local, ...) and --allow-private-networks is off, by how the address was found (ip_literal, dns).",
    ),
    (
        "crawler_throttled_total",
        Kind::Counter,
        "429 and 503 responses after which the domain waits (Retry-After or backoff), by status class.",
    ),
    (
        "crawler_disallowed_total",
        Kind::Counter,
        "URLs not fetched because robots.txt disallows them.",
    ),
    (
        "crawler_skipped_total",
        Kind::Counter,
        "Fetched pages recorded but not parsed, by reason (content_type: not HTML).",
    ),
    (
        "crawler_links_refused_total",
        Kind::Counter,
        "New links the dispatcher did not admit, by reason: out_of_scope, denied_by_rule and not_allowed_by_rule (the operator's --deny/--allow rules), too_many_segments and repeated_segments (path traps), over_domain_budget and over_query_budget (stored as deferred, for a later run with a larger budget).",
    ),
    (
        "crawler_links_dropped_total",
        Kind::Counter,
        "Links found on pages and not followed, by reason (a URL rule, or over the per-page cap).",
    ),
    (
        "crawler_robots_fetches_total",
        Kind::Counter,
        "robots.txt fetches, by outcome (ok: 2xx, absent: 4xx, unavailable: 5xx or unreachable).",
    ),
    (
        "crawler_pages_stored_total",
        Kind::Counter,
        "Pages written to the store.",
    ),
    (
        "crawler_store_rejected_total",
        Kind::Counter,
        "Pages the store refused to write (reported as failed with store_rejected).",
    ),
    // All processes.
    (
        "crawler_store_commands_total",
        Kind::Counter,
        "Commands sent to the store (each one round trip), by collection kind (pages, frontier, seeds, body_dicts, robots, domains, other, none) and command (insert, update, delete, find, getMore, aggregate, count, other); counted by the driver's command monitoring.",
    ),
    (
        "crawler_store_documents_total",
        Kind::Counter,
        "Documents the store's commands touched, by collection kind and command: inserted, matched by an update (upserts too) or deleted, as the reply says, and returned by find, getMore and aggregate.",
    ),
    (
        "crawler_store_errors_total",
        Kind::Counter,
        "Store operations that failed and were retried after a backoff.",
    ),
];

/// Describes every family, so `/metrics` has a `# HELP` line for each. Call once at start-up,
/// after the Prometheus recorder is installed (descriptions given to no recorder are lost).
pub fn describe_all() {
    for (name, kind, help) in families() {
        match kind {
            Kind::Counter => describe_counter!(name, help),
            Kind::Gauge => describe_gauge!(name, help),
            Kind::Histogram => describe_histogram!(name, help),
        }
    }
}

/// [`FAMILIES`], the histogram of each [`Op`] and [`BATCH_METRIC`].
fn families() -> impl Iterator<Item = (&'static str, Kind, &'static str)> {
    let ops = Op::ALL.map(|op| (op.metric(), Kind::Histogram, op.help()));
    let batch = (
        BATCH_METRIC,
        Kind::Histogram,
        "Items per batch operation, by op (pages per store write, URLs per lease batch, ...).",
    );
    FAMILIES.iter().copied().chain(ops).chain([batch])
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::collections::{BTreeMap, BTreeSet};
    use std::path::{Path, PathBuf};

    /// Metric names the sources build at run time; [`families`] describes what they make.
    const RUN_TIME_NAMES: &[&str] = &["op.metric()", "BATCH_METRIC"];

    /// One use of a metric macro in the sources.
    #[derive(Debug)]
    struct Use {
        kind: Kind,
        /// The name when it is a string literal.
        literal: Option<String>,
        /// The first argument as written.
        arg: String,
        place: String,
    }

    fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if name.starts_with('.') || name == "target" {
                continue;
            }
            if path.is_dir() {
                rust_files(&path, out);
            } else if name.ends_with(".rs") {
                out.push(path);
            }
        }
    }

    /// The first macro argument of `args` (the text after the opening parenthesis): up to
    /// the first comma or closing parenthesis outside nested parentheses.
    fn first_arg(args: &str) -> &str {
        let mut depth = 0usize;
        for (i, c) in args.char_indices() {
            match c {
                '(' => depth += 1,
                ')' if depth == 0 => return args[..i].trim(),
                ')' => depth -= 1,
                ',' if depth == 0 => return args[..i].trim(),
                _ => {}
            }
        }
        args.trim()
    }

    /// Every `counter!(`, `gauge!(` and `histogram!(` (bare or as `metrics::...`) in `text`
    /// with its first argument; `describe_*!` does not count.
    fn macro_uses(text: &str, file: &str) -> Vec<Use> {
        let mut uses = Vec::new();
        for (macro_name, kind) in [
            ("counter!(", Kind::Counter),
            ("gauge!(", Kind::Gauge),
            ("histogram!(", Kind::Histogram),
        ] {
            for (at, _) in text.match_indices(macro_name) {
                let before = text[..at].chars().next_back();
                if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                    continue;
                }
                let arg = first_arg(&text[at + macro_name.len()..]).to_string();
                let literal = arg
                    .strip_prefix('"')
                    .and_then(|a| a.strip_suffix('"'))
                    .filter(|a| !a.contains('"'))
                    .map(str::to_string);
                uses.push(Use {
                    kind,
                    literal,
                    arg,
                    place: format!("{file}:{}", text[..at].lines().count()),
                });
            }
        }
        uses
    }

    #[test]
    fn finds_macro_uses() {
        let text = "metrics::counter!(\"a_total\", \"k\" => v).increment(1);\n\
                    gauge!(\n    \"b\").set(1.0);\n\
                    metrics::histogram!(op.metric(), \"outcome\" => o);\n\
                    metrics::histogram!(op.metric()).record(1.0);\n\
                    describe_counter!(\"c_total\", \"help\");\n";
        let uses = macro_uses(text, "f.rs");
        let got: Vec<(Kind, Option<&str>, &str)> = uses
            .iter()
            .map(|u| (u.kind, u.literal.as_deref(), u.arg.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                (Kind::Counter, Some("a_total"), "\"a_total\""),
                (Kind::Gauge, Some("b"), "\"b\""),
                (Kind::Histogram, None, "op.metric()"),
                (Kind::Histogram, None, "op.metric()"),
            ]
        );
    }

    /// Fails when a metric family is added to the sources without a HELP text here.
    #[test]
    fn every_emitted_family_is_described() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .expect("the workspace holds this crate");
        let mut files = Vec::new();
        rust_files(root, &mut files);
        let described: BTreeMap<&str, Kind> = families().map(|(n, k, _)| (n, k)).collect();
        let mut uses = Vec::new();
        // This file names the macros in its tests and emits nothing.
        for file in files.iter().filter(|f| !f.ends_with("shared/src/metric_help.rs")) {
            let text = std::fs::read_to_string(file).unwrap_or_default();
            let shown = file.strip_prefix(root).unwrap_or(file).display().to_string();
            uses.extend(macro_uses(&text, &shown));
        }
        assert!(
            uses.iter()
                .any(|u| u.literal.as_deref() == Some("crawler_pages_total")),
            "the scan found no crawler_pages_total in {} files under {}",
            files.len(),
            root.display()
        );
        for u in &uses {
            let Some(name) = &u.literal else {
                assert!(
                    RUN_TIME_NAMES.contains(&u.arg.as_str()),
                    "{}: a metric named at run time by `{}`: describe what it makes in families() \
                     and add it to RUN_TIME_NAMES",
                    u.place,
                    u.arg
                );
                continue;
            };
            if name.starts_with("test_") {
                continue;
            }
            assert_eq!(
                described.get(name.as_str()),
                Some(&u.kind),
                "{}: the {:?} {name} has no HELP of that kind in shared/src/metric_help.rs",
                u.place,
                u.kind
            );
        }
    }

    #[test]
    fn families_are_unique_and_well_named() {
        let mut seen = BTreeSet::new();
        for (name, kind, help) in families() {
            assert!(seen.insert(name), "{name} twice");
            assert!(
                name.starts_with("crawler_") && name.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'),
                "{name}"
            );
            assert_eq!(
                kind == Kind::Counter,
                name.ends_with("_total"),
                "{name}: counters, and only they, end in _total"
            );
            assert!(
                help.ends_with('.') && !help.contains('\n'),
                "{name}: one sentence: {help}"
            );
        }
        assert_eq!(seen.len(), FAMILIES.len() + Op::ALL.len() + 1);
    }
}
