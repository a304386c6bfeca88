package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/distlock/store"
)

// faulty wraps a store to put faults between a Client and it: renewals
// that never reach the store, and a request held back (as by a slow
// network) until the check lets it go on, after its caller gave up on it.
// It passes on the store's Validator and GrantConfirmer (a store that
// wants grants confirmed keeps them confirmed), and hides the other
// optional interfaces: the checks that use it need none.
type faulty struct {
	store.Store

	mu        sync.Mutex
	dropRenew bool
	acquire   *heldBack     // the next Acquire is held back
	renew     *heldBack     // the next Renew is held back
	refused   chan struct{} // told of each Acquire the store refused
	refusals  atomic.Int64  // how many it refused
}

// A heldBack is one request held back by a faulty store.
type heldBack struct {
	arrived chan struct{} // closed when the request has reached the wrapper
	release chan struct{} // closed by the check: the request goes on to the store
	done    chan error    // the store's answer: an error, or nil for an acquisition that took nothing
	once    sync.Once     // closes release
}

// newHeldBack returns a heldBack that the end of t lets go on, if the
// check did not (it failed before): a request held for ever would hold up
// the Client's Close.
func newHeldBack(t *testing.T) *heldBack {
	h := &heldBack{arrived: make(chan struct{}), release: make(chan struct{}), done: make(chan error, 1)}
	t.Cleanup(h.goOn)
	return h
}

// goOn lets the held-back request go on to the store; it may be called
// more than once.
func (h *heldBack) goOn() { h.once.Do(func() { close(h.release) }) }

// Err and Validate implement store.Validator as the store does, if it
// does.
func (f *faulty) Err() error {
	if v, ok := f.Store.(store.Validator); ok {
		return v.Err()
	}
	return nil
}

func (f *faulty) Validate(kind store.Kind, lease, queue time.Duration) error {
	if v, ok := f.Store.(store.Validator); ok {
		return v.Validate(kind, lease, queue)
	}
	return nil
}

// ConfirmGrants implements store.GrantConfirmer as the store does.
func (f *faulty) ConfirmGrants() bool {
	gc, ok := f.Store.(store.GrantConfirmer)
	return ok && gc.ConfirmGrants()
}

// errDropped is the failure of a renewal that a faulty store dropped.
var errDropped = fmt.Errorf("%w: storetest: renewal dropped", store.ErrBackend)

// holdAcquire holds back the next Acquire, until the check lets it go
// on (go), or the test ends.
func (f *faulty) holdAcquire(t *testing.T) *heldBack {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.acquire = newHeldBack(t)
	return f.acquire
}

// holdRenew holds back the next Renew, as holdAcquire does.
func (f *faulty) holdRenew(t *testing.T) *heldBack {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.renew = newHeldBack(t)
	return f.renew
}

// watchRefusals makes the returned channel receive a value for each
// acquisition that the store refused (the lock is held), from now on.
func (f *faulty) watchRefusals() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.refused = make(chan struct{}, 64)
	return f.refused
}

// dropRenewals makes every renewal from now on fail without reaching the
// store.
func (f *faulty) dropRenewals() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dropRenew = true
}

func (f *faulty) Acquire(ctx context.Context, r store.Request) (store.Grant, error) {
	f.mu.Lock()
	h := f.acquire
	f.acquire = nil
	f.mu.Unlock()
	if h == nil {
		g, err := f.Store.Acquire(ctx, r)
		if err == nil && !g.Acquired && !g.Queued {
			f.refusals.Add(1)
			f.mu.Lock()
			if f.refused != nil {
				select {
				case f.refused <- struct{}{}:
				default:
				}
			}
			f.mu.Unlock()
		}
		return g, err
	}
	close(h.arrived)
	<-h.release
	// Late: the caller's context may have ended long ago.
	g, err := f.Store.Acquire(context.Background(), r)
	switch {
	case errors.Is(err, store.ErrBackend):
		h.done <- err
	case err != nil:
		h.done <- nil // refused
	case g.Acquired || g.Queued:
		h.done <- fmt.Errorf("an acquisition that reached the store after its owner was given up was applied: %+v", g)
	default:
		h.done <- nil
	}
	return g, err
}

func (f *faulty) Renew(ctx context.Context, rs []store.Request, report func(int, store.Grant, error)) {
	f.mu.Lock()
	drop, h := f.dropRenew, f.renew
	f.renew = nil
	f.mu.Unlock()
	switch {
	case drop:
		for i := range rs {
			report(i, store.Grant{}, errDropped)
		}
		return
	case h == nil:
		f.Store.Renew(ctx, rs, report)
		return
	}
	close(h.arrived)
	<-h.release
	var applied error
	var mu sync.Mutex
	f.Store.Renew(context.Background(), rs, func(i int, g store.Grant, err error) {
		if err == nil {
			mu.Lock()
			applied = fmt.Errorf("a renewal that reached the store after its owner released the lock was applied: %+v", g)
			mu.Unlock()
		}
		report(i, g, err)
	})
	h.done <- applied
}
