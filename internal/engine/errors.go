package engine

import (
	"errors"
	"fmt"
)

// The errors the engine and its backends return. The public package
// re-exports them; callers match them with errors.Is.
var (
	ErrNotAcquired = errors.New("distlock: not acquired")
	ErrNotHeld     = errors.New("distlock: not held")
	ErrLockLost    = errors.New("distlock: lock lost")
	ErrClosed      = errors.New("distlock: client closed")
	ErrBackend     = errors.New("distlock: backend error")
	ErrUnsupported = errors.New("distlock: unsupported")

	// ErrInvalidOption: a request that could never be served as asked (an
	// out-of-range option, more permits than a semaphore has).
	ErrInvalidOption = errors.New("distlock: invalid option")
)

// ErrNotReplicated is the outcome of a request that the master applied
// but too few replicas acknowledged in time: it counts as not confirmed
// (an acquisition is rolled back, a renewal retried). It wraps ErrBackend.
var ErrNotReplicated = fmt.Errorf("%w: not acknowledged by enough replicas", ErrBackend)

// ErrWrongKind is an Acquire outcome: the name is used by a lock of
// another kind (a plain mutex and a fair mutex of one name), which was
// left untouched.
var ErrWrongKind = fmt.Errorf("%w: the name is in use by a lock of another kind", ErrNotAcquired)

// ErrDeadlock is an Acquire outcome: the request could never be granted
// because its owner itself holds a conflicting hold (the write side of a
// lock asked for by a holder of the read side).
var ErrDeadlock = fmt.Errorf("%w: the caller's own hold conflicts with the request (deadlock)", ErrNotAcquired)

// ErrLeaseExpired ends a fixed lease (one the watchdog does not renew)
// that ran its course. It wraps ErrLockLost: past its lease the lock may be
// taken by another owner, exactly as after a loss.
var ErrLeaseExpired error = expired{}

type expired struct{}

func (expired) Error() string { return "distlock: lease expired" }
func (expired) Unwrap() error { return ErrLockLost }

// ErrSuperseded is a Renew outcome: a later renewal of the same owner was
// applied first, so this one changed nothing.
var ErrSuperseded = errors.New("distlock: renewal superseded by a later one")

// errReleased is the end of a hold that its owner released.
var errReleased = errors.New("released")
