package engine

import (
	"context"
	"time"
)

// cleanup abandons, in the background, the owner of a request whose
// outcome the engine does not use: an acquisition that was cancelled,
// failed or answered too late, a hold lost at its deadline, a release
// that was not confirmed. Abandon releases whatever the owner holds and
// makes any acquisition of that owner that reaches the backend later fail,
// so a request still on its way when the clean-up runs is harmless too.
//
// It retries until the backend confirms, for AbandonFor(lease) at most, or
// until Close gives up waiting; a clean-up that Close cuts short makes
// Close report an error.
func (e *Engine) cleanup(r Request) {
	r.Hold = 0
	r.Lease = AbandonFor(r.Lease)
	e.spawn(func() {
		ctx, cancel := e.detach(context.Background(), r.Lease)
		defer cancel()
		delay := 10 * time.Millisecond
		for {
			freed, err := e.b.Abandon(ctx, r)
			if err == nil {
				if freed {
					e.handOff(r.Name, r.Kind)
				}
				return
			}
			if e.abandon.Err() != nil || (e.closed.Load() && ctx.Err() != nil) {
				e.unresolved.Add(1)
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(delay):
				delay = min(2*delay, time.Second)
			}
		}
	})
}

// ownerOf is the request that abandons the owner of h.
func (e *Engine) ownerOf(h *Hold) Request {
	return h.request(Request{Lease: e.renew.leaseOf(h)})
}

// AbandonFor is how long an abandoned owner's late acquisitions are refused:
// a request held up in the network (or in a frozen Redis) for longer than
// that can still take the lock, for one lease, in the name of an owner
// that no one tracks.
func AbandonFor(lease time.Duration) time.Duration {
	return max(2*lease, time.Minute)
}
