// Package safety is distlock's safety suite. It is a separate module
// (github.com/distlock/distlock/safety) so that the library never depends
// on toxiproxy or porcupine; it has no non-test code.
//
// The suite runs real redis-server processes on loopback ports only:
//
//   - chaos_test.go, client_test.go, checks_test.go, monitor_test.go,
//     fenced_test.go, fairchecks_test.go, sharedchecks_test.go,
//     closechecks_test.go, giveupchecks_test.go, semcapacity_test.go,
//     onceclient_test.go, oncechecks_test.go, history_test.go: a
//     Jepsen-style run. Client processes (re-executions of the test
//     binary) loop acquire, fenced read, work, fenced write, release on a
//     few lock names whose names carry spaces and other unusual
//     characters, plain and fair (FairMutex), lead an election, hold the
//     read or write side of a read-write lock and 1 or 2 permits of a
//     semaphore of 3 (only writers and leaders do the fenced
//     read-modify-write; a name keeps its kind for the whole run), and run
//     jobs with Once and OncePer that panic, outlast their caller, fail or
//     succeed, while a seeded scheduler kills and stops holders and
//     waiters, stops and restarts Redis, injects latency, black holes,
//     connection resets, late requests and lost replies through in-process
//     toxiproxy proxies, flushes the script cache, exhausts connection
//     pools, cancels acquisitions mid-way (some while they wait in a
//     queue), shrinks and grows the semaphore's capacity, and closes
//     clients under load while they have waiters of every queued kind,
//     with replies or requests delayed; holders also Extend, re-enter and
//     unlock concurrently. The recorded history is checked with a
//     porcupine mutex model, validity-interval overlap, a fenced register,
//     token order, the timing of the loss signal against the server's own
//     timeline (MONITOR), what a nil Close leaves on the server (locks,
//     holders, places, grants after it), released leases never reported
//     lost, orphan locks and goroutine leaks; and, from the server's own
//     timeline, no tenure begun while another could be held, no lock
//     deleted by another owner's release, FIFO service of the fair queues
//     and elections, nothing of a queued acquisition that returned an
//     error left or granted after it returned, no error raised by a
//     script, kinds that never mix, and every key's TTL within its bound
//     during and after the run; for the read-write locks, no writer's
//     validity interval overlapping another holder's, and for the
//     semaphores, no admission above the capacity in force, a capacity
//     key that outlives its holders and waiters, and no permit left after
//     the run; for the jobs run once, no lock left by a panic, no rerun of
//     a recorded job (one that outlasted its caller included), failures
//     not recorded, and no two runs of a key at once. TestChaosCluster
//     runs the same, under a key prefix with a space, on a 3-master Redis
//     Cluster with a paused master among its faults. TestChaosSentinel
//     runs plain mutexes, and TestChaosSentinelAck (WithReplicaAck) every
//     lock kind of TestChaos, on a Sentinel group through go-redis's
//     failover client, with master kills, SENTINEL FAILOVER and a
//     replication cut before a master kill among the faults.
//     TestChaosRedlock (redlock_chaos_test.go) runs plain mutexes from 3
//     processes locking with NewRedlock over 5 independent masters, with
//     faults on at most 2 masters at once (pauses, kills with a delayed
//     restart, the proxy faults) and one no-quorum phase.
//     TestChaosEtcd (etcd_chaos_test.go, etcdclient_test.go) runs plain
//     mutexes and MultiMutexes of two names on etcdstore, over 3 etcd
//     members (etcdtest, in the test process) that each client process
//     reaches through proxies of its own, with member kills and restarts
//     (the leader and followers), leader transfers, the member of a
//     holder's client partitioned from the others, compactions while
//     acquisitions wait, clients cut off (their proxies paused) and holders
//     stopped or killed; the server's timeline is a watch of the store's
//     prefix on every member and samples of its revision (no MONITOR).
//     TestChaosSQL (sql_chaos_test.go, sqlclient_test.go) runs the same
//     workload on sqlstore over one PostgreSQL server (sqltest), and
//     TestChaosSQLMariaDB, shorter, over one MariaDB server, from client
//     processes that each reach it through a proxy of their own, with
//     server kills and restarts, server stops, clients cut off or their
//     connections reset, and holders stopped or killed; the server's
//     timeline is a sampler that reads the whole table every 20 ms.
//   - monitor_fair_test.go, monitor_shared_test.go: the MONITOR
//     reconstruction of fair hand-overs (a grant inside another owner's
//     release), of the shared kinds' holders and of elections, under names
//     and a prefix with spaces, on redis-server.
//   - badinput_test.go, url_test.go: misuse and bad Redis URLs get typed
//     errors and corrupt nothing.
//   - acl_test.go, acl_fair_test.go, acl_queued_test.go: the minimal Redis
//     ACL for distlock, and the rules a fair mutex adds, proven by
//     experiment; the same rules cover the read-write lock, the semaphore,
//     the election, the once helpers and the multi-lock.
//   - tls_test.go: TLS with certificate verification fails closed.
//   - secrets_test.go: owner ids are random (>= 128 bits) and never logged.
//
// The regression tests of the library bugs this suite found say so in their
// comments. See docs/safety.md for the commands and the published figures.
package safety
