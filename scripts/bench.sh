#!/usr/bin/env bash
# Builds the release binaries and runs the crawl benchmark (see scripts/bench.py):
# the realistic synthetic web by default, `--profile small` for the old small-page one.
#   scripts/bench.sh [--profile realistic|small] [--hosts N] [--pages-per-host N] [--keep]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/store.sh install
cargo build --release --workspace --bins
exec python3 scripts/bench.py "$@"
