#!/usr/bin/env bash
# Installs what kova-redis's tests and bench start: redis-server, redis-cli and redis-benchmark.
# Does nothing when all three are on PATH. The README's test command and .ci/run call it.
#
#   crates/kova-redis/install-redis.sh && cargo test --workspace
#
# Debian/Ubuntu (apt-get, through sudo when not root), Fedora/RHEL (dnf), Alpine (apk), macOS
# (Homebrew). Anywhere else it says what is missing and exits 1.
set -euo pipefail

missing=()
for bin in redis-server redis-cli redis-benchmark; do
  command -v "$bin" >/dev/null 2>&1 || missing+=("$bin")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-redis: $(redis-server --version | head -n1)"
  exit 0
fi
echo "install-redis: missing ${missing[*]}; installing"

sudo=()
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then sudo=(sudo); fi
fi

if command -v apt-get >/dev/null 2>&1; then
  "${sudo[@]}" apt-get update -qq
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server redis-tools
elif command -v dnf >/dev/null 2>&1; then
  "${sudo[@]}" dnf install -y -q redis
elif command -v apk >/dev/null 2>&1; then
  "${sudo[@]}" apk add --quiet redis
elif command -v brew >/dev/null 2>&1; then
  brew install redis
else
  echo "install-redis: no apt-get, dnf, apk or brew here: install redis-server, redis-cli and" \
       "redis-benchmark (Redis 6.2 or later) by hand, or run the tests with KOVA_REDIS_TESTS=skip" >&2
  exit 1
fi

for bin in redis-server redis-cli redis-benchmark; do
  command -v "$bin" >/dev/null 2>&1 || { echo "install-redis: $bin still missing" >&2; exit 1; }
done
echo "install-redis: $(redis-server --version | head -n1)"
