package engine

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/distlock/distlock/store"
)

// fakeBackend is an in-memory Backend for the engine's timing logic, which
// these tests check on synctest's fake clock. Redis behaviour itself is
// tested against real servers in the other packages.
type fakeBackend struct {
	mu      sync.Mutex
	owner   map[string]string
	expires map[string]time.Time    // lease end of a held lock (fake clock), when set
	wakes   map[string]func(Notice) // the watch of each lock
	renews  [][]Request             // every Renew call
	hang    chan struct{}           // when not nil, Renew blocks until it is closed or ctx ends
	silent  bool                    // Acquire and Release never answer: they return when ctx ends
	renewed chan int                // receives the size of every Renew batch
}

func newFake() *fakeBackend {
	return &fakeBackend{owner: map[string]string{}, expires: map[string]time.Time{}, wakes: map[string]func(Notice){}, renewed: make(chan int, 100)}
}

func (f *fakeBackend) Acquire(ctx context.Context, r Request) (Grant, error) {
	if f.isSilent() {
		<-ctx.Done()
		return Grant{}, ctx.Err()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if end, ok := f.expires[r.Name]; ok && !time.Now().Before(end) {
		delete(f.owner, r.Name) // the lease ran out: nobody was told
		delete(f.expires, r.Name)
	}
	if o, ok := f.owner[r.Name]; ok && o != r.Owner {
		if end, ok := f.expires[r.Name]; ok {
			return Grant{TTL: time.Until(end)}, nil
		}
		return Grant{TTL: time.Second}, nil
	}
	f.owner[r.Name] = r.Owner
	return Grant{Acquired: true, Token: 1, Holds: 1}, nil
}

func (f *fakeBackend) Release(ctx context.Context, r Request) (Release, error) {
	if f.isSilent() {
		<-ctx.Done()
		return 0, ctx.Err()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.owner[r.Name] != r.Owner {
		return NotOwner, nil
	}
	delete(f.owner, r.Name)
	return Freed, nil
}

func (f *fakeBackend) Abandon(ctx context.Context, r Request) (bool, error) {
	res, err := f.Release(ctx, r)
	return res == Freed, err
}

func (f *fakeBackend) Renew(ctx context.Context, rs []Request, report func(int, Grant, error)) {
	f.mu.Lock()
	f.renews = append(f.renews, rs)
	hang := f.hang
	f.mu.Unlock()
	if hang != nil {
		select {
		case <-hang:
		case <-ctx.Done():
			for i := range rs {
				report(i, Grant{}, ctx.Err())
			}
			return
		}
	}
	f.mu.Lock()
	out := make([]bool, len(rs))
	for i, r := range rs {
		out[i] = f.owner[r.Name] == r.Owner
	}
	f.mu.Unlock()
	for i, ok := range out {
		if ok {
			report(i, Grant{}, nil)
		} else {
			report(i, Grant{}, ErrNotHeld)
		}
	}
	f.renewed <- len(rs)
}

func (f *fakeBackend) isSilent() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.silent
}

func (f *fakeBackend) Watch(ctx context.Context, name string, _ Kind, wake func(Notice)) (func(), error) {
	f.mu.Lock()
	f.wakes[name] = wake
	f.mu.Unlock()
	return func() {}, nil
}

// holdFor makes owner hold name until its lease ends at end, silently (as
// a holder that crashed).
func (f *fakeBackend) holdFor(name, owner string, lease time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.owner[name] = owner
	f.expires[name] = time.Now().Add(lease)
}

// release frees name as another process would, and notifies the watch.
func (f *fakeBackend) releaseAndNotify(name string) {
	f.mu.Lock()
	delete(f.owner, name)
	delete(f.expires, name)
	wake := f.wakes[name]
	f.mu.Unlock()
	if wake != nil {
		wake(Notice{})
	}
}

// Holds taken at different moments with the same lease are renewed
// together, and each is renewed between lease/6 and lease/3 after the last
// confirmation.
func TestRenewalsShareTicks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		e := New(f, nil, nil)
		defer e.Close(context.Background())
		const lease = 6 * time.Second
		var leases []*Lease
		for i := 0; i < 5; i++ {
			l, err := e.Acquire(context.Background(), Spec{Name: string(rune('a' + i)), Lease: lease, Renew: true}, false)
			if err != nil {
				t.Fatal(err)
			}
			leases = append(leases, l)
			time.Sleep(100 * time.Millisecond) // fake time: acquisitions spread over 0.5 s
		}
		start := time.Now()
		if n := <-f.renewed; n != 5 {
			t.Fatalf("first renewal batch has %d holds, want all 5", n)
		}
		if d := time.Since(start) + 500*time.Millisecond; d < lease/6 || d > lease/3 {
			t.Fatalf("first renewal %v after the first acquisition, want within [lease/6, lease/3]", d)
		}
		for _, l := range leases {
			if err := l.Unlock(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// When renewals hang, the lease context is cancelled exactly at the local
// deadline, sent + lease - margin, with ErrLockLost; a reply that comes
// later does not revive the hold.
func TestDeadlineCancelsLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		f.hang = make(chan struct{})
		e := New(f, nil, nil)
		defer e.Close(context.Background())
		const lease = 3 * time.Second
		start := time.Now()
		l, err := e.Acquire(context.Background(), Spec{Name: "x", Lease: lease, Renew: true}, false)
		if err != nil {
			t.Fatal(err)
		}
		<-l.Context().Done()
		if got, want := time.Since(start), lease-margin(lease); got != want {
			t.Fatalf("cancelled after %v, want exactly %v", got, want)
		}
		if cause := context.Cause(l.Context()); !errors.Is(cause, ErrLockLost) {
			t.Fatalf("cause %v", cause)
		}
		close(f.hang)
		synctest.Wait()
		if err := l.Unlock(context.Background()); !errors.Is(err, ErrLockLost) {
			t.Fatalf("Unlock after loss = %v, want ErrLockLost", err)
		}
	})
}

