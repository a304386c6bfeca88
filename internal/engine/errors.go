package engine

import "errors"

// The errors the engine and its backends return. The public package
// re-exports them; callers match them with errors.Is.
var (
	ErrNotAcquired = errors.New("distlock: not acquired")
	ErrNotHeld     = errors.New("distlock: not held")
	ErrLockLost    = errors.New("distlock: lock lost")
	ErrClosed      = errors.New("distlock: client closed")
	ErrBackend     = errors.New("distlock: backend error")
	ErrUnsupported = errors.New("distlock: unsupported server")
)

// ErrSuperseded is a Renew outcome: a later renewal of the same owner was
// applied first, so this one changed nothing.
var ErrSuperseded = errors.New("distlock: renewal superseded by a later one")

// errReleased is the end of a hold that its owner released.
var errReleased = errors.New("released")
