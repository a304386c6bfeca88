#!/usr/bin/env bash
# Runs distlock's whole test suite: installs redis-server if missing, then
# runs every module's tests with the race detector. Every test starts and
# stops its own redis-server processes on free loopback ports.
#
#   .            the library and the distlock command
#   safety/      the safety suite: chaos runs, ACL, TLS, bad input (~3.5 min)
#   bench/       the comparison harness's own tests (the benchmarks are run
#                by bench/cmd/lockbench, not here)
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/deps.sh

for module in . safety bench; do
	echo "== $module"
	(cd "$module" && go vet ./... && go test -race -count=1 -timeout 10m ./...)
done
