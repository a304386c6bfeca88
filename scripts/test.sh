#!/usr/bin/env bash
# Runs distlock's whole test suite: installs redis-server, PostgreSQL and
# MariaDB if missing, then vets and tests the ten modules with the race
# detector. Every test
# starts and stops its own redis-server processes (and etcd members, in
# process) on free loopback ports, so the modules can run side by side.
#
#   .            the library (package distlock, redisstore, redistest, ...)
#   cmd/distlock the distlock command (its own module, so that etcd's
#                client and gRPC stay out of the root's go.mod); its
#                tests drive the binary against redis-server processes,
#                embedded etcd members, PostgreSQL and MariaDB servers
#   safety/      the safety suite: ACL, TLS, bad input, fault tests, and
#                eight chaos runs of fixed length (TestChaos 40 s,
#                TestChaosCluster, TestChaosRedlock, TestChaosSentinel and
#                TestChaosSentinelAck 20 s each, the last two with Sentinel
#                failovers that take a few seconds each, TestChaosEtcd
#                40 s, on three embedded etcd members, TestChaosSQL 30 s on
#                PostgreSQL and TestChaosSQLMariaDB 20 s)
#   bench/       the comparison harness's own tests (the benchmarks are run
#                by bench/cmd/lockbench, not here)
#   etcdstore/   the etcd store (its own module: etcd's client only)
#   etcdtest/    the etcd harness (embedded etcd members: the server's
#                dependencies stay out of etcdstore's module) and the
#                store conformance suite on etcdstore, on 1 and 3 members
#   sqltest/     the SQL harness: PostgreSQL and MariaDB servers started
#                by the tests from Debian's binaries (installed by
#                deps.sh), killed, paused and restarted, and PgBouncer in front of PostgreSQL (about 45 s)
#   sqlstore/    the SQL store (its own module: pgx), and the conformance
#                suite on it against PostgreSQL, listening and polling
#   prometheus/  the Prometheus collector (its own module: client_golang),
#                scraped through promhttp after operations on redis-server
#   otel/        the OpenTelemetry observer (its own module: otel), with
#                the SDK's in-memory exporter and manual metric reader
#
# Three steps, each job with its own log, printed with its exit status
# when the job ends; the script exits non-zero if any job failed:
#
#   1. build: each module's tests compiled with -race (none run), one
#      module after another so that shared packages compile once, and
#      `go vet -race` from that build. 15 s with a warm Go build cache;
#      with a cold one, minutes (398 s of CPU, see README.md).
#   2. side by side, in three lanes of 6 to 7 minutes each: the root
#      module's tests (about 5 minutes: the library's own tests run one
#      after another), then the SQL harness's and the observers'; the
#      safety suite's tests but its chaos runs, then the command's, then
#      the rueidis store's; the bench module's, then the etcd modules',
#      then the SQL store's.
#   3. alone: the safety suite's chaos runs (about 3 minutes), whose
#      client processes renew leases under injected faults and must not
#      be starved of CPU by the rest of the suite.
#
# About 10.5 to 12.5 minutes in all with a warm build cache, several more
# with a cold one, on a 2-core machine (see README.md, "Development").
set -euo pipefail
cd "$(dirname "$0")/.."

# -trimpath: without it, the Go build cache keys each of the project's
# packages by its directory, so a clone in a new directory (as CI makes)
# compiles every package again, with the race detector: 2 to 3 minutes
# more. No test reads its own source's path.
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-trimpath"

scripts/deps.sh
# deps.sh installed Prometheus: the command's end-to-end metrics test must
# run, not skip.
export DISTLOCK_REQUIRE_PROMETHEUS=1

if ((BASH_VERSINFO[0] < 5 || (BASH_VERSINFO[0] == 5 && BASH_VERSINFO[1] < 1))); then
	echo "test.sh: needs bash 5.1 or later (wait -n -p)" >&2
	exit 2
fi

logs=$(mktemp -d)
# On any exit, stop the jobs still running (an interrupted run) and drop
# the logs.
cleanup() {
	local pids
	pids=$(jobs -p)
	if [[ -n $pids ]]; then
		kill $pids 2>/dev/null || true
	fi
	rm -rf "$logs"
}
trap cleanup EXIT
declare -A job=() began=()
failed=()
summary=()

