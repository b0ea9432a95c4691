#!/usr/bin/env bash
# kova-rls in CI: the built binary on the example config, one real gRPC round trip (OK x3 then
# OVER_LIMIT, examples/check.rs), /healthz, the decisions on /metrics, then SIGTERM and a clean exit.
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo build -q -p kova-rls --bin kova-rls --example check
log=/tmp/kova-rls-ci.log
target/debug/kova-rls --config crates/kova-rls/examples/config.yaml \
  --grpc-addr 127.0.0.1:0 --http-addr 127.0.0.1:0 >"$log.out" 2>"$log" &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
for _ in $(seq 100); do grep -q '^kova-rls listening' "$log.out" 2>/dev/null && break; sleep 0.1; done
line=$(grep '^kova-rls listening' "$log.out")
grpc=$(sed -E 's/.*grpc=([^ ]+).*/\1/' <<<"$line")
http=$(sed -E 's/.*http=([^ ]+).*/\1/' <<<"$line")
target/debug/examples/check "$grpc"
test "$(curl -s "$http/healthz")" = OK
curl -s "$http/metrics" | grep -qx 'kova_rls_decisions_total{domain="edge",code="OVER_LIMIT",shadow="false"} 1'
kill -TERM $pid
wait $pid
trap - EXIT
echo "kova-rls: round trip OK, stopped cleanly"
