#!/usr/bin/env bash
# Runs kova's loom models (see loom-tests/src/lib.rs) with a stated budget.
#
# - `--cfg kova_loom` switches the core's `sync` module (and the keyed table's lock) to loom's
#   types; loom itself is only a dependency under that cfg, so normal builds never see it.
# - `--release` with `-C debug-assertions`: loom explores tens of thousands of executions, which
#   an unoptimised build makes several times slower; debug assertions keep overflow checks and
#   the code's `debug_assert!`s on.
# - LOOM_MAX_PREEMPTIONS bounds how many times an execution may switch away from a runnable
#   thread. 3 covers every interleaving of the 2-3 short threads in the CAS-loop, table and
#   should-fail models; the sliding log's models touch many more atomics per call (head,
#   floor, a seqlock read per slot), so they run at 2.
#
# Budget, measured on the 2-core dev machine (release build already cached; a cold build of the
# crate and loom adds about 1.5 minutes):
#   word_cas (16 models, bound 3)          ~45 s
#   refund (9 models, bound 3)             <1 s
#   keyed (5 models, bound 3)              ~1 s
#   racy (9 should-fail models, bound 3)   ~1 s
#   sliding_log (5 models, bound 2)        ~40-75 s
#   total                                   ~2-2.5 minutes.
#
# Usage: loom-tests/run.sh [extra cargo test args], from anywhere.
set -euo pipefail

cd "$(dirname "$0")/.."
export RUSTFLAGS="--cfg kova_loom -C debug-assertions ${RUSTFLAGS:-}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target-loom}"
export RUST_BACKTRACE="${RUST_BACKTRACE:-0}"
# The should-fail models panic by design; loom's per-model summary goes to stderr.
cargo_test() {
    cargo test --release -p kova-loom-tests "$@"
}

start=$SECONDS
LOOM_MAX_PREEMPTIONS="${LOOM_MAX_PREEMPTIONS:-3}" cargo_test --test word_cas --test refund --test keyed --test racy "$@"
LOOM_MAX_PREEMPTIONS="${LOOM_MAX_PREEMPTIONS_LOG:-2}" cargo_test --test sliding_log "$@"
echo "loom-tests: all models passed in $((SECONDS - start)) s"
