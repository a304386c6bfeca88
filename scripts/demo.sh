#!/usr/bin/env bash
# Runs the stock demo: worker processes sell stock under the lock (zero
# oversell), then without it (oversell). Installs redis-server if missing;
# the demo starts its own throwaway server unless REDIS_URL is set.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh >/dev/null
# The command is a module of its own, in cmd/distlock.
(cd cmd/distlock && go run . demo "$@")
(cd cmd/distlock && go run . demo --unsafe "$@")
