// Package engine is the backend-independent core of distlock: it waits for
// locks (push wake-ups with a lease-bounded fallback), keeps held leases
// alive in batches, cancels lease contexts before a lease can run out on the
// server, and hands re-entrant acquisitions to the hold that a context
// carries. Backends (Redis today) implement the Backend interface.
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
	Lease time.Duration
	Renew bool // the watchdog renews the lease while held
}

// Engine acquires, waits for, renews and releases locks on one Backend.
type Engine struct {
	b       Backend
	observe func(Event)
	epoch   time.Time
	owners  string // random prefix of every owner id of this engine
	seq     atomic.Uint64
	renew   *renewer

	ctx    context.Context // cancelled when Close starts: waits end, no new requests
	cancel context.CancelFunc
	// abandon is cancelled when Close gives up waiting: requests still
	// under way are abandoned.
	abandon       context.Context
	abandonCancel context.CancelFunc
	bg            sync.WaitGroup // background work: watches, renewals, clean-ups

	closed atomic.Bool

	mu       sync.Mutex
	queues   map[string]*queue
	draining bool // Close is waiting for bg: no more Adds
}

// spawn runs fn in a goroutine that Close waits for. Once Close has started
// waiting, fn runs in the caller instead.
func (e *Engine) spawn(fn func()) {
	e.mu.Lock()
	if e.draining {
		e.mu.Unlock()
		fn()
		return
	}
	e.bg.Add(1)
	e.mu.Unlock()
	go func() {
		defer e.bg.Done()
		fn()
	}()
}

