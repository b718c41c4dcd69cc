#!/usr/bin/env bash
# Builds the release binaries and runs the dispatcher benchmark (see
# scripts/bench_dispatcher.py): the dispatcher alone, fed by many fake
# supervisors over real ZeroMQ sockets, with a real store.
#   scripts/bench-dispatcher.sh --urls N [--supervisors M] [--dispatcher-arg=--frontier-memory-urls=K]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/store.sh install
cargo build --release --workspace --bins
exec python3 scripts/bench_dispatcher.py "$@"
