#!/usr/bin/env bash
# Installs what distlock's tests and demo need on a fresh Debian/Ubuntu
# machine: redis-server (the tests start their own servers from it, and
# their sentinels as `redis-server --sentinel`: no redis-sentinel package).
# Go itself (1.26+) must already be installed.
set -euo pipefail

if ! command -v go >/dev/null 2>&1; then
  echo "deps: go is not installed (need Go 1.26+: https://go.dev/doc/install)" >&2
  exit 1
fi

if ! command -v redis-server >/dev/null 2>&1; then
  echo "deps: installing redis-server" >&2
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq redis-server >/dev/null
fi
redis-server --version
