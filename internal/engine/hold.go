package engine

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// holdIDs is the last Hold id handed out, by any engine of the process:
// observers shared by Clients tell holds apart by it.
var holdIDs atomic.Uint64

// A Hold is one owner's possession of one lock, from acquisition to release
// or loss. Re-entrant acquisitions add Leases to the same Hold.
//
// A Hold of a queued kind starts as a place in the lock's queue: it is in
// the renewer like a held lock, which refreshes the place instead of a
// lease, until the lock is granted to it (see place.go).
//
// Its fields fall under three regimes: what is fixed when it is made (no
// lock), the callers' leases and the hold's context (mu), and the lease's
// clock and the queue place (leaseClock and queuePlace: the renewer's
// mutex).
type Hold struct {
	e     *Engine
	name  string
	kind  Kind
	owner string
	id    uint64        // unique in the process: events name the hold by it
	token uint64        // set when the lock is granted (queued kinds); read-only once a Lease is out
	renew bool          // the watchdog renews the lease
	queue time.Duration // queued kinds: how long a place lasts without a refresh

	// A semaphore's permits: those of this hold, and those held in the
	// contexts it was acquired in, this hold's included (a caller that
	// asks for more with this hold's context holds them all).
	permits, capacity, nested int

	vals context.Context // the acquiring caller's context: its values, not its end

	lastHold atomic.Uint64 // the last hold id handed out
	first    Lease         // the lease of the acquisition, hold id 1: allocated with the hold

	// lateRelease: the hold was lost as Redis reported it (gone, taken
	// over, revoked), and the server may still keep the lock for this
	// owner (revoked): the last lease's Unlock sends the release all the
	// same, once, after the caller has stopped, or Close does (see
	// addLate).
	lateRelease atomic.Bool

	mu     sync.Mutex
	leases int  // leases handed out and not yet unlocked
	writes int  // of those, leases of kind Write (the owner writes while there are any)
	ending bool // the last lease was unlocked: no re-entry may succeed
	// The hold's context (see context) is made when a lease's context is
	// first asked for: most callers never ask.
	ctx      context.Context // carries the hold (withHold); cancelled when the hold ends
	cancel   context.CancelCauseFunc
	ended    bool  // end was called: the hold's context is, or is born, cancelled
	endCause error // its cause
	// reported: 1 + the engine's clock when Acquired was reported, 0
	// before. Whichever of acquired and end comes second reports Ended.
	reported time.Duration

	leaseClock // the renewer's, under its mutex
	queuePlace // the renewer's too, under its mutex, while placed
}

// A leaseClock is a hold's lease as the renewer keeps it: when it ends
// locally, given every request that may still set it, and when to renew
// it. Guarded by the renewer's mutex; times are offsets from the engine's
// monotonic epoch.
type leaseClock struct {
	lease    time.Duration // lease length of renewals
	base     time.Duration // local end of validity by the last confirmed request: its send + lease - margin
	pending  []bound       // requests not confirmed yet that may still set the lease
	deadline time.Duration // min(base, pending bounds): the lease context ends here
	seq      uint64        // the last renewal sequence number sent
	acked    uint64        // the highest sequence number confirmed
	renewAt  time.Duration
	next     time.Duration // heap key
	index    int           // heap position, -1 when not in the heap
	inflight bool          // a watchdog renewal or place refresh is on its way
	done     bool          // ended: released, lost or closed
	cause    error         // why it ended
}

// A queuePlace is the place phase of a hold of a queued kind (place.go):
// its place in the lock's queue until the lock is granted to it. Guarded
// by the renewer's mutex.
type queuePlace struct {
	placed  bool          // waiting in the queue, not granted yet
	sends   []sendTime    // when the place's requests that a grant may name were sent
	settled chan struct{} // closed when the place phase ends: granted, or the hold ended
	confirm bool          // granted a lease shorter than lease: renew it once even if the watchdog is off
	// unconfirmed: granted by another owner's request, and the backend
	// wants grants confirmed (GrantConfirmer): confirmGrant renews it
	// before it is handed out; the watchdog leaves it alone meanwhile.
	unconfirmed bool
}

// A bound is what a renewal or extension on its way, or one whose outcome
// is unknown, may leave on the server: if it lands, the lease ends no
// earlier than its send time + its lease.
type bound struct {
	seq uint64
	end time.Duration // send + lease - margin
}

// holdsKey is the context key of the holds a context carries: a chain
// of holdLinks, the innermost first. One key for all of them, rather than
// one per lock, so that looking a hold up allocates nothing.
type holdsKey struct{}

