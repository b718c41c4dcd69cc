//! The end-to-end tests, as one test binary: each file beside this one is a
//! module of it. As twelve binaries, each compiled and optimised its own copy
//! of the same async runtime, driver and harness code (406 CPU-seconds
//! together in the release build); one binary compiles that once. The tests
//! run six at a time (`scripts/test.sh` sets `RUST_TEST_THREADS`): most of
//! their time is spent waiting on politeness gaps and timeouts.
//!
//! Two files stay binaries of their own, because they judge the timing of a
//! crawl and must not share the machine with another test's crawl:
//! `bottleneck_e2e.rs` and `timing_trend.rs`.
//!
//! One file's tests: `cargo test --release --workspace --features crawl-tests/fault-injection --test e2e fault_e2e::`.

mod ansible_e2e;
mod breaker_e2e;
mod child_in_process;
mod cluster_auth_e2e;
mod cluster_in_process;
mod cluster_profile;
mod control_e2e;
mod crawl_e2e;
mod dashboard_e2e;
mod dispatcher_load_e2e;
mod dns_e2e;
mod domain_connections_e2e;
mod export_e2e;
mod extract_scan;
mod fault_e2e;
mod forget_e2e;
mod hostile_e2e;
mod hostile_peers_e2e;
mod netns_e2e;
mod partition_e2e;
mod politeness_gap_e2e;
mod replay_e2e;
mod revisit_e2e;
mod robots_meta_e2e;
mod server_politeness_e2e;
mod sitemaps_e2e;
mod steer_under_load_e2e;
mod store_point_reads;
mod tls_e2e;
mod traps_e2e;
