#!/usr/bin/env bash
# Runs the stock demo: worker processes sell stock under the lock (zero
# oversell), then without it (oversell). Installs redis-server if missing;
# the demo starts its own throwaway server unless REDIS_URL is set.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh >/dev/null
go run ./cmd/distlock demo "$@"
go run ./cmd/distlock demo --unsafe "$@"
