#!/usr/bin/env bash
# Builds the release binaries and runs the crawl benchmark (see scripts/bench.py).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/store.sh install
cargo build --release --workspace --bins
exec python3 scripts/bench.py "$@"
