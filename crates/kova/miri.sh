#!/usr/bin/env bash
# Runs Miri over the core's unsafe and lock-free paths: the keyed table (its lines, boxed cells
# kept as pointers with their provenance, epoch and reclamation), the doorkeeper, the hot keys,
# the striped limiter's stripes, the composite limits and the reservations.
#
#   crates/kova/miri.sh          the CI set (.ci/run): the unit tests of keyed:: and striped::,
#                                and the integration tests keyed_door, limits, reservation and
#                                keyed_reservation, their proptests at PROPTEST_CASES cases (4)
#   crates/kova/miri.sh --full   also the keyed table's behaviour tests, settling and refunds,
#                                proptests at 32 cases (the striped limiter's and hot keys' own
#                                tests hammer the real clock, which Miri cannot run)
#
# Miri's checks are its defaults (isolation on, strict provenance warnings, Stacked Borrows,
# the data race detector). The only flags forward the two proptest variables into the isolated
# program: its case count, and no failure-persistence file (isolation forbids `getcwd`). The
# unit tests scale themselves down under `cfg(miri)`; tests that build on the default clock
# (quanta runs `cpuid`, which Miri cannot) are ignored under it.
#
# Installs Miri on the nightly toolchain when missing.
set -euo pipefail
cd "$(dirname "$0")/../.."

if ! cargo +nightly miri --version >/dev/null 2>&1; then
    rustup component add miri rust-src --toolchain nightly
fi
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target-miri}"
export MIRIFLAGS="${MIRIFLAGS:-} -Zmiri-env-forward=PROPTEST_CASES -Zmiri-env-forward=PROPTEST_DISABLE_FAILURE_PERSISTENCE"
export PROPTEST_DISABLE_FAILURE_PERSISTENCE=1
tests=(--test keyed_door --test limits --test reservation --test keyed_reservation)
if [ "${1:-}" = "--full" ]; then
    export PROPTEST_CASES="${PROPTEST_CASES:-32}"
    tests+=(--test keyed_table --test settle --test refund)
else
    export PROPTEST_CASES="${PROPTEST_CASES:-4}"
fi

start=$SECONDS
cargo +nightly miri test -p kova --lib -- keyed:: striped::
echo "miri.sh: unit tests clean at $((SECONDS - start)) s"
cargo +nightly miri test -p kova "${tests[@]}"
echo "miri.sh: clean in $((SECONDS - start)) s"
