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
