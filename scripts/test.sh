#!/usr/bin/env bash
# Runs distlock's whole test suite: installs redis-server if missing, then
# runs every module's tests with the race detector. Every test starts and
# stops its own redis-server processes on free loopback ports.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/deps.sh

go vet ./...
go test -race -count=1 -timeout 10m ./...
