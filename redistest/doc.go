// Package redistest starts real redis-server processes for tests.
//
// Each [Server] is a redis-server process started by this package on a free
// loopback port, with its own temporary working directory and log file and
// with persistence disabled. Tests can make the server misbehave the way a
// real deployment does: [Server.Pause] freezes it (clients time out),
// [Server.Kill] crashes it (clients get connection errors), and
// [Server.Restart] brings it back, empty, on the same address.
//
// In tests, use [Start], which fails the test if redis-server cannot be
// started and stops the server when the test ends:
//
//	func TestSomething(t *testing.T) {
//		srv := redistest.Start(t)
//		rdb := srv.Client(t)
//		if err := rdb.Ping(context.Background()).Err(); err != nil {
//			t.Fatal(err)
//		}
//	}
//
// Outside tests (demos, benchmarks), use [NewServer] and call
// [Server.Stop] when done. Each deployment has the same two constructors:
// NewX returns an error and leaves stopping to the caller ([NewServer],
// [NewSentinel], [NewCluster]); StartX is for tests ([Start],
// [StartSentinel], [StartCluster]).
//
// [StartSentinel] starts a replicated deployment: a master, replicas and
// three sentinels (redis-server --sentinel) with short timeouts, with
// methods to trigger a failover ([Sentinel.Failover]), to wait for one after
// killing or pausing the master ([Sentinel.AwaitMaster]) and to cut one
// replica's replication ([Sentinel.CutReplication]). [StartCluster] starts
// a Redis Cluster, with [WithReplicas] a replica per master, with methods
// to find a slot's master and replica ([Cluster.SlotMaster],
// [Cluster.SlotReplica]), to migrate a slot at once or step by step
// ([Cluster.MigrateSlot], [Cluster.StartMigration]), to trigger a planned
// failover ([Cluster.FailoverReplica]) and to wait for an automatic one
// after killing a master ([Cluster.AwaitSlotMaster]).
//
// The redis-server binary is found by [Binary]: the environment variable
// DISTLOCK_REDIS_SERVER if set, otherwise a PATH lookup.
//
// The package only ever signals processes it started itself, identified by
// the handle returned when starting them; it never touches other Redis
// servers on the machine. On Linux the servers are also killed if the
// process that started them dies.
package redistest
