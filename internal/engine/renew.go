package engine

import (
	"container/heap"
	"context"
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
// backend as one batch, whatever their number. A hold whose renewal is not
// confirmed by its deadline (send time of the last confirmed renewal +
// lease - margin) is lost: its context is cancelled before the server can
// expire the key, so before anyone else can take the lock.
type renewer struct {
	e *Engine

	mu      sync.Mutex
	idle    *sync.Cond // signalled when a hold stops being in flight
	holds   holdHeap
	timer   *time.Timer
	armedAt time.Duration // when the timer fires; valid if armed
	armed   bool
	stopped bool
}

func newRenewer(e *Engine) *renewer {
	r := &renewer{e: e}
	r.idle = sync.NewCond(&r.mu)
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
	h.deadline = sent + h.lease - margin(h.lease)
	h.renewAt = renewTime(sent, h.lease)
	h.schedule()
	heap.Push(&r.holds, h)
	r.arm(h.next)
	return true, r.e.now() >= h.deadline
}

// leaseOf reads the current lease length of h.
func (r *renewer) leaseOf(h *Hold) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return h.lease
}

// remove stops watching h; it reports false if h had already ended.
func (r *renewer) remove(h *Hold) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.end(h)
}

// end marks h done and takes it out of the heap. r.mu must be held.
func (r *renewer) end(h *Hold) bool {
	if h.done {
		return false
	}
	h.done = true
	if h.index >= 0 {
		heap.Remove(&r.holds, h.index)
	}
	return true
}

// stop ends every hold and returns them; the timer fires no more.
func (r *renewer) stop() []*Hold {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopped = true
	r.timer.Stop()
	var out []*Hold
	for len(r.holds) > 0 {
		h := heap.Pop(&r.holds).(*Hold)
		h.done = true
		out = append(out, h)
	}
	return out
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
	if h.renew && !h.inflight && h.renewAt < h.deadline {
		h.next = h.renewAt
	}
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
	var lost, batch []*Hold
	for len(r.holds) > 0 && r.holds[0].next <= now {
		h := r.holds[0]
		if h.deadline <= now {
			r.end(h)
			lost = append(lost, h)
			continue
		}
		h.inflight = true
		h.schedule()
		heap.Fix(&r.holds, 0)
		batch = append(batch, h)
	}
	if len(r.holds) > 0 {
		r.arm(r.holds[0].next)
	}
	r.mu.Unlock()

	for _, h := range lost {
		r.e.lose(h, fmt.Errorf("%w: renewal not confirmed before the lease deadline", ErrLockLost), true)
	}
	if len(batch) > 0 {
		r.e.spawn(func() { r.renewBatch(batch, now) })
	}
}

// renewBatch renews the holds of one batch in one backend call.
func (r *renewer) renewBatch(batch []*Hold, sent time.Duration) {
	reqs := make([]Request, len(batch))
	first := batch[0].deadline
	r.mu.Lock()
	for i, h := range batch {
		reqs[i] = Request{Name: h.name, Owner: h.owner, Lease: h.lease}
		first = min(first, h.deadline)
	}
	r.mu.Unlock()

	// A reply later than the first deadline of the batch is of no use to it.
	ctx, cancel := context.WithTimeout(context.Background(), first-sent)
	owned, err := r.e.b.Renew(ctx, reqs)
	cancel()

	now := r.e.now()
	var events []Event
	var lost []*Hold
	r.mu.Lock()
	for i, h := range batch {
		h.inflight = false
		if h.done {
			continue
		}
		switch {
		case err != nil:
			h.renewAt = now + retryDelay(h.lease)
			events = append(events, Event{Kind: RenewFailed, Name: h.name, Token: h.token, Err: err})
		case owned[i]:
			h.deadline = sent + reqs[i].Lease - margin(reqs[i].Lease)
			h.renewAt = renewTime(sent, reqs[i].Lease)
			events = append(events, Event{Kind: Renewed, Name: h.name, Token: h.token, Wait: reqs[i].Lease})
		default:
			r.end(h)
			lost = append(lost, h)
			continue
		}
		h.schedule()
		heap.Fix(&r.holds, h.index)
		r.arm(h.next)
	}
	r.idle.Broadcast()
	r.mu.Unlock()

	for _, ev := range events {
		r.e.emit(ev)
	}
	for _, h := range lost {
		r.e.lose(h, fmt.Errorf("%w: renewal found it no longer held by this owner", ErrLockLost), false)
	}
}

// extend sets the lease of h to ttl from now, waiting for a renewal on its
// way first so that the two cannot reach the server out of order.
func (r *renewer) extend(ctx context.Context, h *Hold, ttl time.Duration) error {
	r.mu.Lock()
	for h.inflight && !h.done {
		r.idle.Wait()
	}
	if h.done {
		r.mu.Unlock()
		return h.lostErr()
	}
	h.inflight = true
	h.schedule()
	heap.Fix(&r.holds, h.index)
	r.mu.Unlock()

	sent := r.e.now()
	owned, err := r.e.b.Renew(ctx, []Request{{Name: h.name, Owner: h.owner, Lease: ttl}})

	r.mu.Lock()
	h.inflight = false
	r.idle.Broadcast()
	if h.done {
		r.mu.Unlock()
		return h.lostErr()
	}
	if err == nil && !owned[0] {
		r.end(h)
		r.mu.Unlock()
		r.e.lose(h, fmt.Errorf("%w: extension found it no longer held by this owner", ErrLockLost), false)
		return h.lostErr()
	}
	if err == nil {
		h.lease = ttl
		h.deadline = sent + ttl - margin(ttl)
		h.renewAt = renewTime(sent, ttl)
	}
	h.schedule()
	heap.Fix(&r.holds, h.index)
	r.arm(h.next)
	r.mu.Unlock()
	if err != nil {
		return fmt.Errorf("lock %q: extend: %w", h.name, err)
	}
	return nil
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

// holdHeap orders holds by their next event.
type holdHeap []*Hold

func (q holdHeap) Len() int           { return len(q) }
func (q holdHeap) Less(i, j int) bool { return q[i].next < q[j].next }
func (q holdHeap) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].index, q[j].index = i, j
}
func (q *holdHeap) Push(x any) {
	h := x.(*Hold)
	h.index = len(*q)
	*q = append(*q, h)
}
func (q *holdHeap) Pop() any {
	old := *q
	h := old[len(old)-1]
	old[len(old)-1] = nil
	h.index = -1
	*q = old[:len(old)-1]
	return h
}
