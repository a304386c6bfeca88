package distlock

import "github.com/distlock/distlock/internal/engine"

// Errors returned by distlock. Match them with errors.Is: the returned
// errors wrap them with the lock name and the cause.
var (
	// ErrNotAcquired: the lock was not acquired. TryLock returns it when
	// someone else holds the lock; Lock returns it, joined with the
	// context's error, when its context ends first.
	ErrNotAcquired = engine.ErrNotAcquired

	// ErrWrongKind: the name is in use by a lock of another kind (a Mutex,
	// a FairMutex and an RWMutex of the same name), or the context passed
	// to Lock holds the name as another kind; the lock in use was left
	// untouched. It wraps ErrNotAcquired.
	ErrWrongKind = engine.ErrWrongKind

	// ErrDeadlock: the request could never be granted because the caller
	// itself holds a conflicting hold: the write side of an RWMutex asked
	// for with a context that holds only its read side (an upgrade), or
	// more permits of a Semaphore than fit next to those held in the same
	// context. It fails at once instead of waiting forever. It wraps
	// ErrNotAcquired.
	ErrDeadlock = engine.ErrDeadlock

	// ErrNotHeld: the lease was already unlocked (or released by Close).
	ErrNotHeld = engine.ErrNotHeld

	// ErrLockLost: the lock was lost while held: a renewal found it gone or
	// taken over, or could not be confirmed before the lease's local
	// deadline. It is the cause of the lease context, and Unlock and
	// Extend return it.
	ErrLockLost = engine.ErrLockLost

	// ErrLeaseExpired: a fixed lease (WithFixedLease) ran its course. It is
	// the cause of the lease context then, and Unlock and Extend return it.
	// It wraps ErrLockLost, since past its lease the lock may be taken by
	// another owner exactly as after a loss; check it first to tell an
	// expiry the caller asked for from a loss. It is reported as
	// EventExpired, logged at Debug.
	ErrLeaseExpired = engine.ErrLeaseExpired

	// ErrClosed: the Client was closed.
	ErrClosed = engine.ErrClosed

	// ErrBackend wraps a failure of Redis itself (unreachable, timeout,
	// refused command), so it is never confused with contention.
	ErrBackend = engine.ErrBackend

	// ErrNotReplicated: an acquisition or renewal was applied by the
	// master but acknowledged by fewer replicas than WithReplicaAck asks
	// for, in time. An acquisition is then rolled back; a renewal is not
	// confirmed. It wraps ErrBackend.
	ErrNotReplicated = engine.ErrNotReplicated

	// ErrUnsupported: the Redis server is too old (before 6.2), or the
	// Client cannot serve this kind of lock: a Client of NewRedlock serves
	// Mutex and MultiMutex only.
	ErrUnsupported = engine.ErrUnsupported

	// ErrInvalidName: the lock name is empty, too long, not UTF-8, or
	// contains braces or control characters.
	ErrInvalidName = errorString("distlock: invalid lock name")

	// ErrInvalidOption: an option is out of range (an absurd TTL, a prefix
	// with braces, ...), or a request could never be served as asked (more
	// permits than a semaphore has).
	ErrInvalidOption = engine.ErrInvalidOption
)

type errorString string

func (e errorString) Error() string { return string(e) }
