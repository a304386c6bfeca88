package etcdtest_test

import (
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// leakGrace is how long TestMain lets goroutines end before calling them
// leaked. etcd's Close can leave a peer-server connection goroutine behind
// (net/http's conn.serve in abortPendingRead, and the peer's
// persistConn.writeLoop): the peer listener's connections re-arm a read
// deadline of rafthttp.ConnReadTimeout (5 s) on every Read, including the
// background read that net/http is aborting, so the goroutine ends only when
// that deadline passes. goleak.VerifyTestMain waits only about a second.
const leakGrace = 10 * time.Second

// ignored are goroutines of the etcd server that a killed member can leave
// blocked for good, which a real deployment (a process per member) never
// sees: a peer's version request that reached a member as it crashed
// waits on the read lock of its closed backend.
var ignored = []goleak.Option{
	goleak.IgnoreAnyFunction("go.etcd.io/etcd/server/v3/etcdserver/api/etcdhttp.newPeerHandler.versionHandler.func1"),
}

func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		deadline := time.Now().Add(leakGrace)
		for {
			err := goleak.Find(ignored...) // retries for about a second itself
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				fmt.Fprintf(os.Stderr, "goleak: goroutines still running %v after the tests: %v\n", leakGrace, err)
				code = 1
				break
			}
		}
	}
	os.Exit(code)
}
