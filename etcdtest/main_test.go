package etcdtest_test

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/distlock/distlock/etcdtest"
)

// leakGrace is how long TestMain lets goroutines end before calling them
// leaked. etcd's Close can leave a peer-server connection goroutine behind
// (net/http's conn.serve in abortPendingRead, and the peer's
// persistConn.writeLoop): the peer listener's connections re-arm a read
// deadline of rafthttp.ConnReadTimeout (5 s) on every Read, including the
// background read that net/http is aborting, so the goroutine ends only when
// that deadline passes. goleak.VerifyTestMain waits only about a second.
const leakGrace = 10 * time.Second

func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if err := etcdtest.FindLeaks(leakGrace); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: goroutines still running %v after the tests: %v\n", leakGrace, err)
			code = 1
		}
	}
	os.Exit(code)
}
