package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// The renewer keeps every Hold of an engine alive and watches its local
// deadline, with one timer for all of them.
//
// A watchdog lease is renewed between lease/6 and lease/3 after its last
// confirmed renewal: renewal times are rounded down to a grid of lease/6, so
// holds with the same lease share their renewal instants and go to the
// backend as one batch, whatever their number.
//
// The deadline of a hold is the earliest moment at which the server may
// expire its key, less a margin, given every request that may still set
// its lease: the last confirmed one (its send time + lease) and every
// renewal or extension sent after it whose outcome is not known yet, or
// never will be (a lost reply: it may land later, and a shorter lease then
// ends sooner). Renewals carry increasing sequence numbers and the backend
// refuses one older than the last it applied, so a confirmation makes every
// earlier request harmless. A hold whose deadline passes is lost: its
// context is cancelled before the server can expire the key, so before
// anyone else can take the lock.
type renewer struct {
	e *Engine

	mu      sync.Mutex
	holds   holdHeap
	timer   *time.Timer
	armedAt time.Duration // when the timer fires; valid if armed
	armed   bool
	stopped bool
	// spare is the largest requests buffer of a finished batch, for the
	// next: a tick may renew a million locks, and a new buffer each time
	// is that much fresh memory to fault in.
	spare []Request
}

func newRenewer(e *Engine) *renewer {
	r := &renewer{e: e}
	r.timer = time.AfterFunc(time.Hour, r.fire)
	r.timer.Stop()
	return r
}

// add starts watching h, acquired by a request sent at sent. It reports
// whether h was added (not after stop), and whether its deadline has
// already passed (the reply came too late).
func (r *renewer) add(h *Hold, sent time.Duration) (added, late bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return false, false
	}
	h.base = sent + h.lease - margin(h.lease)
	h.deadline = h.base
	h.renewAt = renewTime(sent, h.lease)
	h.schedule()
	r.holds.push(h)
	r.arm(h.next)
	return true, r.e.now() >= h.deadline
}

// leaseOf reads the current lease length of h.
func (r *renewer) leaseOf(h *Hold) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return h.lease
}

// causeOf reads why h ended, nil while it has not.
func (r *renewer) causeOf(h *Hold) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return h.cause
}

// end marks h ended with cause and stops watching it; it reports false if h
// had already ended.
func (r *renewer) end(h *Hold, cause error) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.endLocked(h, cause)
}

func (r *renewer) endLocked(h *Hold, cause error) bool {
	if h.done {
		return false
	}
	h.done, h.cause = true, cause
	if h.index >= 0 {
		r.holds.remove(h)
	}
	if h.placed {
		close(h.settled)
	}
	return true
}

// stop ends every hold with ErrClosed and returns them: those that held
// the lock, and those that were waiting in a queue. The timer fires no
// more.
func (r *renewer) stop() (holds, places []*Hold) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopped = true
	r.timer.Stop()
	for len(r.holds) > 0 {
		h := r.holds.pop()
		h.done, h.cause = true, ErrClosed
		if h.placed {
			close(h.settled)
			places = append(places, h)
		} else {
			holds = append(holds, h)
		}
	}
	return holds, places
}

// arm makes the timer fire no later than at. r.mu must be held.
func (r *renewer) arm(at time.Duration) {
	if r.stopped || r.armed && r.armedAt <= at {
		return
	}
	r.armed, r.armedAt = true, at
	r.timer.Reset(at - r.e.now())
}

// schedule sets the heap key of h from its state.
func (h *Hold) schedule() {
	h.next = h.deadline
	if (h.renew || h.placed || h.confirm) && !h.inflight && h.renewAt < h.deadline {
		h.next = h.renewAt
	}
}

// send records a renewal or extension of h for lease, sent at sent, and
// returns its sequence number. Until it is confirmed, the deadline counts
// with it. r.mu must be held.
func (r *renewer) send(h *Hold, sent, lease time.Duration) uint64 {
	h.seq++
	h.pending = append(h.pending, bound{seq: h.seq, end: sent + lease - margin(lease)})
	r.setDeadline(h)
	return h.seq
}

// settle takes the outcome of request seq of h (sent at sent, for lease)
// into account. It reports whether the hold was found lost. r.mu must be
// held.
func (r *renewer) settle(h *Hold, seq uint64, sent, lease time.Duration, err error) (lost bool) {
	if h.done {
		return false
	}
	switch {
	case err == nil:
		if seq > h.acked {
			h.acked = seq
			h.lease = lease
			h.base = sent + lease - margin(lease)
			h.renewAt = renewTime(sent, lease)
			h.confirm = false
		}
		h.forget(h.acked)
	case errors.Is(err, ErrSuperseded):
		h.forget(seq) // a later request was applied: this one never will be
	case errors.Is(err, ErrNotHeld):
		return true
	default:
		// Unknown: it may still land, so its bound stays in pending.
	}
	r.setDeadline(h)
	return false
}

