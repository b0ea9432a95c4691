#!/usr/bin/env bash
# Runs Miri (default flags) over the core's unsafe paths: the keyed table (its lines, boxed
# cells, epoch and reclamation), the doorkeeper, the hot keys, the striped limiter's stripes and
# the composite limits, as the library's own unit tests.
#
#   crates/kova/miri.sh            the unit tests of those modules
#   crates/kova/miri.sh --full     also the keyed integration test the README names
#
# Installs Miri on the nightly toolchain when missing. The unit tests scale themselves down
# under `cfg(miri)`.
set -euo pipefail
cd "$(dirname "$0")/../.."

if ! cargo +nightly miri --version >/dev/null 2>&1; then
    rustup component add miri rust-src --toolchain nightly
fi
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target-miri}"

start=$SECONDS
# No test of these modules builds on the CoarseClock, whose quanta source Miri cannot run.
cargo +nightly miri test -p kova --lib -- keyed:: limits:: striped::
if [ "${1:-}" = "--full" ]; then
    cargo +nightly miri test -p kova --test keyed_table
fi
echo "miri.sh: clean in $((SECONDS - start)) s"