// New returns an engine on b. observe, if not nil, is called synchronously
// for every event and must not block.
func New(b Backend, observe func(Event)) *Engine {
	var id [16]byte
	_, _ = rand.Read(id[:]) // crypto/rand.Read never fails (Go 1.24+)
	e := &Engine{
		b:       b,
		observe: observe,
		epoch:   time.Now(),
		owners:  hex.EncodeToString(id[:]) + ":",
		queues:  map[string]*queue{},
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

// Acquire takes the lock described by s. With wait it blocks until the lock
// is held or ctx ends; without, it makes one attempt and returns an error
// wrapping ErrNotAcquired if someone else holds the lock.
//
// If ctx carries a lease context of the same lock from this engine, the
// acquisition re-enters that hold instead.
func (e *Engine) Acquire(ctx context.Context, s Spec, wait bool) (*Lease, error) {
	if e.closed.Load() {
		return nil, ErrClosed
	}
	if ctx.Err() != nil {
		return nil, notAcquired(s.Name, context.Cause(ctx))
	}
	if h, ok := ctx.Value(holdKey{e, s.Name}).(*Hold); ok {
		return e.reenter(ctx, h)
	}
	start := time.Now()

	// One attempt at once, unless others of this process already wait: then
	// line up behind them.
	var g Grant
	if !wait || !e.waiting(s.Name) {
		l, g0, err := e.try(ctx, s)
		if err != nil {
			return nil, err
		}
		if l != nil {
			e.emit(Event{Kind: Acquired, Name: s.Name, Token: l.Token(), Holds: 1})
			return l, nil
		}
		if !wait {
			return nil, fmt.Errorf("%w: lock %q is held by another owner (lease %v left)", ErrNotAcquired, s.Name, g0.TTL)
		}
		g = g0
	}

	q, w, first, err := e.join(ctx, s.Name)
	if errors.Is(err, ErrBackend) || errors.Is(err, ErrClosed) {
		return nil, fmt.Errorf("lock %q: %w", s.Name, err)
	}
	if err != nil {
		return nil, notAcquired(s.Name, err)
	}
	defer e.leave(q, w)
	e.emit(Event{Kind: Waiting, Name: s.Name})
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	// The first waiter tries again at once: watching started before this
	// attempt, so a release after it cannot go unnoticed. Later ones wait
	// for their turn.
	for try := first; ; try = true {
		if ctx.Err() != nil {
			return nil, notAcquired(s.Name, context.Cause(ctx))
		}
		if try {
			l, g0, err := e.try(ctx, s)
			if err != nil {
				return nil, err
			}
			if l != nil {
				e.emit(Event{Kind: Acquired, Name: s.Name, Token: l.Token(), Holds: 1, Wait: time.Since(start)})
				return l, nil
			}
			g = g0
		} else {
			g.TTL = s.Lease // the holder's lease is unknown: assume ours
		}
		// A lost notification costs at most the holder's remaining lease.
		timer.Reset(pollDelay(g.TTL))
		select {
		case <-w.wake:
		case <-timer.C:
		case <-ctx.Done():
			return nil, notAcquired(s.Name, context.Cause(ctx))
		case <-e.ctx.Done():
			return nil, ErrClosed
		}
	}
}

// try makes one attempt and turns a grant into a Lease. Every attempt has
// an owner id of its own: a hold that an earlier attempt may have left
// behind (and that is being cleaned up) is never mistaken for this one.
func (e *Engine) try(ctx context.Context, s Spec) (*Lease, Grant, error) {
	r := Request{Name: s.Name, Owner: e.owners + strconv.FormatUint(e.seq.Add(1), 36), Hold: 1, Lease: s.Lease}
	g, sent, err := e.attempt(ctx, r)
	if err != nil || !g.Acquired {
		return nil, g, err
	}
	h := &Hold{e: e, name: s.Name, owner: r.Owner, token: g.Token, renew: s.Renew, lease: s.Lease, index: -1}
	base, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	h.ctx, h.cancel = context.WithValue(base, holdKey{e, s.Name}, h), cancel
	h.lastHold.Store(1)
	h.leases.Store(1)
	added, late := e.renew.add(h, sent)
	if !added {
		e.cleanup(r)
		cancel(ErrClosed)
		return nil, g, ErrClosed
	}
	if late {
		// The reply came too late to be of use: the lease is (nearly) over.
		e.lose(h, fmt.Errorf("%w: the acquisition reply came after the lease deadline", ErrLockLost), true)
		return nil, Grant{TTL: 0}, nil
	}
	return h.newLease(1), g, nil
}

// attempt sends one Acquire. The request itself is never cancelled: if ctx
// ends first, attempt returns at once and a background task waits for the
// reply and releases whatever the request may have taken, so a cancelled
// acquisition leaves no lock behind. The same clean-up follows a backend
// error, after which the request may or may not have been applied.
func (e *Engine) attempt(ctx context.Context, r Request) (Grant, time.Duration, error) {
	type result struct {
		g   Grant
		err error
	}
	sent := e.now()
	if ctx.Done() == nil { // cannot end: no need to be able to return early
		g, err := e.b.Acquire(ctx, r)
		if err != nil {
			e.cleanup(r)
			return Grant{}, sent, fmt.Errorf("lock %q: %w", r.Name, err)
		}
		return g, sent, nil
	}
	done := make(chan result, 1)
	go func() {
		bctx, cancel := e.detach(ctx, r.Lease)
		defer cancel()
		g, err := e.b.Acquire(bctx, r)
		done <- result{g, err}
	}()
	select {
	case res := <-done:
		if res.err != nil {
			e.cleanup(r)
			return Grant{}, sent, e.detachedErr(r, res.err)
		}
		return res.g, sent, nil
	case <-ctx.Done():
		e.spawn(func() {
			if res := <-done; res.err != nil || res.g.Acquired {
				e.cleanup(r)
			}
		})
		return Grant{}, sent, notAcquired(r.Name, context.Cause(ctx))
	}
}

// detach returns a context for a request that must outlive ctx (so that its
// outcome is known) but not the lease it is about (a reply after that is of
// no use), nor Close's patience. It keeps ctx's values.
func (e *Engine) detach(ctx context.Context, lease time.Duration) (context.Context, context.CancelFunc) {
	bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), lease)
	stop := context.AfterFunc(e.abandon, cancel)
	return bctx, func() {
		stop()
		cancel()
	}
}

// detachedErr explains the failure of request r made under a context from
// detach, while the caller's context lasts. The request's own context
// ending is not the caller's business: Close abandoned it, or the backend
// did not answer within the lease.
func (e *Engine) detachedErr(r Request, err error) error {
	switch {
	case errors.Is(err, ErrBackend):
		return fmt.Errorf("lock %q: %w", r.Name, err)
	case e.abandon.Err() != nil:
		return ErrClosed
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%w: lock %q: no reply within the lease (%v)", ErrBackend, r.Name, r.Lease)
	}
	return fmt.Errorf("%w: lock %q: %w", ErrBackend, r.Name, err)
}

// cleanup releases, in the background, a hold that an interrupted or
// failed request may have taken. It keeps trying for one lease (after that
// the lease has run out anyway), or until the engine is closed: an attempt
// under way then still completes unless Close gives up on it, but none
// follows.
func (e *Engine) cleanup(r Request) {
	e.spawn(func() {
		ctx, cancel := e.detach(context.Background(), r.Lease)
		defer cancel()
		delay := 10 * time.Millisecond
		for {
			if res, err := e.b.Release(ctx, r); err == nil {
				if res == Freed {
					e.handOff(r.Name)
				}
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-e.ctx.Done():
				return
			case <-time.After(delay):
				delay = min(2*delay, time.Second)
			}
		}
	})
}

