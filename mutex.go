package distlock

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"time"

	"github.com/distlock/distlock/internal/engine"
)

// A Mutex is a re-entrant, fenced, self-renewing lock shared by every
// process that uses the same name (and key prefix) on the same Redis.
type Mutex struct {
	c    *Client
	spec engine.Spec
	err  error
}

// Name is the name of the lock.
func (m *Mutex) Name() string { return m.spec.Name }

// Err returns, without contacting Redis, the error every method of m
// returns because its name or an option (of m or its Client) is invalid:
// one wrapping ErrInvalidName or ErrInvalidOption. It is nil for a usable
// Mutex.
func (m *Mutex) Err() error { return m.err }

// Lock blocks until it holds the lock, or until ctx ends: the error then
// wraps both ErrNotAcquired and the context's cause. While it waits it is
// woken by the release itself (through one subscription shared by all of
// the Client's waiters), and never sleeps longer than the holder's remaining
// lease, so a lost notification costs at most that.
//
// If ctx is, or derives from, the Context of a Lease of this lock from this
// Client, Lock re-enters: it adds a hold and returns a new Lease with the
// same token at once. Any other context is a different owner, even in the
// same goroutine.
//
// Cancelling ctx while a request is on its way never leaves a lock behind:
// whatever the request took is released in the background, and the
// request is refused if it reaches Redis only later (for a minute, or two
// leases if longer; see the package documentation).
func (m *Mutex) Lock(ctx context.Context) (*Lease, error) { return m.acquire(ctx, true) }

// TryLock makes one attempt. If someone else holds the lock, or callers of
// the same Client are already waiting for it in Lock (they are served
// first come, first served), it returns an error wrapping ErrNotAcquired.
// If its request's outcome cannot be known (ctx ended, Redis failed),
// whatever it may have taken is released in the background, and the
// request is refused by Redis if it arrives later.
func (m *Mutex) TryLock(ctx context.Context) (*Lease, error) { return m.acquire(ctx, false) }

func (m *Mutex) acquire(ctx context.Context, wait bool) (*Lease, error) {
	if m.err != nil {
		return nil, m.err
	}
	l, err := m.c.engine.Acquire(ctx, m.spec, wait)
	if err != nil {
		return nil, err
	}
	return &Lease{l: l}, nil
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
	// counter has expired (see WithFenceRetention).
	LastToken uint64
	// Waiters counts the processes (subscribed connections) waiting.
	Waiters int
}

// Holder identifies the owner of a lock.
type Holder struct {
	// ID identifies the owner: a digest of its secret owner token, so that
	// showing it does not let anyone release the lock.
	ID    string
	Host  string
	PID   int
	Since time.Time // by the holder's clock
}

// Inspect reads the lock's state in one round trip.
func (m *Mutex) Inspect(ctx context.Context) (LockInfo, error) {
	if m.err != nil {
		return LockInfo{}, m.err
	}
	if err := m.c.usable(); err != nil {
		return LockInfo{}, err
	}
	st, err := m.c.backend.Inspect(ctx, m.spec.Name)
	if err != nil {
		return LockInfo{}, err
	}
	info := LockInfo{
		Name: m.spec.Name, Locked: st.Locked, Holds: st.Holds, TTL: st.TTL,
		Token: st.Token, LastToken: st.LastToken, Waiters: st.Watchers,
	}
	if st.Locked {
		info.Holder = Holder{ID: ownerID(st.Owner), Host: st.Host, PID: st.PID, Since: st.Since}
	}
	return info, nil
}

// ForceUnlock deletes the lock whoever holds it and wakes its waiters. It is
// for operators: the holder learns of it at its next renewal (its lease
// context is then cancelled with ErrLockLost), so until then two processes
// may both believe they hold the lock. It reports whether the lock was held.
func (m *Mutex) ForceUnlock(ctx context.Context) (bool, error) {
	if m.err != nil {
		return false, m.err
	}
	if err := m.c.usable(); err != nil {
		return false, err
	}
	return m.c.backend.ForceUnlock(ctx, m.spec.Name)
}

func ownerID(owner string) string {
	sum := sha256.Sum256([]byte(owner))
	return hex.EncodeToString(sum[:8])
}
