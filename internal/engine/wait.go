package engine

import (
	"context"
	"fmt"
	"time"
)

// A queue gathers the waiters of one lock in this process, first come first
// served. They share one backend watch; each release wakes the waiter at the
// head of the queue (no thundering herd), and newcomers line up behind
// waiting ones instead of barging in, so that a goroutine that releases and
// locks again at once cannot starve the others of its process.
//
// Waiters of a queued kind are ordered by the store, not here: for them the
// queue only shares the watch that delivers grants.
type queue struct {
	key     queueKey
	waiters []*waiter     // in arrival order; guarded by Engine.mu
	until   time.Duration // when the holder's lease ends at the latest, as last seen; 0: unknown; guarded by Engine.mu
	ready   chan struct{} // closed when the watch is set up (or failed)
	err     error         // why the watch failed; read after ready
	stop    func()        // ends the watch; guarded by Engine.mu
}

// queueKey names the local queue of one lock: plain and queued waiters of
// one name (which the store never lets both succeed) watch different
// notices; queued waiters of every kind share one watch of the process's
// grants (the readers and writers of a read-write lock, say).
type queueKey struct {
	name   string
	queued bool
}

func keyOf(name string, kind Kind) queueKey { return queueKey{name, kind.Queued()} }

// A waiter is one goroutine waiting in a queue.
type waiter struct {
	wake chan struct{} // capacity 1: a wake-up is kept until the waiter takes it
}

func (w *waiter) signal() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// signal wakes the waiter at the head of q.
func (e *Engine) signal(q *queue) {
	e.mu.Lock()
	if len(q.waiters) > 0 {
		q.waiters[0].signal()
	}
	e.mu.Unlock()
}

// waiting reports whether goroutines of this process wait for the lock.
func (e *Engine) waiting(name string, kind Kind) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	q := e.queues[keyOf(name, kind)]
	return q != nil && len(q.waiters) > 0
}

// join lines up a waiter for the lock, setting up the watch if it is the
// first, and returns once notices are being watched. first reports whether
// no one else was waiting.
func (e *Engine) join(ctx context.Context, name string, kind Kind) (q *queue, w *waiter, first bool, err error) {
	e.mu.Lock()
	if e.closed.Load() {
		e.mu.Unlock()
		return nil, nil, false, ErrClosed
	}
	key := keyOf(name, kind)
	q = e.queues[key]
	if q == nil {
		q = &queue{key: key, ready: make(chan struct{})}
		e.queues[key] = q
		e.bg.Add(1) // under e.mu, before Close can drain
		go e.watch(q, kind)
	}
	w = &waiter{wake: make(chan struct{}, 1)}
	first = len(q.waiters) == 0
	q.waiters = append(q.waiters, w)
	e.mu.Unlock()

	select {
	case <-q.ready:
	case <-ctx.Done():
		e.leave(q, w, true, false)
		return nil, nil, false, context.Cause(ctx)
	}
	if q.err != nil {
		e.leave(q, w, true, false)
		return nil, nil, false, q.err
	}
	return q, w, first, nil
}

// watch sets up the backend watch of q, for the notices of kind. It does
// not depend on any waiter's context: the waiters share it, and each may
// leave on its own.
func (e *Engine) watch(q *queue, kind Kind) {
	defer e.bg.Done()
	ctx, cancel := context.WithTimeout(e.ctx, watchTimeout)
	stop, err := e.b.Watch(ctx, q.key.name, kind, func(n Notice) {
		if n.Grantee != "" {
			e.deliver(n)
		} else {
			// A release, or notices may have been lost. Queued waiters
			// find a grant they missed at their next refresh.
			e.signal(q)
		}
	})
	if err != nil && ctx.Err() != nil && e.ctx.Err() == nil {
		// No waiter's context ended: the backend did not answer in time.
		err = fmt.Errorf("%w: release notifications not confirmed within %v: %w", ErrBackend, watchTimeout, err)
	} else if err != nil && e.ctx.Err() != nil {
		err = ErrClosed
	}
	cancel()
	e.mu.Lock()
	q.err = err
	if err != nil && e.queues[q.key] == q {
		delete(e.queues, q.key) // the next waiter tries again
	}
	if stop != nil && len(q.waiters) == 0 {
		e.mu.Unlock()
		stop() // everyone left while it was being set up
		close(q.ready)
		return
	}
	q.stop = stop
	close(q.ready)
	e.mu.Unlock()
}

// leave takes w out of q; the last waiter ends the watch, in the
// background (the caller, often a goroutine that has just acquired, does not
// wait for an unsubscription). A waiter that leaves without the lock (its
// context ended) passes on what it owed the others: a wake-up it took or
// still had and did not act on, and, at the head of the queue, the duty to
// try when the holder's lease ends. The next waiter then tries at once.
func (e *Engine) leave(q *queue, w *waiter, gaveUp, woken bool) {
	e.mu.Lock()
	head := len(q.waiters) > 0 && q.waiters[0] == w
	for i, x := range q.waiters {
		if x == w {
			q.waiters = append(q.waiters[:i], q.waiters[i+1:]...)
			break
		}
	}
	select {
	case <-w.wake:
		woken = true
	default:
	}
	if (woken || head && gaveUp) && len(q.waiters) > 0 {
		q.waiters[0].signal()
	}
	var stop func()
	if len(q.waiters) == 0 {
		if e.queues[q.key] == q {
			delete(e.queues, q.key)
		}
		stop, q.stop = q.stop, nil
	}
	e.mu.Unlock()
	if stop != nil {
		e.spawn(stop)
	}
}

// heldUntil records what an attempt learned of the holder's lease: ttl
// left (ttl < 0: unknown).
func (e *Engine) heldUntil(q *queue, ttl time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if ttl >= 0 {
		q.until = e.now() + ttl
	} else {
		q.until = 0
	}
}

// holderLeft is how long the holder's lease may still last, as last seen
// by any waiter of q (0 once that moment has passed); fallback when
// nothing is known.
func (e *Engine) holderLeft(q *queue, fallback time.Duration) time.Duration {
	e.mu.Lock()
	defer e.mu.Unlock()
	if q.until == 0 {
		return fallback
	}
	return max(q.until-e.now(), 0)
}

// handOff wakes the first local waiter of a lock this process has just
// freed. The backend does not notify a process of its own releases: this is
// quicker. (A queued kind's release grants the lock itself.)
func (e *Engine) handOff(name string, kind Kind) {
	if kind.Queued() {
		return
	}
	e.mu.Lock()
	if q := e.queues[keyOf(name, kind)]; q != nil && len(q.waiters) > 0 {
		q.waiters[0].signal()
	}
	e.mu.Unlock()
}

// watchTimeout bounds setting up a watch.
const watchTimeout = 10 * time.Second
