package etcdtest

import (
	"time"

	"go.uber.org/goleak"
)

// FindLeaks looks for leaked goroutines, as goleak.Find does with opts, at
// the end of a test binary that ran members of this package: it tries
// again until grace has passed, since a stopped member can leave a
// peer-server connection goroutine behind until rafthttp's 5 s read
// deadline passes (net/http's conn.serve re-arms it on every read). It
// ignores the goroutines of the etcd server that a killed member
// ([Member.Kill]) can leave blocked for good, which a real deployment (a
// process per member) never sees: a peer's version request that reached
// the member as it crashed waits on the read lock of its closed backend.
// It returns nil, or goleak.Find's last error.
func FindLeaks(grace time.Duration, opts ...goleak.Option) error {
	opts = append(opts, goleak.IgnoreAnyFunction("go.etcd.io/etcd/server/v3/etcdserver/api/etcdhttp.newPeerHandler.versionHandler.func1"))
	deadline := time.Now().Add(grace)
	for {
		err := goleak.Find(opts...) // retries for about a second itself
		if err == nil || time.Now().After(deadline) {
			return err
		}
	}
}
