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
# Six tests at a time in each test binary (unless the caller says
# otherwise): the end-to-end tests spend most of their time waiting on
# politeness gaps, timeouts and restarts, not computing. On two cores the
# e2e binary took 561 s at two at a time (the machine 38 % busy), 306 s at
# four (13-51 % busy), 232 s at six and 214 s at eight, every test passing.
export RUST_TEST_THREADS="${RUST_TEST_THREADS:-6}"
work=$(mktemp -d)
e2e=
cleanup() {
    # The e2e tests' own session: its stores and crawlers go with it.
    [ -z "$e2e" ] || kill -TERM -- "-$e2e" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
installed=
tools() {
    [ -z "$installed" ] || return "$installed"
    installed=0
    wait "$installer" || installed=$?
    cat "$installs"
    rm -f "$installs"
    if [ "$installed" != 0 ]; then
        echo "test.sh: installing the tests' tools failed (above)" >&2
    fi
    return "$installed"
}

# `cargo test --release --workspace` with the hooks and ARGS..., its output
# also kept in LOG for the closing line; a failure is kept in `status`.
status=0
cargo_test() {
    local log=$1
    shift
    cargo test --release --workspace "${features[@]}" "$@" 2>&1 | tee "$work/$log.log" || status=$?
}
# oprates.py's unit tests.
oprates_tests() {
    PYTHONDONTWRITEBYTECODE=1 python3 -m unittest discover -s scripts/oprates/tests -t scripts
}

# One closing line over all test binaries (cargo prints one per binary).
summary() {
    cat "$work"/*.log | awk '/^test result:/ { p += $4; f += $6 } END { printf "tests: %d passed, %d failed\n", p, f }'
}

# A run with arguments (a test-name filter) is the build, then one
# `cargo test` with them.
if [ "$#" != 0 ]; then
    cargo build --release --workspace --bins --tests "${features[@]}"
    tools
    oprates_tests
    cargo_test all "$@"
    summary
    exit $status
fi

# The whole run. The e2e tests start as soon as they and the binaries
# they run are built, and the rest of the build (each crate's unit-test
# harness, the crate compiled a second time with its tests: about two
# minutes of both cores) runs beside them: they leave a third of the
# machine idle, waiting on politeness gaps, timeouts and restarts. That
# build runs niced, so it takes what the tests leave and their crawls keep
# the pace they have alone. (In one cargo run, cargo links the binaries
# last, with the unit-test harnesses, and the e2e tests could start only
# about 100 s before its end.)
cargo build --release --workspace --bins --test e2e "${features[@]}"
tools || exit
echo "     Running tests/e2e.rs beside the rest of the build; its output follows when it ends"
# In a session of its own (setsid), so that an early exit can end its
# processes with it.
(exec setsid -w cargo test --release --workspace "${features[@]}" --test e2e) >"$work/e2e.log" 2>&1 &
e2e=$!
# Cargo holds the build directory's lock until it starts the test binary:
# the second build would take it first, and the e2e tests wait for its end.
while kill -0 "$e2e" 2>/dev/null && ! grep -q '^ *Running ' "$work/e2e.log"; do sleep 0.2; done
nice -n 10 cargo build --release --workspace --bins --tests "${features[@]}"
oprates_tests
# Every other test binary beside the e2e tests; then the tests that judge a
# crawl's timing (bottleneck_e2e, timing_trend), which keep the machine to
# themselves (tests/tests/e2e.rs says why). The flags select targets within
# the whole workspace (scripts/test_targets.py says why).
# shellcheck disable=SC2046 # one word per flag
cargo_test units $(python3 scripts/test_targets.py beside crawl-tests)
cargo_test doc --doc
e2e_status=0
wait "$e2e" || e2e_status=$?
e2e=
cat "$work/e2e.log"
[ "$e2e_status" = 0 ] || { echo "test.sh: the e2e tests failed (exit $e2e_status)" >&2; status=$e2e_status; }
# shellcheck disable=SC2046 # one word per flag
cargo_test timing $(python3 scripts/test_targets.py after crawl-tests e2e)
summary
exit $status
