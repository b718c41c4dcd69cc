#!/usr/bin/env bash
# Lints every crate of the workspace with clippy while the release build
# compiles it: CI's lint, without checking every dependency a second time.
#
#     RUSTC_WORKSPACE_WRAPPER="$PWD"/scripts/clippy-rustc.sh scripts/test.sh
#
# Why: `cargo clippy` checks each of the ~470 dependencies again in check
# mode before it lints ours (about 130 of CI's 1,100 s, on two cores), work
# the release build does anyway. Cargo hands every compile of a workspace
# crate to this wrapper (`RUSTC_WORKSPACE_WRAPPER`); the wrapper runs the
# compiler as cargo asked, and beside it clippy's driver on the same
# arguments with only metadata emitted, into a directory of its own, so the
# binaries the tests run are the ones `cargo build --release` makes.
# (Clippy's driver as the compiler itself would build with MIR optimisations
# off.) The lints are `cargo clippy -- -D warnings`'s, with the repository's
# clippy.toml; a lint fails the build as a compile error does.
#
# Test harnesses (not the binaries) compile at opt-level 1 (see below).
#
# A crate compiled with the test hooks (`--features
# crawl-tests/fault-injection`, which `scripts/test.sh` turns on) whose code
# names them is linted a second time without them, as it ships.
set -uo pipefail

rustc=$1
shift
# Cargo also asks the compiler for its version and targets through the
# wrapper: only compiles (which emit something) are linted.
emits=0
for a in "$@"; do
    case $a in --emit=*) emits=1 ;; esac
done
if [ "$emits" = 0 ]; then
    exec "$rustc" "$@"
fi

driver="$(dirname "$rustc")/clippy-driver"
[ -x "$driver" ] || driver=clippy-driver
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The arguments for a lint ($3...: the compiler's) in `args`: metadata only,
# into the directory $1, without the fault-injection feature when $2 is
# "shipped".
lint_args() {
    local out=$1 variant=$2 skip=0 prev=
    args=()
    for a in "${@:3}"; do
        if [ "$skip" = 1 ]; then skip=0; continue; fi
        case $a in
            --emit=*) args+=(--emit=metadata) ;;
            --out-dir) args+=(--out-dir "$out"); skip=1 ;;
            'feature="fault-injection"')
                if [ "$variant" = shipped ] && [ "$prev" = --cfg ]; then
                    unset 'args[${#args[@]}-1]'
                else
                    args+=("$a")
                fi ;;
            *) args+=("$a") ;;
        esac
        prev=$a
    done
}

# Clippy's diagnostics only: its artifact notices would tell cargo of a
# second metadata file, and the compiler's own run reports the rest.
lint() {
    local name=$1
    shift
    mkdir -p "$work/$name"
    lint_args "$work/$name" "$name" "$@"
    CLIPPY_ARGS="-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__" \
        "$driver" "$rustc" "${args[@]}" >"$work/$name.out" 2>"$work/$name.err"
    local status=$?
    grep -v -e '^{"$message_type":"artifact"' -e '^{"$message_type":"future_incompat"' \
        "$work/$name.err" >"$work/$name.diag"
    return $status
}

lint as-built "$@" &
linting=$!
# Only a crate whose code names the feature compiles differently without it
# (crawler-child); for the others (crawl-tests only passes it on) a second
# lint would repeat the first.
shipped=
case " $* " in *' feature="fault-injection" '*)
    if grep -rqsF --include='*.rs' 'feature = "fault-injection"' "${CARGO_MANIFEST_DIR:-.}"; then
        lint shipped "$@" &
        shipped=$!
    fi ;;
esac

# A test harness (`--test`: a crate's unit tests, an integration test) is
# compiled at opt-level 1: about a sixth less time for those compiles (CI's
# build is CPU-bound on two cores, and a second copy of each crate with its
# tests is a third of it). Everything the tests link as a dependency and
# every binary they run stays exactly as `cargo build --release` makes it;
# a unit test checks what its crate computes, which the optimisation level
# must not change.
case " $* " in *' --test '*)
    harness=()
    for a in "$@"; do
        case $a in opt-level=3) harness+=(opt-level=1) ;; *) harness+=("$a") ;; esac
    done
    set -- "${harness[@]}" ;;
esac
"$rustc" "$@"
built=$?
wait "$linting"
linted=$?
if [ -n "$shipped" ]; then
    wait "$shipped"
    shipped_status=$?
else
    shipped_status=0
fi
if [ "$built" != 0 ]; then
    exit "$built"
fi
cat "$work/as-built.diag" >&2
[ -z "$shipped" ] || cat "$work/shipped.diag" >&2
[ "$linted" = 0 ] || exit "$linted"
exit "$shipped_status"
