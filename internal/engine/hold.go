package engine

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"
)

// A Hold is one owner's possession of one lock, from acquisition to release
// or loss. Re-entrant acquisitions add Leases to the same Hold.
type Hold struct {
	e     *Engine
	name  string
	owner string
	token uint64
	renew bool // the watchdog renews the lease

	ctx    context.Context // carries holdKey; cancelled on release or loss
	cancel context.CancelCauseFunc

	lastHold atomic.Uint64 // the last hold id handed out
	leases   atomic.Int64  // leases not yet unlocked, counting re-entries on their way

	// Guarded by the renewer's mutex; times are offsets from the engine's
	// monotonic epoch.
	lease    time.Duration
	deadline time.Duration // local end of validity: confirmed send + lease - margin
	renewAt  time.Duration
	next     time.Duration // heap key
	index    int           // heap position, -1 when not in the heap
	inflight bool          // a renewal or extension is on its way
	done     bool          // released or lost
}

// holdKey finds, in a context, the Hold of one lock of one engine.
type holdKey struct {
	e    *Engine
	name string
}

// A Lease is one hold of a lock, as returned to a caller.
type Lease struct {
	hold     *Hold
	id       uint64
	ctx      context.Context
	cancel   context.CancelCauseFunc
	unlocked atomic.Bool
}

func (h *Hold) newLease(id uint64) *Lease {
	ctx, cancel := context.WithCancelCause(h.ctx)
	return &Lease{hold: h, id: id, ctx: ctx, cancel: cancel}
}

// Name is the name of the lock.
func (l *Lease) Name() string { return l.hold.name }

// Token is the fencing token of the hold.
func (l *Lease) Token() uint64 { return l.hold.token }

// Context is cancelled when this lease is unlocked or the lock is lost.
func (l *Lease) Context() context.Context { return l.ctx }

// Unlock releases this hold; the lock is freed when it was the last one.
func (l *Lease) Unlock(ctx context.Context) error {
	h := l.hold
	if !l.unlocked.CompareAndSwap(false, true) {
		return fmt.Errorf("%w: lock %q: this lease was already unlocked", ErrNotHeld, h.name)
	}
	defer l.cancel(nil)
	last := h.leases.Add(-1) == 0
	if err := h.lostErr(); err != nil {
		return err
	}
	id := l.id
	if last {
		id = 0 // every hold: none can stay behind to keep the lock
	}
	return h.e.release(ctx, h, id)
}

// Extend sets the lease to ttl from now and keeps it for later renewals.
func (l *Lease) Extend(ctx context.Context, ttl time.Duration) error {
	h := l.hold
	if l.unlocked.Load() {
		return fmt.Errorf("%w: lock %q: this lease was already unlocked", ErrNotHeld, h.name)
	}
	if err := h.lostErr(); err != nil {
		return err
	}
	return h.e.renew.extend(ctx, h, ttl)
}

// lostErr is the error for using a hold that has ended, or nil.
func (h *Hold) lostErr() error {
	if h.ctx.Err() == nil {
		return nil
	}
	cause := context.Cause(h.ctx)
	if cause == context.Canceled {
		return fmt.Errorf("%w: lock %q was released", ErrNotHeld, h.name)
	}
	return fmt.Errorf("lock %q: %w", h.name, cause)
}

// margin is how much earlier than the server the holder gives up a lease:
// it covers clock rate differences and a late timer.
func margin(lease time.Duration) time.Duration {
	return lease/50 + 5*time.Millisecond
}
