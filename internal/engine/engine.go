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

	ctx    context.Context // cancelled when Close starts: waits end
	cancel context.CancelFunc
	// abandon is cancelled when Close gives up waiting: requests still
	// under way are abandoned.
	abandon       context.Context
	abandonCancel context.CancelFunc
	bg            sync.WaitGroup // requests and background work: Close waits for it
	unresolved    atomic.Int64   // releases and clean-ups that Close saw fail

	closed atomic.Bool // Close has started: no new requests from callers

	mu       sync.Mutex
	queues   map[string]*queue
	draining bool // Close is waiting for bg: no more Adds
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
// wrapping ErrNotAcquired if someone else holds the lock, or if callers of
// this engine are already waiting for it (they are served first).
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

	// One attempt at once, unless others of this process already wait:
	// then line up behind them.
	if e.waiting(s.Name) {
		if !wait {
			return nil, fmt.Errorf("%w: lock %q: other callers of this process are waiting for it", ErrNotAcquired, s.Name)
		}
	} else {
		l, g, err := e.try(ctx, s)
		if err != nil {
			return nil, err
		}
		if l != nil {
			e.emit(Event{Kind: Acquired, Name: s.Name, Token: l.Token(), Holds: 1})
			return l, nil
		}
		if !wait {
			return nil, fmt.Errorf("%w: lock %q is held by another owner (lease %v left)", ErrNotAcquired, s.Name, max(g.TTL, 0))
		}
	}

	q, w, first, err := e.join(ctx, s.Name)
	if errors.Is(err, ErrBackend) || errors.Is(err, ErrClosed) {
		return nil, fmt.Errorf("lock %q: %w", s.Name, err)
	}
	if err != nil {
		return nil, notAcquired(s.Name, err)
	}
	// A waiter that leaves without the lock hands on a wake-up it did not
	// act on, and the head's duty to watch the holder's lease.
	acquired, woken := false, false
	defer func() { e.leave(q, w, !acquired, woken) }()
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
			woken = false
			l, g, err := e.try(ctx, s)
			if err != nil {
				return nil, err
			}
			if l != nil {
				acquired = true
				e.heldUntil(q, s.Lease)
				e.emit(Event{Kind: Acquired, Name: s.Name, Token: l.Token(), Holds: 1, Wait: time.Since(start)})
				return l, nil
			}
			e.heldUntil(q, g.TTL)
		}
		// A lost notification costs at most the holder's remaining lease.
		timer.Reset(pollDelay(e.holderLeft(q, s.Lease)))
		select {
		case <-w.wake:
			woken = true
		case <-timer.C:
			woken = true
		case <-ctx.Done():
			return nil, notAcquired(s.Name, context.Cause(ctx))
		case <-e.ctx.Done():
			return nil, ErrClosed
		}
	}
}

// try makes one attempt and turns a grant into a Lease. Every attempt has
// an owner id of its own: an attempt that is given up is abandoned (see
// cleanup), and a late request of it is refused, never mistaken for a
// later attempt.
func (e *Engine) try(ctx context.Context, s Spec) (*Lease, Grant, error) {
	r := Request{Name: s.Name, Owner: e.owners + strconv.FormatUint(e.seq.Add(1), 36), Hold: 1, Lease: s.Lease}
	sent := e.now()
	type outcome struct {
		l   *Lease
		g   Grant
		err error
	}
	out, replied := call(e, ctx, s.Lease, func(c context.Context) (Grant, error) { return e.b.Acquire(c, r) },
		func(g Grant, err error, waiting bool) outcome {
			switch {
			case errors.Is(err, ErrClosed):
				return outcome{err: ErrClosed}
			case err != nil:
				e.cleanup(r) // it may have been applied, now or later
				return outcome{err: fmt.Errorf("lock %q: %w", s.Name, err)}
			case !g.Acquired:
				return outcome{g: g}
			case !waiting:
				e.cleanup(r)
				return outcome{}
			}
			l, err := e.hold(s, r, g, sent)
			return outcome{l: l, g: g, err: err}
		})
	if !replied {
		return nil, Grant{}, notAcquired(s.Name, context.Cause(ctx))
	}
	return out.l, out.g, out.err
}

