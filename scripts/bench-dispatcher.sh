#!/usr/bin/env bash
# The dispatcher alone, fed by many fake supervisors over real ZeroMQ
# sockets, with a real store: builds the three binaries it needs, then runs
# scripts/bench_dispatcher.py (which starts and, on any exit, stops the
# store, the dispatcher and the load generator).
#   scripts/bench-dispatcher.sh --urls N | --stored-urls N [--supervisors M] [--domains D] [--links K]
#                               [--dispatcher-arg=--frontier-memory-urls=U] [--keep]
# Honours CARGO_TARGET_DIR (or CRAWLER_BIN_DIR for binaries built elsewhere).
# On a shared machine: nice -n 19 scripts/bench-dispatcher.sh --urls 100000
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/store.sh install
cargo build --release -p dispatcher -p crawl-tests --bin dispatcher --bin dispatcher_load --bin frontier_fill
target="${CARGO_TARGET_DIR:-target}"
export CRAWLER_BIN_DIR="${CRAWLER_BIN_DIR:-$(cd "$target" && pwd)/release}"
exec python3 scripts/bench_dispatcher.py "$@"
