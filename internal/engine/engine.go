package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Spec describes how to acquire one lock.
type Spec struct {
	Name  string
	Kind  Kind
	Lease time.Duration
	Renew bool // the watchdog renews the lease while held
	// Queue is how long a waiter's place in the queue of a queued kind
	// lasts without a refresh: a waiter that stops refreshing (it died, was
	// paused or cut off) loses its place that long after its last refresh.
	Queue time.Duration
	// Permits, Capacity and Value: see Request.
	Permits, Capacity int
	Value             string
}

// Engine acquires, waits for, renews and releases locks on one Backend.
type Engine struct {
	b       Backend
	observe func(Event)
	cause   func(name string, err error) error // see New
	epoch   time.Time
	owners  string // random prefix of every owner id of this engine
	seq     atomic.Uint64
	renew   *renewer

	// confirmGrants: grants made by others' requests are renewed before
	// they are handed out (see GrantConfirmer).
	confirmGrants bool

	ctx    context.Context // cancelled when Close starts: waits end
	cancel context.CancelFunc
	// abandon is cancelled when Close gives up waiting: requests still
	// under way are abandoned.
	abandon       context.Context
	abandonCancel context.CancelFunc
	deadlines     requestDeadlines // contexts of requests under abandon
	bg            sync.WaitGroup   // requests and background work: Close waits for it
	unresolved    atomic.Int64     // releases and clean-ups that Close saw fail

	closed atomic.Bool // Close has started: no new requests from callers

	work       chan func()   // requests for an idle worker (see goWork)
	idle       atomic.Int32  // idle workers
	closedWork chan struct{} // closed when Close has ended: idle workers exit

	mu         sync.Mutex
	mismatches map[string]int // semaphores whose capacity in the store differs from this client's: the one last reported
	queues     map[queueKey]*queue
	places     map[string]*Hold   // holds in their place phase, by GranteeID of their owner
	late       map[*Hold]struct{} // holds lost whose release is owed (addLate)
	draining   bool               // Close is waiting for bg: no more Adds

	revoking      bool          // the watch of force-unlock notices is started or starting (revoke.go)
	revokeReady   chan struct{} // closed once that watch is set up or failed
	revokeUp      atomic.Bool   // that watch is set up
	revokeRetryAt time.Duration // when to try it again after it failed
	stopRevoked   func()        // ends that watch
}

// New returns an engine on b. observe, if not nil, is called synchronously
// for every event and must not block. cause, if not nil, makes the cause
// of the lease contexts of the lock name out of err, the engine's reason
// for ending them (the caller adds the lock's name there, as it does to
// the errors the engine returns); nil leaves err as it is.
func New(b Backend, observe func(Event), cause func(name string, err error) error) *Engine {
	var id [16]byte
	_, _ = rand.Read(id[:]) // crypto/rand.Read never fails (Go 1.24+)
	e := &Engine{
		b:           b,
		observe:     observe,
		cause:       cause,
		epoch:       time.Now(),
		owners:      hex.EncodeToString(id[:]) + ":",
		queues:      map[queueKey]*queue{},
		mismatches:  map[string]int{},
		places:      map[string]*Hold{},
		late:        map[*Hold]struct{}{},
		revokeReady: closedChan,
		work:        make(chan func()),
		closedWork:  make(chan struct{}),
	}
	if gc, ok := b.(GrantConfirmer); ok {
		e.confirmGrants = gc.ConfirmGrants()
	}
	e.ctx, e.cancel = context.WithCancel(context.Background())
	e.abandon, e.abandonCancel = context.WithCancel(context.Background())
	e.renew = newRenewer(e)
	return e
}

// now is the monotonic time since the engine started.
func (e *Engine) now() time.Duration { return time.Since(e.epoch) }

func (e *Engine) emit(ev Event) {
	if e.observe != nil {
		e.observe(ev)
	}
}

// acquired reports the acquisition of l, the first lease of its hold, by
// a call that waited for wait, and starts the hold's clock of Ended. A
// hold that ended before (lost at once) is reported ended here, after
// its acquisition, so that every Acquired has its Ended.
func (e *Engine) acquired(l *Lease, wait time.Duration) {
	h := l.hold
	h.mu.Lock()
	if h.reported == 0 {
		h.reported = e.now() + 1
	}
	reported, ended := h.reported, h.ended
	h.mu.Unlock()
	e.emit(Event{Kind: Acquired, Name: h.name, Lock: h.kind, Hold: h.id, Token: h.token, Holds: 1, Wait: wait})
	if ended {
		h.reportEnd(reported)
	}
}

// Acquire takes the lock described by s. With wait it blocks until the lock
// is held or ctx ends; without, it makes one attempt and returns an error
// wrapping ErrNotAcquired if someone else holds the lock, or if others are
// already waiting for it (they are served first): callers of this engine
// for a plain kind, anyone's for a queued kind.
//
// If ctx carries a lease context of the same lock from this engine, the
// acquisition re-enters that hold instead.
func (e *Engine) Acquire(ctx context.Context, s Spec, wait bool) (*Lease, error) {
	if e.closed.Load() {
		return nil, ErrClosed
	}
	if ctx.Err() != nil {
		return nil, notAcquired(context.Cause(ctx))
	}
	if h := holdIn(ctx, e, s.Name); h != nil {
		if s.Kind != Semaphore || h.kind != Semaphore {
			return e.reenter(ctx, h, s.Kind)
		}
		// A semaphore is not re-entrant: a new acquisition, unless the
		// permits the caller holds leave too few for it ever to be granted.
		if h.nested+s.Permits > s.Capacity {
			return nil, fmt.Errorf("%w: the context holds %d of its %d permits; %d more could never be granted", ErrDeadlock, h.nested, s.Capacity, s.Permits)
		}
	}
	start := time.Now()
	switch {
	case !wait:
		return e.tryOnce(ctx, s)
	case s.Kind.Queued():
		return e.acquireQueued(ctx, s, start)
	}
	return e.acquirePlain(ctx, s, start)
}

