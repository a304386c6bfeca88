package distlock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/redisstore"
	"github.com/distlock/distlock/redistest"
)

// Three processes of four goroutines each increment a counter with a
// non-atomic read-modify-write under the lock: no increment may be lost.
func TestMutualExclusionAcrossProcesses(t *testing.T) {
	srv := redistest.Start(t)
	_, rdb := newClient(t, srv)
	const procs, goroutines, rounds = 3, 4, 50
	var hs []*helper
	for p := 0; p < procs; p++ {
		hs = append(hs, startHelper(t, "rmw", srv.URL(), "rmw", "counter", fmt.Sprint(goroutines), fmt.Sprint(rounds)))
	}
	for _, h := range hs {
		if err := h.wait(t); err != nil {
			t.Fatalf("worker: %v", err)
		}
	}
	got, err := rdb.Get(testCtx(t), "counter").Int()
	if err != nil {
		t.Fatal(err)
	}
	if want := procs * goroutines * rounds; got != want {
		t.Fatalf("counter = %d, want %d: increments were lost, so two holders overlapped", got, want)
	}
}

// Fencing tokens increase strictly over every acquisition of a name, by
// many owners in two clients, across unlock and relock.
func TestTokensStrictlyIncrease(t *testing.T) {
	srv := redistest.Start(t)
	c1, _ := newClient(t, srv)
	c2, _ := newClient(t, srv)
	ctx := testCtx(t)
	const goroutines, rounds = 8, 130 // 1040 acquisitions
	var mu sync.Mutex                 // guards tokens; the lock orders the appends
	var tokens []uint64
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := 0; g < goroutines; g++ {
		c := c1
		if g%2 == 1 {
			c = c2
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := c.Mutex("tokens")
			for i := 0; i < rounds; i++ {
				l, err := m.Lock(ctx)
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				tokens = append(tokens, l.Token())
				mu.Unlock()
				if err := l.Unlock(ctx); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if len(tokens) != goroutines*rounds {
		t.Fatalf("%d acquisitions, want %d", len(tokens), goroutines*rounds)
	}
	for i := 1; i < len(tokens); i++ {
		if tokens[i] <= tokens[i-1] {
			t.Fatalf("token %d = %d after %d: not increasing", i, tokens[i], tokens[i-1])
		}
	}
}

// The fencing counter key may expire (no key leaks), and tokens still
// increase afterwards, because they are never below the server clock in µs.
func TestTokensIncreaseAfterCounterExpires(t *testing.T) {
	srv := redistest.Start(t)
	c, rdb := newStoreClient(t, srv, redisstore.WithFenceRetention(time.Second))
	ctx := testCtx(t)
	m := c.Mutex("fence")
	l, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	first := l.Token()
	if ttl := rdb.PTTL(ctx, "distlock:{fence}:fence").Val(); ttl <= 0 || ttl > time.Second {
		t.Fatalf("counter TTL = %v, want (0, 1s]", ttl)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	// Expire it now, as time would.
	if err := rdb.Del(ctx, "distlock:{fence}:fence").Err(); err != nil {
		t.Fatal(err)
	}
	l, err = m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock(ctx)
	if l.Token() <= first {
		t.Fatalf("token after the counter expired = %d, not above %d", l.Token(), first)
	}
}

// Locking with a lease's context re-enters; any other context is another
// owner; the lock is free when the last hold is released, in any order.
func TestReentrancy(t *testing.T) {
	srv := redistest.Start(t)
	c, _ := newClient(t, srv)
	ctx := testCtx(t)
	m := c.Mutex("re")

	outer, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	child, cancel := context.WithCancel(outer.Context()) // derived contexts re-enter too
	defer cancel()
	inner, err := m.Lock(child)
	if err != nil {
		t.Fatal(err)
	}
	if inner.Token() != outer.Token() {
		t.Fatalf("re-entry token %d, want the hold's %d", inner.Token(), outer.Token())
	}
	inner2, err := c.Mutex("re").TryLock(inner.Context())
	if err != nil {
		t.Fatal(err)
	}
	assertHolds(t, m, 3)

	// Another context of the same process is another owner.
	if _, err := m.TryLock(ctx); !errors.Is(err, distlock.ErrNotAcquired) {
		t.Fatalf("TryLock by another owner: %v, want ErrNotAcquired", err)
	}

	// Release out of order: the outer hold first.
	if err := outer.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if outer.Context().Err() == nil {
		t.Fatal("outer lease context not cancelled by its Unlock")
	}
	if inner.Context().Err() != nil {
		t.Fatal("inner lease context cancelled by the outer Unlock")
	}
	assertHolds(t, m, 2)
	if err := inner2.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	assertHolds(t, m, 1)
	if err := inner.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if info, err := m.Inspect(ctx); err != nil || info.Locked {
		t.Fatalf("after the last Unlock: %+v, %v; want free", info, err)
	}
}

func assertHolds(t *testing.T, m *distlock.Mutex, want int) {
	t.Helper()
	info, err := m.Inspect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !info.Locked || info.Holds != want {
		t.Fatalf("Inspect: locked %v holds %d, want locked with %d holds", info.Locked, info.Holds, want)
	}
}

// Unlocking twice returns ErrNotHeld and changes nothing: the second call
// must not release another hold of the same owner.
func TestDoubleUnlock(t *testing.T) {
	srv := redistest.Start(t)
	c, _ := newClient(t, srv)
	ctx := testCtx(t)
	m := c.Mutex("twice")
	outer, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	inner, err := m.Lock(outer.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := inner.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := inner.Unlock(ctx); !errors.Is(err, distlock.ErrNotHeld) {
		t.Fatalf("second Unlock: %v, want ErrNotHeld", err)
	}
	if err := inner.Extend(ctx, time.Second); !errors.Is(err, distlock.ErrNotHeld) {
		t.Fatalf("Extend after Unlock: %v, want ErrNotHeld", err)
	}
	assertHolds(t, m, 1)
	if err := outer.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := outer.Unlock(ctx); !errors.Is(err, distlock.ErrNotHeld) {
		t.Fatalf("Unlock after release: %v, want ErrNotHeld", err)
	}
}

// A lease that was lost must not release the lock its successor holds.
func TestUnlockAfterLossLeavesSuccessorAlone(t *testing.T) {
	srv := redistest.Start(t)
	c, rdb := newClient(t, srv)
	other, _ := newClient(t, srv)
	ctx := testCtx(t)
	l, err := c.Mutex("succ", distlock.WithTTL(300*time.Millisecond)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rdb.Del(ctx, "distlock:{succ}") // an operator, or an early expiry
	next, err := other.Mutex("succ").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(ctx); !errors.Is(err, distlock.ErrLockLost) {
		t.Fatalf("Unlock of the lost lease: %v, want ErrLockLost", err)
	}
	info, err := other.Mutex("succ").Inspect(ctx)
	if err != nil || !info.Locked || info.Token != next.Token() {
		t.Fatalf("successor's lock after the stale Unlock: %+v, %v", info, err)
	}
	if next.Token() <= l.Token() {
		t.Fatalf("successor token %d not above %d", next.Token(), l.Token())
	}
	if err := next.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// ForceUnlock frees the lock, wakes a waiter, and the holder learns of the
// loss at its next renewal.
func TestForceUnlock(t *testing.T) {
	srv := redistest.Start(t)
	c, _ := newClient(t, srv)
	ops, _ := newClient(t, srv)
	ctx := testCtx(t)
	l, err := c.Mutex("force", distlock.WithTTL(300*time.Millisecond)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ok, err := ops.Mutex("force").ForceUnlock(ctx)
	if err != nil || !ok {
		t.Fatalf("ForceUnlock = %v, %v", ok, err)
	}
	<-l.Context().Done()
	if cause := context.Cause(l.Context()); !errors.Is(cause, distlock.ErrLockLost) {
		t.Fatalf("cause %v, want ErrLockLost", cause)
	}
	if ok, err := ops.Mutex("force").ForceUnlock(ctx); err != nil || ok {
		t.Fatalf("second ForceUnlock = %v, %v; want false", ok, err)
	}
}

// ForceUnlock through a Mutex works on a name of any kind: every holder of
// a semaphore loses its permits and the waiter is let in; an election's
// leader is deposed and the next candidate leads.
func TestForceUnlockAnyKind(t *testing.T) {
	srv := redistest.Start(t)
	c, _ := newClient(t, srv)
	ops, _ := newClient(t, srv)
	ctx := testCtx(t)
	ttl := distlock.WithTTL(300 * time.Millisecond)

	s := c.Semaphore("force-sem", 2, ttl)
	a, err := s.Acquire(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Acquire(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	waiter := make(chan *distlock.Lease, 1)
	go func() {
		l, err := s.Acquire(ctx, 2)
		if err != nil {
			t.Error(err)
		}
		waiter <- l
	}()
	waitFor(t, func() bool { info, _ := s.Inspect(ctx); return info.Queued == 1 })
	if ok, err := ops.Semaphore("force-sem", 2).ForceUnlock(ctx); err != nil || !ok {
		t.Fatalf("ForceUnlock of a semaphore = %v, %v", ok, err)
	}
	w := <-waiter
	for _, l := range []*distlock.Lease{a, b} {
		<-l.Context().Done()
		if cause := context.Cause(l.Context()); !errors.Is(cause, distlock.ErrLockLost) {
			t.Fatalf("holder's cause %v, want ErrLockLost", cause)
		}
	}
	if w.Context().Err() != nil {
		t.Fatal("the waiter let in lost its permits")
	}
	if err := w.Unlock(ctx); err != nil {
		t.Fatal(err)
	}

	e := c.Election("force-elect", ttl)
	leader, err := e.Campaign(ctx, "one")
	if err != nil {
		t.Fatal(err)
	}
	next := make(chan *distlock.Lease, 1)
	go func() {
		l, err := ops.Election("force-elect", ttl).Campaign(ctx, "two")
		if err != nil {
			t.Error(err)
		}
		next <- l
	}()
	waitFor(t, func() bool { info, _ := c.Mutex("force-elect").Inspect(ctx); return info.Queued == 1 })
	if info, err := ops.Mutex("force-elect").Inspect(ctx); err != nil || info.Kind != distlock.KindElection || !info.Locked || info.Token != leader.Token() {
		t.Fatalf("Inspect of an election: %+v, %v; want its leader, term %d", info, err, leader.Token())
	}
	if ok, err := ops.Election("force-elect").ForceUnlock(ctx); err != nil || !ok {
		t.Fatalf("ForceUnlock of an election = %v, %v", ok, err)
	}
	two := <-next
	<-leader.Context().Done()
	if got, err := e.Leader(ctx); err != nil || got.Value != "two" || got.Term != two.Token() || got.Term <= leader.Token() {
		t.Fatalf("leader after the old one was deposed: %+v, %v (old term %d)", got, err, leader.Token())
	}
	two.Unlock(ctx)
}

// List finds held locks by pattern, and only locks.
func TestList(t *testing.T) {
	srv := redistest.Start(t)
	c, _ := newClient(t, srv)
	ctx := testCtx(t)
	for _, n := range []string{"job-a", "job-b", "other", "odd*name"} {
		l, err := c.Mutex(n).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Unlock(ctx)
	}
	got, err := c.List(ctx, "job-*")
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != "[job-a job-b]" {
		t.Fatalf("List(job-*) = %v", got)
	}
	all, err := c.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(all) != "[job-a job-b odd*name other]" {
		t.Fatalf("List() = %v", all)
	}
}
