package distlock_test

import (
	"context"
	"testing"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/redisstore"
	"github.com/distlock/distlock/redistest"
)

// maxPairAllocs bounds the allocations of an uncontended Lock and Unlock
// of a Mutex: 30–31 when this test was written (go-redis v9.23 makes about
// 13 of them; see docs/benchmarks.md, round three). A go-redis upgrade may
// move it: measure with BenchmarkMutexLockUnlock, and raise it only for a
// reason that the docs state.
const maxPairAllocs = 34

func TestUncontendedAllocations(t *testing.T) {
	srv := redistest.Start(t)
	c := distlock.New(redisstore.New(srv.Client(t)), distlock.WithLogger(nil))
	defer c.Close()
	ctx := context.Background()
	m := c.Mutex("allocs")
	pair := func() {
		l, err := m.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for range 20 { // connections, scripts loaded, workers
		pair()
	}
	if n := testing.AllocsPerRun(300, pair); n > maxPairAllocs {
		t.Fatalf("an uncontended Lock+Unlock allocates %v times, more than %d", n, maxPairAllocs)
	}
}
