package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
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
	rctx := e.requestContext(ctx, limit)
	if ctx.Done() == nil { // cannot end: no need to be able to return early
		defer e.bg.Done()
		res, err := req(rctx)
		err = e.requestErr(rctx, err)
		return handle(res, err, true), true
	}

	type result struct {
		res T
		err error
	}
	var mu sync.Mutex
	left := false
	done := make(chan result, 1)
	e.goWork(func() {
		res, err := req(rctx)
		err = e.requestErr(rctx, err)
		mu.Lock()
		if !left { // the caller handles it, and counts it done
			done <- result{res, err}
			mu.Unlock()
			return
		}
		mu.Unlock()
		defer e.bg.Done()
		handle(res, err, false)
	})
	take := func(r result) (R, bool) {
		defer e.bg.Done()
		return handle(r.res, r.err, true), true
	}
	select {
	case r := <-done:
		return take(r)
	case <-ctx.Done():
		mu.Lock()
		select {
		case r := <-done: // it came just now
			mu.Unlock()
			return take(r)
		default:
			left = true
			mu.Unlock()
			return out, false
		}
	}
}

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
	var idle *time.Timer
	for {
		f()
		if e.idle.Add(1) > maxIdleWorkers {
			e.idle.Add(-1)
			return
		}
		if idle == nil {
			idle = time.NewTimer(workerIdle)
		} else {
			idle.Reset(workerIdle)
		}
		select {
		case f = <-e.work:
			e.idle.Add(-1)
		case <-idle.C:
			e.idle.Add(-1)
			return
		case <-e.closedWork:
			e.idle.Add(-1)
			return
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
// to limit/shareWindow before its limit.
func (e *Engine) requestContext(ctx context.Context, limit time.Duration) context.Context {
	rctx := e.deadlines.get(e.abandon, limit)
	if ctx == context.Background() {
		return rctx
	}
	return valuesOf{rctx, ctx}
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
	case rctx.Err() != nil && errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%w: no reply in time", ErrBackend)
	}
	return fmt.Errorf("%w: %w", ErrBackend, err)
}
