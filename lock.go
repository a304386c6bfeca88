package distlock

import (
	"context"
	"time"

	"github.com/distlock/distlock/internal/engine"
	"github.com/distlock/distlock/store"
)

// lock is what every kind of lock has: its Client, its name, and the error
// that its name and options make every method return.
type lock struct {
	c    *Client
	name string
	err  error
}

// acquire takes the lock as spec says, for the method op: Lock with wait,
// TryLock without.
func (lk *lock) acquire(ctx context.Context, op string, spec engine.Spec, wait bool) (*Lease, error) {
	w, ctx := lk.c.startCall(ctx, op, lk.name, kindOfEngine(spec.Kind), 0)
	l, err := lk.take(ctx, spec, wait)
	err = opErr(op, lk.name, err)
	w.end(l, err)
	return l, err
}

// take is acquire, unobserved, for a caller that makes its own error of
// err.
func (lk *lock) take(ctx context.Context, spec engine.Spec, wait bool) (*Lease, error) {
	if lk.err != nil {
		return nil, lk.err
	}
	l, err := lk.c.engine.Acquire(ctx, spec, wait)
	if err != nil {
		return nil, err
	}
	return &Lease{l: l, c: lk.c}, nil
}

// check returns the error of the method Err of a lock made by the
// constructor op.
func (lk *lock) check(op string) error { return opErr(op, lk.name, lk.err) }

// state reads the lock's state.
func (lk *lock) state(ctx context.Context) (store.State, error) {
	if lk.err != nil {
		return store.State{}, lk.err
	}
	if err := lk.c.usable(); err != nil {
		return store.State{}, err
	}
	s, err := capability[store.Inspector](lk.c, "Inspect")
	if err != nil {
		return store.State{}, err
	}
	return s.Inspect(ctx, lk.name)
}

// forceUnlock deletes the lock whoever holds it.
func (lk *lock) forceUnlock(ctx context.Context) (bool, error) {
	if lk.err != nil {
		return false, opErr("force-unlock", lk.name, lk.err)
	}
	if err := lk.c.usable(); err != nil {
		return false, opErr("force-unlock", lk.name, err)
	}
	s, err := capability[store.ForceUnlocker](lk.c, "ForceUnlock")
	if err != nil {
		return false, opErr("force-unlock", lk.name, err)
	}
	held, err := s.ForceUnlock(ctx, lk.name)
	return held, opErr("force-unlock", lk.name, err)
}

// revoke revokes the lock whoever holds it, without freeing it.
func (lk *lock) revoke(ctx context.Context) (time.Duration, error) {
	if lk.err != nil {
		return 0, opErr("revoke", lk.name, lk.err)
	}
	if err := lk.c.usable(); err != nil {
		return 0, opErr("revoke", lk.name, err)
	}
	s, err := capability[store.Revoker](lk.c, "Revoke")
	if err != nil {
		return 0, opErr("revoke", lk.name, err)
	}
	left, err := s.Revoke(ctx, lk.name)
	return left, opErr("revoke", lk.name, err)
}

// A Kind is the kind of lock a name is in use as. A name is used by one
// kind at a time: acquiring it as another kind fails with ErrWrongKind.
// Its value is the name of the Client method that makes the lock, in the
// words of the errors' ops (see Error): the same names in Inspect, in the
// command's output (distlock status and list) and in its JSON.
type Kind string

// The kinds of lock.
const (
	KindFree      Kind = ""           // nobody holds the name or waits for it
	KindMutex     Kind = "mutex"      // Client.Mutex
	KindFairMutex Kind = "fair-mutex" // Client.FairMutex
	KindRWMutex   Kind = "rwmutex"    // Client.RWMutex
	KindSemaphore Kind = "semaphore"  // Client.Semaphore
	KindElection  Kind = "election"   // Client.Election
)

// kindOf names the kind of lock that the store reports.
func kindOf(st store.State) Kind {
	if !st.InUse {
		return KindFree
	}
	return kindOfEngine(st.Kind)
}

// holder describes a holder without its secret owner id.
func holder(h store.Holder) Holder {
	return Holder{ID: store.OwnerID(h.Owner), Host: h.Host, PID: h.PID, Since: h.Since, Revoked: h.Revoked}
}
