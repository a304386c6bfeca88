package engine

import (
	"errors"
	"fmt"
)

// The errors the engine and its backends return. The public package
// re-exports them; callers match them with errors.Is.
//
// Their messages say what happened and nothing else: no "distlock:", no
// lock name. The engine and the backends return them wrapped with the
// detail and the cause ("not acquired: held by another owner"); the
// public package alone adds the operation and the name in front
// (`distlock: lock "jobs": not acquired: held by another owner`).
var (
	ErrNotAcquired = errors.New("not acquired")
	ErrNotHeld     = errors.New("not held")
	ErrLockLost    = errors.New("lock lost")
	ErrClosed      = errors.New("client closed")
	ErrBackend     = errors.New("backend error")
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
// applied, now or later, so nothing needs cleaning up after it. A backend
// wraps it beside ErrBackend only when it knows; see the Backend's doc.
var ErrUnsent = errors.New("not sent")

// ErrWrongKind is an Acquire outcome: the name is used by a lock of
// another kind (a plain mutex and a fair mutex of one name), which was
// left untouched.
var ErrWrongKind = fmt.Errorf("%w: the name is in use by a lock of another kind", ErrNotAcquired)

// ErrDeadlock is an Acquire outcome: the request could never be granted
// because its owner itself holds a conflicting hold (the write side of a
// lock asked for by a holder of the read side).
var ErrDeadlock = fmt.Errorf("%w: deadlock with the caller's own hold", ErrNotAcquired)

// ErrLeaseExpired ends a fixed lease (one the watchdog does not renew)
// that ran its course. It wraps ErrLockLost: past its lease the lock may be
// taken by another owner, exactly as after a loss.
var ErrLeaseExpired error = expired{}

type expired struct{}

func (expired) Error() string { return "lease expired" }
func (expired) Unwrap() error { return ErrLockLost }

// ErrSuperseded is a Renew outcome: a later renewal of the same owner was
// applied first, so this one changed nothing.
var ErrSuperseded = errors.New("renewal superseded by a later one")

// errReleased is the end of a hold that its owner released.
var errReleased = errors.New("released")
