// Package storetest checks a store of locks (an implementation of package
// store) against what package distlock promises its users, through
// distlock's public API only, as testing/fstest does for file systems.
//
// A store's own tests call Run with a function that returns a new store
// on the same locks each time it is called (the same server or cluster,
// the same key prefix): the suite makes several Clients, one per store,
// and closes them (which closes their stores) when each test ends.
//
//	func TestConformance(t *testing.T) {
//		srv := startServer(t)
//		storetest.Run(t, func(t *testing.T) store.Store {
//			return mystore.New(srv.Connect(t))
//		})
//	}
//
// The suite checks, for every kind of lock the store serves (a kind its
// Validator refuses with ErrUnsupported is skipped, and so is a check whose
// capability the store does not implement): exclusion across clients,
// re-entry, fencing tokens strictly increasing, waking a waiter on a
// release rather than at the holder's lease, a lease context that ends
// before another holder can take the lock when renewals stop, late
// requests made harmless (an acquisition or renewal that reaches the store
// after its caller gave up on it), first-come first-served queues,
// semaphore capacity, kinds that do not mix, nothing left behind by a
// cancelled wait or by Close, and ErrUnsupported, before any request, for
// every capability the store lacks. Locks are named after the test, under
// a random prefix, so the suite can share a server with other tests.
//
// The suite takes about half a minute per store: some checks wait for a
// lease of several seconds to run out.
package storetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/store"
)

// Run runs the conformance suite, as subtests of t, on the stores that
// newStore returns.
func Run(t *testing.T, newStore func(t *testing.T) store.Store) {
	var id [4]byte
	_, _ = rand.Read(id[:])
	s := &suite{newStore: newStore, prefix: "storetest-" + hex.EncodeToString(id[:]) + "-"}
	for _, tc := range []struct {
		name string
		run  func(*testing.T, *suite)
	}{
		{"Mutex/Exclusion", testExclusion},
		{"Mutex/Reentry", testReentry},
		{"Mutex/TokensIncrease", testTokensIncrease},
		{"Mutex/WakeOnRelease", testWakeOnRelease},
		{"Mutex/RenewalKeepsTheLock", testRenewal},
		{"Mutex/LeaseEndsBeforeOthersHold", testLeaseEndsFirst},
		{"Mutex/LateAcquisitionIsHarmless", testLateAcquire},
		{"Mutex/LateRenewalIsHarmless", testLateRenewal},
		{"MultiMutex/AllOrNothing", testMulti},
		{"Queued/FIFO", testFIFO},
		{"Queued/LateAcquisitionIsHarmless", testLateQueuedAcquire},
		{"RWMutex/SharedAndExclusive", testRW},
		{"Semaphore/Capacity", testSemaphore},
		{"Election/Succession", testElection},
		{"Kinds/DoNotMix", testKinds},
		{"Cleanup/CancelledWait", testCancelledWait},
		{"Cleanup/Close", testClose},
		{"Once", testOnce},
		{"Observer", testObserved},
		{"Capabilities", testCapabilities},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, s) })
	}
}

// A suite makes the clients and the lock names of the checks.
type suite struct {
	newStore func(t *testing.T) store.Store
	prefix   string
}

// name returns a lock name of the test, unique in the run.
func (s *suite) name(t *testing.T, suffix string) string {
	n := s.prefix + strings.NewReplacer("/", ".", " ", "_").Replace(t.Name())
	if suffix != "" {
		n += "." + suffix
	}
	return n
}

// client returns a Client on a new store, wrapped by wrap if not nil. The
// Client is closed when the test ends, and its Close must succeed:
// nothing of it may be left in the store.
func (s *suite) client(t *testing.T, wrap func(store.Store) store.Store, opts ...distlock.Option) *distlock.Client {
	t.Helper()
	st := s.newStore(t)
	if wrap != nil {
		st = wrap(st)
	}
	c := distlock.New(st, append([]distlock.Option{distlock.WithLogger(nil)}, opts...)...)
	if err := c.Err(); err != nil {
		t.Fatalf("a Client on the store: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return c
}

// faultyClient returns a Client whose store is wrapped by a faulty store.
func (s *suite) faultyClient(t *testing.T) (*distlock.Client, *faulty) {
	t.Helper()
	var f *faulty
	c := s.client(t, func(st store.Store) store.Store { f = &faulty{Store: st}; return f })
	return c, f
}

// ctx is a context that ends with the test, bounded so that a broken
// wake-up fails the check instead of hanging it.
func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// served skips the test if err says the store does not serve the kind,
// and fails it on any other error.
func served(t *testing.T, kind string, err error) {
	t.Helper()
	switch {
	case errors.Is(err, distlock.ErrUnsupported):
		t.Skipf("the store does not serve %s: %v", kind, err)
	case err != nil:
		t.Fatalf("%s: %v", kind, err)
	}
}

// has reports whether the store of a new client implements T; a check
// that needs T skips without it.
func has[T any](t *testing.T, s *suite) bool {
	t.Helper()
	st := s.newStore(t)
	defer st.Close()
	_, ok := st.(T)
	return ok
}

// waits is an event handler that signals, on the channel of a name, each
// time a call of that Client starts waiting for that lock (for a queued
// kind, once the store has given it its place).
type waits struct {
	mu sync.Mutex
	ch map[string]chan struct{}
}

func newWaits() *waits { return &waits{ch: map[string]chan struct{}{}} }

func (w *waits) of(name string) chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ch[name] == nil {
		w.ch[name] = make(chan struct{}, 64)
	}
	return w.ch[name]
}

func (w *waits) handle(ev distlock.Event) {
	if ev.Kind == distlock.EventWaiting {
		w.of(ev.Name) <- struct{}{}
	}
}

// await waits for the next wait of name, failing the test after d.
func (w *waits) await(t *testing.T, name string, d time.Duration) {
	t.Helper()
	select {
	case <-w.of(name):
	case <-time.After(d):
		t.Fatalf("no call started waiting for %q within %v", name, d)
	}
}

// result is what a call made in a goroutine returned.
type result struct {
	l   *distlock.Lease
	err error
}

// async runs lock in a goroutine and returns the channel of its result.
func async(lock func() (*distlock.Lease, error)) <-chan result {
	ch := make(chan result, 1)
	go func() {
		l, err := lock()
		ch <- result{l, err}
	}()
	return ch
}

// get returns the result of ch, failing the test if it does not come
// within d.
func get(t *testing.T, ch <-chan result, d time.Duration, what string) result {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(d):
		t.Fatalf("%s: no result within %v", what, d)
	}
	return result{}
}

// unlock unlocks l, failing the test on an error.
func unlock(t *testing.T, l *distlock.Lease) {
	t.Helper()
	if err := l.Unlock(context.Background()); err != nil {
		t.Errorf("Unlock %v: %v", l, err)
	}
}
