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
// counted: it is cancelled once it has been replaced by a later one and
// its last request has ended, so that contexts with long limits do not
// stay alive until their deadline.
type requestDeadlines struct {
	mu    sync.Mutex
	slots [8]*sharedDeadline // by limit: a few distinct limits are in use at once
	next  int                // the slot to reuse when none has the limit
}

// A sharedDeadline is a context shared by the requests of one limit.
type sharedDeadline struct {
	ctx    context.Context
	cancel context.CancelFunc
	limit  time.Duration
	end    time.Time
	users  int  // requests using it that have not ended
	stale  bool // replaced in its slot: cancelled when users reaches 0
}

// shareWindow: requests share a context if they start within 1/shareWindow
// of their limit of each other.
const shareWindow = 16

// get returns a context under parent that ends no later than limit from
// now, and no earlier than limit - limit/shareWindow from now (unless
// parent ends first). The caller must hand it back with put when its
// request has ended.
func (d *requestDeadlines) get(parent context.Context, limit time.Duration) *sharedDeadline {
	end := time.Now().Add(limit)
	d.mu.Lock()
	defer d.mu.Unlock()
	i := d.slot(limit)
	s := d.slots[i]
	if s == nil || s.limit != limit || s.end.After(end) || end.Sub(s.end) > limit/shareWindow {
		if s != nil {
			s.stale = true
			if s.users == 0 {
				s.cancel()
			}
		}
		s = &sharedDeadline{limit: limit, end: end}
		s.ctx, s.cancel = context.WithDeadline(parent, end)
		d.slots[i] = s
	}
	s.users++
	return s
}

// put hands back a context from get: its request has ended.
func (d *requestDeadlines) put(s *sharedDeadline) {
	d.mu.Lock()
	defer d.mu.Unlock()
	s.users--
	if s.users == 0 && s.stale {
		s.cancel()
	}
}

// slot returns the index of the slot of limit, or of the one to reuse for
// it. d.mu must be held.
func (d *requestDeadlines) slot(limit time.Duration) int {
	for i, s := range d.slots {
		if s != nil && s.limit == limit {
			return i
		}
	}
	i := d.next
	d.next = (d.next + 1) % len(d.slots)
	return i
}