// hold turns the grant g of request r, sent at sent, into a Hold and its
// first Lease. It returns no Lease, and releases the lock, if the reply came
// too late to be of use or Close has started.
func (e *Engine) hold(s Spec, r Request, g Grant, sent time.Duration) (*Lease, error) {
	h := newHold(e, s, r.Owner, g.Token)
	added, late := e.renew.add(h, sent)
	if !added {
		e.cleanup(r)
		h.cancel(ErrClosed)
		return nil, ErrClosed
	}
	if late {
		// The reply came too late to be of use: the lease is (nearly) over.
		e.lose(h, fmt.Errorf("%w: the acquisition reply came after the lease deadline", ErrLockLost), true)
		return nil, nil
	}
	return h.newLease(1), nil
}

// reenter adds a lease to the hold h.
//
// A re-entry counts only once it has succeeded: if the hold's last lease is
// unlocked while a re-entry is on its way, the lock is released at once and
// the re-entry fails with ErrNotHeld (its hold, if it reached the server,
// went with the release).
func (e *Engine) reenter(ctx context.Context, h *Hold) (*Lease, error) {
	if !h.usable() {
		return nil, h.endErr()
	}
	id := h.lastHold.Add(1)
	r := Request{Name: h.name, Owner: h.owner, Hold: id, Lease: e.renew.leaseOf(h), Reenter: true}
	type outcome struct {
		l   *Lease
		err error
	}
	out, replied := call(e, ctx, r.Lease, func(c context.Context) (Grant, error) { return e.b.Acquire(c, r) },
		func(g Grant, err error, waiting bool) outcome {
			switch {
			case errors.Is(err, ErrClosed):
				return outcome{err: ErrClosed}
			case err != nil:
				e.releaseInBackground(h, id) // the hold may have been added
				return outcome{err: fmt.Errorf("lock %q: %w", h.name, err)}
			case !g.Acquired:
				// Not this owner's any more: a loss, unless the hold ended
				// first (released or lost while the re-entry was on its way).
				e.lose(h, fmt.Errorf("%w: re-entry found it no longer held by this owner", ErrLockLost), false)
				return outcome{err: h.endErr()}
			case !waiting:
				e.releaseInBackground(h, id)
				return outcome{}
			}
			l := h.add(id)
			if l == nil {
				return outcome{err: h.endErr()}
			}
			e.emit(Event{Kind: Acquired, Name: h.name, Token: h.token, Holds: g.Holds})
			return outcome{l: l}
		})
	if !replied {
		return nil, notAcquired(h.name, context.Cause(ctx))
	}
	return out.l, out.err
}

// unlock ends lease id of h for its caller: the last lease of a hold
// releases the lock, any other lease only its own hold.
func (e *Engine) unlock(ctx context.Context, h *Hold, id uint64) error {
	if h.drop() {
		return e.releaseAll(ctx, h)
	}
	return e.releaseOne(ctx, h, id)
}

// releaseInBackground removes hold id of h, added by a re-entry whose
// caller has gone or that failed, while the hold lasts (its end removes
// every hold of the owner).
func (e *Engine) releaseInBackground(h *Hold, id uint64) {
	e.spawn(func() {
		ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
		defer cancel()
		_ = e.releaseOne(ctx, h, id)
	})
}

// releaseAll releases every hold of h. The hold ends, and its lease
// contexts are cancelled, before the release is sent: once the lock can be
// taken by someone else, no context of h is live. If the release cannot be
// confirmed, it is retried in the background, and the lock expires with
// its lease at the latest.
func (e *Engine) releaseAll(ctx context.Context, h *Hold) error {
	if !e.endHold(h, errReleased) {
		return h.unlockErr()
	}
	res, err := e.release(ctx, h, 0)
	switch {
	case err != nil:
		e.cleanup(Request{Name: h.name, Owner: h.owner, Lease: e.renew.leaseOf(h)})
		return fmt.Errorf("lock %q: release not confirmed, it is retried in the background and expires with its lease at the latest: %w", h.name, err)
	case res == NotOwner:
		return fmt.Errorf("lock %q: %w: it was no longer held by this owner at release", h.name, ErrLockLost)
	}
	e.emit(Event{Kind: Released, Name: h.name, Token: h.token})
	e.handOff(h.name)
	return nil
}

