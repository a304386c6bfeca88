package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// AcquireAll takes the plain mutexes of specs together, all or none: a
// multi-lock. Each member is an ordinary plain mutex with an owner of its
// own, so a Mutex on one of the names excludes the multi-lock and is
// excluded by it.
//
// An attempt takes every member or nothing: the backend takes the members
// that share a store node in one atomic step; where it needs several (a
// Redis Cluster with members in several slots), the members an attempt
// took are abandoned when a later one is refused. Nothing is ever held
// while waiting, so callers that list the same names in different orders
// cannot deadlock. Attempts are made in one canonical order (by name). With
// wait, a refused attempt waits for the member that refused it (its
// release, or its holder's lease as last seen) and tries again; without,
// it fails with ErrNotAcquired.
//
// A context that carries a hold of one of the members fails at once with
// ErrDeadlock: that hold would be waited for by its own holder.
func (e *Engine) AcquireAll(ctx context.Context, specs []Spec, wait bool) (*Group, error) {
	if e.closed.Load() {
		return nil, ErrClosed
	}
	specs = slices.SortedFunc(slices.Values(specs), func(a, b Spec) int { return cmp.Compare(a.Name, b.Name) })
	label := groupName(specs)
	if ctx.Err() != nil {
		return nil, notAcquired(context.Cause(ctx))
	}
	for _, s := range specs {
		if holdIn(ctx, e, s.Name) != nil {
			return nil, fmt.Errorf("%w: the context holds its member %q", ErrDeadlock, s.Name)
		}
	}
	start := time.Now()
	var q *queue
	var w *waiter
	woken := false
	defer func() {
		if q != nil {
			e.leave(q, w, true, woken)
		}
	}()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		if ctx.Err() != nil {
			return nil, notAcquired(context.Cause(ctx))
		}
		g, blocker, ttl, err := e.tryAll(ctx, specs)
		switch {
		case err != nil:
			return nil, err
		case g != nil:
			wait := time.Since(start)
			for _, l := range g.leases {
				e.acquired(l, wait)
			}
			return g, nil
		case !wait:
			return nil, refused(Grant{TTL: ttl})
		}
		name := specs[blocker].Name
		if q == nil || q.key.name != name {
			// Watch the member that refused before trying again, so that
			// its release cannot go unnoticed; then try at once.
			if q != nil {
				e.leave(q, w, true, woken)
			} else {
				e.emit(Event{Kind: Waiting, Name: label, Lock: Plain})
				defer e.emit(Event{Kind: WaitEnded, Name: label, Lock: Plain})
			}
			woken = false
			if q, w, _, err = e.join(ctx, name, Plain); err != nil {
				q = nil
				return nil, joinErr(err)
			}
			continue
		}
		e.heldUntil(q, ttl)
		timer.Reset(pollDelay(e.holderLeft(q, specs[blocker].Lease)))
		woken = false
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

// groupName names a multi-lock in errors and events: its members' names.
func groupName(specs []Spec) string {
	names := make([]string, len(specs))
	for i, s := range specs {
		names[i] = s.Name
	}
	return strings.Join(names, "+")
}

// tryAll makes one attempt at every member of specs. It returns the group,
// or the index of a member that was refused and its holder's remaining
// lease. Members the attempt took but cannot keep are abandoned, as is
// every member when the outcome is unknown.
func (e *Engine) tryAll(ctx context.Context, specs []Spec) (*Group, int, time.Duration, error) {
	rs := make([]Request, len(specs))
	for i, s := range specs {
		rs[i] = Request{Name: s.Name, Kind: Plain, Owner: e.newOwner(), Hold: 1, Lease: s.Lease}
	}
	lease := specs[0].Lease
	sent := e.now()
	type outcome struct {
		g       *Group
		blocker int
		ttl     time.Duration
		err     error
	}
	// cleanup abandons every member (all) or those gs says were taken:
	// before the call returns if its caller waits (see clean).
	cleanup := func(gs []Grant, all, waiting bool) {
		var taken []Request
		for i, r := range rs {
			if all || i < len(gs) && gs[i].Acquired {
				taken = append(taken, r)
			}
		}
		e.clean(waiting, taken...)
	}
	label := groupName(specs)
	out, replied := call(e, ctx, lease, func(c context.Context) ([]Grant, error) { return e.b.AcquireAll(c, rs) },
		func(gs []Grant, err error, waiting bool) outcome {
			switch {
			case errors.Is(err, ErrClosed):
				cleanup(gs, true, false)
				return outcome{err: ErrClosed}
			case refusal(err) || unsent(err):
				cleanup(gs, false, waiting)
				return outcome{err: err}
			case err == nil && (len(gs) == 0 || len(gs) > len(rs) || len(gs) < len(rs) && gs[len(gs)-1].Acquired):
				err = fmt.Errorf("%w: %d grants for %d members", ErrBackend, len(gs), len(rs))
				fallthrough
			case err != nil:
				cleanup(gs, true, waiting) // it may have been applied, now or later
				return outcome{err: err}
			case !waiting:
				cleanup(gs, false, false)
				return outcome{}
			}
			if last := len(gs) - 1; !gs[last].Acquired {
				// Refused at the last member tried: the members a separate
				// step took are given up before the caller learns it.
				cleanup(gs, false, true)
				return outcome{blocker: last, ttl: gs[last].TTL}
			}
			leases := make([]*Lease, len(rs))
			for i := range rs {
				l, err := e.hold(ctx, specs[i], rs[i], gs[i], sent)
				if l == nil {
					// Close started, or the reply came too late: give up
					// the members held so far; the rest were cleaned up by
					// hold.
					for _, l := range leases[:i] {
						_ = l.Unlock(context.Background())
					}
					for j := i + 1; j < len(rs); j++ {
						e.cleanup(rs[j])
					}
					if err == nil {
						return outcome{blocker: i, ttl: 0}
					}
					return outcome{err: err}
				}
				leases[i] = l
			}
			return outcome{g: newGroup(ctx, e, label, leases)}
		})
	if !replied {
		// Every member may still be taken: abandoned now (see try).
		e.cleanupNow(rs...)
		return nil, 0, 0, notAcquired(context.Cause(ctx))
	}
	return out.g, out.blocker, out.ttl, out.err
}

// A Group is the leases of a multi-lock, one per member, taken together
// and held as one: its context ends when any member's does, and Unlock
// releases every member.
type Group struct {
	name     string
	leases   []*Lease
	ctx      context.Context
	cancel   context.CancelCauseFunc
	stops    []func() bool
	unlocked atomic.Bool
}

// newGroup makes the group of leases, acquired by a caller whose context
// is ctx: its context carries ctx's values and every member's hold (so
// that a member is re-entered with it), and ends when any member's lease
// context ends, with that cause.
func newGroup(ctx context.Context, e *Engine, name string, leases []*Lease) *Group {
	vals := context.WithoutCancel(ctx)
	for _, l := range leases {
		vals = withHold(vals, l.hold)
	}
	g := &Group{name: name, leases: leases}
	g.ctx, g.cancel = context.WithCancelCause(vals)
	if !leases[0].hold.renew { // the members share their options
		g.ctx = fixedContext{g.ctx, func() time.Time {
			t := leases[0].hold.leaseEnd()
			for _, l := range leases[1:] {
				if u := l.hold.leaseEnd(); u.Before(t) {
					t = u
				}
			}
			return t
		}}
	}
	for _, l := range leases {
		lctx := l.Context()
		g.stops = append(g.stops, context.AfterFunc(lctx, func() { g.cancel(context.Cause(lctx)) }))
	}
	return g
}

// Name names the group: its members' names, in canonical order.
func (g *Group) Name() string { return g.name }

// Kind is the kind of every member: Plain.
func (g *Group) Kind() Kind { return Plain }

// Hold is 0: a group's members are holds of their own (events name each).
func (g *Group) Hold() uint64 { return 0 }

// Token is the largest of the members' fencing tokens.
func (g *Group) Token() uint64 {
	var t uint64
	for _, l := range g.leases {
		t = max(t, l.Token())
	}
	return t
}

// Tokens returns each member's fencing token, by name.
func (g *Group) Tokens() map[string]uint64 {
	out := make(map[string]uint64, len(g.leases))
	for _, l := range g.leases {
		out[l.Name()] = l.Token()
	}
	return out
}

// Context ends when the group is unlocked or any member is lost.
func (g *Group) Context() context.Context { return g.ctx }

// ValidUntil is the earliest of the members' ValidUntil: the zero time once
// any member has ended.
func (g *Group) ValidUntil() time.Time {
	if g.unlocked.Load() {
		return time.Time{}
	}
	var until time.Time
	for i, l := range g.leases {
		t := l.ValidUntil()
		if t.IsZero() {
			return t
		}
		if i == 0 || t.Before(until) {
			until = t
		}
	}
	return until
}

// Unlock releases every member, the group's context first: each member's
// lease context is cancelled before its release is sent. It returns the
// members' errors, joined.
func (g *Group) Unlock(ctx context.Context) error {
	if !g.unlocked.CompareAndSwap(false, true) {
		return fmt.Errorf("%w: this lease was already unlocked", ErrNotHeld)
	}
	for _, stop := range g.stops {
		stop()
	}
	g.cancel(nil)
	errs := make([]error, len(g.leases))
	var wg sync.WaitGroup
	for i, l := range g.leases {
		wg.Go(func() { errs[i] = memberErr(l, l.Unlock(ctx)) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Extend sets every member's lease to ttl from now. It returns the
// members' errors, joined.
func (g *Group) Extend(ctx context.Context, ttl time.Duration) error {
	if g.unlocked.Load() {
		return fmt.Errorf("%w: this lease was already unlocked", ErrNotHeld)
	}
	errs := make([]error, len(g.leases))
	var wg sync.WaitGroup
	for i, l := range g.leases {
		wg.Go(func() { errs[i] = memberErr(l, l.Extend(ctx, ttl)) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// memberErr says which member err, if not nil, is about: a group's name
// names them all.
func memberErr(l *Lease, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("member %q: %w", l.Name(), err)
}
