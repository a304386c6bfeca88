package engine

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// unlock ends lease id, of kind, of h for its caller: the last lease of a
// hold releases the lock, any other lease only its own hold.
func (e *Engine) unlock(ctx context.Context, h *Hold, id uint64, kind Kind) error {
	if h.drop(kind) {
		return e.releaseAll(ctx, h)
	}
	return e.releaseOne(ctx, h, id)
}

// releaseHold removes hold id of h, added by a re-entry whose caller has
// gone or that failed, while the hold lasts (its end removes every hold of
// the owner). With now, it returns once that is confirmed, or after
// giveUpWait, for a caller about to return an error (nothing of its call
// may be left behind it); otherwise it runs in the background.
func (e *Engine) releaseHold(h *Hold, id uint64, now bool) {
	done := make(chan struct{})
	e.spawn(func() {
		defer close(done)
		ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
		defer cancel()
		_ = e.releaseOne(ctx, h, id)
	})
	if now {
		await(giveUpWait, done)
	}
}

// releaseAll releases every hold of h. The hold ends, and its lease
// contexts are cancelled, before the release is sent: once the lock can be
// taken by someone else, no context of h is live. If the release cannot be
// confirmed, it is retried in the background, and the lock expires with
// its lease at the latest.
func (e *Engine) releaseAll(ctx context.Context, h *Hold) error {
	if !e.endHold(h, errReleased) {
		if e.takeLate(h) {
			e.releaseLost(ctx, h)
		}
		return h.unlockErr()
	}
	res, err := e.release(ctx, h, 0)
	switch {
	case err != nil:
		e.cleanup(e.ownerOf(h))
		return fmt.Errorf("release not confirmed, it is retried in the background and expires with its lease at the latest: %w", err)
	case res == NotOwner:
		return lostErr(LossGone, "it was no longer held by this owner at release")
	}
	e.emit(Event{Kind: Released, Name: h.name, Lock: h.kind, Hold: h.id, Token: h.token})
	e.handOff(h.name, h.kind)
	return nil
}

// releaseLost releases h, which was lost while the server kept the lock
// for its owner, now that its caller has stopped: a revoked lock is then
// free at once instead of when its lease runs out. Where the lock is gone
// or someone else's, the release changes nothing.
func (e *Engine) releaseLost(ctx context.Context, h *Hold) {
	res, err := e.release(ctx, h, 0)
	switch {
	case err != nil:
		e.cleanup(e.ownerOf(h))
	case res == Freed:
		e.handOff(h.name, h.kind)
	}
}

// releaseOne releases hold id of h, one of several leases of the hold.
func (e *Engine) releaseOne(ctx context.Context, h *Hold, id uint64) error {
	if h.isEnded() {
		return h.unlockErr()
	}
	res, err := e.release(ctx, h, id)
	switch {
	case err != nil:
		// The hold id may stay on the server: the release of the last
		// lease removes every hold of the owner.
		return fmt.Errorf("release not confirmed: %w", err)
	case res == Freed:
		// No other hold had reached the server (a re-entry on its way):
		// the lock is free, so the hold has ended.
		if e.endHold(h, errReleased) {
			e.emit(Event{Kind: Released, Name: h.name, Lock: h.kind, Hold: h.id, Token: h.token})
		}
		e.handOff(h.name, h.kind)
	case res == NotOwner:
		e.lose(h, lostErr(LossGone, "it was no longer held by this owner at release"), false)
		return h.unlockErr() // nil if the last lease's release came first
	}
	return nil
}

// release sends the release of hold id (0: every hold) of h, retrying a
// failed attempt while ctx lasts. A ctx that has already ended still gets
// one attempt, bounded by releaseTimeout, so that a deferred Unlock releases
// even after the work's context has expired.
func (e *Engine) release(ctx context.Context, h *Hold, id uint64) (Release, error) {
	if ctx.Err() != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
		defer cancel()
	}
	r := h.request(Request{Hold: id})
	type outcome struct {
		res     Release
		retried bool
		err     error
	}
	out, replied := call(e, ctx, releaseTimeout, func(c context.Context) (outcome, error) {
		var o outcome
		var err error
		for try := 0; try < releaseTries; try++ {
			if o.res, err = e.b.Release(c, r); err == nil || c.Err() != nil || ctx.Err() != nil {
				break
			}
			o.retried = true
		}
		return o, err
	}, func(o outcome, err error, waiting bool) outcome {
		if !waiting {
			if err != nil {
				e.cleanup(e.ownerOf(h))
			} else if o.res == Freed {
				e.handOff(h.name, h.kind)
			}
		}
		o.err = err
		return o
	})
	if !replied {
		return 0, context.Cause(ctx)
	}
	if out.err != nil {
		return 0, out.err
	}
	if out.res == NotOwner && out.retried {
		// An earlier attempt that seemed to fail may have freed it. It
		// cannot be told apart from a force-unlock in between; either way
		// this owner no longer holds the lock.
		out.res = Freed
	}
	return out.res, nil
}

// endHold ends h with cause, unless it has ended already, and cancels its
// lease contexts (with no cause for a release). It reports whether it did.
func (e *Engine) endHold(h *Hold, cause error) bool {
	if !e.renew.end(h, cause) {
		return false
	}
	if cause == errReleased {
		h.end(nil)
	} else {
		h.end(cause)
	}
	return true
}

// lose ends h because the lock was lost, cancelling its lease contexts
// with cause. With stale, the lock may still be ours on the server (a
// deadline passed without confirmation), so it is released in the background
// to let waiters in sooner.
func (e *Engine) lose(h *Hold, cause error, stale bool) {
	if e.renew.end(h, cause) {
		e.lost(h, stale)
	}
}

// lost finishes the loss of h, which the renewer has just ended.
func (e *Engine) lost(h *Hold, stale bool) {
	cause := e.renew.causeOf(h)
	if !stale {
		e.addLate(h) // before the lease context ends: an Unlock may follow at once
	}
	h.end(cause)
	kind := Lost
	if errors.Is(cause, ErrLeaseExpired) {
		kind = Expired
	}
	e.emit(Event{Kind: kind, Name: h.name, Lock: h.kind, Hold: h.id, Token: h.token, Reason: ReasonOf(cause), Err: cause})
	if stale {
		e.cleanup(e.ownerOf(h))
	}
}

// addLate records that h was lost while the server may still keep the
// lock for its owner (revoked): its release is owed, by the last lease's
// Unlock, or by Close if that comes first.
func (e *Engine) addLate(h *Hold) {
	h.lateRelease.Store(true)
	e.mu.Lock()
	e.late[h] = struct{}{}
	e.mu.Unlock()
}

// takeLate reports whether the release of h was owed, and takes the debt
// over: the caller sends it.
func (e *Engine) takeLate(h *Hold) bool {
	if !h.lateRelease.Swap(false) {
		return false
	}
	e.mu.Lock()
	delete(e.late, h)
	e.mu.Unlock()
	return true
}

// A release is tried releaseTries times, each within releaseTimeout.
const (
	releaseTries   = 3
	releaseTimeout = 5 * time.Second
)
