package engine

import (
	"context"
	"time"
)

// A queue gathers the waiters of one lock in this process. They share one
// backend watch; each release notification wakes one of them, which then
// tries to acquire (no thundering herd).
type queue struct {
	name    string
	waiters int           // guarded by Engine.mu
	wake    chan struct{} // capacity 1: a wake-up is kept until a waiter takes it
	ready   chan struct{} // closed when the watch is set up (or failed)
	err     error         // why the watch failed; read after ready
	stop    func()        // ends the watch; guarded by Engine.mu
}

func (q *queue) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// join adds a waiter for name, setting up the watch if it is the first, and
// returns once releases are being watched.
func (e *Engine) join(ctx context.Context, name string) (*queue, error) {
	e.mu.Lock()
	if e.closed.Load() {
		e.mu.Unlock()
		return nil, ErrClosed
	}
	q := e.queues[name]
	if q == nil {
		q = &queue{name: name, wake: make(chan struct{}, 1), ready: make(chan struct{})}
		e.queues[name] = q
		e.bg.Add(1) // under e.mu, before Close can drain
		go e.watch(q)
	}
	q.waiters++
	e.mu.Unlock()

	select {
	case <-q.ready:
	case <-ctx.Done():
		e.leave(q)
		return nil, context.Cause(ctx)
	}
	if q.err != nil {
		e.leave(q)
		return nil, q.err
	}
	return q, nil
}

// watch sets up the backend watch of q. It does not depend on any waiter's
// context: the waiters share it, and each may leave on its own.
func (e *Engine) watch(q *queue) {
	defer e.bg.Done()
	ctx, cancel := context.WithTimeout(e.ctx, watchTimeout)
	stop, err := e.b.Watch(ctx, q.name, q.signal)
	cancel()
	e.mu.Lock()
	q.err = err
	if err != nil && e.queues[q.name] == q {
		delete(e.queues, q.name) // the next waiter tries again
	}
	if stop != nil && q.waiters == 0 {
		e.mu.Unlock()
		stop() // everyone left while it was being set up
		close(q.ready)
		return
	}
	q.stop = stop
	close(q.ready)
	e.mu.Unlock()
}

// leave removes a waiter; the last one ends the watch.
func (e *Engine) leave(q *queue) {
	e.mu.Lock()
	q.waiters--
	var stop func()
	if q.waiters == 0 {
		if e.queues[q.name] == q {
			delete(e.queues, q.name)
		}
		stop, q.stop = q.stop, nil
	}
	e.mu.Unlock()
	if stop != nil {
		stop()
	}
}

// watchTimeout bounds setting up a watch.
const watchTimeout = 10 * time.Second

// handOff wakes a local waiter of a lock this process has just freed. The
// backend does not notify a process of its own releases: this is quicker.
func (e *Engine) handOff(name string) {
	e.mu.Lock()
	q := e.queues[name]
	e.mu.Unlock()
	if q != nil {
		q.signal()
	}
}
