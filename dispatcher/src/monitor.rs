//! The JSON monitoring summary the dispatcher prints every few seconds (on
//! stderr, one line, prefixed `monitor `): global and per-supervisor rates,
//! errors, paused and halted domains, frontier size. Made for `grep
//! '^monitor ' | cut -c9- | jq`.

use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use serde::Serialize;

use crate::state::Member;
use crate::stats::Stats;

/// At most this many domain names are listed per state (counts are exact).
const MAX_NAMES: usize = 20;

pub(crate) struct Monitor {
    last_at: Instant,
    last_fetched: u64,
    last_errors: u64,
    last_by_sup: HashMap<String, u64>,
}

#[derive(Serialize)]
struct Report<'a> {
    elapsed_secs: f64,
    pages: u64,
    pages_per_sec: f64,
    errors: u64,
    errors_per_sec: f64,
    disallowed: u64,
    frontier_queued: usize,
    in_flight: usize,
    seen_urls: usize,
    supervisors: BTreeMap<&'a str, SupReport>,
    paused_domains: usize,
    halted_domains: usize,
    paused: Vec<&'a str>,
    halted: Vec<&'a str>,
    /// Set by an operator (`crawlctl`): the whole crawl paused, domains
    /// blocked, domains with their own delay.
    crawl_paused: bool,
    blocked_by_operator: usize,
    delays_set: usize,
}

#[derive(Serialize)]
struct SupReport {
    live: bool,
    results_per_sec: f64,
    outstanding: u32,
}

/// What the frontier looks like at the moment of the report.
pub(crate) struct FrontierView<'a> {
    /// Leases held, by supervisor index (the order of `sups`).
    pub held: Vec<u32>,
    pub queued: usize,
    pub in_flight: usize,
    pub seen: usize,
    pub paused: Vec<&'a str>,
    pub halted: Vec<&'a str>,
    /// What an operator set: (crawl paused, domains blocked, delays set).
    pub operator: (bool, usize, usize),
}

impl Monitor {
    pub(crate) fn new() -> Self {
        Monitor {
            last_at: Instant::now(),
            last_fetched: 0,
            last_errors: 0,
            last_by_sup: HashMap::new(),
        }
    }

    pub(crate) fn report<C>(&mut self, stats: &Stats, sups: &[Member<C>], f: FrontierView) -> String {
        let dt = self.last_at.elapsed().as_secs_f64().max(1e-3);
        let errors = stats.errors();
        // A supervisor that reconnected has one entry per connection:
        // reported once, over all of them.
        let mut totals: BTreeMap<&str, (bool, u64, u32)> = BTreeMap::new();
        for (i, s) in sups.iter().enumerate() {
            let t = totals.entry(s.id.as_str()).or_default();
            t.0 |= s.live;
            t.1 = t.1.saturating_add(s.results);
            t.2 = t.2.saturating_add(f.held.get(i).copied().unwrap_or(0));
        }
        let mut per_sup = BTreeMap::new();
        for (id, (live, results, outstanding)) in totals {
            let before = self.last_by_sup.insert(id.to_string(), results).unwrap_or(0);
            per_sup.insert(
                id,
                SupReport {
                    live,
                    results_per_sec: round(results.saturating_sub(before) as f64 / dt),
                    outstanding,
                },
            );
        }
        let r = Report {
            elapsed_secs: round(stats.started.elapsed().as_secs_f64()),
            pages: stats.counts.fetched,
            pages_per_sec: round(stats.counts.fetched.saturating_sub(self.last_fetched) as f64 / dt),
            errors,
            errors_per_sec: round(errors.saturating_sub(self.last_errors) as f64 / dt),
            disallowed: stats.counts.disallowed,
            frontier_queued: f.queued,
            in_flight: f.in_flight,
            seen_urls: f.seen,
            supervisors: per_sup,
            paused_domains: f.paused.len(),
            halted_domains: f.halted.len(),
            paused: f.paused.into_iter().take(MAX_NAMES).collect(),
            halted: f.halted.into_iter().take(MAX_NAMES).collect(),
            crawl_paused: f.operator.0,
            blocked_by_operator: f.operator.1,
            delays_set: f.operator.2,
        };
        self.last_at = Instant::now();
        self.last_fetched = stats.counts.fetched;
        self.last_errors = errors;
        serde_json::to_string(&r).unwrap_or_default()
    }
}

fn round(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}
