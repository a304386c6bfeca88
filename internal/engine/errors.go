package engine

import (
	"errors"

	"github.com/distlock/distlock/store"
)

// The errors the engine returns: package store's (see there), under the
// names the engine's code uses.
var (
	ErrNotAcquired   = store.ErrNotAcquired
	ErrNotHeld       = store.ErrNotHeld
	ErrLockLost      = store.ErrLockLost
	ErrClosed        = store.ErrClosed
	ErrBackend       = store.ErrBackend
	ErrUnsupported   = store.ErrUnsupported
	ErrInvalidOption = store.ErrInvalidOption
	ErrNotReplicated = store.ErrNotReplicated
	ErrUnsent        = store.ErrUnsent
	ErrWrongKind     = store.ErrWrongKind
	ErrDeadlock      = store.ErrDeadlock
	ErrLeaseExpired  = store.ErrLeaseExpired
	ErrSuperseded    = store.ErrSuperseded
)

// errReleased is the end of a hold that its owner released.
var errReleased = errors.New("released")
