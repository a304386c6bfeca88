package storetest

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/store"
)

// testCancelledWait: a waiter of a queued kind whose context ends leaves
// no place behind: when the holder unlocks, the lock is free at once, not
// granted to the waiter that left (which would hold it up to its queue
// timeout).
func testCancelledWait(t *testing.T, s *suite) {
	eachQueued(t, s, func(t *testing.T, k lockKind) {
		w := newWaits()
		a, b, c := s.client(t, nil), s.client(t, nil, distlock.WithEventHandler(w.handle)), s.client(t, nil)
		name := s.name(t, "")
		ctx := ctx(t)
		l, err := k.lock(a, name, true, ctx)
		if err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithCancel(ctx)
		waiter := async(func() (*distlock.Lease, error) { return k.lock(b, name, true, wctx) })
		w.await(t, name, 10*time.Second)
		cancel()
		if r := get(t, waiter, 10*time.Second, "the cancelled waiter"); !errors.Is(r.err, distlock.ErrNotAcquired) {
			t.Fatalf("cancelled waiter: %v, want ErrNotAcquired", r.err)
		}
		unlock(t, l)
		l2, err := k.lock(c, name, false, ctx)
		if err != nil {
			t.Fatalf("after the holder unlocked, the cancelled waiter gone: %v (its place was left behind)", err)
		}
		unlock(t, l2)
	})
}

