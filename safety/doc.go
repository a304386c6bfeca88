// Package safety is distlock's safety suite. It is a separate module
// (github.com/distlock/distlock/safety) so that the library never depends
// on toxiproxy or porcupine; it has no non-test code.
//
// The suite runs real redis-server processes on loopback ports only:
//
//   - chaos_test.go, client_test.go, checks_test.go, monitor_test.go,
//     fenced_test.go, history_test.go: a Jepsen-style run. Client processes
//     (re-executions of the test binary) loop acquire, fenced read, work,
//     fenced write, release on a few lock names, while a seeded scheduler
//     kills and stops holders, stops and restarts Redis, injects latency,
//     black holes, connection resets, late requests and lost replies
//     through in-process toxiproxy proxies, flushes the script cache,
//     exhausts connection pools, cancels acquisitions mid-way and closes
//     clients under load; holders also Extend, re-enter and unlock
//     concurrently. The recorded history is checked with a porcupine mutex
//     model, validity-interval overlap, a fenced register, token order, the
//     timing of the loss signal against the server's own timeline (MONITOR),
//     what a nil Close leaves on the server, released leases never reported
//     lost, orphan locks and goroutine leaks. TestChaosCluster runs the same
//     on a 3-master Redis Cluster with a paused master among its faults.
//   - badinput_test.go, url_test.go: misuse and bad Redis URLs get typed
//     errors and corrupt nothing.
//   - acl_test.go: the minimal Redis ACL for distlock, proven by experiment.
//   - tls_test.go: TLS with certificate verification fails closed.
//   - secrets_test.go: owner ids are random (>= 128 bits) and never logged.
//
// The regression tests of the library bugs this suite found say so in their
// comments. See docs/safety.md for the commands and the published figures.
package safety