# run NAME DIR COMMAND...: starts COMMAND in DIR in the background, with
# its output in NAME's log.
run() {
	local name=$1 dir=$2
	shift 2
	(cd "$dir" && exec "$@") >"$logs/$name.log" 2>&1 &
	job[$!]=$name
	began[$name]=$SECONDS
}

# await waits for every job started, and prints each one's log and exit
# status as it ends.
await() {
	local pid rc name took
	while ((${#job[@]} > 0)); do
		rc=0
		wait -n -p pid || rc=$?
		name=${job[$pid]}
		unset "job[$pid]"
		took=$((SECONDS - ${began[$name]}))
		echo
		echo "== $name: $(status "$rc") after ${took}s"
		cat "$logs/$name.log"
		echo "== $name: end, $(status "$rc")"
		summary+=("$name $(status "$rc") ${took}s")
		if ((rc != 0)); then
			failed+=("$name")
		fi
	done
}

status() {
	if (($1 == 0)); then echo ok; else echo "FAILED (exit $1)"; fi
}

# The chaos runs: TestChaos, TestChaosCluster, TestChaosRedlock,
# TestChaosSentinel, TestChaosSentinelAck and TestChaosEtcd.
chaos='^TestChaos'
gotest=(go test -race -count=1 -timeout 10m)

# The build step checks that every Go file is formatted by gofmt; then
# it compiles each module's tests with the race detector (running none
# of them), so that the modules' tests, side by side, do not compile the
# packages they share twice; then `go vet -race`, which
# checks the same files (race_test.go included) from the export data
# just built, where a plain `go vet` would compile every package again
# without the race detector.
build='set -o pipefail
rc=0
echo "gofmt -l"
unformatted=$(gofmt -l .) || rc=1
if [ -n "$unformatted" ]; then
	echo "not formatted with gofmt:"
	echo "$unformatted"
	rc=1
fi
for m in . cmd/distlock safety bench etcdstore etcdtest sqltest sqlstore prometheus otel rueidisstore; do
	echo "go test -race -run ^\$ ($m)"
	(cd "$m" && go test -race -count=1 -run "^\$" ./... | sed "/\[no tests to run\]\$/d") || rc=1
	echo "go vet -race ($m)"
	(cd "$m" && go vet -race ./...) || rc=1
done
exit $rc'

echo "== step 1: build the race-enabled tests of every module, one module after another, and vet them"
run build . bash -c "$build"
await
if ((${#failed[@]} > 0)); then
	echo "FAILED: ${failed[*]}"
	exit 1
fi

echo
# Three lanes, so that no more than three test binaries compete for the
# two cores at once (with five side by side, a Redis Cluster test of the
# root module once waited 30 s for its nodes' gossip to agree on a
# migrated slot, and failed): the root module's tests, which take the
# longest, beside two lanes of the others, one module after another,
# each shorter than the root's.
echo "== step 2: the tests of . then sqltest/ then prometheus/ then otel/, beside those of safety/ (but its chaos runs) then cmd/distlock/ then rueidisstore/, and of bench/ then etcdstore/ then etcdtest/ then sqlstore/"
run root+sql+observers . bash -c "rc=0; ${gotest[*]} ./... || rc=1; (cd sqltest && ${gotest[*]} ./...) || rc=1; (cd prometheus && ${gotest[*]} ./...) || rc=1; (cd otel && ${gotest[*]} ./...) || rc=1; exit \$rc"
run safety+cmd+rueidis . bash -c "rc=0; (cd safety && ${gotest[*]} -skip '$chaos' ./...) || rc=1; (cd cmd/distlock && ${gotest[*]} ./...) || rc=1; (cd rueidisstore && ${gotest[*]} ./...) || rc=1; exit \$rc"
run bench+etcd+sqlstore . bash -c "rc=0; (cd bench && ${gotest[*]} ./...) || rc=1; (cd etcdstore && ${gotest[*]} ./...) || rc=1; (cd etcdtest && ${gotest[*]} ./...) || rc=1; (cd sqlstore && ${gotest[*]} ./...) || rc=1; exit \$rc"
await

echo
echo "== step 3: the safety suite's chaos runs, alone"
run safety-chaos safety "${gotest[@]}" -run "$chaos" ./...
await

echo
echo "== summary (${SECONDS}s in all)"
printf '   %s\n' "${summary[@]}"
if ((${#failed[@]} > 0)); then
	echo "FAILED: ${failed[*]}"
	exit 1
fi
echo "all passed"