// A lease's context is made when it is first asked for: asked for only
// after the lease was unlocked, or after its hold was lost, it is born
// cancelled, with the cause it would have had, and still carries the
// acquiring context's values and the hold (for re-entry).
func TestLeaseContextAskedForLate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		f.hang = make(chan struct{})
		e := New(f, nil, nil)
		defer e.Close(context.Background())
		type key struct{}
		ctx := context.WithValue(context.Background(), key{}, "v")
		const lease = 3 * time.Second

		unlocked, err := e.Acquire(ctx, Spec{Name: "u", Lease: lease, Renew: true}, false)
		if err != nil {
			t.Fatal(err)
		}
		if err := unlocked.Unlock(context.Background()); err != nil {
			t.Fatal(err)
		}
		uctx := unlocked.Context()
		if cause := context.Cause(uctx); !errors.Is(cause, context.Canceled) {
			t.Fatalf("context of an unlocked lease: cause %v, want context.Canceled", cause)
		}
		if uctx.Value(key{}) != "v" {
			t.Fatalf("context of an unlocked lease lost the acquiring context's values")
		}

		lost, err := e.Acquire(ctx, Spec{Name: "l", Lease: lease, Renew: true}, false)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(lease) // renewals hang: the hold is lost at its deadline
		lctx := lost.Context()
		if cause := context.Cause(lctx); !errors.Is(cause, ErrLockLost) {
			t.Fatalf("context of a lost lease: cause %v, want ErrLockLost", cause)
		}
		if h := holdIn(lctx, e, "l"); h != lost.hold {
			t.Fatalf("context of a lost lease does not carry its hold")
		}
		close(f.hang)
	})
}

// A fixed lease is never renewed and ends at its deadline.
func TestFixedLeaseEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		e := New(f, nil, nil)
		defer e.Close(context.Background())
		start := time.Now()
		l, err := e.Acquire(context.Background(), Spec{Name: "x", Lease: time.Second}, false)
		if err != nil {
			t.Fatal(err)
		}
		<-l.Context().Done()
		if got, want := time.Since(start), time.Second-margin(time.Second); got != want {
			t.Fatalf("ended after %v, want %v", got, want)
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		if len(f.renews) != 0 {
			t.Fatalf("a fixed lease was renewed %d times", len(f.renews))
		}
	})
}

func TestRenewTimeGrid(t *testing.T) {
	const lease = 30 * time.Second
	for sent := time.Duration(0); sent < 2*lease; sent += 777 * time.Millisecond {
		at := renewTime(sent, lease)
		if at-sent < lease/6 || at-sent > lease/3 {
			t.Fatalf("renewTime(%v) = %v: %v after, outside [lease/6, lease/3]", sent, at, at-sent)
		}
		if at%(lease/6) != 0 {
			t.Fatalf("renewTime(%v) = %v: not on the lease/6 grid", sent, at)
		}
	}
}

// A backend that does not answer an acquisition within its lease (Redis
// frozen) gives ErrBackend while the caller's context lasts, never the
// internal request's own deadline. Close still returns, within its
// context, and says that clean-ups could not be confirmed.
func TestNoReplyWithinLeaseIsErrBackend(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		f.silent = true
		e := New(f, nil, nil)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		for _, wait := range []bool{false, true} {
			_, err := e.Acquire(ctx, Spec{Name: "x", Lease: time.Second, Renew: true}, wait)
			if !errors.Is(err, ErrBackend) || errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("Acquire(wait=%v) with no reply: %v, want ErrBackend without DeadlineExceeded", wait, err)
			}
		}
		closed, stop := context.WithTimeout(context.Background(), 5*time.Second)
		defer stop()
		if err := e.Close(closed); !errors.Is(err, ErrBackend) {
			t.Errorf("Close with clean-ups unconfirmed: %v, want ErrBackend", err)
		}
	})
}

// AcquireAll takes the members one by one, all or none: enough for the
// engine's timing tests.
func (f *fakeBackend) AcquireAll(ctx context.Context, rs []Request) ([]Grant, error) {
	return store.AcquireEach(ctx, f, rs)
}

func (f *fakeBackend) Close() error { return nil }

// A hold that ends before its acquisition is reported (lost at once, by a
// revocation that raced the reply) still gets one Ended, after its
// Acquired; one that ends after gets it from its end.
func TestEveryAcquiredHasOneEnded(t *testing.T) {
	for _, endFirst := range []bool{true, false} {
		var events []Event
		e := New(newFake(), func(ev Event) { events = append(events, ev) }, nil)
		h := newHold(context.Background(), e, Spec{Name: "x", Kind: Plain, Lease: time.Second}, "owner", 1)
		l := h.newLease(1)
		if endFirst {
			h.end(ErrClosed)
			e.acquired(l, 0)
		} else {
			e.acquired(l, 0)
			h.end(ErrClosed)
		}
		h.end(ErrClosed) // a second end reports nothing
		var kinds []EventKind
		for _, ev := range events {
			kinds = append(kinds, ev.Kind)
			if ev.Hold != h.id {
				t.Errorf("event %v of hold %d, want %d", ev.Kind, ev.Hold, h.id)
			}
		}
		if len(kinds) != 2 || kinds[0] != Acquired || kinds[1] != Ended || !errors.Is(events[1].Err, ErrClosed) {
			t.Errorf("end first %v: events %v (%+v), want Acquired then one Ended with ErrClosed", endFirst, kinds, events)
		}
	}
}
