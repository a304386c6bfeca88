package engine

import (
	"context"
	"sync"
	"time"
)

// requestDeadlines hands out the contexts that bound the requests callers
// wait for (see call): each ends when Close abandons requests, or when the
// request's limit has passed since it started.
//
// A timer context per request was a fifth of an uncontended lock's
// allocations, so requests with the same limit that start within
// limit/shareWindow of each other share one: a request may end up to
// limit/shareWindow before its limit, never after. A shared context is
// not cancelled when its requests end (others may still use it): its
// deadline releases it, and Close's abandonment before that.
type requestDeadlines struct {
	mu    sync.Mutex
	slots [4]deadlineSlot // by limit: a few distinct limits are in use at once
	next  int             // the slot to reuse when none has the limit
}

type deadlineSlot struct {
	limit  time.Duration
	end    time.Time
	ctx    context.Context
	cancel context.CancelFunc // its deadline, or its parent's end, calls it
}

// shareWindow: requests share a context if they start within 1/shareWindow
// of their limit of each other.
const shareWindow = 16

// get returns a context under parent that ends no later than limit from
// now, and no earlier than limit - limit/shareWindow from now (unless
// parent ends first).
func (d *requestDeadlines) get(parent context.Context, limit time.Duration) context.Context {
	end := time.Now().Add(limit)
	d.mu.Lock()
	defer d.mu.Unlock()
	s := d.slot(limit)
	if s.ctx == nil || s.limit != limit || s.end.After(end) || end.Sub(s.end) > limit/shareWindow {
		s.limit, s.end = limit, end
		s.ctx, s.cancel = context.WithDeadline(parent, end)
	}
	return s.ctx
}

// slot returns the slot of limit, or the one to reuse for it. d.mu must be
// held.
func (d *requestDeadlines) slot(limit time.Duration) *deadlineSlot {
	for i := range d.slots {
		if d.slots[i].limit == limit {
			return &d.slots[i]
		}
	}
	s := &d.slots[d.next]
	d.next = (d.next + 1) % len(d.slots)
	return s
}
