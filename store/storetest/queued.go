package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/store"
)

// A lockKind is one kind of lock, as a check uses it.
type lockKind struct {
	name string
	// lock acquires the exclusive side of the kind on c, waiting with
	// wait (Lock) or not (TryLock).
	lock func(c *distlock.Client, name string, wait bool, ctx context.Context) (*distlock.Lease, error)
	// err is what the kind's constructor reports (Err).
	err func(c *distlock.Client, name string) error
}

// mutexKind is the plain Mutex.
var mutexKind = lockKind{"Mutex",
	func(c *distlock.Client, n string, wait bool, ctx context.Context) (*distlock.Lease, error) {
		if wait {
			return c.Mutex(n).Lock(ctx)
		}
		return c.Mutex(n).TryLock(ctx)
	},
	func(c *distlock.Client, n string) error { return c.Mutex(n).Err() }}

// queuedKinds are the kinds whose waiters queue on the store.
var queuedKinds = []lockKind{
	{"FairMutex",
		func(c *distlock.Client, n string, wait bool, ctx context.Context) (*distlock.Lease, error) {
			if wait {
				return c.FairMutex(n).Lock(ctx)
			}
			return c.FairMutex(n).TryLock(ctx)
		},
		func(c *distlock.Client, n string) error { return c.FairMutex(n).Err() }},
	{"RWMutex",
		func(c *distlock.Client, n string, wait bool, ctx context.Context) (*distlock.Lease, error) {
			if wait {
				return c.RWMutex(n).Lock(ctx)
			}
			return c.RWMutex(n).TryLock(ctx)
		},
		func(c *distlock.Client, n string) error { return c.RWMutex(n).Err() }},
	{"Semaphore",
		func(c *distlock.Client, n string, wait bool, ctx context.Context) (*distlock.Lease, error) {
			if wait {
				return c.Semaphore(n, 1).Acquire(ctx, 1)
			}
			return c.Semaphore(n, 1).TryAcquire(ctx, 1)
		},
		func(c *distlock.Client, n string) error { return c.Semaphore(n, 1).Err() }},
	{"Election",
		func(c *distlock.Client, n string, wait bool, ctx context.Context) (*distlock.Lease, error) {
			if !wait {
				// An election has no TryLock: a candidate whose context
				// has ended campaigns no more. The checks that use it
				// expect an answer at once (the name free, or in use as
				// another kind).
				short, cancel := context.WithTimeout(ctx, 5*time.Second)
				defer cancel()
				ctx = short
			}
			return c.Election(n).Campaign(ctx, "candidate")
		},
		func(c *distlock.Client, n string) error { return c.Election(n).Err() }},
}

// eachQueued runs check for every queued kind the store serves.
func eachQueued(t *testing.T, s *suite, check func(t *testing.T, k lockKind)) {
	for _, k := range queuedKinds {
		t.Run(k.name, func(t *testing.T) {
			served(t, k.name, k.err(s.client(t, nil), s.name(t, "")))
			check(t, k)
		})
	}
}

// testFIFO: waiters of a queued kind, in any clients, get the lock in the
// order they queued.
func testFIFO(t *testing.T, s *suite) {
	eachQueued(t, s, func(t *testing.T, k lockKind) {
		const n = 4
		name := s.name(t, "")
		ctx := ctx(t)
		l, err := k.lock(s.client(t, nil), name, true, ctx)
		if err != nil {
			t.Fatal(err)
		}
		order := make(chan int, n)
		done := make(chan error, n)
		for i := range n {
			w := newWaits()
			c := s.client(t, nil, distlock.WithEventHandler(w.handle))
			go func() {
				l, err := k.lock(c, name, true, ctx)
				if err != nil {
					done <- fmt.Errorf("waiter %d: %w", i, err)
					return
				}
				order <- i
				done <- l.Unlock(context.Background())
			}()
			w.await(t, name, 10*time.Second) // queued before the next
		}
		unlock(t, l)
		for range n {
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		}
		close(order)
		want := 0
		for i := range order {
			if i != want {
				t.Fatalf("waiter %d got the lock in turn %d", i, want)
			}
			want++
		}
	})
}

// testLateQueuedAcquire: an acquisition of a queued kind that reaches the
// store after its caller gave up takes neither the lock nor a place.
func testLateQueuedAcquire(t *testing.T, s *suite) {
	eachQueued(t, s, func(t *testing.T, k lockKind) { lateAcquisition(t, s, k) })
}

// testRW: readers share an RWMutex, a writer excludes readers and
// writers, and a reader that arrives while a writer waits queues behind
// it.
func testRW(t *testing.T, s *suite) {
	w := newWaits()
	a, b := s.client(t, nil), s.client(t, nil, distlock.WithEventHandler(w.handle))
	name := s.name(t, "")
	served(t, "RWMutex", a.RWMutex(name).Err())
	ctx := ctx(t)
	r1, err := a.RWMutex(name).RLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := b.RWMutex(name).TryRLock(ctx)
	if err != nil {
		t.Fatalf("a second reader: %v", err)
	}
	if r2.Token() <= r1.Token() {
		t.Errorf("second reader's token %d, not above the first's %d", r2.Token(), r1.Token())
	}
	if _, err := b.RWMutex(name).TryLock(ctx); !errors.Is(err, distlock.ErrNotAcquired) {
		t.Fatalf("TryLock (write) while read: %v, want ErrNotAcquired", err)
	}
	writer := async(func() (*distlock.Lease, error) { return b.RWMutex(name).Lock(ctx) })
	w.await(t, name, 10*time.Second)
	if _, err := a.RWMutex(name).TryRLock(ctx); !errors.Is(err, distlock.ErrNotAcquired) {
		t.Fatalf("TryRLock while a writer waits: %v, want ErrNotAcquired (readers queue behind it)", err)
	}
	unlock(t, r1)
	unlock(t, r2)
	wr := get(t, writer, 15*time.Second, "the writer")
	if wr.err != nil {
		t.Fatal(wr.err)
	}
	if _, err := a.RWMutex(name).TryRLock(ctx); !errors.Is(err, distlock.ErrNotAcquired) {
		t.Fatalf("TryRLock while written: %v, want ErrNotAcquired", err)
	}
	unlock(t, wr.l)
}

