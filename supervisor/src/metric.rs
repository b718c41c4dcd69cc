//! The metric families a supervisor emits.

use shared::metric::{Counter, Described, Gauge};

pub(crate) const CHILD_RESTARTS: Counter = Counter::new(
    "crawler_child_restarts_total",
    "Crawler children restarted after they crashed or stopped answering.",
    [],
);

pub(crate) const SUPERVISOR_FENCED: Counter = Counter::new(
    "crawler_supervisor_fenced_total",
    "URLs this node's children handed back unfetched because its right to crawl had run out.",
    [],
);

pub(crate) const SUPERVISOR_IN_FLIGHT: Gauge = Gauge::new(
    "crawler_supervisor_in_flight",
    "URLs this supervisor has handed to its children and not yet had results for, set once a second.",
    [],
);

pub(crate) const SUPERVISOR_RESULTS_ACKED: Counter = Counter::new(
    "crawler_supervisor_results_acked_total",
    "Results the dispatcher acknowledged (until then the supervisor keeps them and sends them again on its next connection).",
    [],
);

pub(crate) const SUPERVISOR_RESULTS: Counter = Counter::new(
    "crawler_supervisor_results_total",
    "Crawl results this supervisor sent to the dispatcher (the dispatcher counts what it received in crawler_dispatcher_results_received_total).",
    [],
);

pub(crate) const SUPERVISOR_RESULTS_UNACKED: Gauge = Gauge::new(
    "crawler_supervisor_results_unacked",
    "Results sent on the current connection and not yet acknowledged by the dispatcher, set at each heartbeat.",
    [],
);

pub(crate) const SUPERVISOR_RESULTS_WAITING: Gauge = Gauge::new(
    "crawler_supervisor_results_waiting",
    "Results not yet sent on the current connection (the link is down, or the window of unacknowledged messages is full), set at each heartbeat.",
    [],
);

pub(crate) const SUPERVISOR_RIGHT_SECONDS: Gauge = Gauge::new(
    "crawler_supervisor_right_seconds",
    "Seconds this node's right to crawl still runs (renewed by the dispatcher's acknowledgements; 0 = lapsed, no request starts), set at each heartbeat.",
    [],
);

/// Describes every family a supervisor emits, its own and its end of
/// the link's, so `/metrics` has a HELP line for each.
pub(crate) fn describe() {
    for families in [FAMILIES, link::metric::FAMILIES] {
        shared::metric::describe(families);
    }
    shared::timing::describe();
}

/// Every family this crate emits, for `/metrics`' HELP lines.
pub(crate) static FAMILIES: &[&dyn Described] = &[
    &CHILD_RESTARTS,
    &SUPERVISOR_FENCED,
    &SUPERVISOR_IN_FLIGHT,
    &SUPERVISOR_RESULTS_ACKED,
    &SUPERVISOR_RESULTS,
    &SUPERVISOR_RESULTS_UNACKED,
    &SUPERVISOR_RESULTS_WAITING,
    &SUPERVISOR_RIGHT_SECONDS,
];

#[cfg(test)]
mod tests {
    #[test]
    fn families_are_fit_for_metrics() {
        shared::metric::check(super::FAMILIES).unwrap();
    }
}
