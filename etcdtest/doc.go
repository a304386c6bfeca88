// Package etcdtest starts real etcd members in-process for tests.
//
// A [Cluster] is one or more etcd members (typically 1 or 3) run by the
// embedded server of go.etcd.io/etcd/server/v3/embed inside the test
// process, each listening on free loopback ports with its own data
// directory. The members use fsync-free storage, a silent logger, and short
// Raft timings ([HeartbeatInterval], [ElectionTimeout]) so that elections
// take about a second.
//
// In tests, use [Start], which fails the test if the cluster cannot be
// started and stops it when the test ends:
//
//	func TestSomething(t *testing.T) {
//		cl := etcdtest.Start(t, 3)
//		cli := cl.Client(t)
//		if _, err := cli.Put(context.Background(), "k", "v"); err != nil {
//			t.Fatal(err)
//		}
//	}
//
// Outside tests (demos, benchmarks), use [NewCluster] and call
// [Cluster.Stop] when done.
//
// Tests can make members fail the way a real deployment does:
// [Member.Stop] shuts a member down gracefully (a leader hands its
// leadership over first), [Member.Kill] stops it without telling the others
// (they elect a new leader after the election timeout), and
// [Member.Restart] starts it again on the same ports from the same data
// directory, so it rejoins the cluster. [Cluster.Leader] waits until the
// running members agree on a leader and [Cluster.TransferLeader] moves
// leadership to a chosen member.
//
// Each member also has a TCP [Proxy] in front of its client port
// ([Member.ProxyEndpoint], [Member.Proxy]). Clients that connect through it
// can be frozen ([Proxy.Pause]: connections stay open but nothing is
// forwarded, like a server that stopped responding), released
// ([Proxy.Resume]) or disconnected ([Proxy.Cut]), without touching the
// member itself. [Cluster.Isolate] partitions a member from the others
// (their Raft traffic is cut both ways, its clients still reach it), and
// [Cluster.Heal] ends the partition.
//
// The package lives in its own module because the etcd server has many
// dependencies: code that only uses an etcd client never builds it.
package etcdtest
