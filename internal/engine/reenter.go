package engine

import (
	"context"
	"errors"
	"fmt"
)

// reenter adds a lease of kind to the hold h.
//
// The kinds must go together: the same kind, or Read in a Write hold (a
// writer that also reads: once its write leases are unlocked, it still
// reads, and no writer got in between). Write in a hold that only reads
// (an upgrade) could never be granted while the caller reads: it fails at
// once with ErrDeadlock.
//
// A re-entry counts only once it has succeeded: if the hold's last lease is
// unlocked while a re-entry is on its way, the lock is released at once and
// the re-entry fails with ErrNotHeld (its hold, if it reached the server,
// went with the release).
func (e *Engine) reenter(ctx context.Context, h *Hold, kind Kind) (*Lease, error) {
	switch {
	case kind == h.kind || kind == Read && h.kind == Write:
	case kind == Write && h.kind == Read:
		return nil, fmt.Errorf("%w: the context holds the read side; the write side would wait for it forever", ErrDeadlock)
	default:
		return nil, fmt.Errorf("%w, by the caller's own context", ErrWrongKind)
	}
	if kind == Write && !h.writing() {
		return nil, fmt.Errorf("%w: the context's write leases were unlocked, it holds the read side only", ErrDeadlock)
	}
	if !h.usable() {
		return nil, h.endErr()
	}
	id := h.lastHold.Add(1)
	r := h.request(Request{Hold: id, Lease: e.renew.leaseOf(h), Reenter: true})
	r.Kind = kind
	type outcome struct {
		l   *Lease
		err error
	}
	out, replied := call(e, ctx, r.Lease, func(c context.Context) (Grant, error) { return e.b.Acquire(c, r) },
		func(g Grant, err error, waiting bool) outcome {
			switch {
			case errors.Is(err, ErrClosed):
				return outcome{err: ErrClosed}
			case errors.Is(err, ErrDeadlock):
				// The last write hold was released first: nothing was added.
				return outcome{err: err}
			case unsent(err):
				return outcome{err: err}
			case err != nil:
				e.releaseHold(h, id, waiting) // the hold may have been added
				return outcome{err: err}
			case !g.Acquired:
				// Not this owner's any more: a loss, unless the hold ended
				// first (released or lost while the re-entry was on its way).
				e.lose(h, lostErr(LossGone, "re-entry found it no longer held by this owner"), false)
				return outcome{err: h.endErr()}
			case !waiting:
				e.releaseHold(h, id, false)
				return outcome{}
			}
			l := h.add(id, kind)
			if l == nil {
				return outcome{err: h.endErr()}
			}
			e.emit(Event{Kind: Acquired, Name: h.name, Lock: h.kind, Hold: h.id, Token: h.token, Holds: g.Holds})
			return outcome{l: l}
		})
	if !replied {
		// The hold may still be added: it is removed before the call
		// returns (its reply, when it comes, removes it again).
		e.releaseHold(h, id, true)
		return nil, notAcquired(context.Cause(ctx))
	}
	return out.l, out.err
}
