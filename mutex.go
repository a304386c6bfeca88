package distlock

import (
	"context"
	"time"

	"github.com/distlock/distlock/internal/engine"
)

// A Mutex is a re-entrant, fenced, self-renewing lock shared by every
// process that uses the same name (and key prefix) on the same Redis.
// Client.Mutex returns a plain mutex, whose waiters race for it when it is
// released; Client.FairMutex a fair one, whose waiters are served in
// order. Both have the same methods and Leases.
type Mutex struct {
	lock
	spec engine.Spec
}

// Name is the name of the lock.
func (m *Mutex) Name() string { return m.name }

// Err returns, without contacting the store, the error every method of m
// returns because its name or an option (of m or its Client) is invalid:
// one wrapping ErrInvalidName or ErrInvalidOption. It is nil for a usable
// Mutex.
func (m *Mutex) Err() error {
	if m.spec.Kind == engine.Fair {
		return m.check("fair-mutex")
	}
	return m.check("mutex")
}

// Lock blocks until it holds the lock, or until ctx ends: the error then
// wraps both ErrNotAcquired and the context's cause. A plain mutex's
// waiter is woken by the release itself (through one subscription shared
// by all of the Client's waiters), and never sleeps longer than the
// holder's remaining lease, so a lost notification costs at most that. A
// fair mutex's waiter takes a place in the lock's queue in Redis and is
// granted the lock by the release in its turn (see "Fair mutex" in the
// package documentation).
//
// If ctx is, or derives from, the Context of a Lease of this lock from this
// Client, Lock re-enters: it adds a hold and returns a new Lease with the
// same token at once. Any other context is a different owner, even in the
// same goroutine.
//
// Cancelling ctx while a request is on its way, or while waiting in a fair
// mutex's queue, never leaves a lock behind: before Lock returns, whatever
// the request took is released, its place is removed (a grant that raced
// the cancellation goes to the next in line), and the request is refused
// if it reaches Redis only later (for a minute, or two leases if longer).
// Lock waits for Redis to confirm that, up to 5 s (it returns sooner if
// the clean-up fails: Redis is down); see "Waiting" in the package
// documentation.
func (m *Mutex) Lock(ctx context.Context) (*Lease, error) {
	return m.acquire(ctx, "lock", m.spec, true)
}

// TryLock makes one attempt. If someone else holds the lock, or others are
// already waiting for it in Lock (they are served first), it returns an
// error wrapping ErrNotAcquired: for a plain mutex, callers of the same
// Client; for a fair mutex, anyone (TryLock never queues and never jumps
// the queue).
// If its request's outcome cannot be known (ctx ended, Redis failed),
// whatever it may have taken is released before TryLock returns, and the
// request is refused by Redis if it arrives later.
func (m *Mutex) TryLock(ctx context.Context) (*Lease, error) {
	return m.acquire(ctx, "try-lock", m.spec, false)
}

// LockInfo is a snapshot of a lock's state.
type LockInfo struct {
	Name   string
	Locked bool
	// Holder describes the owner, when Locked.
	Holder Holder
	// Holds is the owner's hold count (re-entrant acquisitions).
	Holds int
	// TTL is the remaining lease; negative if the key has no expiry.
	TTL time.Duration
	// Token is the holder's fencing token.
	Token uint64
	// LastToken is the last fencing token issued for this name, 0 if its
	// counter has expired (see redisstore.WithFenceRetention).
	LastToken uint64
	// Waiters counts the processes waiting for a plain mutex: on Redis its
	// subscribed connections, on etcd the keys of its line; 0 where the
	// store cannot tell.
	Waiters int
	// Queued counts the waiters in a FairMutex's queue (places that have
	// not expired), in any process: for an election, the candidates
	// waiting to lead.
	Queued int
	// Kind is the kind of lock the name is in use as: KindMutex, KindFairMutex,
	// KindElection (the holder is the leader, Token its term), or KindFree.
	// If it is another kind (a read-write lock, a semaphore), the fields
	// above are zero but for Name and LastToken.
	Kind Kind
}

// Holder identifies the owner of a lock.
type Holder struct {
	// ID identifies the owner: a digest of its secret owner token, so that
	// showing it does not let anyone release the lock.
	ID   string
	Host string
	PID  int
	// Since is when the owner got the lock: by its own clock for a plain
	// mutex, by the Redis server's clock for a fair one (which is granted
	// inside another owner's release).
	Since time.Time
	// Revoked: an operator revoked the lock (Revoke). The owner has been
	// told to stop, its renewals are refused, and the lock ends with its
	// release or its lease, whichever comes first.
	Revoked bool
}

// Inspect reads the lock's state in one round trip.
func (m *Mutex) Inspect(ctx context.Context) (LockInfo, error) {
	info, err := m.info(ctx)
	return info, opErr("inspect", m.name, err)
}

// info is Inspect for a caller that makes its own error of err.
func (m *Mutex) info(ctx context.Context) (LockInfo, error) {
	st, err := m.state(ctx)
	if err != nil {
		return LockInfo{}, err
	}
	info := LockInfo{Name: m.name, LastToken: st.LastToken, Kind: kindOf(st)}
	if info.Kind != KindMutex && info.Kind != KindFairMutex && info.Kind != KindElection && info.Kind != KindFree {
		return info, nil
	}
	h := st.Holder()
	info.Locked, info.Holds, info.TTL, info.Token = st.Locked(), h.Holds, h.TTL, h.Token
	info.Waiters, info.Queued = st.Watchers, st.Queued
	if st.Locked() {
		info.Holder = holder(h)
	}
	return info, nil
}

// ForceUnlock deletes the lock whoever holds it and wakes its waiters (a
// fair mutex goes to the first in its queue). It works on a name of any
// kind: an election's leader is deposed, and every holder of a read-write
// lock or a semaphore loses it, the first waiters in line being let in.
// It is for operators. Each holder's process is told, and the holder's
// lease context is cancelled with ErrLockLost within about one round trip
// (if that notice is lost, at its next renewal); but the lock is free at
// once, so until the holder's code stops, two processes may both act
// under the lock. Revoke does not have that gap. It reports whether the
// lock was held.
func (m *Mutex) ForceUnlock(ctx context.Context) (bool, error) { return m.forceUnlock(ctx) }

// Revoke takes the lock away from whoever holds it, without letting
// anyone else in before the holder has stopped. Each holder's process is
// told, and the holder's lease context is cancelled with ErrLockLost
// within about one round trip; its renewals are refused from then on (so
// a holder that missed the notice learns of it at its next renewal). The
// lock stays held until the holder releases it, which Unlock does even
// after the loss, or until the holder's current lease runs out (a holder
// that is dead or cut off from Redis). Nobody else holds the lock while a
// holder that stops within its lease still works: the overlap of
// ForceUnlock is gone, at the cost of waiting for the holder.
//
// It works on a name of any kind, as ForceUnlock does. It is for
// operators. It returns the longest the lock may stay held: the
// remaining lease of its holder (the longest of several holders), 0 if the
// lock was not held.
func (m *Mutex) Revoke(ctx context.Context) (time.Duration, error) { return m.revoke(ctx) }
