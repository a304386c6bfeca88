package prometheus_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/distlock/distlock"
)

// TestKinds: each kind of lock is labelled as such, a MultiMutex is one
// call and one hold per member, and every hold and wait ends.
func TestKinds(t *testing.T) {
	r := newRig(t)
	c := r.client(t, true)
	ctx := testCtx(t)

	var leases []*distlock.Lease
	take := func(l *distlock.Lease, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		leases = append(leases, l)
	}
	take(c.FairMutex("fair").Lock(ctx))
	take(c.RWMutex("rw").RLock(ctx))
	take(c.RWMutex("rw").RLock(ctx)) // a second reader: a hold of its own
	take(c.Semaphore("sem", 3).Acquire(ctx, 2))
	take(c.Election("leader").Campaign(ctx, "me"))
	take(c.MultiMutex([]string{"a", "b"}).Lock(ctx))

	m := r.scrape(t)
	for kind, n := range map[string]float64{"fair-mutex": 1, "rwmutex": 2, "semaphore": 1, "election": 1, "mutex": 2} {
		m.expect(t, n, "distlock_held_locks", "kind", kind, "store", "redis")
	}
	m.expect(t, 1, "distlock_calls_total", "op", "lock", "kind", "fair-mutex", "outcome", "ok")
	m.expect(t, 2, "distlock_calls_total", "op", "rlock", "kind", "rwmutex", "outcome", "ok")
	m.expect(t, 1, "distlock_calls_total", "op", "acquire", "kind", "semaphore", "outcome", "ok")
	m.expect(t, 1, "distlock_calls_total", "op", "campaign", "kind", "election", "outcome", "ok")
	m.expect(t, 1, "distlock_calls_total", "op", "lock", "kind", "mutex") // the MultiMutex's
	m.expect(t, 6, "distlock_acquire_duration_seconds", "outcome", "ok")

	for _, l := range leases {
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	m = r.scrape(t)
	m.expect(t, 0, "distlock_held_locks")
	m.expect(t, 7, "distlock_hold_duration_seconds")
	m.expect(t, 6, "distlock_calls_total", "op", "unlock", "outcome", "ok")
}

// TestEnds: a wait that times out, and holds that Close ends, leave
// neither waiters nor held locks behind.
func TestEnds(t *testing.T) {
	r := newRig(t)
	holder := r.client(t, false)
	c := r.client(t, true)
	ctx := testCtx(t)

	l, err := holder.Mutex("late").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock(ctx)
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if _, err := c.Mutex("late").Lock(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock = %v, want a timeout", err)
	}
	m := r.scrape(t)
	m.expect(t, 0, "distlock_waiters", mutexOnRedis...)
	m.expect(t, 1, "distlock_acquire_duration_seconds", with("outcome", "timeout")...)
	m.expect(t, 1, "distlock_calls_total", with("op", "lock", "outcome", "timeout")...)

	for _, name := range []string{"kept-1", "kept-2"} {
		if _, err := c.Mutex(name).Lock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	r.scrape(t).expect(t, 2, "distlock_held_locks", mutexOnRedis...)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	m = r.scrape(t)
	m.expect(t, 0, "distlock_held_locks", mutexOnRedis...)
	m.expect(t, 2, "distlock_hold_duration_seconds", mutexOnRedis...)
	m.expect(t, 0, "distlock_losses_total")
}
