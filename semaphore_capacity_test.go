package distlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/redisstore"
	"github.com/distlock/distlock/redistest"
	"github.com/redis/go-redis/v9"
)

// capacityKey is the key of a semaphore's capacity (default prefix).
func capacityKey(name string) string { return redisstore.DefaultPrefix + "{" + name + "}:cap" }

// outlast waits, holding l, until the capacity of the semaphore name would
// have expired three times over had nothing but acquisitions kept it (the
// thing under test is a Redis TTL, so this waits for wall-clock time). It
// reports whether the capacity key was ever found missing meanwhile.
func outlast(t *testing.T, rdb *redis.Client, l *distlock.Lease, name string, retention time.Duration) (vanished bool) {
	t.Helper()
	end := time.Now().Add(3 * retention)
	for time.Now().Before(end) {
		if err := l.Context().Err(); err != nil {
			t.Fatalf("the holder lost its permits: %v", context.Cause(l.Context()))
		}
		if rdb.Exists(context.Background(), capacityKey(name)).Val() == 0 {
			vanished = true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return vanished
}

// A semaphore's capacity lasts as long as its permits are held, however
// short the fence retention: a holder renewed by the watchdog for three
// retentions after SetPermits(1) keeps the capacity at 1, and a second
// client, which believes in 2 permits, is not admitted beyond it. (The
// capacity used to expire a retention after the last acquisition; the
// next acquisition then set it again from its own permits argument.)
func TestSemaphoreCapacityOutlivesRetentionWhileHeld(t *testing.T) {
	srv := redistest.Start(t)
	const retention = time.Second
	c1, rdb := newStoreClient(t, srv, redisstore.WithFenceRetention(retention))
	c2, _ := newStoreClient(t, srv, redisstore.WithFenceRetention(retention))
	ctx := testCtx(t)
	s1 := c1.Semaphore("held", 2, distlock.WithTTL(300*time.Millisecond))
	l, err := s1.Acquire(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := s1.SetPermits(ctx, 1); err != nil {
		t.Fatal(err)
	}
	vanished := outlast(t, rdb, l, "held", retention)
	s2 := c2.Semaphore("held", 2)
	if l2, err := s2.TryAcquire(ctx, 1); err == nil {
		l2.Unlock(ctx)
		t.Fatalf("a second permit was given with the capacity set to 1 (the capacity key vanished: %v)", vanished)
	} else if !errors.Is(err, distlock.ErrNotAcquired) {
		t.Fatal(err)
	}
	if info, err := s2.Inspect(ctx); err != nil || info.Capacity != 1 || info.InUse != 1 {
		t.Fatalf("after %v held: %+v, %v; want capacity 1, 1 permit in use", 3*retention, info, err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// A waiter that refreshes its place for longer than the fence retention
// does not reset the capacity from its own permits argument: it waits
// until the holder releases. (Its refresh used to set an expired capacity
// again from the waiter's argument, and admit it at once.)
func TestSemaphoreCapacityOutlivesRetentionWhileWaited(t *testing.T) {
	srv := redistest.Start(t)
	const retention = time.Second
	c1, rdb := newStoreClient(t, srv, redisstore.WithFenceRetention(retention))
	c2, _ := newStoreClient(t, srv, redisstore.WithFenceRetention(retention))
	ctx := testCtx(t)
	s1 := c1.Semaphore("waited", 1, distlock.WithTTL(300*time.Millisecond))
	l, err := s1.Acquire(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	s2 := c2.Semaphore("waited", 3, distlock.WithQueueTimeout(300*time.Millisecond))
	got := make(chan error, 1)
	var l2 *distlock.Lease
	go func() {
		var err error
		l2, err = s2.Acquire(ctx, 1)
		got <- err
	}()
	waitFor(t, func() bool { info, _ := s1.Inspect(ctx); return info.Queued == 1 })
	vanished := outlast(t, rdb, l, "waited", retention)
	select {
	case err := <-got:
		t.Fatalf("the waiter was admitted beyond the capacity of 1 (%v; the capacity key vanished: %v)", err, vanished)
	default:
	}
	if info, err := s1.Inspect(ctx); err != nil || info.Capacity != 1 || info.InUse != 1 || info.Queued != 1 {
		t.Fatalf("after %v waited: %+v, %v; want capacity 1, 1 in use, 1 waiting", 3*retention, info, err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("the waiter after the release: %v", err)
	}
	if err := l2.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// After SetPermits shrinks a semaphore, every waiter whose request no
// longer fits fails with ErrInvalidOption, wherever it is in the queue,
// while the holders keep their permits and the waiters that fit keep
// their places. (Only the head of the queue was checked: a too-large
// waiter further back kept waiting.)
func TestSemaphoreShrinkFailsWaitersBehindTheHead(t *testing.T) {
	srv := redistest.Start(t)
	c, _ := newClient(t, srv)
	ctx := testCtx(t)
	s := c.Semaphore("shrink-all", 3, distlock.WithQueueTimeout(300*time.Millisecond))
	held, err := s.Acquire(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	type outcome struct {
		l   *distlock.Lease
		err error
	}
	wait := func(n int) chan outcome {
		ch := make(chan outcome, 1)
		waiters := 0
		if info, err := s.Inspect(ctx); err == nil {
			waiters = info.Queued
		}
		go func() {
			l, err := s.Acquire(ctx, n)
			ch <- outcome{l, err}
		}()
		waitFor(t, func() bool { info, _ := s.Inspect(ctx); return info.Queued == waiters+1 })
		return ch
	}
	small, big, bigger, last := wait(1), wait(3), wait(3), wait(2)
	if err := s.SetPermits(ctx, 2); err != nil {
		t.Fatal(err)
	}
	for i, ch := range []chan outcome{big, bigger} {
		if o := <-ch; !errors.Is(o.err, distlock.ErrInvalidOption) {
			t.Fatalf("waiter %d for 3 permits of a capacity shrunk to 2, behind the head: %v, want ErrInvalidOption", i+1, o.err)
		}
	}
	if info, err := s.Inspect(ctx); err != nil || info.InUse != 3 || info.Queued != 2 || info.QueuedPermits != 3 {
		t.Fatalf("after the shrink: %+v, %v; want 3 in use, the waiters for 1 and 2 still queued", info, err)
	}
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	o := <-small // 1 of 2; then the waiter for 2 when it is released
	if o.err != nil {
		t.Fatal(o.err)
	}
	if err := o.l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if o := <-last; o.err != nil {
		t.Fatal(o.err)
	} else if err := o.l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}