// A holdLink is one hold carried by a context, and the holds of the
// context it was derived from.
type holdLink struct {
	h    *Hold
	next *holdLink
}

// withHold returns a context with ctx's values that carries h too.
func withHold(ctx context.Context, h *Hold) context.Context {
	next, _ := ctx.Value(holdsKey{}).(*holdLink)
	return context.WithValue(ctx, holdsKey{}, &holdLink{h: h, next: next})
}

// holdIn returns the hold of the lock name of engine e that ctx carries,
// the innermost if there are several, or nil.
func holdIn(ctx context.Context, e *Engine, name string) *Hold {
	l, _ := ctx.Value(holdsKey{}).(*holdLink)
	for ; l != nil; l = l.next {
		if l.h.e == e && l.h.name == name {
			return l.h
		}
	}
	return nil
}

// newHold returns the hold of owner acquired as s says by a caller whose
// context is ctx: the hold's context carries ctx's values, not its end.
func newHold(ctx context.Context, e *Engine, s Spec, owner string, token uint64) *Hold {
	h := &Hold{e: e, name: s.Name, kind: s.Kind, owner: owner, id: holdIDs.Add(1), token: token, renew: s.Renew, queue: s.Queue, leases: 1,
		permits: s.Permits, capacity: s.Capacity, nested: s.Permits, leaseClock: leaseClock{lease: s.Lease, index: -1}}
	if outer := holdIn(ctx, e, s.Name); outer != nil && outer.kind == Semaphore {
		h.nested += outer.nested
	}
	if s.Kind == Write {
		h.writes = 1
	}
	h.vals = ctx
	h.lastHold.Store(1)
	return h
}

// context returns the hold's context, making it if need be: it carries
// the values of the acquiring caller's context and the hold, and is
// cancelled when the hold ends.
func (h *Hold) context() context.Context {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ctx == nil {
		base, cancel := context.WithCancelCause(context.WithoutCancel(h.vals))
		h.ctx = withHold(base, h)
		if h.ended {
			cancel(h.endCause)
		} else {
			h.cancel = cancel
		}
	}
	return h.ctx
}

// end cancels the hold's context with cause (nil: context.Canceled), as
// the engine's cause hook makes it, or makes it be born cancelled; the
// first call counts.
func (h *Hold) end(cause error) {
	if cause != nil && h.e.cause != nil {
		cause = h.e.cause(h.name, cause)
	}
	h.mu.Lock()
	if h.ended {
		h.mu.Unlock()
		return
	}
	h.ended, h.endCause = true, cause
	cancel, reported := h.cancel, h.reported
	h.cancel = nil
	h.mu.Unlock()
	if cancel != nil {
		cancel(cause)
	}
	if reported != 0 {
		h.reportEnd(reported)
	}
}

// reportEnd reports the end of h, whose acquisition was reported at 1 +
// reported.
func (h *Hold) reportEnd(reported time.Duration) {
	cause := h.endCause // set once, before ended: read-only now
	h.e.emit(Event{Kind: Ended, Name: h.name, Lock: h.kind, Hold: h.id, Token: h.token, Held: h.e.now() - (reported - 1), Reason: ReasonOf(cause), Err: cause})
}

// isEnded reports whether end was called.
func (h *Hold) isEnded() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ended
}

// request returns r about h: with its name, kind, owner and permits.
func (h *Hold) request(r Request) Request {
	r.Name, r.Kind, r.Owner = h.name, h.kind, h.owner
	r.Permits, r.Capacity = h.permits, h.capacity
	return r
}

// usable reports whether a re-entry may start: the hold has not ended and
// its last lease is not being unlocked.
func (h *Hold) usable() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return !h.ending && !h.ended
}

// writing reports whether the owner holds leases of kind Write.
func (h *Hold) writing() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.writes > 0
}

// add hands out lease id, of kind, of a re-entry that succeeded, unless
// the hold ended, or its last lease was unlocked, while the re-entry was
// on its way.
func (h *Hold) add(id uint64, kind Kind) *Lease {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ending || h.ended {
		return nil
	}
	h.leases++
	if kind == Write {
		h.writes++
	}
	l := h.newLease(id)
	l.kind = kind
	return l
}

// drop uncounts an unlocked lease of kind and reports whether it was the
// last: the caller then releases the whole hold.
func (h *Hold) drop(kind Kind) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.leases--
	if kind == Write {
		h.writes--
	}
	if h.leases == 0 && !h.ending {
		h.ending = true
		return true
	}
	return false
}

