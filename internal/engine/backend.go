package engine

import (
	"context"
	"time"
)

// A Backend stores locks. The engine drives it: it decides when to try,
// wait, renew and give up; the backend makes each of those one atomic step
// on its store and delivers release notifications.
//
// Every method must be safe for concurrent use. Errors that come from the
// store must wrap ErrBackend. A request may be applied even when its
// method returned an error (a lost reply), and even later (a request held
// up in the network): the engine counts on the guarantees below to make
// such late requests harmless.
type Backend interface {
	// Acquire makes one attempt to take the lock for r.Owner, or to add
	// hold r.Hold to it if r.Owner holds it already. It is idempotent:
	// repeating a request that succeeded changes nothing. It never takes
	// the lock for an owner that was abandoned (see Abandon), and with
	// r.Reenter it never takes a free lock.
	Acquire(ctx context.Context, r Request) (Grant, error)

	// Release removes hold r.Hold of r.Owner and frees the lock, notifying
	// waiters, when no hold is left; r.Hold 0 removes every hold of the
	// owner at once. It is idempotent.
	Release(ctx context.Context, r Request) (Release, error)

	// Abandon gives up owner r.Owner for good: it removes every hold of
	// the owner (freeing the lock and notifying waiters, as Release does)
	// and makes every Acquire of r.Owner that reaches the store within
	// r.Lease from now fail. It reports whether it freed the lock.
	Abandon(ctx context.Context, r Request) (freed bool, err error)

	// Renew sets the lease of every lock in rs that is still owned by its
	// r.Owner to r.Lease, in as few round trips as the store allows. It
	// calls report once for each request, as soon as its outcome is known
	// (possibly from several goroutines at once), and returns after the
	// last call: nil when the lease was set (by this request, or by an
	// earlier copy of it); an error wrapping ErrNotHeld when the lock is
	// not owned by r.Owner (nothing changed); ErrSuperseded when a renewal
	// of the owner with a higher r.Seq was applied before (nothing
	// changed); any other error when the outcome is unknown. A renewal
	// never lowers the Seq of the last applied one, so a late request
	// cannot undo a later one.
	Renew(ctx context.Context, rs []Request, report func(i int, err error))

	// Watch delivers release notifications for the named lock to wake until
	// the returned stop is called. It returns once notifications are flowing,
	// so a release that happens after Watch returns is never missed. wake is
	// also called when notifications may have been lost (a reconnection).
	// Releases made through this Backend itself are not delivered: the
	// engine hands those over to its waiters directly. wake must not block.
	Watch(ctx context.Context, name string, wake func()) (stop func(), err error)
}

// A Request names one hold of one lock.
type Request struct {
	Name  string        // lock name, already validated
	Owner string        // owner id, unique per acquisition
	Hold  uint64        // hold id, unique within the owner
	Lease time.Duration // lease to set (Acquire of a free lock, Renew); how long to refuse (Abandon)
	Seq   uint64        // Renew: increasing per owner, from 1
	// Reenter makes Acquire only add a hold to a lock the owner already
	// holds, never take a free one.
	Reenter bool
}

// A Grant is the outcome of one Acquire attempt.
type Grant struct {
	Acquired bool
	Token    uint64        // fencing token of the owner's hold, when Acquired
	Holds    int           // the owner's hold count, when Acquired
	TTL      time.Duration // the holder's remaining lease when not Acquired; < 0 when unknown or unbounded
}

// Release is the outcome of a Release.
type Release int

const (
	// Freed: that was the last hold; the lock is free and waiters were told.
	Freed Release = iota
	// Remaining: the hold was removed; the owner has other holds.
	Remaining
	// NotOwner: the owner does not hold the lock (expired or taken over).
	NotOwner
	// AlreadyReleased: the owner holds the lock but not this hold: an
	// earlier attempt of the same release already removed it.
	AlreadyReleased
)
