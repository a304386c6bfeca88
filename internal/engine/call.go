package engine

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// call runs one backend request for a caller whose patience is ctx, and
// hands its outcome to handle.
//
// The request runs under a context of its own (see detach): ctx ending
// does not cut it short, because a request that was sent may be applied
// whether or not anyone waits for its reply. call returns when the reply
// has been handled or when ctx ends, whichever is first: the backend's
// client may not bound a socket read by ctx (go-redis does not, unless
// ContextTimeoutEnabled is set), so the engine does. replied is false when
// ctx ended first; handle then runs in the background when the outcome
// comes, told that nobody waits, to make whatever the request did harmless.
//
// Every request, and the handling of its outcome, is counted in the
// engine's background work, so Close waits for both. No request is sent
// once Close has started: handle then gets ErrClosed at once.
func call[T, R any](e *Engine, ctx context.Context, limit time.Duration,
	req func(context.Context) (T, error), handle func(res T, err error, waiting bool) R) (out R, replied bool) {
	var zero T
	if !e.enter() {
		return handle(zero, ErrClosed, true), true
	}
	rctx, shared := e.requestContext(ctx, limit)
	if ctx.Done() == nil { // cannot end: no need to be able to return early
		defer e.bg.Done()
		res, err := req(rctx)
		err = e.requestErr(rctx, err)
		e.deadlines.put(shared)
		return handle(res, err, true), true
	}

	p := &pending[T]{done: make(chan struct{})}
	e.goWork(func() {
		res, err := req(rctx)
		p.res, p.err = res, e.requestErr(rctx, err)
		e.deadlines.put(shared)
		if p.state.CompareAndSwap(awaited, callerHandles) { // the caller handles it, and counts it done
			close(p.done)
			return
		}
		defer e.bg.Done()
		handle(p.res, p.err, false)
	})
	select {
	case <-p.done:
	case <-ctx.Done():
		if p.state.CompareAndSwap(awaited, workerHandles) {
			return out, false
		}
		<-p.done // it came just now
	}
	defer e.bg.Done()
	return handle(p.res, p.err, true), true
}

// A pending request, run by a worker for a caller that may leave: the
// first of the two to change its state from awaited decides who handles
// the outcome.
type pending[T any] struct {
	res   T
	err   error
	state atomic.Int32
	done  chan struct{} // closed once res and err are set, if the caller is to handle them
}

// The states of a pending request.
const (
	awaited       int32 = iota // no reply yet, and the caller waits for it
	callerHandles              // the reply came first: the caller handles it
	workerHandles              // the caller left first: the worker handles the reply
)

// goWork runs f on an idle worker goroutine, or on a new one if none is
// idle. Workers outlive their request: a new goroutine per request would
// grow its stack anew through the client library's calls every time.
func (e *Engine) goWork(f func()) {
	select {
	case e.work <- f:
	default:
		go e.worker(f)
	}
}

// worker runs f, then the requests handed to it, until it has been idle
// for workerIdle, more than maxIdleWorkers are idle, or Close has ended.
func (e *Engine) worker(f func()) {
	// The timer is not reset for every request (a timer's reset costs more
	// than reading the clock): when it fires, the worker looks at how long
	// it has been idle, and sets it for the rest.
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	for {
		f()
		if e.idle.Add(1) > maxIdleWorkers {
			e.idle.Add(-1)
			return
		}
		if f = e.next(idle, time.Now()); f == nil {
			return
		}
	}
}

// next waits for the next request of an idle worker, idle since since,
// and returns it, or nil once the worker has been idle for workerIdle or
// Close has ended; idle is the worker's timer. The worker is no longer
// counted idle when next returns.
func (e *Engine) next(idle *time.Timer, since time.Time) func() {
	defer e.idle.Add(-1)
	for {
		select {
		case f := <-e.work:
			return f
		case <-idle.C:
			d := time.Since(since)
			if d >= workerIdle {
				return nil
			}
			idle.Reset(workerIdle - d)
		case <-e.closedWork:
			return nil
		}
	}
}

// Idle workers are kept for workerIdle, and no more than maxIdleWorkers.
const (
	workerIdle     = time.Second
	maxIdleWorkers = 64
)

// enter counts a request that a caller starts, unless Close has started.
func (e *Engine) enter() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed.Load() {
		return false
	}
	e.bg.Add(1)
	return true
}

// spawn runs fn in a goroutine that Close waits for. Once Close has started
// waiting, fn runs in the caller instead (which is itself background work
// that Close waits for, or Close).
func (e *Engine) spawn(fn func()) {
	e.mu.Lock()
	if e.draining {
		e.mu.Unlock()
		fn()
		return
	}
	e.bg.Add(1)
	e.mu.Unlock()
	go func() {
		defer e.bg.Done()
		fn()
	}()
}

// detach returns a context for a request that must outlive ctx (so that its
// outcome is known) but not the lease it is about (a reply after that is of
// no use), nor Close's patience. It keeps ctx's values.
func (e *Engine) detach(ctx context.Context, limit time.Duration) (context.Context, context.CancelFunc) {
	rctx, cancel := context.WithTimeout(e.abandon, limit)
	return valuesOf{rctx, ctx}, cancel
}

// requestContext is detach for the requests callers wait for (see call):
// its contexts are shared (see requestDeadlines), so a request may end up
// to limit/shareWindow before its limit. The caller hands shared back to
// e.deadlines when the request has ended.
func (e *Engine) requestContext(ctx context.Context, limit time.Duration) (rctx context.Context, shared *sharedDeadline) {
	shared = e.deadlines.get(e.abandon, limit)
	if ctx == context.Background() {
		return shared.ctx, shared
	}
	return valuesOf{shared.ctx, ctx}, shared
}

// valuesOf is a context that ends as its Context does and has the values
// of vals too.
type valuesOf struct {
	context.Context
	vals context.Context
}

func (c valuesOf) Value(key any) any {
	if v := c.Context.Value(key); v != nil {
		return v
	}
	return c.vals.Value(key)
}

// requestErr explains the failure of a request made under rctx, a context
// from detach: its end is not the caller's business (Close abandoned the
// request, or the backend did not answer within the limit). The outcomes
// a backend reports on purpose (not acquired: another kind, a deadlock;
// not held; superseded; a request it could never serve) pass as they are:
// they are answers, not failures of the store.
func (e *Engine) requestErr(rctx context.Context, err error) error {
	switch {
	case err == nil || errors.Is(err, ErrBackend) || errors.Is(err, ErrClosed) ||
		errors.Is(err, ErrNotAcquired) || errors.Is(err, ErrNotHeld) || errors.Is(err, ErrSuperseded) ||
		errors.Is(err, ErrInvalidOption):
		return err
	case e.abandon.Err() != nil:
		return ErrClosed
	case errors.Is(err, ErrUnsent):
		return fmt.Errorf("%w: %w", ErrBackend, err)
	case rctx.Err() != nil && errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%w: no reply in time", ErrBackend)
	}
	return fmt.Errorf("%w: %w", ErrBackend, err)
}
