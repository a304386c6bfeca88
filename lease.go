package distlock

import (
	"context"
	"fmt"
	"time"

	"github.com/distlock/distlock/internal/engine"
)

// A Lease is one hold of a lock, returned by Lock and TryLock. Its methods
// are safe for concurrent use.
type Lease struct {
	l *engine.Lease
}

// Name is the name of the lock.
func (l *Lease) Name() string { return l.l.Name() }

// Token is the fencing token of this hold: strictly greater than the
// token of every earlier acquisition of the same lock name, by any owner
// (re-entrant holds share their first hold's token). Pass it to the
// resource you modify and have it reject tokens lower than the highest it
// has seen: that keeps a holder that outlived its lease (a long pause)
// from doing damage. See the package documentation for what it rests on.
func (l *Lease) Token() uint64 { return l.l.Token() }

// Context is a context that carries the values of the context the lock was
// acquired with, and is cancelled when this lease is unlocked or the lock is
// lost. On loss, context.Cause returns an error wrapping ErrLockLost, and
// the cancellation comes before the lease can expire on the server (see the
// package documentation for the assumptions).
//
// Acquiring the same lock with this context, or one derived from it,
// re-enters the lock instead of waiting for it.
func (l *Lease) Context() context.Context { return l.l.Context() }

// Unlock releases this hold; the lock is free when the last hold of its
// owner is released, and one waiter per process is woken. It returns an
// error wrapping ErrNotHeld if this lease was already unlocked, and
// ErrLockLost if the lock had been lost. A failed release is retried; a
// retry never releases twice. If the release cannot be confirmed, the
// error wraps ErrBackend (Redis failed) or the end of ctx, the lease
// context is cancelled, and the lock expires with its lease. Unlock makes
// one attempt even when ctx has already ended, so a deferred Unlock works
// after a request has timed out.
func (l *Lease) Unlock(ctx context.Context) error { return l.l.Unlock(ctx) }

// Extend sets the lease to ttl from now, and makes ttl the lease length of
// later renewals. It returns an error wrapping ErrLockLost if the lock was
// lost, and ErrNotHeld if the lease was unlocked.
func (l *Lease) Extend(ctx context.Context, ttl time.Duration) error {
	if err := checkTTL(ttl); err != nil {
		return err
	}
	return l.l.Extend(ctx, ttl)
}

// String describes the lease without its secrets.
func (l *Lease) String() string { return fmt.Sprintf("lease %q token %d", l.Name(), l.Token()) }
