//! The metric families of the cluster link, on both its ends.

use shared::metric::{Counter, Described};

pub const CLUSTER_REFUSALS: Counter<1> = Counter::new(
    "crawler_cluster_refusals_total",
    "What the dispatcher refused on its cluster link, by reason: messages from peers that have not proven the cluster secret (unauthenticated, bad_proof, no_challenge, malformed_join, oversized, undecodable, version), messages of an admitted connection whose seal does not hold (bad_seal, replayed, unsealed), results for leases it did not issue to the sender or about another URL than the lease's (unknown_lease, foreign_lease, lease_url_mismatch), held URLs it would not adopt (unadoptable_lease) and challenges dropped by a flood of Hellos (challenge_evicted).",
    ["reason"],
);

pub const DISPATCHER_RECONNECTS: Counter = Counter::new(
    "crawler_dispatcher_reconnects_total",
    "Times this supervisor re-opened its link to the dispatcher after losing it.",
    [],
);

pub const ZMQ_MESSAGES_RECEIVED: Counter = Counter::new(
    "crawler_zmq_messages_received_total",
    "Messages received over the dispatcher-supervisor link, counted by the receiver.",
    [],
);

pub const ZMQ_MESSAGES_SENT: Counter = Counter::new(
    "crawler_zmq_messages_sent_total",
    "Messages sent over the dispatcher-supervisor link, counted by the sender.",
    [],
);

/// Every family this crate emits, for `/metrics`' HELP lines.
pub static FAMILIES: &[&dyn Described] = &[
    &CLUSTER_REFUSALS,
    &DISPATCHER_RECONNECTS,
    &ZMQ_MESSAGES_RECEIVED,
    &ZMQ_MESSAGES_SENT,
];

#[cfg(test)]
mod tests {
    #[test]
    fn families_are_fit_for_metrics() {
        shared::metric::check(super::FAMILIES).unwrap();
    }
}
