package storetest

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/store"
)

// testExclusion: a Mutex held by one client cannot be taken by another
// until it is unlocked.
func testExclusion(t *testing.T, s *suite) {
	a, b := s.client(t, nil), s.client(t, nil)
	name := s.name(t, "")
	ctx := ctx(t)
	l, err := a.Mutex(name).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Mutex(name).TryLock(ctx); !errors.Is(err, distlock.ErrNotAcquired) {
		t.Fatalf("TryLock of a held mutex from another client: %v, want ErrNotAcquired", err)
	}
	if _, err := a.Mutex(name).TryLock(ctx); !errors.Is(err, distlock.ErrNotAcquired) {
		t.Fatalf("TryLock of a held mutex from the same client, not re-entering: %v, want ErrNotAcquired", err)
	}
	if l.Context().Err() != nil {
		t.Fatalf("lease context ended while held: %v", context.Cause(l.Context()))
	}
	unlock(t, l)
	if l.Context().Err() == nil {
		t.Error("lease context still live after Unlock")
	}
	if err := l.Unlock(ctx); !errors.Is(err, distlock.ErrNotHeld) {
		t.Errorf("second Unlock: %v, want ErrNotHeld", err)
	}
	l2, err := b.Mutex(name).TryLock(ctx)
	if err != nil {
		t.Fatalf("TryLock after Unlock: %v", err)
	}
	unlock(t, l2)
}

// testReentry: Lock with a Lease's context re-enters it, with the same
// token; the lock stays held until the last hold is unlocked.
func testReentry(t *testing.T, s *suite) {
	a, b := s.client(t, nil), s.client(t, nil)
	name := s.name(t, "")
	ctx := ctx(t)
	m := a.Mutex(name)
	outer, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	inner, err := m.Lock(outer.Context())
	if err != nil {
		t.Fatalf("re-entry: %v", err)
	}
	if inner.Token() != outer.Token() {
		t.Errorf("re-entry token %d, want the outer's %d", inner.Token(), outer.Token())
	}
	unlock(t, inner)
	if _, err := b.Mutex(name).TryLock(ctx); !errors.Is(err, distlock.ErrNotAcquired) {
		t.Fatalf("TryLock after the inner hold's Unlock: %v, want ErrNotAcquired (the outer hold remains)", err)
	}
	if outer.Context().Err() != nil {
		t.Fatalf("the outer lease ended with the inner one: %v", context.Cause(outer.Context()))
	}
	unlock(t, outer)
	l, err := b.Mutex(name).TryLock(ctx)
	if err != nil {
		t.Fatalf("TryLock after the last Unlock: %v", err)
	}
	unlock(t, l)
}

// testTokensIncrease: every acquisition of a name, by any client, gets a
// fencing token above every earlier one.
func testTokensIncrease(t *testing.T, s *suite) {
	cs := []*distlock.Client{s.client(t, nil), s.client(t, nil), s.client(t, nil)}
	name := s.name(t, "")
	ctx := ctx(t)
	var last uint64
	for i := range 30 {
		l, err := cs[i%len(cs)].Mutex(name).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if l.Token() <= last {
			t.Fatalf("acquisition %d: token %d, not above %d", i, l.Token(), last)
		}
		last = l.Token()
		unlock(t, l)
	}
}