// forget drops the pending requests up to seq: a request with a higher
// sequence number was applied, so they never will be.
func (h *Hold) forget(seq uint64) {
	keep := h.pending[:0]
	for _, b := range h.pending {
		if b.seq > seq {
			keep = append(keep, b)
		}
	}
	h.pending = keep
}

// setDeadline recomputes the deadline of h and its place in the heap.
// r.mu must be held.
func (r *renewer) setDeadline(h *Hold) {
	h.deadline = h.base
	for _, b := range h.pending {
		h.deadline = min(h.deadline, b.end)
	}
	h.schedule()
	if h.index >= 0 {
		r.holds.fix(h)
	}
	r.arm(h.next)
}

// fire handles the holds that are due: it ends those past their deadline
// and sends one renewal batch for the others.
func (r *renewer) fire() {
	r.mu.Lock()
	if r.stopped {
		r.mu.Unlock()
		return
	}
	now := r.e.now()
	r.armed = false
	var lost []*Hold
	var batch []renewal
	var reqs []Request
	if due := r.holds.due(now); due > 0 {
		batch = make([]renewal, 0, due)
		switch {
		case cap(r.spare) >= due && cap(r.spare) <= 4*due+1024:
			reqs, r.spare = r.spare, nil
		case cap(r.spare) > 4*len(r.holds)+1024:
			r.spare = nil // far more than the holds need now: let it go
			fallthrough
		default:
			reqs = make([]Request, 0, due)
		}
	}
	for len(r.holds) > 0 && r.holds[0].next <= now {
		h := r.holds[0].h
		if h.deadline <= now {
			r.endLocked(h, deadlineCause(h))
			lost = append(lost, h)
			continue
		}
		h.inflight = true
		if h.placed {
			batch = append(batch, renewal{h: h, place: true})
			reqs = append(reqs, r.refreshPlace(h, now))
			h.schedule()
			r.holds.fix(h)
			continue
		}
		seq := r.send(h, now, h.lease)
		batch = append(batch, renewal{h: h})
		reqs = append(reqs, h.request(Request{Lease: h.lease, Seq: seq}))
	}
	if len(r.holds) > 0 {
		r.arm(r.holds[0].next)
	}
	r.mu.Unlock()

	for _, h := range lost {
		r.e.lost(h, true)
	}
	if len(batch) > 0 {
		r.e.spawn(func() { r.renewBatch(batch, reqs, now) })
	}
}

// A renewal is one hold's part in a batch: a lease's renewal, or a place's
// refresh. Its request is at the same position in the batch's requests.
type renewal struct {
	h        *Hold
	place    bool
	reported bool
}

// renewBatch renews the holds of one batch in one backend call, taking
// each outcome as it comes: a store that answers for some locks and not
// others (a Cluster with one node down) costs only the others.
func (r *renewer) renewBatch(batch []renewal, reqs []Request, sent time.Duration) {
	// A reply later than the last deadline of the batch is of no use to it
	// (a place's refresh: than the place's expiry).
	last := sent
	r.mu.Lock()
	for _, b := range batch {
		if b.place {
			last = max(last, sent+b.h.queue)
		} else {
			last = max(last, b.h.deadline)
		}
	}
	r.mu.Unlock()
	ctx, cancel := r.e.detach(context.Background(), last-sent)
	defer cancel()

	var events []Event
	var lost []*Hold
	settle := func(i int, g Grant, err error) {
		b, req := &batch[i], &reqs[i]
		if b.reported {
			return
		}
		b.reported = true
		h := b.h
		if b.place {
			// A refresh overtaken by the grant, or by the end, is of no use.
			if h.placed && !h.done {
				r.settlePlace(h, req.Seq, sent, g, err)
			}
			return
		}
		// Not in flight any more: settle then places h by its next renewal
		// (or its deadline), in one move.
		h.inflight = false
		if r.settle(h, req.Seq, sent, req.Lease, err) {
			r.endLocked(h, lostErr(LossGone, "renewal found it no longer held by this owner"))
			lost = append(lost, h)
			return
		}
		if h.done {
			return
		}
		if err != nil && !errors.Is(err, ErrSuperseded) {
			now := r.e.now()
			h.renewAt = now + retryDelay(h.lease)
			h.schedule()
			if h.index >= 0 {
				r.holds.fix(h)
			}
			r.arm(h.next)
			events = append(events, Event{Kind: RenewFailed, Name: h.name, Lock: h.kind, Hold: h.id, Token: h.token, Latency: now - sent, Err: err})
			return
		}
		events = append(events, Event{Kind: Renewed, Name: h.name, Lock: h.kind, Hold: h.id, Token: h.token, Wait: req.Lease, Latency: r.e.now() - sent})
	}
	flush := func() {
		ev, ls := events, lost
		events, lost = nil, nil
		r.mu.Unlock()
		for _, e := range ev {
			r.e.emit(e)
		}
		for _, h := range ls {
			r.e.lost(h, false)
		}
	}
	r.e.b.Renew(ctx, reqs, func(i int, g Grant, err error) {
		if i < 0 || i >= len(batch) {
			return
		}
		r.mu.Lock()
		settle(i, g, err)
		flush()
	})
	r.mu.Lock()
	var unanswered error
	for i := range batch {
		if !batch[i].reported {
			if unanswered == nil {
				unanswered = fmt.Errorf("%w: renewal not answered", ErrBackend)
			}
			settle(i, Grant{}, unanswered)
		}
	}
	flush()
	clear(reqs) // the names and owners it holds are not kept alive by the spare
	r.mu.Lock()
	if cap(reqs) > cap(r.spare) {
		r.spare = reqs[:0]
	}
	r.mu.Unlock()
}

