package distlock

import (
	"context"
	"fmt"
	"time"

	"github.com/distlock/distlock/internal/engine"
	"github.com/distlock/distlock/store"
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
// channel, so Observe sees every change, in order, pushed (see Observe).
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

// Err returns, without contacting the store, the error every method of e
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

// Resign ends the leadership that lease, a Lease of Campaign on e, holds:
// it is lease.Unlock(ctx), by the name etcd's concurrency.Election gives
// it. The lease's context is cancelled before the next candidate can
// lead. A lease of another lock (another name, another kind, or another
// Client's) fails with ErrInvalidOption, and nothing is released.
func (e *Election) Resign(ctx context.Context, lease *Lease) error {
	switch {
	case lease == nil:
		return opErr("resign", e.name, errNilLease)
	case lease.Name() != e.name || lease.l.Kind() != engine.Election || lease.c != e.c:
		return opErr("resign", e.name, fmt.Errorf("%w: the lease is not one of this election's Campaign on this Client", ErrInvalidOption))
	}
	return opErr("resign", e.name, lease.l.Unlock(ctx))
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
	l, ttl, ok := leaderOf(st)
	if !ok {
		return Leader{}, 0, fmt.Errorf("%w: nobody leads", ErrNotHeld)
	}
	return l, ttl, nil
}

// leaderOf returns who leads an election in the state st, and how long
// its lease has left; ok is false when nobody leads.
func leaderOf(st store.State) (l Leader, ttl time.Duration, ok bool) {
	if st.Kind != store.Election || !st.Locked() {
		return Leader{}, 0, false
	}
	h := st.Holder()
	return Leader{Value: h.Value, Term: h.Token, Holder: holder(h)}, h.TTL, true
}

// ForceUnlock deposes the leader at once and lets the next candidate in
// line lead, as Mutex.ForceUnlock does for a mutex: the leader's process is
// told and its lease context cancelled with ErrLockLost, but until its
// code stops two leaders may act. It is for operators. It reports whether
// anyone led.
func (e *Election) ForceUnlock(ctx context.Context) (bool, error) { return e.forceUnlock(ctx) }

// Revoke deposes the leader without letting the next candidate lead before
// it has stopped, as Mutex.Revoke does: its lease context is cancelled with
// ErrLockLost, its renewals are refused, and the next candidate leads once
// it has resigned (Unlock) or its lease has run out. It is for operators.
// It returns the longest the leader may still lead, 0 if nobody led.
func (e *Election) Revoke(ctx context.Context) (time.Duration, error) { return e.revoke(ctx) }
