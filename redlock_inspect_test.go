package distlock_test

import (
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/redisstore"
	"github.com/redis/go-redis/v9"
)

// Inspect of a Redlock lock counts the holds that a quorum of masters
// has, as it counts the lease a quorum keeps: a re-entry that reached a
// quorum but not yet every master is counted (item 11: the count came
// from one master, whichever had the quorum's lease).
func TestRedlockInspectHoldsOfAQuorum(t *testing.T) {
	q := startQuorum(t, 3)
	ctx := testCtx(t)
	var rdbs []redis.UniversalClient
	for _, srv := range q.servers {
		rdbs = append(rdbs, srv.Client(t))
	}
	h := newInterceptor(t)
	rdbs[2].AddHook(h)
	c := distlock.New(redisstore.NewRedlock(rdbs), distlock.WithLogger(nil))
	defer c.Close()
	h.load(t, rdbs[2])
	l, err := c.Mutex("job").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	q.awaitTokens(t, "job", l.Token())
	// The master without the re-entry has the quorum's lease: the second
	// longest of three.
	for i, ttl := range []time.Duration{3 * time.Minute, time.Minute, 2 * time.Minute} {
		if err := q.rdbs[i].PExpire(ctx, redisstore.DefaultPrefix+"{job}", ttl).Err(); err != nil {
			t.Fatal(err)
		}
	}
	late := h.holdBack("job", "acquire", 1) // the re-entry, on the third master
	inner, err := c.Mutex("job").Lock(l.Context())
	if err != nil {
		t.Fatal(err)
	}
	await(t, late.matched, "the re-entry on the third master")
	info, err := q.client(t).Mutex("job").Inspect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Holds != 2 {
		t.Errorf("after a re-entry that a quorum took: %d holds, want 2", info.Holds)
	}
	late.free()
	if err := inner.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}
