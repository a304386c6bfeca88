package distlock

import (
	"strconv"

	"github.com/distlock/distlock/store"
)

// Errors returned by distlock. Match them with errors.Is, not by their
// text: the errors returned wrap them.
//
// Every error about a lock reads
//
//	distlock: <op> "<name>": <what>[: <cause>]
//
// as an *fs.PathError does: <op> is the method that failed, <name> the
// lock's name (the pattern, for List; the members' names joined with "+",
// as Lease.Name has them, for a MultiMutex), <what> the message of one of
// the errors below with its detail, and <cause> the error underneath, if
// any. For example:
//
//	distlock: try-lock "jobs": not acquired: held by another owner (lease 29.949s left)
//	distlock: unlock "jobs": lock lost: it was no longer held by this owner at release
//	distlock: inspect "jobs": backend error: dial tcp 127.0.0.1:1: connect: connection refused
//	distlock: hold "jobs": lease expired: the fixed lease of 100ms was not renewed
//
// The ops are the methods' names in lower case, with a hyphen between
// words: lock, try-lock, rlock, try-rlock, acquire, try-acquire,
// campaign, resign, unlock, extend, inspect, force-unlock, revoke, leader, set-permits,
// list, once, once-per, forget and last-run. The cause of a lease's context
// (context.Cause(lease.Context())) has the op hold. The Err methods of
// the locks have the name of the Client's method that made the lock:
// mutex, fair-mutex, rwmutex, semaphore, election or multi-mutex.
//
// Errors about no lock read "distlock: [<op>: ]<what>[: <cause>]": an
// invalid option of New or of its store (Client.Err, with no op), Close
// (close), Do with a nil Locker or job (do), and a nil *Lease (unlock,
// extend, hold):
//
//	distlock: invalid option: prefix "a{": contains a brace
//
// The messages of the errors below have no "distlock: " of their own, as
// fs.ErrNotExist's ("file does not exist") has no "open": they are always
// returned wrapped. An Event's Err, whose lock is named in the Event's
// Name, reads <what>[: <cause>], without "distlock: " either.
var (
	// ErrNotAcquired: the lock was not acquired. TryLock returns it when
	// someone else holds the lock; Lock returns it, joined with the
	// context's error, when its context ends first.
	ErrNotAcquired = store.ErrNotAcquired

	// ErrWrongKind: the name is in use by a lock of another kind (a Mutex,
	// a FairMutex and an RWMutex of the same name), or the context passed
	// to Lock holds the name as another kind; the lock in use was left
	// untouched. It wraps ErrNotAcquired.
	ErrWrongKind = store.ErrWrongKind

	// ErrDeadlock: the request could never be granted because the caller
	// itself holds a conflicting hold: the write side of an RWMutex asked
	// for with a context that holds only its read side (an upgrade), or
	// more permits of a Semaphore than fit next to those held in the same
	// context. It fails at once instead of waiting forever. It wraps
	// ErrNotAcquired.
	ErrDeadlock = store.ErrDeadlock

	// ErrNotHeld: the lease was already unlocked (or released by Close).
	ErrNotHeld = store.ErrNotHeld

	// ErrLockLost: the lock was lost while held: a renewal found it gone or
	// taken over, or could not be confirmed before the lease's local
	// deadline. It is the cause of the lease context, and Unlock and
	// Extend return it.
	ErrLockLost = store.ErrLockLost

	// ErrLeaseExpired: a fixed lease (WithFixedLease) ran its course. It is
	// the cause of the lease context then, and Unlock and Extend return it.
	// It wraps ErrLockLost, since past its lease the lock may be taken by
	// another owner exactly as after a loss; check it first to tell an
	// expiry the caller asked for from a loss. It is reported as
	// EventExpired, logged at Debug.
	ErrLeaseExpired = store.ErrLeaseExpired

	// ErrClosed: the Client was closed.
	ErrClosed = store.ErrClosed

	// ErrBackend wraps a failure of the store itself (Redis unreachable, a
	// timeout, a refused command), so it is never confused with contention.
	ErrBackend = store.ErrBackend

	// ErrNotReplicated: an acquisition or renewal was applied by the
	// master but acknowledged by fewer replicas than
	// redisstore.WithReplicaAck asks for, in time. An acquisition is then
	// rolled back; a renewal is not confirmed. It wraps ErrBackend.
	ErrNotReplicated = store.ErrNotReplicated

	// ErrUnsupported: the store cannot serve the request: it does not
	// serve this kind of lock (a store of redisstore.NewRedlock serves
	// Mutex and MultiMutex only), it lacks the capability the operation
	// needs (see package store), or its server is too old (Redis before
	// 6.2).
	ErrUnsupported = store.ErrUnsupported

	// ErrInvalidName: the lock name is empty, too long, not UTF-8, or
	// contains braces or control characters.
	ErrInvalidName = store.ErrInvalidName

	// ErrInvalidOption: an option of the Client, a lock or the store is
	// out of range (an absurd TTL, a redisstore.WithPrefix with braces,
	// ...), the store is nil, or a request could never be served as asked
	// (more permits than a semaphore has).
	ErrInvalidOption = store.ErrInvalidOption
)

// An Error is an error of an operation of distlock, as an *fs.PathError
// is of a file operation: every error distlock makes is one (read its
// fields with errors.As), and so is the cause of a lease's context. What
// a job returns (Once, OncePer, Do) and what a Locker of your own returns
// to Do come back as they were, joined to distlock's own if any. It is
// the one place that writes "distlock: ", the operation and the lock's
// name in front of the errors underneath.
type Error struct {
	// Op is the operation that failed: the method's name in lower case,
	// hyphenated (see the Err values for the list); "" for an invalid
	// option of the Client (Client.Err).
	Op string
	// Name is the lock's name (the pattern, for List; the members' names
	// joined with "+" for a MultiMutex); "" for an error about no lock.
	Name string
	// Err is what went wrong; it wraps one of the Err values.
	Err error

	named bool // about a lock: Name is quoted in the message, even if empty
}

// opErr returns err, if it is not nil, as the error of the operation op of
// the lock name.
func opErr(op, name string, err error) error {
	if err == nil {
		return nil
	}
	return &Error{Op: op, Name: name, Err: err, named: true}
}

// clientErr returns err, if it is not nil, as the error of the operation
// op of the Client, about no lock; op may be "".
func clientErr(op string, err error) error {
	if err == nil {
		return nil
	}
	return &Error{Op: op, Err: err}
}

// Error reads "distlock: <op> "<name>": <err>" for an error about a lock,
// "distlock: [<op>: ]<err>" otherwise.
func (e *Error) Error() string {
	s := "distlock: "
	if e.Op != "" {
		s += e.Op
		if e.named || e.Name != "" {
			s += " " + strconv.Quote(e.Name)
		}
		s += ": "
	}
	if e.Err == nil {
		return s + "<nil>"
	}
	return s + e.Err.Error()
}

// Unwrap returns e.Err.
func (e *Error) Unwrap() error { return e.Err }
