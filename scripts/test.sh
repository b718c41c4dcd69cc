#!/usr/bin/env bash
# Runs every test: unit tests and the end-to-end crawls that start real
# store servers, dispatchers, supervisors and children.
# This is the command the README gives and .ci/run calls.
set -euo pipefail
cd "$(dirname "$0")/.."
# The tools the tests drive install while cargo compiles: they wait on the
# package registries more than on the CPU (about 30 s of CI, one after the
# other after the build).
installs=$(mktemp)
(scripts/store.sh install && scripts/ansible.sh install &&
    scripts/warcio.sh install && scripts/pywb.sh install) >"$installs" 2>&1 &
installer=$!
# One release build of the binaries and the tests together, so cargo
# compiles the tests of one crate while it links another's binaries: the
# end-to-end tests run these binaries, with the crawler child's test hooks
# (crawler-child/src/fault.rs) compiled in. The tests run with the same
# features, or cargo would rebuild the binaries without the hooks.
features=(--features crawl-tests/fault-injection)
build=0
cargo build --release --workspace --bins --tests "${features[@]}" || build=$?
installed=0
wait "$installer" || installed=$?
cat "$installs"
rm -f "$installs"
if [ "$installed" != 0 ]; then
    echo "test.sh: installing the tests' tools failed (above)" >&2
    exit "$installed"
fi
[ "$build" = 0 ] || exit "$build"
PYTHONDONTWRITEBYTECODE=1 python3 -m unittest discover -s scripts/oprates/tests -t scripts  # oprates.py's unit tests
# Six tests at a time in each test binary (unless the caller says
# otherwise): the end-to-end tests spend most of their time waiting on
# politeness gaps, timeouts and restarts, not computing. On two cores the
# e2e binary took 561 s at two at a time (the machine 38 % busy), 306 s at
# four (13-51 % busy), 232 s at six and 214 s at eight, every test passing.
# Tests that judge a crawl's timing keep the machine to themselves in
# binaries of their own (tests/tests/e2e.rs says which).
export RUST_TEST_THREADS="${RUST_TEST_THREADS:-6}"
log=$(mktemp)
status=0
cargo test --release --workspace "${features[@]}" "$@" 2>&1 | tee "$log" || status=$?
# One closing line over all test binaries (cargo prints one per binary).
awk '/^test result:/ { p += $4; f += $6 } END { printf "tests: %d passed, %d failed\n", p, f }' "$log"
rm -f "$log"
exit $status
