#!/usr/bin/env bash
# Installs what distlock's tests and demo need on a fresh Debian/Ubuntu
# machine: redis-server (the tests start their own servers from it, and
# their sentinels as `redis-server --sentinel`: no redis-sentinel package),
# PostgreSQL and MariaDB (sqltest/ starts its own servers from their
# binaries: postgres and initdb, mariadbd and mariadb-install-db),
# PgBouncer (sqltest/ starts its own /usr/sbin/pgbouncer in front of them)
# and Prometheus (the command's metrics test in cmd/distlock starts its
# own /usr/bin/prometheus, to scrape `distlock run --metrics-addr` and
# check the dashboard's queries).
# Go itself (1.26+) must already be installed. Starts no service: the
# packages' own services are kept from starting while they install.
set -euo pipefail

if ! command -v go >/dev/null 2>&1; then
  echo "deps: go is not installed (need Go 1.26+: https://go.dev/doc/install)" >&2
  exit 1
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
updated=""

# apt_install PACKAGE...: installs Debian packages. The services they
# come with (redis-server, postgresql, mariadb, pgbouncer) are not
# started: while apt-get runs, a policy-rc.d denies every start, unless
# the machine has its own policy-rc.d already, which is then left as it
# is.
apt_install() {
  local policy=/usr/sbin/policy-rc.d added="" rc=0
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$policy" >/dev/null
    $SUDO chmod 755 "$policy"
    added=1
  fi
  if [ -z "$updated" ]; then
    $SUDO apt-get update -qq || rc=$?
    updated=1
  fi
  if [ "$rc" -eq 0 ]; then
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "$@" >/dev/null || rc=$?
  fi
  if [ -n "$added" ]; then $SUDO rm -f "$policy"; fi
  return "$rc"
}

if ! command -v redis-server >/dev/null 2>&1; then
  echo "deps: installing redis-server" >&2
  apt_install redis-server
fi
redis-server --version

# pg_bin prints the newest /usr/lib/postgresql/VERSION/bin that has
# postgres and initdb, where sqltest looks first.
pg_bin() {
  local d
  for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
    if [ -x "$d/postgres" ] && [ -x "$d/initdb" ]; then
      echo "$d"
      return
    fi
  done
}
if [ -z "$(pg_bin)" ]; then
  echo "deps: installing postgresql" >&2
  apt_install postgresql
fi
"$(pg_bin)/postgres" --version

if ! [ -x /usr/sbin/mariadbd ] || ! command -v mariadb-install-db >/dev/null 2>&1; then
  echo "deps: installing mariadb-server" >&2
  apt_install mariadb-server
fi
/usr/sbin/mariadbd --version

# pgbouncer: the package's own service is kept from starting like the
# others' (and, unconfigured, it would have no database to serve anyway).
if ! [ -x /usr/sbin/pgbouncer ]; then
  echo "deps: installing pgbouncer" >&2
  apt_install pgbouncer
fi
/usr/sbin/pgbouncer --version

# prometheus: the package's own service is kept from starting like the
# others'; the test starts its own server, with a config and a storage
# directory of its own. Without the recommended node exporter, which the
# test does not need.
if ! command -v prometheus >/dev/null 2>&1; then
  echo "deps: installing prometheus" >&2
  apt_install --no-install-recommends prometheus
fi
prometheus --version 2>&1 | sed -n 1p
