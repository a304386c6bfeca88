package distlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/distlock/distlock/internal/engine"
	"github.com/distlock/distlock/internal/redisbackend"
)

// An Election elects one leader among candidates in any number of
// processes, as etcd's concurrency.Election does: Campaign blocks until its
// caller leads, and the Lease it returns is the leadership. Client.Election
// returns it.
//
// An election is a fair mutex whose holder leads: candidates queue in
// Redis in the order they campaigned, and when the leader resigns (Unlock)
// or its lease ends (it died, froze or lost Redis), the next candidate
// leads. The leader's term is its Lease's fencing token, strictly
// increasing: pass it with every write the leader makes, and have the
// store refuse a term below the highest it has seen. A leader whose
// renewals cannot be confirmed has its lease context cancelled before
// anyone else can be elected, as for a mutex.
//
// Every script that changes the leader announces it on the election's
// channel, so Observe sees every change, in order, pushed.
type Election struct {
	lock
	spec engine.Spec
}

// Election returns the named election. It is cheap and does not contact
// Redis. The options are those of a mutex: WithTTL (the leader's lease),
// WithQueueTimeout (how long a candidate keeps its place without
// refreshing it). A name is used by one kind of lock at a time.
func (c *Client) Election(name string, opts ...MutexOption) *Election {
	lk, spec := c.lock(name, engine.Election, opts)
	return &Election{lock: lk, spec: spec}
}

// Name is the name of the election.
func (e *Election) Name() string { return e.name }

// Err returns, without contacting Redis, the error every method of e
// returns because its name or an option is invalid, or nil.
func (e *Election) Err() error { return e.check("election") }

// Campaign blocks until its caller leads, with value as the leader's value
// (what Leader and Observe report: an address, say), or until ctx ends
// (the error then wraps ErrNotAcquired and the context's cause). The
// Lease's Token is the term; Unlock resigns, and the next candidate leads.
func (e *Election) Campaign(ctx context.Context, value string) (*Lease, error) {
	spec := e.spec
	spec.Value = value
	return e.acquire(ctx, "campaign", spec, true)
}

// A Leader is who leads an election.
type Leader struct {
	Value string
	// Term is the leader's fencing token, strictly increasing from one
	// leader to the next.
	Term uint64
	// Holder identifies the leader's process; Since is when it was
	// elected, by the Redis server's clock.
	Holder Holder
}

// Leader returns who leads now, or an error wrapping ErrNotHeld when
// nobody does.
func (e *Election) Leader(ctx context.Context) (Leader, error) {
	l, _, err := e.leader(ctx)
	return l, opErr("leader", e.name, err)
}

// leader reads who leads, and how long its lease has left.
func (e *Election) leader(ctx context.Context) (Leader, time.Duration, error) {
	st, err := e.state(ctx)
	if err != nil {
		return Leader{}, 0, err
	}
	if st.Kind != redisbackend.KindElect || !st.Locked() {
		return Leader{}, 0, fmt.Errorf("%w: nobody leads", ErrNotHeld)
	}
	h := st.Holder()
	return Leader{Value: h.Value, Term: h.Token, Holder: holder(h)}, h.TTL, nil
}

// Observe returns a channel that receives who leads now, then every change
// of leader, in order, until ctx ends; then it is closed. A zero Leader
// (Term 0) means that nobody leads: the leader resigned with no candidate
// waiting, or its lease ran out. Changes made by a release, a grant or a
// take are pushed by Redis as they happen; a leader whose lease runs out
// with no candidate to follow it is noticed when that lease ends (Observe
// looks again then), and after a reconnection Observe looks again at once.
// Nothing is dropped: a slow reader delays the channel, not the observing.
func (e *Election) Observe(ctx context.Context) <-chan Leader {
	out := make(chan Leader)
	o := &observer{e: e, ctx: ctx, out: out, wake: make(chan struct{}, 1)}
	if e.lock.err != nil || e.c.usable() != nil {
		close(out)
		return out
	}
	go o.run()
	return out
}

// An observer feeds Observe's channel.
type observer struct {
	e    *Election
	ctx  context.Context
	out  chan Leader
	wake chan struct{} // an announcement came, or some may have been lost

	mu      sync.Mutex
	pending []Leader // announced, not yet sent
	lost    bool     // announcements may have been lost: look again
	heard   bool     // an announcement came since the last look began
}

// run sends who leads, then every announcement, in order; it looks again
// (reads who leads) at the start, after a reconnection, and when the last
// leader's lease could have run out without an announcement.
func (o *observer) run() {
	defer close(o.out)
	stop, err := o.e.c.backend.WatchLeader(o.ctx, o.e.name, o.announced)
	if err != nil {
		return
	}
	defer stop()
	var last Leader
	send := func(l Leader) bool {
		if l.Term == last.Term || l.Term != 0 && l.Term < last.Term {
			return true // no change, or older than what was sent
		}
		select {
		case o.out <- l:
			last = l
			return true
		case <-o.ctx.Done():
			return false
		}
	}
	timer := time.NewTimer(0) // look at once
	defer timer.Stop()
	for {
		look := false
		select {
		case <-o.ctx.Done():
			return
		case <-timer.C:
			look = true
		case <-o.wake:
		}
		o.mu.Lock()
		batch := o.pending
		o.pending = nil
		look = look || o.lost
		o.lost = false
		if look {
			o.heard = false
		}
		o.mu.Unlock()
		for _, l := range batch {
			if !send(l) {
				return
			}
			if l.Term != 0 {
				timer.Reset(o.e.spec.Lease) // look when it could end silently
			}
		}
		if !look {
			continue
		}
		l, ttl, err := o.e.leader(o.ctx)
		o.mu.Lock()
		fresher := o.heard // an announcement came meanwhile: it is newer
		o.mu.Unlock()
		switch {
		case o.ctx.Err() != nil:
			return
		case fresher:
			timer.Reset(0) // take it, then look again
		case err == nil:
			if !send(l) {
				return
			}
			timer.Reset(ttl + time.Millisecond)
		case errors.Is(err, ErrNotHeld):
			if !send(Leader{}) {
				return
			}
		default:
			timer.Reset(time.Second) // Redis failed: try again
		}
	}
}

// announced takes an announcement from the backend; it must not block.
func (o *observer) announced(a redisbackend.Announcement, lost bool) {
	o.mu.Lock()
	if lost {
		o.lost = true
	} else {
		o.heard = true
		l := Leader{Value: a.Value, Term: a.Term}
		if a.Term != 0 {
			l.Holder = Holder{ID: a.ID, Host: a.Host, PID: a.PID, Since: a.Since}
		}
		o.pending = append(o.pending, l)
	}
	o.mu.Unlock()
	select {
	case o.wake <- struct{}{}:
	default:
	}
}
