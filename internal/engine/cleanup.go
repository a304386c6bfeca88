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
// Close report an error. The channel it returns is closed once its first
// attempt has ended, confirmed or not.
func (e *Engine) cleanup(r Request) <-chan struct{} {
	r.Hold = 0
	r.Lease = AbandonFor(r.Lease)
	tried := make(chan struct{})
	e.spawn(func() {
		first := true
		ctx, cancel := e.detach(context.Background(), r.Lease)
		defer cancel()
		delay := 10 * time.Millisecond
		for {
			freed, err := e.b.Abandon(ctx, r)
			if first {
				first = false
				close(tried)
			}
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
	return tried
}

// cleanupNow is cleanup for a caller that is about to return an error: it
// returns once the backend has confirmed the clean-up, so that nothing of
// the call is left behind it (a place in a queue, a lock granted to it
// meanwhile: the next in line has it by then). If the backend does not
// confirm it (the first attempt failed, or giveUpWait passed), it returns
// all the same: waiting longer would not help a store that does not
// answer, and the clean-up goes on in the background.
func (e *Engine) cleanupNow(rs ...Request) {
	dones := make([]<-chan struct{}, len(rs))
	for i, r := range rs {
		dones[i] = e.cleanup(r)
	}
	await(giveUpWait, dones...)
}

// await waits until every channel of dones is closed, for d at most.
func await(d time.Duration, dones ...<-chan struct{}) {
	var timer <-chan time.Time
	for _, done := range dones {
		select {
		case <-done:
			continue
		default:
		}
		if timer == nil {
			t := time.NewTimer(d)
			defer t.Stop()
			timer = t.C
		}
		select {
		case <-done:
		case <-timer:
			return
		}
	}
}

// giveUpWait bounds how long a call that gives up (its context ended, or a
// request failed) waits for its clean-up before it returns: as long as
// Unlock waits for a release when its context has ended.
const giveUpWait = releaseTimeout

// ownerOf is the request that abandons the owner of h.
func (e *Engine) ownerOf(h *Hold) Request {
	return h.request(Request{Lease: e.renew.leaseOf(h)})
}
