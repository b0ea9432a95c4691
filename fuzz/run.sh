#!/usr/bin/env bash
# Runs every kova fuzz target for a while; exits non-zero on the first finding.
#
#   fuzz/run.sh            each target 30 s (FUZZ_SECONDS overrides), all targets
#   fuzz/run.sh packing    only the targets named
#
# Needs the nightly toolchain (installed when missing, minimal profile) and cargo-fuzz
# (installed when missing). Builds with debug assertions (`-a`), so an arithmetic overflow is a
# finding. Each target starts from its committed seeds (fuzz/corpus/<target>/seed-*) plus
# whatever earlier local runs left there (ignored by git). A finding leaves the input in
# fuzz/artifacts/<target>/; reproduce it with
#   cargo +nightly fuzz run -a <target> fuzz/artifacts/<target>/<file>
#
# Time on the 2-core dev machine: ~2 minutes to build the targets cold (seconds when cached),
# then FUZZ_SECONDS per target: about 4 minutes of fuzzing for the seven targets at 30 s.
set -euo pipefail

cd "$(dirname "$0")"
seconds="${FUZZ_SECONDS:-30}"
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    targets=(differential configuration packing keyed_table client_ip sketch whole_api)
fi

if ! rustup toolchain list | grep -q '^nightly'; then
    rustup toolchain install nightly --profile minimal
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
    cargo +nightly install cargo-fuzz --locked
fi

start=$SECONDS
cargo +nightly fuzz build -a
for target in "${targets[@]}"; do
    echo "=== fuzz $target for ${seconds} s"
    mkdir -p "corpus/$target"
    # -rss_limit_mb: the targets allocate little; a runaway allocation is a finding too.
    # libFuzzer's progress lines (#N ...) are dropped; pipefail keeps cargo-fuzz's exit status.
    cargo +nightly fuzz run -a "$target" -- -max_total_time="$seconds" -rss_limit_mb=2048 -print_final_stats=1 \
        2>&1 | { grep -v '^#[0-9]' || true; } || {
        echo "fuzz/run.sh: $target FOUND A FAILURE (input saved under fuzz/artifacts/$target/)" >&2
        exit 1
    }
done
echo "fuzz/run.sh: ${targets[*]} clean, ${seconds} s each, $((SECONDS - start)) s in all"