// testSemaphore: at most the capacity's permits are held, across clients;
// a waiter is let in when permits are returned; TryAcquire of more
// permits than the capacity fails at once.
func testSemaphore(t *testing.T, s *suite) {
	const capacity = 3
	w := newWaits()
	cs := []*distlock.Client{s.client(t, nil), s.client(t, nil), s.client(t, nil, distlock.WithEventHandler(w.handle))}
	name := s.name(t, "")
	served(t, "Semaphore", cs[0].Semaphore(name, capacity).Err())
	ctx := ctx(t)
	var held []*distlock.Lease
	for i := range capacity {
		l, err := cs[i%2].Semaphore(name, capacity).TryAcquire(ctx, 1)
		if err != nil {
			t.Fatalf("permit %d of %d: %v", i+1, capacity, err)
		}
		held = append(held, l)
	}
	if _, err := cs[2].Semaphore(name, capacity).TryAcquire(ctx, 1); !errors.Is(err, distlock.ErrNotAcquired) {
		t.Fatalf("TryAcquire with every permit held: %v, want ErrNotAcquired", err)
	}
	if _, err := cs[2].Semaphore(name, capacity).Acquire(ctx, capacity+1); !errors.Is(err, distlock.ErrInvalidOption) {
		t.Fatalf("Acquire of more permits than the capacity: %v, want ErrInvalidOption", err)
	}
	// The capacity in force is the store's: a client that says 10 still
	// finds the 3 permits held.
	if _, err := cs[1].Semaphore(name, 10).TryAcquire(ctx, 1); !errors.Is(err, distlock.ErrNotAcquired) {
		t.Fatalf("TryAcquire by a client that says the capacity is 10, 3 of 3 held: %v, want ErrNotAcquired", err)
	}
	two := async(func() (*distlock.Lease, error) { return cs[2].Semaphore(name, capacity).Acquire(ctx, 2) })
	w.await(t, name, 10*time.Second)
	unlock(t, held[0])
	if _, err := cs[0].Semaphore(name, capacity).TryAcquire(ctx, 1); !errors.Is(err, distlock.ErrNotAcquired) {
		t.Fatalf("TryAcquire of the permit returned while a waiter of two queues first: %v, want ErrNotAcquired", err)
	}
	unlock(t, held[1])
	r := get(t, two, 15*time.Second, "the waiter of two permits")
	if r.err != nil {
		t.Fatal(r.err)
	}
	if _, err := cs[0].Semaphore(name, capacity).TryAcquire(ctx, 1); !errors.Is(err, distlock.ErrNotAcquired) {
		t.Fatalf("TryAcquire with 3 of 3 permits held: %v, want ErrNotAcquired", err)
	}
	unlock(t, r.l)
	unlock(t, held[2])
}

// testElection: one leader at a time; the next candidate leads when the
// leader resigns, with a higher term.
func testElection(t *testing.T, s *suite) {
	w := newWaits()
	a, b := s.client(t, nil), s.client(t, nil, distlock.WithEventHandler(w.handle))
	name := s.name(t, "")
	served(t, "Election", a.Election(name).Err())
	ctx := ctx(t)
	lead, err := a.Election(name).Campaign(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	next := async(func() (*distlock.Lease, error) { return b.Election(name).Campaign(ctx, "b") })
	w.await(t, name, 10*time.Second)
	if has[store.Inspector](t, s) {
		l, err := b.Election(name).Leader(ctx)
		if err != nil || l.Value != "a" || l.Term != lead.Token() {
			t.Errorf("Leader = %+v, %v; want a, term %d", l, err, lead.Token())
		}
	}
	unlock(t, lead)
	r := get(t, next, 15*time.Second, "the next candidate")
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.l.Token() <= lead.Token() {
		t.Errorf("next term %d, not above %d", r.l.Token(), lead.Token())
	}
	unlock(t, r.l)
}

// testKinds: a name in use as one kind refuses every other kind with
// ErrWrongKind, and the lock in use is left as it was.
func testKinds(t *testing.T, s *suite) {
	a, b := s.client(t, nil), s.client(t, nil)
	ctx := ctx(t)
	var kinds []lockKind
	for _, k := range append([]lockKind{mutexKind}, queuedKinds...) {
		if !errors.Is(k.err(a, s.name(t, "")), distlock.ErrUnsupported) {
			kinds = append(kinds, k)
		}
	}
	for _, held := range kinds {
		name := s.name(t, held.name)
		l, err := held.lock(a, name, true, ctx)
		if err != nil {
			t.Fatalf("%s: %v", held.name, err)
		}
		for _, other := range kinds {
			if other.name == held.name {
				continue
			}
			if _, err := other.lock(b, name, false, ctx); !errors.Is(err, distlock.ErrWrongKind) {
				t.Errorf("%s of a name held as a %s: %v, want ErrWrongKind", other.name, held.name, err)
			}
		}
		if l.Context().Err() != nil {
			t.Fatalf("the %s was lost: %v", held.name, context.Cause(l.Context()))
		}
		unlock(t, l)
	}
}
