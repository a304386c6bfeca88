package prometheus_test

import (
	"errors"
	"testing"
	"time"

	"github.com/distlock/distlock"
	distlockprom "github.com/distlock/distlock/prometheus"
)

// The labels of a Mutex on the Redis store.
var mutexOnRedis = []string{"kind", "mutex", "store", "redis"}

// with returns the labels of mutexOnRedis and pairs.
func with(pairs ...string) []string {
	return append(append([]string(nil), mutexOnRedis...), pairs...)
}

// expect fails the test unless the metric name, with the labels pairs,
// has the value want.
func (m metrics) expect(t *testing.T, want float64, name string, pairs ...string) {
	t.Helper()
	if got := m.value(name, pairs...); got != want {
		t.Errorf("%s%v = %v, want %v", name, pairs, got, want)
	}
}

// TestLockUnlock: a Lock and an Unlock make one acquisition that ended
// ok, one call of each, one hold, and held_locks goes to 1 and back to 0.
func TestLockUnlock(t *testing.T) {
	r := newRig(t)
	c := r.client(t, true)
	ctx := testCtx(t)

	l, err := c.Mutex("jobs").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m := r.scrape(t)
	m.expect(t, 1, "distlock_held_locks", mutexOnRedis...)
	m.expect(t, 1, "distlock_acquire_duration_seconds", with("outcome", "ok")...)
	m.expect(t, 0, "distlock_hold_duration_seconds")

	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	m = r.scrape(t)
	m.expect(t, 0, "distlock_held_locks", mutexOnRedis...)
	m.expect(t, 1, "distlock_hold_duration_seconds", mutexOnRedis...)
	m.expect(t, 1, "distlock_acquire_duration_seconds", with("outcome", "ok")...)
	m.expect(t, 1, "distlock_acquire_duration_seconds") // no other outcome
	m.expect(t, 1, "distlock_calls_total", with("op", "lock", "outcome", "ok")...)
	m.expect(t, 1, "distlock_calls_total", with("op", "unlock", "outcome", "ok")...)
	m.expect(t, 2, "distlock_calls_total")
	m.expect(t, 0, "distlock_waiters")
	m.expect(t, 0, "distlock_losses_total")
	if s := m.samples("distlock_calls_total"); len(s) > 0 && label(s[0], "name") != "" {
		t.Errorf("a label name without WithLockNames: %v", s[0])
	}
}

// TestReentry: a re-entered lock is held once; each acquisition is a call.
func TestReentry(t *testing.T) {
	r := newRig(t)
	c := r.client(t, true)
	ctx := testCtx(t)
	m := c.Mutex("reentered")

	outer, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	inner, err := m.Lock(outer.Context())
	if err != nil {
		t.Fatal(err)
	}
	r.scrape(t).expect(t, 1, "distlock_held_locks", mutexOnRedis...)
	for _, l := range []*distlock.Lease{inner, outer} {
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	s := r.scrape(t)
	s.expect(t, 0, "distlock_held_locks", mutexOnRedis...)
	s.expect(t, 1, "distlock_hold_duration_seconds", mutexOnRedis...)
	s.expect(t, 2, "distlock_acquire_duration_seconds", with("outcome", "ok")...)
}

// TestTryLockBusy: a TryLock of a lock held by another owner ends busy,
// and neither holds nor waits.
func TestTryLockBusy(t *testing.T) {
	r := newRig(t)
	holder := r.client(t, false)
	c := r.client(t, true)
	ctx := testCtx(t)

	l, err := holder.Mutex("busy").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock(ctx)
	if _, err := c.Mutex("busy").TryLock(ctx); !errors.Is(err, distlock.ErrNotAcquired) {
		t.Fatalf("TryLock = %v, want ErrNotAcquired", err)
	}
	m := r.scrape(t)
	m.expect(t, 1, "distlock_acquire_duration_seconds", with("outcome", "busy")...)
	m.expect(t, 1, "distlock_acquire_duration_seconds")
	m.expect(t, 1, "distlock_calls_total", with("op", "try-lock", "outcome", "busy")...)
	m.expect(t, 0, "distlock_held_locks")
	m.expect(t, 0, "distlock_waiters")
}

// TestWaiters: an acquisition waiting for a lock held elsewhere is a
// waiter until it gets the lock.
func TestWaiters(t *testing.T) {
	r := newRig(t)
	holder := r.client(t, false)
	events := make(observer, 100)
	c := r.client(t, true, distlock.WithObserver(events))
	ctx := testCtx(t)

	l, err := holder.Mutex("queue").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		l, err := c.Mutex("queue").Lock(ctx)
		if err == nil {
			err = l.Unlock(ctx)
		}
		got <- err
	}()
	events.await(t, distlock.EventWaiting, "queue")
	m := r.scrape(t)
	m.expect(t, 1, "distlock_waiters", mutexOnRedis...)
	m.expect(t, 0, "distlock_held_locks")

	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	m = r.scrape(t)
	m.expect(t, 0, "distlock_waiters", mutexOnRedis...)
	m.expect(t, 0, "distlock_held_locks", mutexOnRedis...)
	m.expect(t, 1, "distlock_acquire_duration_seconds", with("outcome", "ok")...)
	if sum := m["distlock_acquire_duration_seconds"].Metric[0].Histogram.GetSampleSum(); sum <= 0 {
		t.Errorf("the wait took %vs", sum)
	}
}