// releaseOne releases hold id of h, one of several leases of the hold.
func (e *Engine) releaseOne(ctx context.Context, h *Hold, id uint64) error {
	if h.ctx.Err() != nil {
		return h.unlockErr()
	}
	res, err := e.release(ctx, h, id)
	switch {
	case err != nil:
		// The hold id may stay on the server: the release of the last
		// lease removes every hold of the owner.
		return fmt.Errorf("lock %q: release not confirmed: %w", h.name, err)
	case res == Freed:
		// No other hold had reached the server (a re-entry on its way):
		// the lock is free, so the hold has ended.
		if e.endHold(h, errReleased) {
			e.emit(Event{Kind: Released, Name: h.name, Token: h.token})
		}
		e.handOff(h.name)
	case res == NotOwner:
		e.lose(h, fmt.Errorf("%w: it was no longer held by this owner at release", ErrLockLost), false)
		return h.unlockErr() // nil if the last lease's release came first
	}
	return nil
}

// release sends the release of hold id (0: every hold) of h, retrying a
// failed attempt while ctx lasts. A ctx that has already ended still gets
// one attempt, bounded by releaseTimeout, so that a deferred Unlock releases
// even after the work's context has expired.
func (e *Engine) release(ctx context.Context, h *Hold, id uint64) (Release, error) {
	if ctx.Err() != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
		defer cancel()
	}
	r := Request{Name: h.name, Owner: h.owner, Hold: id}
	type outcome struct {
		res     Release
		retried bool
		err     error
	}
	out, replied := call(e, ctx, releaseTimeout, func(c context.Context) (outcome, error) {
		var o outcome
		var err error
		for try := 0; try < releaseTries; try++ {
			if o.res, err = e.b.Release(c, r); err == nil || c.Err() != nil || ctx.Err() != nil {
				break
			}
			o.retried = true
		}
		return o, err
	}, func(o outcome, err error, waiting bool) outcome {
		if !waiting {
			if err != nil {
				e.cleanup(Request{Name: h.name, Owner: h.owner, Lease: e.renew.leaseOf(h)})
			} else if o.res == Freed {
				e.handOff(h.name)
			}
		}
		o.err = err
		return o
	})
	if !replied {
		return 0, context.Cause(ctx)
	}
	if out.err != nil {
		return 0, out.err
	}
	if out.res == NotOwner && out.retried {
		// An earlier attempt that seemed to fail may have freed it. It
		// cannot be told apart from a force-unlock in between; either way
		// this owner no longer holds the lock.
		out.res = Freed
	}
	return out.res, nil
}

// endHold ends h with cause, unless it has ended already, and cancels its
// lease contexts (with no cause for a release). It reports whether it did.
func (e *Engine) endHold(h *Hold, cause error) bool {
	if !e.renew.end(h, cause) {
		return false
	}
	if cause == errReleased {
		h.cancel(nil)
	} else {
		h.cancel(cause)
	}
	return true
}

// lose ends h because the lock was lost, cancelling its lease contexts
// with cause. With stale, the lock may still be ours on the server (a
// deadline passed without confirmation), so it is released in the background
// to let waiters in sooner.
func (e *Engine) lose(h *Hold, cause error, stale bool) {
	if e.renew.end(h, cause) {
		e.lost(h, stale)
	}
}

// lost finishes the loss of h, which the renewer has just ended.
func (e *Engine) lost(h *Hold, stale bool) {
	cause := e.renew.causeOf(h)
	h.cancel(cause)
	e.emit(Event{Kind: Lost, Name: h.name, Token: h.token, Err: cause})
	if stale {
		e.cleanup(Request{Name: h.name, Owner: h.owner, Lease: e.renew.leaseOf(h)})
	}
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

	holds := e.renew.stop()
	for _, h := range holds {
		h.cancel(ErrClosed)
	}
	for _, h := range holds {
		e.spawn(func() {
			rctx, cancel := e.detach(context.Background(), releaseTimeout)
			defer cancel()
			if _, err := e.b.Release(rctx, Request{Name: h.name, Owner: h.owner}); err != nil {
				e.unresolved.Add(1)
			}
		})
	}
	e.cancel()
	e.mu.Lock()
	e.draining = true
	e.mu.Unlock()
	if !waitFor(ctx, &e.bg) {
		return fmt.Errorf("%w: close: requests to the backend still under way after %w; locks they hold expire with their leases", ErrBackend, context.Cause(ctx))
	}
	if n := e.unresolved.Load(); n > 0 {
		return fmt.Errorf("%w: close: %d releases failed; those locks expire with their leases", ErrBackend, n)
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