// testWakeOnRelease: a waiter takes the lock when it is unlocked, long
// before the holder's lease would have run out: the store notifies
// releases.
func testWakeOnRelease(t *testing.T, s *suite) {
	a := s.client(t, nil)
	var f *faulty
	var atWait atomic.Int64 // refusals when the waiter started waiting
	atWait.Store(-1)
	b := s.client(t, func(st store.Store) store.Store { f = &faulty{Store: st}; return f },
		distlock.WithEventHandler(func(ev distlock.Event) {
			if ev.Kind == distlock.EventWaiting {
				atWait.Store(f.refusals.Load())
			}
		}))
	refused := f.watchRefusals()
	name := s.name(t, "")
	ctx := ctx(t)
	l, err := a.Mutex(name, distlock.WithTTL(time.Minute)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	got := async(func() (*distlock.Lease, error) { return b.Mutex(name).Lock(wctx) })
	// The waiter found the lock held after it started waiting (an
	// attempt made before may be followed by another before it sleeps):
	// from now on, only a notice of the release, or the end of the
	// holder's lease, makes it try again.
	timeout := time.After(10 * time.Second)
	for n := atWait.Load(); n < 0 || f.refusals.Load() <= n; n = atWait.Load() {
		select {
		case <-refused:
		case <-timeout:
			t.Fatal("the waiter made no attempt while waiting, within 10 s")
		}
	}
	unlock(t, l)
	r := get(t, got, 15*time.Second, "the waiter")
	if r.err != nil {
		t.Fatalf("waiter, the lock unlocked 10 s before its lease of a minute ends: %v", r.err)
	}
	if r.l.Token() <= l.Token() {
		t.Errorf("waiter's token %d, not above %d", r.l.Token(), l.Token())
	}
	unlock(t, r.l)
}

// testRenewal: a lock held for several times its lease stays held: the
// renewals reach the store, and its lease context stays live.
func testRenewal(t *testing.T, s *suite) {
	a, b := s.client(t, nil), s.client(t, nil)
	name := s.name(t, "")
	ctx := ctx(t)
	m, ttl := shortLease(t, a, name, time.Second)
	l, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	other := b.Mutex(name)
	for end := time.Now().Add(4 * ttl); time.Now().Before(end); time.Sleep(ttl / 10) {
		if l2, err := other.TryLock(ctx); !errors.Is(err, distlock.ErrNotAcquired) {
			t.Fatalf("another client took the lock %v after it was acquired with a lease of %v: %v, %v",
				time.Since(end.Add(-4*ttl)).Round(time.Millisecond), ttl, l2, err)
		}
		if err := l.Context().Err(); err != nil {
			t.Fatalf("lease context ended while renewed: %v", context.Cause(l.Context()))
		}
	}
	unlock(t, l)
}

// shortLease returns a Mutex of c named name with a lease of ttl, or of
// the first of 2, 4 and 8 times ttl that the store accepts (its
// Validator: a lease must outlast what the store needs to renew it),
// and that lease; it skips the test if the store takes none of them.
func shortLease(t *testing.T, c *distlock.Client, name string, ttl time.Duration) (*distlock.Mutex, time.Duration) {
	t.Helper()
	var err error
	for lease := ttl; lease <= 8*ttl; lease *= 2 {
		m := c.Mutex(name, distlock.WithTTL(lease))
		if err = m.Err(); !errors.Is(err, distlock.ErrInvalidOption) {
			return m, lease
		}
	}
	t.Skipf("the store refuses every lease from %v to %v: %v", ttl, 8*ttl, err)
	return nil, 0
}

// leaseLossTTL is the lease of the check whose holder stops renewing: its
// margin (a fiftieth of it) must cover a late timer on a loaded machine.
const leaseLossTTL = 8 * time.Second

// testLeaseEndsFirst: when a holder's renewals stop reaching the store,
// its lease context is cancelled, with ErrLockLost, before another client
// can take the lock.
func testLeaseEndsFirst(t *testing.T, s *suite) {
	a, f := s.faultyClient(t)
	b := s.client(t, nil)
	name := s.name(t, "")
	ctx := ctx(t)
	l, err := a.Mutex(name, distlock.WithTTL(leaseLossTTL)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	f.dropRenewals()
	m := b.Mutex(name)
	l2, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The holder's context was cancelled (its Done closed) before the
	// lock could be taken, so it reads ended now.
	if l.Context().Err() == nil {
		t.Errorf("another client took the lock while the holder's lease context was live")
	}
	if cause := context.Cause(l.Context()); !errors.Is(cause, distlock.ErrLockLost) {
		t.Errorf("cause %v, want ErrLockLost", cause)
	}
	if l2.Token() <= l.Token() {
		t.Errorf("token after the loss %d, not above %d", l2.Token(), l.Token())
	}
	if err := l.Unlock(ctx); !errors.Is(err, distlock.ErrLockLost) {
		t.Errorf("Unlock of the lost lease: %v, want ErrLockLost", err)
	}
	unlock(t, l2)
}

// testLateAcquire: an acquisition that reaches the store after its caller
// gave up (its context ended) takes nothing: the lock is free for others
// at once, not after a lease nobody holds.
func testLateAcquire(t *testing.T, s *suite) { lateAcquisition(t, s, mutexKind) }

// lateAcquisition is the check of late acquisitions for kind k: the
// request of a waiting acquisition is held back until its caller has given
// up, then goes on to the store, which must refuse it (no lock, no place
// in a queue): another client then takes the lock at once.
func lateAcquisition(t *testing.T, s *suite, k lockKind) {
	a, f := s.faultyClient(t)
	b := s.client(t, nil)
	name := s.name(t, "")
	ctx := ctx(t)
	h := f.holdAcquire(t)
	short, cancel := context.WithCancel(ctx)
	got := async(func() (*distlock.Lease, error) { return k.lock(a, name, true, short) })
	<-h.arrived
	cancel()
	if r := get(t, got, 10*time.Second, "the abandoned acquisition"); !errors.Is(r.err, distlock.ErrNotAcquired) {
		t.Fatalf("%s whose context ended while its request was held back: %v, want ErrNotAcquired", k.name, r.err)
	}
	h.goOn()
	if err := <-h.done; err != nil {
		t.Fatal(err)
	}
	l, err := k.lock(b, name, false, ctx)
	if err != nil {
		t.Fatalf("%s after the late acquisition: %v (it took the lock, or a place ahead, for an owner nobody tracks)", k.name, err)
	}
	unlock(t, l)
}

// testLateRenewal: a renewal that reaches the store after its holder
// unlocked and another client took the lock changes nothing for the new
// holder.
func testLateRenewal(t *testing.T, s *suite) {
	a, f := s.faultyClient(t)
	b, c := s.client(t, nil), s.client(t, nil)
	name := s.name(t, "")
	ctx := ctx(t)
	// Renewals come every sixth to third of the lease.
	m, _ := shortLease(t, a, name, 600*time.Millisecond)
	l, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	h := f.holdRenew(t)
	<-h.arrived
	unlock(t, l)
	l2, err := b.Mutex(name, distlock.WithTTL(time.Minute)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	h.goOn()
	if err := <-h.done; err != nil {
		t.Fatal(err)
	}
	if _, err := c.Mutex(name).TryLock(ctx); !errors.Is(err, distlock.ErrNotAcquired) {
		t.Fatalf("TryLock while the new holder holds: %v, want ErrNotAcquired", err)
	}
	if l2.Context().Err() != nil {
		t.Fatalf("the new holder's lease ended: %v", context.Cause(l2.Context()))
	}
	unlock(t, l2)
}

// testMulti: a MultiMutex takes all of its members or none, and excludes
// a Mutex of any member.
func testMulti(t *testing.T, s *suite) {
	a, b := s.client(t, nil), s.client(t, nil)
	x, y := s.name(t, "x"), s.name(t, "y")
	ctx := ctx(t)
	held, err := b.Mutex(y).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if _, err := a.MultiMutex([]string{x, y}).Lock(mctx); !errors.Is(err, distlock.ErrNotAcquired) {
		t.Fatalf("MultiMutex with a member held: %v, want ErrNotAcquired", err)
	}
	lx, err := b.Mutex(x).TryLock(ctx)
	if err != nil {
		t.Fatalf("TryLock of the free member after the refused MultiMutex: %v (it was left held)", err)
	}
	unlock(t, lx)
	unlock(t, held)
	l, err := a.MultiMutex([]string{x, y}).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{x, y} {
		if _, err := b.Mutex(n).TryLock(ctx); !errors.Is(err, distlock.ErrNotAcquired) {
			t.Errorf("TryLock of member %q while the MultiMutex holds it: %v, want ErrNotAcquired", n, err)
		}
	}
	if len(l.Tokens()) != 2 {
		t.Errorf("Tokens %v, want one per member", l.Tokens())
	}
	unlock(t, l)
}