// testClose: Close ends the Client's lease contexts, releases its locks
// and removes its places in queues: others take them at once.
func testClose(t *testing.T, s *suite) {
	w := newWaits()
	a, b := s.client(t, nil, distlock.WithEventHandler(w.handle)), s.client(t, nil)
	ctx := ctx(t)
	mutex, queued := s.name(t, "mutex"), s.name(t, "queued")
	l, err := a.Mutex(mutex, distlock.WithTTL(time.Minute)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var k *lockKind
	for i := range queuedKinds {
		if !errors.Is(queuedKinds[i].err(a, queued), distlock.ErrUnsupported) {
			k = &queuedKinds[i]
			break
		}
	}
	var hq *distlock.Lease
	var waiter <-chan result
	if k != nil {
		if hq, err = k.lock(b, queued, true, ctx); err != nil {
			t.Fatal(err)
		}
		waiter = async(func() (*distlock.Lease, error) { return k.lock(a, queued, true, ctx) })
		w.await(t, queued, 10*time.Second)
	}
	if err := a.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if l.Context().Err() == nil {
		t.Error("a lease context of the closed Client is live")
	}
	l2, err := b.Mutex(mutex).TryLock(ctx)
	if err != nil {
		t.Fatalf("TryLock of a lock the closed Client held: %v", err)
	}
	unlock(t, l2)
	if k == nil {
		return
	}
	if r := get(t, waiter, 10*time.Second, "the waiter of the closed Client"); !errors.Is(r.err, distlock.ErrClosed) {
		t.Errorf("waiter of the closed Client: %v, want ErrClosed", r.err)
	}
	unlock(t, hq)
	l3, err := k.lock(b, queued, false, ctx)
	if err != nil {
		t.Fatalf("%s after its holder unlocked, the closed Client's waiter gone: %v (its place was left behind)", k.name, err)
	}
	unlock(t, l3)
}

// testOnce: a job runs once across clients, and its record tells the
// others.
func testOnce(t *testing.T, s *suite) {
	a, b := s.client(t, nil), s.client(t, nil)
	key := s.name(t, "")
	ctx := ctx(t)
	ran := 0
	job := func(context.Context, uint64) error { ran++; return nil }
	run, err := a.Once(ctx, key, time.Hour, job)
	served(t, "Once", err)
	if run.State != distlock.RanHere || ran != 1 {
		t.Fatalf("first Once: %+v, ran %d times", run, ran)
	}
	run, err = b.Once(ctx, key, time.Hour, job)
	if err != nil || run.State != distlock.AlreadyDone || ran != 1 {
		t.Fatalf("second Once, from another client: %+v, %v, ran %d times; want AlreadyDone, once", run, err, ran)
	}
	if forgot, err := b.Forget(ctx, key); err != nil || !forgot {
		t.Fatalf("Forget: %v, %v", forgot, err)
	}
	if run, err := b.Once(ctx, key, time.Hour, job); err != nil || run.State != distlock.RanHere || ran != 2 {
		t.Fatalf("Once after Forget: %+v, %v, ran %d times", run, err, ran)
	}
}

// testCapabilities: an operation whose interface the store lacks fails
// with ErrUnsupported; one it has works.
func testCapabilities(t *testing.T, s *suite) {
	a, b := s.client(t, nil), s.client(t, nil)
	name := s.name(t, "")
	ctx := ctx(t)
	// Renewed every second or two: without a RevokeWatcher, the holder
	// learns of ForceUnlock at its next renewal.
	l, err := a.Mutex(name, distlock.WithTTL(6*time.Second)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock(context.Background())
	check := func(what string, has bool, err error) {
		t.Helper()
		switch {
		case !has && !errors.Is(err, distlock.ErrUnsupported):
			t.Errorf("%s on a store without it: %v, want ErrUnsupported", what, err)
		case has && err != nil:
			t.Errorf("%s: %v", what, err)
		}
	}
	info, err := b.Mutex(name).Inspect(ctx)
	check("Inspect", has[store.Inspector](t, s), err)
	if err == nil && (!info.Locked || info.Token != l.Token() || info.Kind != distlock.KindMutex) {
		t.Errorf("Inspect of a held Mutex: %+v, want held with token %d", info, l.Token())
	}
	names, err := b.List(ctx, s.name(t, "")+"*")
	check("List", has[store.Lister](t, s), err)
	if err == nil && !slices.Contains(names, name) {
		t.Errorf("List = %v, without the held lock %q", names, name)
	}
	_, _, err = b.LastRun(ctx, name)
	check("LastRun", has[store.OnceKeeper](t, s), err)
	if !errors.Is(b.Semaphore(name, 2).Err(), distlock.ErrUnsupported) {
		err := b.Semaphore(s.name(t, "sem"), 2).SetPermits(ctx, 3)
		check("SetPermits", has[store.PermitSetter](t, s), err)
	}
	// Revoke and ForceUnlock, each on a lock of its own. A holder learns
	// of either at once from a RevokeWatcher store, else at its next
	// renewal: every second or two with a lease of 6 s.
	revoked, err := a.Mutex(s.name(t, "revoked"), distlock.WithTTL(6*time.Second)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	left, err := b.Mutex(revoked.Name()).Revoke(ctx)
	check("Revoke", has[store.Revoker](t, s), err)
	if err == nil {
		if left <= 0 {
			t.Errorf("Revoke of a held lock: %v left, want > 0", left)
		}
		if _, err := b.Mutex(revoked.Name()).TryLock(ctx); !errors.Is(err, distlock.ErrNotAcquired) {
			t.Errorf("TryLock of a revoked lock before its holder unlocked it: %v, want ErrNotAcquired", err)
		}
		awaitLost(t, revoked, "revoked")
		unlockLost(t, revoked)
		l2, err := b.Mutex(revoked.Name()).TryLock(ctx)
		if err != nil {
			t.Fatalf("TryLock after the revoked holder unlocked: %v", err)
		}
		unlock(t, l2)
	} else {
		unlock(t, revoked)
	}
	forced, err := a.Mutex(s.name(t, "forced"), distlock.WithTTL(6*time.Second)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	had, err := b.Mutex(forced.Name()).ForceUnlock(ctx)
	check("ForceUnlock", has[store.ForceUnlocker](t, s), err)
	if err == nil {
		if !had {
			t.Error("ForceUnlock of a held lock reported nothing to delete")
		}
		l2, err := b.Mutex(forced.Name()).TryLock(ctx)
		if err != nil {
			t.Fatalf("TryLock after ForceUnlock: %v", err)
		}
		awaitLost(t, forced, "forced out")
		unlock(t, l2)
	}
	_ = forced.Unlock(context.Background())
}

// awaitLost waits until the lease context of l, whose lock was taken from
// it, ends with ErrLockLost.
func awaitLost(t *testing.T, l *distlock.Lease, how string) {
	t.Helper()
	select {
	case <-l.Context().Done():
		if cause := context.Cause(l.Context()); !errors.Is(cause, distlock.ErrLockLost) {
			t.Errorf("the %s holder's lease context ended with %v, want ErrLockLost", how, cause)
		}
	case <-time.After(10 * time.Second):
		t.Errorf("the %s holder's lease context is live 10 s later (a renewal comes every 2 s at most)", how)
	}
}

// unlockLost unlocks a lease whose lock was revoked: the release may report
// the loss.
func unlockLost(t *testing.T, l *distlock.Lease) {
	t.Helper()
	if err := l.Unlock(context.Background()); err != nil && !errors.Is(err, distlock.ErrLockLost) {
		t.Errorf("Unlock of the revoked lease: %v", err)
	}
}
