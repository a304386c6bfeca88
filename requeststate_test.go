package distlock_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/redisstore"
	"github.com/distlock/distlock/redistest"
)

// Requests with many different leases do not leave their contexts (and
// timers) alive until the lease would have ended: the heap does not grow
// with the number of requests.
func TestManyLeasesKeepNoRequestState(t *testing.T) {
	srv := redistest.Start(t)
	c := distlock.New(redisstore.New(srv.Client(t)), distlock.WithLogger(nil))
	defer c.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var ms []*distlock.Mutex
	for i := range 12 { // more leases than the engine shares contexts for
		ms = append(ms, c.Mutex("leases", distlock.WithTTL(time.Hour+time.Duration(i)*time.Minute)))
	}
	pair := func(m *distlock.Mutex) {
		l, err := m.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	heap := func() uint64 {
		runtime.GC()
		var s runtime.MemStats
		runtime.ReadMemStats(&s)
		return s.HeapAlloc
	}
	for _, m := range ms {
		pair(m)
	}
	const pairs = 4000
	before := heap()
	for i := range pairs {
		pair(ms[i%len(ms)])
	}
	grown := int64(heap()) - int64(before)
	t.Logf("heap grew by %d B over %d pairs", grown, pairs)
	if grown > 100*pairs {
		t.Fatalf("the heap grew by %d B over %d pairs (%d B each): request state outlives its requests", grown, pairs, grown/pairs)
	}
}
