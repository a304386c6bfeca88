package engine

import (
	"errors"
	"math"
	"time"
)

// The place phase of a Hold of a queued kind.
//
// A waiter's place lives on the store and dies unless it is refreshed: the
// renewer refreshes it like a lease, in the same batches, every
// placePeriod. The backend grants the lock to the first place in line when
// the lock is freed, without a request from the waiter; the grant reaches
// the waiter as a Notice pushed to its Watch, or as the reply to its next
// refresh, whichever comes first, and turns the place into a held lock.
//
// # The bound on a granted lease
//
// A lease granted inside someone else's release starts at a store time G
// that the waiter never observes, and its local deadline must not come
// after the store's expiry. Every request of a place carries a number (the
// acquisition is 1, each refresh the next) and the store records the
// highest it applied; the grant carries that number, gseq, and a lease L
// such that the lock expires no earlier than L after the store applied
// request gseq. That request was sent at local time S(gseq), before it was
// applied, so S(gseq) + L - margin is a safe local deadline, as for a lease
// the waiter set itself. The lease looks shorter than it is by the time
// from that request to the grant: at most one placePeriod and a round
// trip. It rests on what every lease rests on (clock rates, the store
// keeping its data), and on no bound on message delays.
//
// # A grantee that died
//
// The Redis backend makes a granted lock expire when the grantee's place
// would have (its last applied request + the queue timeout), or after the
// lease if sooner, and reports L = min(lease, queue timeout). So a waiter
// that died, or is paused, stalls the queue no longer than the queue
// timeout after its last refresh, whether it was granted the lock or not.
// A live grantee's watchdog renews the lease to its full length at its
// first tick, a third of the granted lease in (confirm, for a fixed lease
// that has no watchdog).

// never is a deadline that does not come: a place has no lease to lose.
const never = time.Duration(math.MaxInt64)

// errEvicted ends a place that the store no longer has: it expired (the
// waiter was paused or cut off for longer than the queue timeout), or was
// deleted.
var errEvicted = errors.New("the place in the queue expired")

// errLateGrant ends a place whose grant came too late to be of use: the
// granted lease had (nearly) run out by then.
var errLateGrant = errors.New("the lock was granted too late to be of use")

// A sendTime is when the request numbered seq was sent.
type sendTime struct {
	seq uint64
	at  time.Duration
}

// placePeriod is how often a place is refreshed: a third of the queue
// timeout, and no more than a third of the lease, so that a granted lease
// keeps two thirds of itself at least (see the bound above).
func placePeriod(h *Hold) time.Duration { return min(h.queue, h.lease) / 3 }

// addPlace starts tracking the place of h, whose acquisition (request 1)
// is sent at sent: a grant may be routed to it from now on. Refreshes start
// once the acquisition is confirmed (placeConfirmed): a refresh never makes
// a place, so one that overtook the acquisition would find none. It reports
// false after stop.
func (r *renewer) addPlace(h *Hold, sent time.Duration) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return false
	}
	h.placed = true
	h.settled = make(chan struct{})
	h.seq = 1
	h.sends = []sendTime{{1, sent}}
	h.base, h.deadline, h.renewAt = never, never, never
	h.schedule()
	r.holds.push(h)
	return true
}

// placeConfirmed starts refreshing the place of h, which the store
// confirmed in reply to the acquisition sent at sent. holderTTL is what the
// reply said of the holder's lease (< 0: unknown, or not first in line).
func (r *renewer) placeConfirmed(h *Hold, sent, holderTTL time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if h.done || !h.placed {
		return
	}
	r.nextRefresh(h, sent, holderTTL)
}

// nextRefresh schedules the next refresh of the place of h, whose last
// refresh (or acquisition) was confirmed and sent at sent. r.mu must be
// held.
func (r *renewer) nextRefresh(h *Hold, sent, holderTTL time.Duration) {
	h.renewAt = renewTime(sent, 3*placePeriod(h))
	if holderTTL >= 0 {
		// First in line: refresh when the holder's lease ends, in case it
		// ends without a release (the holder died): the refresh takes it.
		h.renewAt = min(h.renewAt, r.e.now()+holderTTL+time.Millisecond)
	}
	h.schedule()
	r.holds.fix(h)
	r.arm(h.next)
}