// TestRevoked: a lock revoked by an operator is a loss for reason
// "revoked", and its hold ends.
func TestRevoked(t *testing.T) {
	r := newRig(t)
	events := make(observer, 100)
	c := r.client(t, true, distlock.WithObserver(events))
	operator := r.client(t, false)
	ctx := testCtx(t)

	// A short lease: a holder that misses the notice of the revocation
	// learns of it at its next renewal.
	l, err := c.Mutex("revoked", distlock.WithTTL(time.Second)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := operator.Mutex("revoked").Revoke(ctx); err != nil {
		t.Fatal(err)
	}
	ev := events.await(t, distlock.EventLost, "revoked")
	if ev.Reason != distlock.LossRevoked {
		t.Fatalf("lost for %q, want %q", ev.Reason, distlock.LossRevoked)
	}
	m := r.scrape(t)
	m.expect(t, 1, "distlock_losses_total", with("reason", "revoked")...)
	m.expect(t, 1, "distlock_losses_total")
	m.expect(t, 0, "distlock_held_locks", mutexOnRedis...)
	m.expect(t, 1, "distlock_hold_duration_seconds", mutexOnRedis...)

	_ = l.Unlock(ctx) // it lets the lock go
	r.scrape(t).expect(t, 1, "distlock_calls_total", with("op", "unlock")...)
}

// TestRenewals: the watchdog's renewals of a short lease are counted and
// timed.
func TestRenewals(t *testing.T) {
	r := newRig(t)
	events := make(observer, 100)
	c := r.client(t, true, distlock.WithObserver(events))
	ctx := testCtx(t)

	l, err := c.Mutex("renewed", distlock.WithTTL(300*time.Millisecond)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	events.await(t, distlock.EventRenewed, "renewed")
	m := r.scrape(t)
	if n := m.value("distlock_renewals_total", with("result", "ok")...); n < 1 {
		t.Errorf("renewals ok: %v", n)
	}
	if n := m.value("distlock_renewal_duration_seconds", "store", "redis"); n < 1 {
		t.Errorf("renewals timed: %v", n)
	}
	m.expect(t, 0, "distlock_renewals_total", "result", "failed")
	m.expect(t, 0, "distlock_losses_total")
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestLockNames: WithLockNames labels the names given, and every other
// name "other".
func TestLockNames(t *testing.T) {
	r := newRig(t, distlockprom.WithLockNames("orders", "invoices"))
	c := r.client(t, true)
	ctx := testCtx(t)

	for _, name := range []string{"orders", "users:1", "users:2", "users:3"} {
		l, err := c.Mutex(name).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	m := r.scrape(t)
	for _, name := range []string{"distlock_acquire_duration_seconds", "distlock_calls_total", "distlock_hold_duration_seconds", "distlock_held_locks"} {
		names := map[string]bool{}
		for _, s := range m.samples(name) {
			names[label(s, "name")] = true
		}
		if len(names) != 2 || !names["orders"] || !names["other"] {
			t.Errorf("%s: names %v, want orders and other", name, names)
		}
	}
	m.expect(t, 1, "distlock_acquire_duration_seconds", "name", "orders")
	m.expect(t, 3, "distlock_acquire_duration_seconds", "name", "other")
	m.expect(t, 1, "distlock_hold_duration_seconds", "name", "orders")
	m.expect(t, 3, "distlock_hold_duration_seconds", "name", "other")
	m.expect(t, 1, "distlock_calls_total", "op", "unlock", "name", "orders")
	m.expect(t, 3, "distlock_calls_total", "op", "lock", "name", "other")
}
