package distlock

import (
	"context"
	"fmt"
	"time"

	"github.com/distlock/distlock/internal/engine"
)

// A Lease is one hold of a lock, returned by Lock and TryLock (and the
// like: RLock, Acquire), or the holds of every member of a MultiMutex. Its
// methods are safe for concurrent use, and safe on a nil *Lease (the one a
// failed Lock or TryLock returns): Unlock and Extend then return an error
// wrapping ErrNotHeld, Context an ended context, Token 0, Tokens nil and
// Name "".
type Lease struct {
	l held
	c *Client // whose options bound Extend's ttl
}

// held is a lease of the engine: one lock's (*engine.Lease), or a
// multi-lock's (*engine.Group).
type held interface {
	Name() string
	Kind() engine.Kind
	Token() uint64
	Hold() uint64
	Tokens() map[string]uint64
	Context() context.Context
	ValidUntil() time.Time
	Unlock(context.Context) error
	Extend(context.Context, time.Duration) error
}

// errNilLease is what a nil *Lease reports: it is about no lock.
var errNilLease = fmt.Errorf("%w: nil lease (the lock was not acquired)", ErrNotHeld)

// endedContext is the Context of a nil *Lease.
var endedContext = func() context.Context {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(clientErr("hold", errNilLease))
	return ctx
}()

// Name is the name of the lock.
func (l *Lease) Name() string {
	if l == nil {
		return ""
	}
	return l.l.Name()
}

// Token is the fencing token of this hold: strictly greater than the
// token of every earlier acquisition of the same lock name, by any owner
// (re-entrant holds share their first hold's token). For a MultiMutex it
// is the largest of its members' tokens (see Tokens for each). Pass it to the
// resource you modify and have it reject tokens lower than the highest it
// has seen: that keeps a holder that outlived its lease (a long pause)
// from doing damage. See the package documentation for what it rests on.
func (l *Lease) Token() uint64 {
	if l == nil {
		return 0
	}
	return l.l.Token()
}

// Tokens returns the fencing token of each lock the lease holds, by name:
// one for a lock, one per member for a MultiMutex.
func (l *Lease) Tokens() map[string]uint64 {
	if l == nil {
		return nil
	}
	return l.l.Tokens()
}

// Context is a context that carries the values of the context the lock was
// acquired with (for a re-entered hold, of the first acquisition's), not
// its deadline, and is cancelled when this lease is unlocked or the lock is
// lost. On loss, context.Cause returns an error wrapping ErrLockLost, and
// the cancellation comes before the lease can expire on the server (see the
// package documentation for the assumptions).
//
// A fixed lease's context (WithFixedLease) has a Deadline: ValidUntil's
// instant, at which it ends with ErrLeaseExpired. Extend moves it, so a
// call after an Extend can return a later time than one before; contexts
// derived earlier keep the earlier deadline, which is on the safe side.
//
// Acquiring the same lock with this context, or one derived from it,
// re-enters the lock instead of waiting for it.
func (l *Lease) Context() context.Context {
	if l == nil {
		return endedContext
	}
	return l.l.Context()
}

// ValidUntil is the local instant before which the lock is certainly still
// held by this lease: its context ends then at the latest, unless a
// renewal or Extend confirmed in the meantime moves it. It is measured
// from the send of the last confirmed request, less a margin for clock
// drift, on this process's monotonic clock (see the package documentation
// for what it rests on). It returns the zero time once the lease is
// unlocked or the lock is lost or expired. A watchdog's lease moves it
// forward with every renewal; for a fixed lease it is the context's
// Deadline.
func (l *Lease) ValidUntil() time.Time {
	if l == nil {
		return time.Time{}
	}
	return l.l.ValidUntil()
}

// Unlock releases this hold. Its context is cancelled first, before the
// release is sent, so that no work runs under it once another owner can
// take the lock. The lock is free when the last lease of its owner is
// unlocked, and one waiter per process is woken.
//
// Leases of one owner (re-entry) are independent: unlocking the outer lease
// while an inner one is held cancels only the outer lease's context; the
// lock stays held, and the inner lease's context live, until the inner
// lease is unlocked too. Unlocking several of them at once, in any order,
// succeeds for each. A re-entry still on its way when the last lease is
// unlocked fails with ErrNotHeld.
//
// Unlock returns an error wrapping ErrNotHeld if this lease was already
// unlocked, and ErrLockLost if the lock had been lost. After a loss that
// Redis reported (the lock gone, taken over or revoked), the last lease's
// Unlock still sends the release, which changes nothing where the lock is
// gone or someone else's: a lock taken away by Revoke stays held until
// then, so call Unlock once the work has stopped, even after the lease
// context ended. (After a loss by a deadline that passed unconfirmed, the
// release is sent in the background at once.) A failed release is
// retried; a retry never releases twice. If the release cannot be
// confirmed, the error wraps ErrBackend (Redis failed) or the end of ctx;
// the release is then retried in the background, and the lock expires
// with its lease at the latest. Unlock makes one attempt even when ctx has
// already ended, so a deferred Unlock works after a request has timed out.
func (l *Lease) Unlock(ctx context.Context) error {
	if l == nil {
		return clientErr("unlock", errNilLease)
	}
	w, ctx := l.c.startCall(ctx, "unlock", l.Name(), kindOfEngine(l.l.Kind()), l.l.Hold())
	err := opErr("unlock", l.Name(), l.l.Unlock(ctx))
	w.end(nil, err)
	return err
}

// Extend sets the lease to ttl from now, and makes ttl the lease length of
// later renewals. It returns an error wrapping ErrLockLost if the lock was
// lost, and ErrNotHeld if the lease was unlocked.
//
// ttl must lie within [MinTTL, MaxTTL] and be a lease the store accepts,
// as a lock's TTL must (under redisstore.WithReplicaAck, at least six
// times the acknowledgement timeout); otherwise Extend returns an error
// wrapping ErrInvalidOption and sends nothing.
//
// If Extend cannot confirm the extension (ctx ended, Redis failed), it
// returns an error, and the request may still be applied later: the lease
// context then counts with both outcomes, so a shorter ttl that lands late
// ends the context before the server can expire the key. A late request
// never undoes a later renewal or Extend (renewals are sequenced on the
// server).
func (l *Lease) Extend(ctx context.Context, ttl time.Duration) error {
	if l == nil {
		return clientErr("extend", errNilLease)
	}
	w, ctx := l.c.startCall(ctx, "extend", l.Name(), kindOfEngine(l.l.Kind()), l.l.Hold())
	err := opErr("extend", l.Name(), l.extend(ctx, ttl))
	w.end(nil, err)
	return err
}

func (l *Lease) extend(ctx context.Context, ttl time.Duration) error {
	if err := checkTTL(ttl); err != nil {
		return err
	}
	if err := l.c.validate(l.l.Kind(), ttl, 0); err != nil {
		return err
	}
	return l.l.Extend(ctx, ttl)
}

// String describes the lease without its secrets.
func (l *Lease) String() string {
	if l == nil {
		return "lease <nil>"
	}
	return fmt.Sprintf("lease %q token %d", l.Name(), l.Token())
}
