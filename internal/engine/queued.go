package engine

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// acquireQueued waits for a lock of a queued kind: it takes a place in the
// lock's queue on the store and waits for the backend to grant it the
// lock (see place.go). There is no local queue: the store's is the order,
// for every process alike.
//
// Unless callers of this engine already wait for the lock (and so watch
// its grants), it first makes one attempt that never queues: a free lock
// is taken in one round trip, without setting up a watch. The place, if
// one is needed, is made after that.
//
// A call that queues again as a new owner cleans the earlier one up in
// the background; if the call then fails, it waits for those clean-ups
// too (their first attempts, giveUpWait at most), so that no place of
// this call is left when it returns, whichever owner it was made for.
func (e *Engine) acquireQueued(ctx context.Context, s Spec, start time.Time) (_ *Lease, err error) {
	var earlier []<-chan struct{} // the clean-ups of the call's earlier owners
	defer func() {
		if err != nil {
			await(giveUpWait, earlier...)
		}
	}()
	if !e.waiting(s.Name, s.Kind) {
		l, _, err := e.try(ctx, s)
		if err != nil {
			return nil, err
		}
		if l != nil {
			e.acquired(l, 0)
			return l, nil
		}
	}
	// Grants are pushed to the watch: it is set up before the first place.
	q, w, _, err := e.join(ctx, s.Name, s.Kind)
	if err != nil {
		return nil, joinErr(err)
	}
	defer e.leave(q, w, false, false)
	waiting := false
	defer func() {
		if waiting {
			e.emit(Event{Kind: WaitEnded, Name: s.Name, Lock: s.Kind})
		}
	}()
	for {
		h, queued, err := e.enqueue(ctx, s)
		if err != nil {
			return nil, err
		}
		if queued && !waiting {
			waiting = true
			e.emit(Event{Kind: Waiting, Name: s.Name, Lock: s.Kind})
		}
		select {
		case <-h.settled:
		case <-ctx.Done():
			// Nothing of the call may be left when it returns: its place
			// goes, and a grant that raced the cancellation goes to the
			// next in line, before the error is returned.
			e.giveUp(h, context.Cause(ctx), true)
			return nil, notAcquired(context.Cause(ctx))
		case <-e.ctx.Done():
			// Close abandons the place too (and waits for that); the
			// waiter does not return before its place is gone either.
			e.giveUp(h, ErrClosed, true)
			return nil, ErrClosed
		}
		if l := e.claim(h); l != nil {
			err := e.confirmGrant(ctx, h)
			if err == nil {
				awaitRevoked(ctx, e.watchRevoked()) // started by enqueue
				e.acquired(l, time.Since(start))
				return l, nil
			}
			if !errors.Is(err, errGrantGone) {
				return nil, err
			}
		}
		cause := e.renew.causeOf(h)
		switch {
		case errors.Is(cause, ErrClosed):
			return nil, ErrClosed
		case errors.Is(cause, ErrDeadlock):
			// Its place could never be granted (see deadlocked).
			e.cleanupNow(e.ownerOf(h))
			return nil, cause
		}
		// The place expired (this process was paused or cut off for
		// longer than the queue timeout), or the grant came too late to be
		// of use, or was gone before it could be confirmed. Nothing of
		// that owner may stay behind (a grant that is not used goes to the
		// next in line); queue again, at the back, as a new owner.
		earlier = append(earlier, e.cleanup(e.ownerOf(h)))
	}
}

// enqueue sends the acquisition of a new owner of a queued kind, with its
// place already tracked (a grant may come before the reply). It returns
// the hold, settled if the lock was taken at once, and whether it is
// queued. On an error, nothing of the attempt is left: a request whose
// outcome is unknown is abandoned.
func (e *Engine) enqueue(ctx context.Context, s Spec) (*Hold, bool, error) {
	h := newHold(ctx, e, s, e.newOwner(), 0)
	e.watchRevoked()
	r := h.request(Request{Hold: 1, Lease: s.Lease, Queue: s.Queue, Seq: 1, Value: s.Value})
	e.mu.Lock()
	e.places[GranteeID(h.owner)] = h
	e.mu.Unlock()
	sent := e.now()
	if !e.renew.addPlace(h, sent) {
		e.unplace(h)
		return nil, false, ErrClosed
	}
	type outcome struct {
		queued bool
		err    error
	}
	out, replied := call(e, ctx, s.Lease, func(c context.Context) (Grant, error) { return e.b.Acquire(c, r) },
		func(g Grant, err error, waiting bool) outcome {
			switch {
			case errors.Is(err, ErrClosed):
				e.giveUp(h, ErrClosed, false)
				return outcome{err: ErrClosed}
			case refusal(err) || unsent(err):
				e.drop(h, err) // nothing was written
				return outcome{err: err}
			case err != nil:
				e.giveUp(h, err, waiting) // it may have been applied, now or later
				return outcome{err: err}
			case !waiting:
				e.giveUp(h, context.Canceled, false)
				return outcome{}
			case g.Acquired:
				// Taken by this request, or granted since an earlier copy of
				// it: the grant says which.
				e.checkCapacity(s, g)
				e.renew.grant(h, g.Token, g.Seq, g.Lease, true)
			case !g.Queued:
				// Only an abandoned owner is refused: this one was, by Close,
				// while its acquisition was on its way (or by nobody, and the
				// store is wrong).
				if errors.Is(e.renew.causeOf(h), ErrClosed) {
					return outcome{err: ErrClosed}
				}
				e.giveUp(h, ErrBackend, true)
				return outcome{err: fmt.Errorf("%w: the store refused a new owner", ErrBackend)}
			default:
				e.checkCapacity(s, g)
				if err := deadlocked(h, g.Capacity); err != nil {
					e.giveUp(h, err, true)
					return outcome{err: err}
				}
				e.renew.placeConfirmed(h, sent, g.TTL)
			}
			if e.renew.causeOf(h) != nil {
				// h ended while its acquisition was on its way (Close): what
				// the acquisition took, nobody will use.
				e.giveUp(h, nil, false)
			}
			return outcome{queued: g.Queued}
		})
	if !replied {
		// The acquisition may still land: its owner is abandoned now, so
		// that it takes nothing, or gives up what it took.
		e.giveUp(h, context.Cause(ctx), true)
		return nil, false, notAcquired(context.Cause(ctx))
	}
	return h, out.queued, out.err
}