// reenter adds a lease to the hold h.
func (e *Engine) reenter(ctx context.Context, h *Hold) (*Lease, error) {
	if err := h.lostErr(); err != nil {
		return nil, err
	}
	id := h.lastHold.Add(1)
	h.leases.Add(1)
	r := Request{Name: h.name, Owner: h.owner, Hold: id, Lease: e.renew.leaseOf(h), Reenter: true}
	g, _, err := e.attempt(ctx, r)
	if err != nil || !g.Acquired {
		h.leases.Add(-1)
	}
	if err != nil {
		return nil, err
	}
	if !g.Acquired {
		e.lose(h, fmt.Errorf("%w: re-entry found it no longer held by this owner", ErrLockLost), false)
		return nil, h.lostErr()
	}
	e.emit(Event{Kind: Acquired, Name: h.name, Token: h.token, Holds: g.Holds})
	return h.newLease(id), nil
}

// release removes hold id of h (every hold of its owner with id 0),
// retrying a failed attempt while ctx lasts. A ctx that has already ended
// still gets one attempt, bounded by releaseTimeout, so that a deferred
// Unlock releases even after the work's context has expired.
func (e *Engine) release(ctx context.Context, h *Hold, id uint64) error {
	if ctx.Err() != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
		defer cancel()
	}
	r := Request{Name: h.name, Owner: h.owner, Hold: id}
	var err error
	var res Release
	retried := false
	for try := 0; try < releaseTries; try++ {
		if res, err = e.b.Release(ctx, r); err == nil {
			break
		}
		retried = true
		if ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		// The lock will expire by itself: stop renewing it.
		if e.renew.remove(h) {
			h.cancel(fmt.Errorf("%w: release failed: %w", ErrLockLost, err))
		}
		return fmt.Errorf("lock %q: release failed, it expires with its lease: %w", h.name, err)
	}
	if res == NotOwner && retried && h.ctx.Err() == nil {
		// An earlier attempt that seemed to fail freed it: the lease was
		// valid all along, so no one else can have taken it.
		res = Freed
	}
	switch res {
	case Freed:
		if e.renew.remove(h) {
			h.cancel(nil)
			e.emit(Event{Kind: Released, Name: h.name, Token: h.token})
		}
		e.handOff(h.name)
	case NotOwner:
		e.lose(h, fmt.Errorf("%w: it was no longer held by this owner at release", ErrLockLost), false)
		return h.lostErr()
	}
	return nil
}

// lose ends h because the lock was lost, cancelling its lease contexts
// with cause. With stale, the lock may still be ours on the server (a
// deadline passed without confirmation), so it is released in the background
// to let waiters in sooner.
func (e *Engine) lose(h *Hold, cause error, stale bool) {
	e.renew.remove(h)
	if h.ctx.Err() != nil {
		return
	}
	h.cancel(cause)
	e.emit(Event{Kind: Lost, Name: h.name, Token: h.token, Err: cause})
	if stale {
		e.cleanup(Request{Name: h.name, Owner: h.owner, Hold: 0, Lease: e.renew.leaseOf(h)})
	}
}

// Close stops renewals, releases every hold, ends waits with ErrClosed and
// waits for background work, all within ctx. Requests still under way when
// ctx ends are abandoned (their contexts are cancelled; a backend that
// ignores cancellation may finish them later) and Close returns an error
// wrapping ErrBackend: the locks they may have taken expire with their
// leases.
func (e *Engine) Close(ctx context.Context) error {
	if e.closed.Swap(true) {
		return nil
	}
	defer e.abandonCancel()

	holds := e.renew.stop()
	var wg sync.WaitGroup
	for _, h := range holds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = e.b.Release(ctx, Request{Name: h.name, Owner: h.owner, Hold: 0})
			h.cancel(ErrClosed)
		}()
	}
	released := waitFor(ctx, &wg)
	for _, h := range holds {
		h.cancel(ErrClosed) // also those whose release is still on its way
	}
	e.cancel()
	e.mu.Lock()
	e.draining = true
	e.mu.Unlock()
	if !released || !waitFor(ctx, &e.bg) {
		return fmt.Errorf("%w: close: requests to the backend still under way after %w; locks they hold expire with their leases", ErrBackend, context.Cause(ctx))
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

func notAcquired(name string, cause error) error {
	return fmt.Errorf("%w: lock %q: %w", ErrNotAcquired, name, cause)
}

// pollDelay is how long a waiter sleeps without a notification: the
// holder's remaining lease, or a short poll when the lease is unknown.
func pollDelay(ttl time.Duration) time.Duration {
	switch {
	case ttl < 0:
		return unboundedPoll
	case ttl < time.Millisecond:
		return time.Millisecond
	}
	return ttl
}

const (
	releaseTries   = 3
	releaseTimeout = 5 * time.Second
	unboundedPoll  = time.Second
)
