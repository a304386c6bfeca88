package distlock

import (
	"context"
	"fmt"
	"time"

	"github.com/distlock/distlock/internal/engine"

	"github.com/distlock/distlock/store"
)

// MaxPermits is the largest capacity of a Semaphore.
const MaxPermits = 1 << 30

// A Semaphore is a set of permits shared by every process that uses the
// same name (and key prefix) on the same Redis: at most its capacity of
// permits are held at any moment, whatever the number of processes. It is
// the lock for "at most N calls at once to the partner's API, across all
// pods". Client.Semaphore returns it.
//
// Every acquisition is a Lease of its own: its permits are held by an
// owner with a lease renewed by the watchdog (in the same batches as the
// locks). If its holder dies, the permits come back when that lease ends,
// by the Redis server's clock, never a client's. Unlock returns them; the
// lease's Context is cancelled if they are lost; Token is a fencing token,
// strictly increasing per name; Extend works.
//
// Waiters, in every process, are served first come, first served: a
// release lets in the waiters at the head of the queue whose permits now
// fit, as many as fit, in order, so a request for many permits is not
// starved by a stream of small ones.
//
// The capacity in force is the one the store keeps: set by the first user
// of the name (from its permits argument) or by SetPermits, and kept while
// any permit is held or any acquisition waits (however long their leases
// and queue timeouts), and for the fence retention
// (redisstore.WithFenceRetention, an hour by default) after the last of
// them; then the next user sets it again. A client whose permits argument
// differs from the stored capacity still uses the stored one, and reports
// the difference once through the event handler (EventMismatch, logged at
// Warn).
//
// A Semaphore is not re-entrant: Acquire with a context that carries one
// of its Leases is a new acquisition of its own, which must wait for its
// permits like any other; if the permits held in that context and the new
// ones could never fit in the capacity together, it fails at once with
// ErrDeadlock instead of waiting for itself.
type Semaphore struct {
	lock
	spec engine.Spec
}

// Semaphore returns the named semaphore of permits permits (1 to
// MaxPermits; see the type's documentation for which capacity is in
// force). It is cheap and does not contact the store. A name is used by one
// kind of lock at a time. The options are those of a mutex: WithTTL or
// WithFixedLease set the lease of each acquisition, WithQueueTimeout how
// long a waiter keeps its place without refreshing it.
func (c *Client) Semaphore(name string, permits int, opts ...MutexOption) *Semaphore {
	lk, spec := c.lock(name, engine.Semaphore, opts)
	spec.Capacity = permits
	if lk.err == nil && (permits < 1 || permits > MaxPermits) {
		lk.err = fmt.Errorf("%w: %d permits, outside [1, %d]", ErrInvalidOption, permits, MaxPermits)
	}
	return &Semaphore{lock: lk, spec: spec}
}

// Name is the name of the semaphore.
func (s *Semaphore) Name() string { return s.name }

// Err returns, without contacting the store, the error every method of s
// returns because its name, permits or an option is invalid, or nil.
func (s *Semaphore) Err() error { return s.check("semaphore") }

// Acquire blocks until it holds n permits, in its turn, or until ctx ends
// (the error then wraps ErrNotAcquired and the context's cause). n must be
// between 1 and the capacity: otherwise it fails at once with
// ErrInvalidOption, as it does when the capacity the store keeps is
// smaller than n.
func (s *Semaphore) Acquire(ctx context.Context, n int) (*Lease, error) {
	return s.acquirePermits(ctx, "acquire", n, true)
}

// TryAcquire takes n permits if they are free now and no one waits ahead;
// otherwise it fails with ErrNotAcquired. It never queues.
func (s *Semaphore) TryAcquire(ctx context.Context, n int) (*Lease, error) {
	return s.acquirePermits(ctx, "try-acquire", n, false)
}

// acquirePermits takes n permits for the method op.
func (s *Semaphore) acquirePermits(ctx context.Context, op string, n int, wait bool) (*Lease, error) {
	if s.lock.err == nil && (n < 1 || n > s.spec.Capacity) {
		return nil, opErr(op, s.name, fmt.Errorf("%w: %d permits asked for, of %d", ErrInvalidOption, n, s.spec.Capacity))
	}
	spec := s.spec
	spec.Permits = n
	return s.acquire(ctx, op, spec, wait)
}

