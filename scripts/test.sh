#!/usr/bin/env bash
# Runs every test: unit tests and the end-to-end crawls that start real
# store servers, dispatchers, supervisors and children.
# This is the command the README gives and .ci/run calls.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/store.sh install
# One release build: the end-to-end tests run these binaries.
cargo build --release --workspace --bins
cargo test --release --workspace "$@"
