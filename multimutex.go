package distlock

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/distlock/distlock/internal/engine"
)

// MaxMembers is the most names a MultiMutex takes together.
const MaxMembers = 64

// A MultiMutex takes several mutexes together, all of them or none: a
// transfer that must hold two accounts at once, say. Client.MultiMutex
// returns it.
//
// Each member is an ordinary mutex of its name: a Mutex of one of the
// names excludes the MultiMutex and is excluded by it. The members are
// taken in one Lua script where they share a Redis node (always on a
// standalone or Sentinel server; per hash slot on a Cluster), so an
// attempt takes every member or none; on a Cluster, members of several
// slots are taken slot by slot in one canonical order, and those taken
// are released at once if a later one is refused. Nothing is ever held
// while waiting: a refused attempt waits for the member that refused it
// (its release, or its holder's lease) and tries again. So clients that
// list the same names in different orders cannot deadlock, and a
// cancelled or refused acquisition never leaves a member behind.
//
// The Lease covers the set: its Context ends when any member is lost,
// Unlock releases every member, Extend extends every member, Token is the
// largest member token and Tokens gives each. Acquiring a member's Mutex
// with the Lease's context re-enters that member. A context that already
// holds one of the members fails at once with ErrDeadlock.
type MultiMutex struct {
	c     *Client
	names []string // sorted
	specs []engine.Spec
	err   error
}

// MultiMutex returns the multi-lock of names (1 to MaxMembers distinct
// lock names, in any order). It is cheap and does not contact the store. The
// options apply to every member. An empty or too long list is an error
// wrapping ErrInvalidOption, a bad or repeated name one wrapping
// ErrInvalidName, returned by every method.
func (c *Client) MultiMutex(names []string, opts ...MutexOption) *MultiMutex {
	m := &MultiMutex{c: c, names: slices.Sorted(slices.Values(names)), err: c.cfg.err}
	switch {
	case m.err != nil:
	case len(names) == 0:
		m.err = fmt.Errorf("%w: a multi-lock of no names", ErrInvalidOption)
	case len(names) > MaxMembers:
		m.err = fmt.Errorf("%w: a multi-lock of %d names, more than %d", ErrInvalidOption, len(names), MaxMembers)
	}
	for i, name := range m.names {
		if m.err != nil {
			break
		}
		if i > 0 && name == m.names[i-1] {
			m.err = fmt.Errorf("%w: %q twice in a multi-lock", ErrInvalidName, name)
			break
		}
		if err := validateName(name); err != nil {
			m.err = fmt.Errorf("member %q: %w", name, err)
			break
		}
		lk, spec := c.lock(name, engine.Plain, opts)
		m.err = lk.err
		m.specs = append(m.specs, spec)
	}
	return m
}

// Names returns the members' names, sorted.
func (m *MultiMutex) Names() []string { return slices.Clone(m.names) }

// Err returns, without contacting the store, the error every method of m
// returns because its names or options are invalid, or nil.
func (m *MultiMutex) Err() error { return opErr("multi-mutex", m.name(), m.err) }

// Lock blocks until it holds every member, or until ctx ends (the error
// then wraps ErrNotAcquired and the context's cause).
func (m *MultiMutex) Lock(ctx context.Context) (*Lease, error) { return m.acquire(ctx, "lock", true) }

// TryLock makes one attempt at every member: if any is held by someone
// else, it returns an error wrapping ErrNotAcquired, and holds none.
func (m *MultiMutex) TryLock(ctx context.Context) (*Lease, error) {
	return m.acquire(ctx, "try-lock", false)
}

// acquire takes every member for the method op.
func (m *MultiMutex) acquire(ctx context.Context, op string, wait bool) (*Lease, error) {
	w, ctx := m.c.startCall(ctx, op, m.name(), KindMutex, 0)
	l, err := m.take(ctx, wait)
	err = opErr(op, m.name(), err)
	w.end(l, err)
	return l, err
}

func (m *MultiMutex) take(ctx context.Context, wait bool) (*Lease, error) {
	if m.err != nil {
		return nil, m.err
	}
	g, err := m.c.engine.AcquireAll(ctx, m.specs, wait)
	if err != nil {
		return nil, err
	}
	return &Lease{l: g, c: m.c}, nil
}

// name names the multi-lock in errors, as its Lease's Name does: its
// members' names, sorted, joined with "+".
func (m *MultiMutex) name() string { return strings.Join(m.names, "+") }
