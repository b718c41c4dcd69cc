//! The metric families of the store's clients.

use shared::metric::{Counter, Described};

pub const STORE_COMMANDS: Counter<2> = Counter::new(
    "crawler_store_commands_total",
    "Commands sent to the store (each one round trip), by collection kind (pages, frontier, seeds, body_dicts, robots, domains, other, none) and command (insert, update, delete, find, getMore, aggregate, count, other); counted by the driver's command monitoring.",
    ["collection", "command"],
);

pub const STORE_DOCUMENTS: Counter<2> = Counter::new(
    "crawler_store_documents_total",
    "Documents the store's commands touched, by collection kind and command: inserted, matched by an update (upserts too) or deleted, as the reply says, and returned by find, getMore and aggregate.",
    ["collection", "command"],
);

pub const STORE_ERRORS: Counter = Counter::new(
    "crawler_store_errors_total",
    "Store operations that failed and were retried after a backoff.",
    [],
);

/// Every family this crate emits, for `/metrics`' HELP lines.
pub static FAMILIES: &[&dyn Described] = &[&STORE_COMMANDS, &STORE_DOCUMENTS, &STORE_ERRORS];

#[cfg(test)]
mod tests {
    #[test]
    fn families_are_fit_for_metrics() {
        shared::metric::check(super::FAMILIES).unwrap();
    }
}