// SetPermits sets the capacity the store keeps to n (1 to MaxPermits), for
// operators. Growing it lets waiters in at once; shrinking it never
// revokes permits already held: new acquisitions wait until the permits in
// use fall below the new capacity. A waiter that asks for more permits
// than the new capacity can never be served: it loses its place at once
// (so it blocks no one behind it), and its Acquire fails with
// ErrInvalidOption once its next refresh finds that (within the queue
// timeout's refresh interval).
func (s *Semaphore) SetPermits(ctx context.Context, n int) error {
	return opErr("set-permits", s.name, s.setPermits(ctx, n))
}

func (s *Semaphore) setPermits(ctx context.Context, n int) error {
	if s.lock.err != nil {
		return s.lock.err
	}
	if n < 1 || n > MaxPermits {
		return fmt.Errorf("%w: %d permits, outside [1, %d]", ErrInvalidOption, n, MaxPermits)
	}
	if err := s.c.usable(); err != nil {
		return err
	}
	ps, err := capability[store.PermitSetter](s.c, "SetPermits")
	if err != nil {
		return err
	}
	_, _, err = ps.SetPermits(ctx, s.name, n)
	return err
}

// SemaphoreInfo is a snapshot of a semaphore's state.
type SemaphoreInfo struct {
	Name string
	// Capacity is the capacity in force (as the store keeps it); 0 if none is
	// stored (the semaphore has not been used for the fence retention).
	Capacity int
	// InUse is how many permits are held.
	InUse int
	// Holders are the acquisitions that hold permits.
	Holders []SemaphoreHolder
	// Queued counts the acquisitions waiting in the queue, in any
	// process, and QueuedPermits the permits they ask for.
	Queued, QueuedPermits int
	// LastToken is the last fencing token issued for this name, 0 if its
	// counter has expired.
	LastToken uint64
	// Kind is the kind of lock the name is in use as: KindSemaphore or
	// KindFree. If it is another kind, the fields above are zero but for
	// Name, Capacity and LastToken.
	Kind Kind
}

// A SemaphoreHolder is one acquisition that holds permits of a semaphore.
type SemaphoreHolder struct {
	Holder
	Token   uint64
	Permits int
	TTL     time.Duration // what is left of its lease
}

// Inspect reads the semaphore's state in one round trip.
func (s *Semaphore) Inspect(ctx context.Context) (SemaphoreInfo, error) {
	st, err := s.state(ctx)
	if err != nil {
		return SemaphoreInfo{}, opErr("inspect", s.name, err)
	}
	info := SemaphoreInfo{Name: s.name, Capacity: st.Capacity, LastToken: st.LastToken, Kind: kindOf(st)}
	if info.Kind != KindSemaphore && info.Kind != KindFree {
		return info, nil
	}
	info.InUse, info.Queued, info.QueuedPermits = st.Used, st.Queued, st.QueuedPermits
	for _, h := range st.Holders {
		info.Holders = append(info.Holders, SemaphoreHolder{Holder: holder(h), Token: h.Token, Permits: h.Permits, TTL: h.TTL})
	}
	return info, nil
}

// ForceUnlock takes every permit from its holders at once and lets the
// queue in, as Mutex.ForceUnlock does for a mutex: each holder's process is
// told and its lease context cancelled with ErrLockLost, but until the
// holders' code stops they may overlap the next ones. It is for operators.
// It reports whether any permit was held.
func (s *Semaphore) ForceUnlock(ctx context.Context) (bool, error) { return s.forceUnlock(ctx) }

// Revoke takes every permit from its holders without letting anyone else
// in before they have stopped, as Mutex.Revoke does: their lease contexts
// are cancelled with ErrLockLost, their renewals are refused, and each
// permit comes back once its holder has released it or its lease has run
// out. It is for operators. It returns the longest remaining lease of a
// holder, 0 if no permit was held.
func (s *Semaphore) Revoke(ctx context.Context) (time.Duration, error) { return s.revoke(ctx) }