// claim hands out the first Lease of h once its place phase has settled,
// or returns nil if h ended instead.
func (e *Engine) claim(h *Hold) *Lease {
	e.unplace(h)
	e.renew.mu.Lock()
	defer e.renew.mu.Unlock()
	if h.done || h.placed {
		return nil
	}
	return h.newLease(1)
}

// giveUp ends h, whose waiter has gone, and abandons its owner: its place
// is removed, a lock granted to it meanwhile goes to the next in line, and
// a request of it still on its way takes nothing. With now, it returns
// once the backend has confirmed that (see cleanupNow), for a caller about
// to return an error; otherwise the clean-up runs in the background.
func (e *Engine) giveUp(h *Hold, cause error, now bool) {
	e.drop(h, cause)
	e.clean(now, e.ownerOf(h))
}

// drop ends h with cause, if it has not ended, and stops routing grants to
// it.
func (e *Engine) drop(h *Hold, cause error) {
	e.unplace(h)
	if e.renew.end(h, cause) {
		h.end(cause)
	}
}

// unplace stops routing grants to h.
func (e *Engine) unplace(h *Hold) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if id := GranteeID(h.owner); e.places[id] == h {
		delete(e.places, id)
	}
}

// deliver hands a grant pushed by the backend to the place it names, if it
// is one of this engine's, or ends that place if the notice says it is
// gone (its waiter queues again at once).
func (e *Engine) deliver(n Notice) {
	e.mu.Lock()
	h := e.places[n.Grantee]
	e.mu.Unlock()
	switch {
	case h == nil:
	case n.Gone:
		e.renew.evict(h)
	default:
		e.renew.grant(h, n.Token, n.Seq, n.Lease, false)
	}
}

// errGrantGone ends a hold whose grant was gone (expired, deleted) before
// the grantee could confirm it, or that ended otherwise meanwhile.
var errGrantGone = errors.New("the granted lock was gone before the grant was confirmed")

// confirmGrant confirms the grant of h, if it was made by someone else's
// request and the backend wants grants confirmed (see GrantConfirmer): it
// renews the lease, to its length, and waits for the outcome for as long
// as ctx lasts. It returns nil if h needs no confirmation or the renewal
// was confirmed; errGrantGone if h has ended meanwhile or the store no
// longer has the grant (the caller queues again, as after a late grant);
// any other error if the grant could not be confirmed: h has then been
// given up, and the lock goes to the next in line.
func (e *Engine) confirmGrant(ctx context.Context, h *Hold) error {
	r := e.renew
	r.mu.Lock()
	if !h.unconfirmed {
		r.mu.Unlock()
		return nil
	}
	if h.done {
		r.mu.Unlock()
		return errGrantGone
	}
	sent := e.now()
	lease := h.lease
	seq := r.send(h, sent, lease)
	r.mu.Unlock()

	req := h.request(Request{Lease: lease, Seq: seq})
	renew := func(c context.Context) (struct{}, error) {
		var out error
		e.b.Renew(c, []Request{req}, func(_ int, _ Grant, err error) { out = err })
		return struct{}{}, out
	}
	outcome, replied := call(e, ctx, lease, renew, func(_ struct{}, err error, waiting bool) error {
		if !waiting {
			return nil // the caller has given h up
		}
		r.mu.Lock()
		if h.done {
			r.mu.Unlock()
			return errGrantGone
		}
		if err == nil {
			h.inflight, h.unconfirmed = false, false
			r.settle(h, seq, sent, lease, nil)
			r.mu.Unlock()
			return nil
		}
		if errors.Is(err, ErrNotHeld) {
			r.endLocked(h, errGrantGone)
			r.mu.Unlock()
			h.end(errGrantGone)
			return errGrantGone
		}
		r.mu.Unlock()
		e.giveUp(h, err, true)
		if errors.Is(err, ErrClosed) {
			return ErrClosed
		}
		return fmt.Errorf("the grant was not confirmed, and was given up: %w", err)
	})
	if !replied {
		e.giveUp(h, context.Cause(ctx), true)
		return notAcquired(context.Cause(ctx))
	}
	return outcome
}

// deadlocked returns an error wrapping ErrDeadlock if h, a semaphore's
// waiter, could never be granted its permits under capacity, the capacity
// in force as the store reported it (0: not reported), because the
// context it waits in holds permits of the same semaphore: they would have
// to be released first, by the caller that waits. It returns nil
// otherwise; a request larger than the capacity by itself is the store's
// to refuse (ErrInvalidOption).
func deadlocked(h *Hold, capacity int) error {
	if h.kind != Semaphore || capacity == 0 || h.nested <= capacity || h.permits > capacity {
		return nil
	}
	return fmt.Errorf("%w: the context holds %d permits; %d more could never be granted under the capacity of %d",
		ErrDeadlock, h.nested-h.permits, h.permits, capacity)
}
