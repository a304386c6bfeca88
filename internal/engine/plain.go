package engine

import (
	"context"
	"time"
)

// acquirePlain waits for a lock of a plain kind: it tries, and while the
// lock is taken, it lines up in the local queue of its name and tries
// again when it is woken by a release or when the holder's lease, as last
// seen, runs out. A Lock call made while others of this engine wait lines
// up behind them without trying first.
func (e *Engine) acquirePlain(ctx context.Context, s Spec, start time.Time) (*Lease, error) {
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

	q, w, first, err := e.join(ctx, s.Name, s.Kind)
	if err != nil {
		return nil, joinErr(err)
	}
	// A waiter that leaves without the lock hands on a wake-up it did not
	// act on, and the head's duty to watch the holder's lease.
	acquired, woken := false, false
	defer func() { e.leave(q, w, !acquired, woken) }()
	e.emit(Event{Kind: Waiting, Name: s.Name, Lock: s.Kind})
	defer e.emit(Event{Kind: WaitEnded, Name: s.Name, Lock: s.Kind})
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	// The first waiter tries again at once: watching started before this
	// attempt, so a release after it cannot go unnoticed. Later ones wait
	// for their turn.
	for try := first; ; try = true {
		if ctx.Err() != nil {
			return nil, notAcquired(context.Cause(ctx))
		}
		if try {
			woken = false
			l, g, err := e.try(ctx, s)
			if err != nil {
				return nil, err
			}
			if l != nil {
				acquired = true
				e.heldUntil(q, s.Lease)
				e.acquired(l, time.Since(start))
				return l, nil
			}
			e.heldUntil(q, g.TTL)
		}
		// A lost notification costs at most the holder's remaining lease.
		timer.Reset(pollDelay(e.holderLeft(q, s.Lease)))
		select {
		case <-w.wake:
			woken = true
		case <-timer.C:
			woken = true
		case <-ctx.Done():
			return nil, notAcquired(context.Cause(ctx))
		case <-e.ctx.Done():
			return nil, ErrClosed
		}
	}
}

// pollDelay is how long a waiter sleeps without a notification: the
// holder's remaining lease, or a short poll when the lease is unknown.
func pollDelay(ttl time.Duration) time.Duration {
	switch {
	case ttl < 0:
		return unboundedPoll
	case ttl < time.Millisecond:
		return time.Millisecond
	}
	return ttl
}

// unboundedPoll is how long a waiter sleeps when the holder's lease is
// unknown.
const unboundedPoll = time.Second