// tryOnce makes one attempt (TryLock). For a plain kind it does not try
// while callers of this engine wait: they are served first. For a queued
// kind the store refuses while anyone waits.
func (e *Engine) tryOnce(ctx context.Context, s Spec) (*Lease, error) {
	if !s.Kind.Queued() && e.waiting(s.Name, s.Kind) {
		return nil, fmt.Errorf("%w: other callers of this process are waiting for it", ErrNotAcquired)
	}
	l, g, err := e.try(ctx, s)
	switch {
	case err != nil:
		return nil, err
	case l == nil:
		return nil, refused(g)
	}
	e.acquired(l, 0)
	return l, nil
}

// refused is the error of a TryLock that found the lock taken.
func refused(g Grant) error {
	if g.TTL < 0 {
		return fmt.Errorf("%w: held by another owner or waited for", ErrNotAcquired)
	}
	return fmt.Errorf("%w: held by another owner (lease %v left)", ErrNotAcquired, g.TTL)
}

// joinErr is the error of a wait that could not start.
func joinErr(err error) error {
	if errors.Is(err, ErrBackend) || errors.Is(err, ErrClosed) {
		return err
	}
	return notAcquired(err)
}

// newOwner returns a fresh owner id: unique, and secret (it is what
// releases the lock).
func (e *Engine) newOwner() string {
	var buf [64]byte
	return string(strconv.AppendUint(append(buf[:0], e.owners...), e.seq.Add(1), 36))
}

// Close ends every hold (cancelling its lease contexts with ErrClosed, before
// anything is released), releases them, ends waits with ErrClosed and waits
// for every request and clean-up still under way, all within ctx. Requests
// still under way when ctx ends are abandoned (their contexts are
// cancelled; a backend that ignores cancellation may finish them later)
// and Close returns an error wrapping ErrBackend: the locks they may have
// taken expire with their leases. The same error reports a release or
// clean-up that failed.
func (e *Engine) Close(ctx context.Context) error {
	e.mu.Lock()
	if e.closed.Swap(true) {
		e.mu.Unlock()
		return nil
	}
	e.mu.Unlock()
	defer e.abandonCancel()
	defer close(e.closedWork)

	holds, places := e.renew.stop()
	for _, h := range holds {
		h.end(ErrClosed)
	}
	// The holds lost while the server keeps their lock (revoked), and
	// not unlocked yet: their release is owed, and sent now.
	e.mu.Lock()
	for h := range e.late {
		if h.lateRelease.Swap(false) {
			holds = append(holds, h)
		}
	}
	clear(e.late)
	e.mu.Unlock()
	for _, h := range places {
		h.end(ErrClosed)
		// Its acquisition, or a refresh, may still be on its way: the
		// owner is abandoned, so that a late one takes nothing.
		e.cleanup(e.ownerOf(h))
	}
	for _, h := range holds {
		e.spawn(func() {
			rctx, cancel := e.detach(context.Background(), releaseTimeout)
			defer cancel()
			if _, err := e.b.Release(rctx, h.request(Request{})); err != nil {
				e.unresolved.Add(1)
			}
		})
	}
	e.cancel()
	e.mu.Lock()
	e.draining = true
	stopRevoked := e.stopRevoked
	e.mu.Unlock()
	if stopRevoked != nil {
		stopRevoked()
	}
	if !waitFor(ctx, &e.bg) {
		return fmt.Errorf("%w: requests to the backend still under way after %w; locks they hold expire with their leases", ErrBackend, context.Cause(ctx))
	}
	if n := e.unresolved.Load(); n > 0 {
		return fmt.Errorf("%w: %d releases failed; those locks expire with their leases", ErrBackend, n)
	}
	return nil
}

// waitFor waits for wg until ctx ends, and reports whether wg was done.
func waitFor(ctx context.Context, wg *sync.WaitGroup) bool {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return true
	case <-ctx.Done():
		return false
	}
}

// checkCapacity reports, once per change, a semaphore whose capacity in
// the store, as g says, differs from the one this client was given (the
// store's is in force).
func (e *Engine) checkCapacity(s Spec, g Grant) {
	if s.Kind != Semaphore || g.Capacity == 0 {
		return
	}
	e.mu.Lock()
	last, reported := e.mismatches[s.Name]
	switch {
	case g.Capacity == s.Capacity:
		delete(e.mismatches, s.Name)
	case !reported || last != g.Capacity:
		e.mismatches[s.Name] = g.Capacity
	}
	e.mu.Unlock()
	if g.Capacity != s.Capacity && (!reported || last != g.Capacity) {
		e.emit(Event{Kind: Mismatch, Name: s.Name, Lock: s.Kind,
			Err: fmt.Errorf("%d permits in the store, %d here: the store's number is in force", g.Capacity, s.Capacity)})
	}
}

// notAcquired is the error of an acquisition that ended for cause.
func notAcquired(cause error) error {
	return fmt.Errorf("%w: %w", ErrNotAcquired, cause)
}
