package engine

import (
	"context"
	"time"
)

// A hold learns that its lock was force-unlocked or revoked from a notice
// of the backend (Revoker), within about one round trip, instead of at its
// next renewal (up to a third of its lease later, never for a fixed lease). The
// engine watches for notices from its first hold on, until Close.
//
// A notice names the lock and the owner (by GranteeID). The engine takes
// it as it comes: a notice can only be sent by a client allowed to
// publish on the lock's channels, who could as well delete the lock, and
// ending a hold early never lets two owners in.

// watchRevoked starts watching for notices, once, in the background, and
// returns a channel that is closed once they flow, or once the watch has
// failed (or at once if the backend is no Revoker). A caller waits for it
// before it hands out its first Lease, so that a revocation sent after
// Lock returned reaches the holder. If the watch cannot start (Redis down,
// an ACL without the channel), a hold after revokeRetry tries again.
func (e *Engine) watchRevoked() <-chan struct{} {
	rv, ok := e.b.(Revoker)
	if !ok || e.revokeUp.Load() {
		return closedChan
	}
	e.mu.Lock()
	if e.revoking || e.draining || e.now() < e.revokeRetryAt {
		ready := e.revokeReady
		e.mu.Unlock()
		return ready
	}
	e.revoking = true
	ready := make(chan struct{})
	e.revokeReady = ready
	e.mu.Unlock()
	e.spawn(func() {
		defer close(ready)
		ctx, cancel := context.WithTimeout(e.ctx, watchTimeout)
		stop, err := rv.WatchRevoked(ctx, e.revoked)
		cancel()
		e.mu.Lock()
		closed := e.closed.Load() // Close has started, and takes no stop any more
		switch {
		case err != nil:
			e.revoking, e.revokeRetryAt = false, e.now()+revokeRetry
		case !closed:
			e.stopRevoked = stop
			e.revokeUp.Store(true)
		}
		e.mu.Unlock()
		if err == nil && closed {
			stop()
		}
	})
	return ready
}

// awaitRevoked waits until ready (from watchRevoked) is closed, or ctx
// ends: a Lease handed out before notices flow could miss its revocation.
func awaitRevoked(ctx context.Context, ready <-chan struct{}) {
	select {
	case <-ready:
	default:
		select {
		case <-ready:
		case <-ctx.Done():
		}
	}
}

// closedChan is a channel that is closed.
var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// revoked ends the holds of owner grantee on the lock name: the lock was
// deleted from them (a force-unlock), or revoked (the server keeps it for
// them until they release it, or their lease runs out). Either way the
// hold's Unlock sends a release once the caller has stopped: it frees a
// revoked lock, and changes nothing where the lock is gone.
func (e *Engine) revoked(name, grantee string) {
	for _, h := range e.renew.holdsOf(name, grantee) {
		e.lose(h, lostErr(LossRevoked, "revoked by an operator (force-unlock or revoke)"), false)
	}
}

// holdsOf returns the holds of lock name whose owner's GranteeID is
// grantee (those in the place phase of a queued kind, which hold nothing,
// excepted).
func (r *renewer) holdsOf(name, grantee string) []*Hold {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*Hold
	for _, e := range r.holds {
		if h := e.h; h.name == name && !h.placed && GranteeID(h.owner) == grantee {
			out = append(out, h)
		}
	}
	return out
}

// revokeRetry is how long after a failed start the watch of notices is
// tried again.
const revokeRetry = 30 * time.Second