// refreshPlace records a refresh of the place of h sent now and returns
// its request. r.mu must be held.
func (r *renewer) refreshPlace(h *Hold, now time.Duration) Request {
	h.seq++
	h.sends = append(h.sends, sendTime{h.seq, now})
	return h.request(Request{Lease: h.lease, Queue: h.queue, Seq: h.seq})
}

// settlePlace takes the outcome of the refresh seq of h, sent at sent, into
// account. r.mu must be held.
func (r *renewer) settlePlace(h *Hold, seq uint64, sent time.Duration, g Grant, err error) {
	switch {
	case err == nil && g.Acquired:
		// Granted by someone else's script, or taken by this refresh: not
		// an acquisition of the owner's own, to confirm if need be.
		r.grantLocked(h, g.Token, g.Seq, g.Lease, false)
	case err == nil && deadlocked(h, g.Capacity) != nil:
		// The capacity shrank while the place waited (SetPermits).
		r.endLocked(h, deadlocked(h, g.Capacity))
	case err == nil:
		// The store keeps the highest number it applied, so a grant will
		// name seq or a later one: the earlier send times are of no use.
		keep := h.sends[:0]
		for _, s := range h.sends {
			if s.seq >= seq {
				keep = append(keep, s)
			}
		}
		h.sends = keep
		h.inflight = false
		r.nextRefresh(h, sent, g.TTL)
	case errors.Is(err, ErrNotHeld):
		r.endLocked(h, errEvicted)
	default:
		h.inflight = false
		h.renewAt = r.e.now() + retryDelay(placePeriod(h))
		h.schedule()
		r.holds.fix(h)
		r.arm(h.next)
	}
}

// evict ends the place of h, which the store says is gone, as its next
// refresh would have: with errEvicted. A place granted meanwhile is left
// alone (its renewals will tell whether the lock is still held).
func (r *renewer) evict(h *Hold) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if h.placed {
		r.endLocked(h, errEvicted)
	}
}

// grant turns the place of h into a held lock: the store granted it with
// token and a lease of lease, after it applied request gseq of h (a
// Notice, or the reply to a request). own says that the owner's own
// acquisition took it, which the backend answered for; any other grant is
// to be confirmed if the backend wants it (see GrantConfirmer). Repeated
// grants are ignored. A grant that came too late to be of use ends h with
// errLateGrant.
func (r *renewer) grant(h *Hold, token, gseq uint64, lease time.Duration, own bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.grantLocked(h, token, gseq, lease, own)
}

func (r *renewer) grantLocked(h *Hold, token, gseq uint64, lease time.Duration, own bool) {
	if h.done || !h.placed {
		return
	}
	start := time.Duration(0) // unknown: as early as can be
	for _, s := range h.sends {
		if s.seq <= gseq {
			start = s.at
		}
	}
	if lease <= 0 || lease > h.lease {
		lease = min(h.lease, h.queue) // not said, or more than asked for: assume the least
	}
	h.placed, h.sends, h.inflight = false, nil, false
	h.token = token
	h.acked = gseq
	h.base = start + lease - margin(lease)
	// The watchdog renews the granted lease to the full one at its first
	// tick, as any lease: a third of the granted lease in. A fixed lease
	// (no watchdog) gets that one renewal, at once, so that it lasts its
	// length from the grant.
	h.renewAt = renewTime(start, lease)
	if lease < h.lease && !h.renew {
		h.confirm, h.renewAt = true, r.e.now()
	}
	if !own && r.e.confirmGrants {
		// confirmGrant renews it at once; the watchdog waits for that.
		h.unconfirmed, h.inflight = true, true
	}
	close(h.settled)
	r.setDeadline(h)
	if r.e.now() >= h.deadline {
		r.endLocked(h, errLateGrant)
	}
}
