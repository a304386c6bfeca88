package engine

import (
	"context"
	"errors"
	"time"
)

// try makes one attempt and turns a grant into a Lease. Every attempt has
// an owner id of its own: an attempt that is given up is abandoned (see
// cleanup), and a late request of it is refused, never mistaken for a
// later attempt.
func (e *Engine) try(ctx context.Context, s Spec) (*Lease, Grant, error) {
	r := Request{Name: s.Name, Kind: s.Kind, Owner: e.newOwner(), Hold: 1, Lease: s.Lease,
		Permits: s.Permits, Capacity: s.Capacity, Value: s.Value}
	sent := e.now()
	type outcome struct {
		l   *Lease
		g   Grant
		err error
	}
	out, replied := call(e, ctx, s.Lease, func(c context.Context) (Grant, error) { return e.b.Acquire(c, r) },
		func(g Grant, err error, waiting bool) outcome {
			switch {
			case errors.Is(err, ErrClosed):
				return outcome{err: ErrClosed}
			case refusal(err) || unsent(err):
				return outcome{err: err}
			case err != nil:
				e.clean(waiting, r) // it may have been applied, now or later
				return outcome{err: err}
			case !g.Acquired:
				e.checkCapacity(s, g)
				return outcome{g: g}
			case !waiting:
				e.cleanup(r)
				return outcome{}
			}
			e.checkCapacity(s, g)
			l, err := e.hold(ctx, s, r, g, sent)
			return outcome{l: l, g: g, err: err}
		})
	if !replied {
		// The request may still be applied: it is abandoned now, so that
		// it takes nothing, or what it took is released, before the call
		// returns. (Its reply, when it comes, is cleaned up again.)
		e.cleanupNow(r)
		return nil, Grant{}, notAcquired(context.Cause(ctx))
	}
	return out.l, out.g, out.err
}

// hold turns the grant g of request r, sent at sent for a caller whose
// context is ctx, into a Hold and its first Lease. It returns no Lease,
// and releases the lock, if the reply came too late to be of use or Close
// has started.
func (e *Engine) hold(ctx context.Context, s Spec, r Request, g Grant, sent time.Duration) (*Lease, error) {
	h := newHold(ctx, e, s, r.Owner, g.Token)
	revoking := e.watchRevoked()
	added, late := e.renew.add(h, sent)
	if !added {
		e.cleanup(r)
		h.end(ErrClosed)
		return nil, ErrClosed
	}
	if late {
		// The reply came too late to be of use: the lease is (nearly) over.
		e.lose(h, lostErr(LossRenewalFailed, "the acquisition reply came after the lease deadline"), true)
		return nil, nil
	}
	awaitRevoked(ctx, revoking)
	return h.newLease(1), nil
}

// refusal reports whether err is the store's refusal of a request that it
// did not apply: the name is another kind, the request could never be
// granted. Nothing needs cleaning up after it.
func refusal(err error) bool {
	return errors.Is(err, ErrWrongKind) || errors.Is(err, ErrDeadlock) || errors.Is(err, ErrInvalidOption)
}

// unsent reports whether err is the failure of a request that never
// reached the store (see ErrUnsent): nothing needs cleaning up after it.
func unsent(err error) bool { return errors.Is(err, ErrUnsent) }

// clean abandons the owners of rs: before it returns if a caller waits
// for the outcome (it is about to return an error, and nothing of its call
// may be left behind it), in the background otherwise.
func (e *Engine) clean(waiting bool, rs ...Request) {
	if waiting {
		e.cleanupNow(rs...)
		return
	}
	for _, r := range rs {
		e.cleanup(r)
	}
}
