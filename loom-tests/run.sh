#!/usr/bin/env bash
# Runs kova's loom models (see loom-tests/src/lib.rs) with a stated budget.
#
# - `--cfg kova_loom` switches the core's `loom` module (atomics, the keyed table's lock, line
#   keys, thread-locals) to loom's types; loom itself is only a dependency under that cfg, so normal
#   builds never see it. The keyed table's grace periods (`keyed/epoch.rs`: pins, stamps, epoch
#   advances), and the reuse of lines and arrays after them, are model-checked with it.
# - `--release` with `-C debug-assertions`: loom explores tens of thousands of executions, which
#   an unoptimised build makes several times slower; debug assertions keep overflow checks and
#   the code's `debug_assert!`s on.
# - LOOM_MAX_PREEMPTIONS bounds how many times an execution may switch away from a runnable
#   thread. 3 covers every interleaving of the 2-3 short threads in the CAS-loop, striped and
#   should-fail models; the table models run at 4 (their largest, array growth racing a check,
#   takes about 90,000 executions there); the sliding log's models touch many more atomics per call (head,
#   floor, a seqlock read per entry), so they run at 2. The table models run one of their lanes
#   on loom's main thread (one model thread fewer to schedule).
#
# Budget, measured on the 2-core dev machine (release build already cached; a cold build of the
# crate and loom adds about 1.5 minutes), with the test harness's 2 threads per file:
#   word_cas (16 models, bound 3)                                  ~40 s
#   refund (9 models, bound 3)                                     <1 s
#   racy (23 should-fail models, bound 3; 14 in child processes)   ~4 s
#   limits (5 composite models, one should-fail, bound 3)          <1 s
#   reservation (cancel racing a check, and its should-fail twin)  <1 s
#   reset_reservation (a reset racing a reservation, should-fail)  <1 s
#   striped (9 take/give-back models, 2 should-fail, bound 3)     ~2 s
#   sketch (4 models, 2 should-fail, bound 3)                     ~4 s
#   keyed (19 models, bound 4)                                     ~30 s
#     (the word algorithms' models run on inline cells, and the main ones again on boxed cells)
#   door (5 models, one over 4 key pairs; a canary of loom#254)   ~3 s
#   hot (a striped key's check racing its demotion, bound 4)       <1 s
#   sketch_policy (a table-full sketch check racing the key's insert, bound 4)
#     (its should-fail twin, a demotion that leaves the slot open, is in racy)
#   sliding_log (5 models, bound 2)                                ~45-75 s
#   total                                                           ~2-2.5 minutes.
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
LOOM_MAX_PREEMPTIONS="${LOOM_MAX_PREEMPTIONS:-3}" cargo_test --test word_cas --test refund --test racy --test limits --test reservation --test reset_reservation --test striped --test sketch "$@"
LOOM_MAX_PREEMPTIONS="${LOOM_MAX_PREEMPTIONS_TABLE:-4}" cargo_test --test keyed --test door --test hot --test sketch_policy "$@"
LOOM_MAX_PREEMPTIONS="${LOOM_MAX_PREEMPTIONS_LOG:-2}" cargo_test --test sliding_log "$@"
echo "loom-tests: all models passed in $((SECONDS - start)) s"
