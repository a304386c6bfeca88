package store

import (
	"errors"
	"fmt"
)

// The errors of distlock and of its stores; package distlock exports the
// same values, and callers match them with errors.Is.
//
// Their messages say what happened and nothing else: no "distlock:", no
// lock name. A store returns them wrapped with the detail and the cause
// ("backend error: dial tcp ...: connection refused"); package distlock
// alone adds the operation and the name in front
// (`distlock: lock "jobs": not acquired: held by another owner`).
var (
	// ErrNotAcquired: the lock was not acquired.
	ErrNotAcquired = errors.New("not acquired")
	// ErrNotHeld: the owner does not hold the lock (any more), or a place
	// in a queue is gone.
	ErrNotHeld = errors.New("not held")
	// ErrLockLost: a lock was lost while held.
	ErrLockLost = errors.New("lock lost")
	// ErrClosed: the Client was closed.
	ErrClosed = errors.New("client closed")
	// ErrBackend wraps every failure of the store itself (unreachable,
	// timeout, refused command), so that it is never taken for
	// contention.
	ErrBackend = errors.New("backend error")
	// ErrUnsupported: the store cannot serve this request (a kind of lock,
	// an operation, a server too old).
	ErrUnsupported = errors.New("unsupported")
	// ErrInvalidOption: a request that could never be served as asked (an
	// out-of-range option, more permits than a semaphore has).
	ErrInvalidOption = errors.New("invalid option")
)

// ErrNotReplicated is the outcome of a request that the master applied
// but too few replicas acknowledged in time: it counts as not confirmed
// (an acquisition is rolled back, a renewal retried). It wraps ErrBackend.
var ErrNotReplicated = fmt.Errorf("%w: not acknowledged by enough replicas", ErrBackend)

// ErrUnsent marks the failure of a request that certainly never reached
// the store (no connection to it could be made): nothing of it can be
// applied, now or later, so nothing needs cleaning up after it. A store
// wraps it beside ErrBackend only when it knows; see Store.
var ErrUnsent = errors.New("not sent")

// ErrWrongKind is an Acquire outcome: the name is used by a lock of
// another kind (a plain mutex and a fair mutex of one name), which was
// left untouched. It wraps ErrNotAcquired.
var ErrWrongKind = fmt.Errorf("%w: the name is in use by a lock of another kind", ErrNotAcquired)

// ErrDeadlock is an Acquire outcome: the request could never be granted
// because its owner itself holds a conflicting hold (the write side of a
// lock asked for by a holder of the read side). It wraps ErrNotAcquired.
var ErrDeadlock = fmt.Errorf("%w: deadlock with the caller's own hold", ErrNotAcquired)

// ErrLeaseExpired ends a fixed lease (one that is not renewed) that ran
// its course. It wraps ErrLockLost: past its lease the lock may be taken
// by another owner, exactly as after a loss.
var ErrLeaseExpired error = expired{}

type expired struct{}

func (expired) Error() string { return "lease expired" }
func (expired) Unwrap() error { return ErrLockLost }

// ErrSuperseded is a Renew outcome: a later renewal of the same owner was
// applied first, so this one changed nothing.
var ErrSuperseded = errors.New("renewal superseded by a later one")