// A Lease is one hold of a lock, as returned to a caller.
type Lease struct {
	hold     *Hold
	id       uint64
	kind     Kind // the kind it was acquired as: a downgraded writer's read lease is Read
	unlocked atomic.Bool

	mu     sync.Mutex
	ctx    context.Context // made by the first call of Context
	cancel context.CancelCauseFunc
}

func (h *Hold) newLease(id uint64) *Lease {
	if id == 1 {
		l := &h.first
		l.hold, l.id, l.kind = h, 1, h.kind
		return l
	}
	return &Lease{hold: h, id: id, kind: h.kind}
}

// leaseEnd is the lease's local deadline (see ValidUntil), kept after it
// ended.
func (h *Hold) leaseEnd() time.Time {
	t, _ := h.e.renew.validUntil(h)
	return t
}

// A fixedContext is the context of a lease that the watchdog does not
// renew: its Deadline is the lease's local deadline, at which it is
// cancelled (with ErrLeaseExpired) unless Extend moved it first.
type fixedContext struct {
	context.Context
	until func() time.Time
}

// Deadline reports the lease's local deadline. Extend moves it, so a call
// after an Extend may return a later time than one before.
func (c fixedContext) Deadline() (time.Time, bool) { return c.until(), true }

// Name is the name of the lock.
func (l *Lease) Name() string { return l.hold.name }

// Kind is the kind of the lock.
func (l *Lease) Kind() Kind { return l.hold.kind }

// Token is the fencing token of the hold.
func (l *Lease) Token() uint64 { return l.hold.token }

// Hold is the id of the lease's hold, as events name it.
func (l *Lease) Hold() uint64 { return l.hold.id }

// Tokens returns the fencing token by the name of the lock.
func (l *Lease) Tokens() map[string]uint64 { return map[string]uint64{l.hold.name: l.hold.token} }

// Context is cancelled when this lease is unlocked or its hold ends. For a
// fixed lease, its Deadline is the lease's local deadline. It is made at
// the first call: a lease unlocked or ended before is born cancelled.
func (l *Lease) Context() context.Context {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ctx == nil {
		h := l.hold
		ctx, cancel := context.WithCancelCause(h.context())
		if l.unlocked.Load() {
			cancel(nil)
		} else {
			l.cancel = cancel
		}
		l.ctx = ctx
		if !h.renew {
			l.ctx = fixedContext{ctx, h.leaseEnd}
		}
	}
	return l.ctx
}

// ValidUntil is the local instant before which the lock is certainly still
// held by this lease (the lease context ends then at the latest, unless a
// renewal or Extend moves it), or the zero time once the lease is unlocked
// or its hold has ended.
func (l *Lease) ValidUntil() time.Time {
	t, live := l.hold.e.renew.validUntil(l.hold)
	if !live || l.unlocked.Load() || l.hold.isEnded() {
		return time.Time{}
	}
	return t
}

// Unlock releases this lease: its context is cancelled first. The last
// lease of a hold releases the lock; an earlier one only its own hold, and
// the hold's other leases keep the lock.
func (l *Lease) Unlock(ctx context.Context) error {
	h := l.hold
	if !l.unlocked.CompareAndSwap(false, true) {
		return fmt.Errorf("%w: this lease was already unlocked", ErrNotHeld)
	}
	l.mu.Lock()
	cancel := l.cancel
	l.mu.Unlock()
	if cancel != nil {
		cancel(nil)
	}
	return h.e.unlock(ctx, h, l.id, l.kind)
}

// Extend sets the lease to ttl from now and keeps it for later renewals.
func (l *Lease) Extend(ctx context.Context, ttl time.Duration) error {
	h := l.hold
	if l.unlocked.Load() {
		return fmt.Errorf("%w: this lease was already unlocked", ErrNotHeld)
	}
	return h.e.renew.extend(ctx, h, ttl)
}

// endErr is the error for using h after it ended: nil for a release by its
// owner (the caller's lease went with the others), ErrNotHeld for a
// re-entry after that, or the cause of the loss.
func (h *Hold) endErr() error {
	switch cause := h.e.renew.causeOf(h); cause {
	case nil:
		return nil
	case errReleased:
		return fmt.Errorf("%w: the lock was released", ErrNotHeld)
	default:
		return cause
	}
}

// unlockErr is what unlocking a lease of h returns once h has ended: nil
// if its owner released it (the release of the last lease took every hold
// with it), the cause otherwise.
func (h *Hold) unlockErr() error {
	if h.e.renew.causeOf(h) == errReleased {
		return nil
	}
	return h.endErr()
}

// margin is how much earlier than the server the holder gives up a lease:
// it covers clock rate differences and a late timer.
func margin(lease time.Duration) time.Duration {
	return lease/50 + 5*time.Millisecond
}