// extend sets the lease of h to ttl from now. Until it is confirmed, the
// deadline counts with it; if its outcome stays unknown (ctx ended, the
// backend failed), it still does, since the request may land later.
func (r *renewer) extend(ctx context.Context, h *Hold, ttl time.Duration) error {
	r.mu.Lock()
	if h.done {
		r.mu.Unlock()
		return h.endErr()
	}
	sent := r.e.now()
	seq := r.send(h, sent, ttl)
	r.mu.Unlock()

	req := h.request(Request{Lease: ttl, Seq: seq})
	renew := func(c context.Context) (struct{}, error) {
		var out error
		r.e.b.Renew(c, []Request{req}, func(_ int, _ Grant, err error) { out = err })
		return struct{}{}, out
	}
	type outcome struct {
		err   error
		ended bool
	}
	out, replied := call(r.e, ctx, max(ttl, time.Second), renew, func(_ struct{}, err error, _ bool) outcome {
		return outcome{err, r.finishExtend(h, seq, sent, ttl, err)}
	})
	err := out.err
	if !replied {
		err = context.Cause(ctx)
	}
	if out.ended || errors.Is(err, ErrClosed) {
		if err := h.endErr(); err != nil {
			return err
		}
		return ErrClosed
	}
	if err != nil && !errors.Is(err, ErrSuperseded) {
		return fmt.Errorf("extension not confirmed, it may still be applied (the lease context counts with it): %w", err)
	}
	return nil
}

// finishExtend takes the outcome of an extension into account and reports
// whether it found the lock lost.
func (r *renewer) finishExtend(h *Hold, seq uint64, sent, ttl time.Duration, err error) bool {
	r.mu.Lock()
	lost := r.settle(h, seq, sent, ttl, err)
	if lost {
		lost = r.endLocked(h, lostErr(LossGone, "extension found it no longer held by this owner"))
	}
	ended := h.done
	r.mu.Unlock()
	if lost {
		r.e.lost(h, false)
	}
	return ended
}

// renewTime is when a lease confirmed at sent is renewed next: lease/3
// later, rounded down to a grid of lease/6 so that holds batch together.
func renewTime(sent, lease time.Duration) time.Duration {
	q := lease / 6
	if q <= 0 {
		return sent + lease/3
	}
	return (sent + lease/3) / q * q
}

// retryDelay is how soon a failed renewal is tried again.
func retryDelay(lease time.Duration) time.Duration {
	return min(lease/10, time.Second)
}

// deadlineCause is why h ends at its lease deadline: a fixed lease ran its
// course (nothing was to renew it), or a renewal could not be confirmed in
// time.
func deadlineCause(h *Hold) error {
	if !h.renew && !h.confirm {
		return fmt.Errorf("%w: the fixed lease of %v was not renewed", ErrLeaseExpired, h.lease)
	}
	return lostErr(LossRenewalFailed, "renewal not confirmed before the lease deadline")
}

// validUntil is the local instant before which h's lease certainly holds
// (its context ends then), and whether h still holds: after its end it is
// the deadline h had then.
func (r *renewer) validUntil(h *Hold) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.e.epoch.Add(h.deadline), !h.done
}
