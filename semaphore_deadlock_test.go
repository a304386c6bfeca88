package distlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/redisstore"
	"github.com/distlock/distlock/redistest"
)

// A context that holds permits of a semaphore asks for more than the
// capacity in force (the stored one, set by SetPermits below this
// client's) leaves room for: it fails at once with ErrDeadlock instead of
// waiting for itself (item 8).
func TestSemaphoreNestedDeadlockUsesStoredCapacity(t *testing.T) {
	srv := redistest.Start(t)
	c, _ := newClient(t, srv)
	ctx := testCtx(t)
	s := c.Semaphore("nested", 2)
	l, err := s.Acquire(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock(ctx)
	if err := s.SetPermits(ctx, 1); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(l.Context(), 10*time.Second)
	defer cancel()
	if l2, err := s.Acquire(wctx, 1); !errors.Is(err, distlock.ErrDeadlock) {
		if err == nil {
			l2.Unlock(ctx)
		}
		t.Fatalf("Acquire of 1 more permit in a context holding 1, capacity 1: %v, want ErrDeadlock", err)
	}
}

// The same when the capacity shrinks while the nested acquisition waits:
// its next refresh finds that it can never be granted.
func TestSemaphoreNestedDeadlockAfterShrink(t *testing.T) {
	srv := redistest.Start(t)
	c, _ := newClient(t, srv)
	other, _ := newClient(t, srv)
	ctx := testCtx(t)
	opt, waiting := waitEvents()
	w := distlock.New(redisstore.New(srv.Client(t)), distlock.WithLogger(nil), opt)
	defer w.Close()
	l, err := w.Semaphore("shrink", 2).Acquire(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock(ctx)
	o, err := other.Semaphore("shrink", 2).Acquire(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Unlock(ctx)
	out := make(chan error, 1)
	go func() {
		l2, err := w.Semaphore("shrink", 2).Acquire(l.Context(), 1)
		if err == nil {
			l2.Unlock(ctx)
		}
		out <- err
	}()
	<-waiting
	if err := c.Semaphore("shrink", 2).SetPermits(ctx, 1); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-out:
		if !errors.Is(err, distlock.ErrDeadlock) {
			t.Fatalf("nested Acquire after the capacity shrank to 1: %v, want ErrDeadlock", err)
		}
	case <-ctx.Done():
		t.Fatal("the nested Acquire still waits for itself after the capacity shrank to 1")
	}
}
