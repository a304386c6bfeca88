package distlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/distlock/distlock/store"
)

// Observe returns a channel that receives who leads now (a zero Leader if
// nobody does), then every change of leader, in order, until ctx ends or
// the Client is closed; then it is closed, and nothing of it is left
// running once Close has returned. A zero Leader (Term 0) means that
// nobody leads: the leader resigned with no candidate waiting, or its
// lease ran out.
//
// Changes made by a release, a grant or a take are pushed by Redis as they
// happen; a leader whose lease runs out with no candidate to follow it is
// noticed when that lease ends (Observe looks again then), and after a
// reconnection Observe looks again at once. The channel never goes back in
// time: each announcement carries its term (a vacancy, the term that
// ended), and one older than what the channel said is not sent; a look
// reads the state of the moment, newer than anything sent before it.
// Nothing is dropped but such stale news and repeats (two vacancies in a
// row, with a leader between them that came and went unseen, are one): a
// slow reader delays the channel, not the observing.
//
// While Redis cannot be reached (at the start, or for a look) the channel
// stays open and Observe tries again, backing off from 100 ms to 5 s; each
// failure is reported to the Client's event handler and logger as an
// EventObserveFailed, with the election's name. So a channel that closes
// says that ctx ended or the Client was closed, never that Redis failed.
// If the election's name or an option is invalid (see Err), the Client is
// closed already, or its store cannot tell of leaders (it is no
// store.LeaderWatcher and store.Inspector: the failure, wrapping
// ErrUnsupported, is reported as an EventObserveFailed), the channel is
// closed at once.
func (e *Election) Observe(ctx context.Context) <-chan Leader {
	out := make(chan Leader)
	o := &observer{e: e, out: out, wake: make(chan struct{}, 1)}
	if e.lock.err != nil || e.c.usable() != nil || !o.supported() || !e.c.observers.start(ctx, o.run) {
		close(out)
	}
	return out
}

// supported reports whether the Client's store can tell of leaders; if it
// cannot, it reports the failure.
func (o *observer) supported() bool {
	_, err := capability[store.LeaderWatcher](o.e.c, "Observe")
	if err == nil {
		_, err = capability[store.Inspector](o.e.c, "Observe")
	}
	if err != nil {
		emit(o.e.c.cfg.handler, o.e.c.cfg.logger, Event{Kind: EventObserveFailed, Name: o.e.name, Err: err})
		return false
	}
	return true
}

// The bounds of the delay before Observe tries again after a failure, and
// how long it waits for Redis to confirm its watch (a frozen server
// accepts the request and never answers) before it counts a failure.
const (
	minObserveRetry     = 100 * time.Millisecond
	maxObserveRetry     = 5 * time.Second
	observeWatchTimeout = 10 * time.Second
)

// An observer feeds Observe's channel.
type observer struct {
	e    *Election
	ctx  context.Context
	out  chan Leader
	wake chan struct{} // an announcement came, or some may have been lost

	mu      sync.Mutex
	pending []store.Announcement // announced, not yet taken by run
	lost    bool                 // announcements may have been lost: look again

	// Owned by run: what the channel said last, and its place (see place).
	said   Leader
	placed uint64
	sent   bool
	retry  time.Duration // the delay before the next try after a failure
}

// The place of what an election's channel says orders it in time: the
// leader of term t is at 2t, and the vacancy that follows it at 2t+1, so a
// later state has a higher place (terms are fencing tokens, strictly
// increasing from one leader to the next).
func leaderPlace(term uint64) uint64   { return 2 * term }
func vacancyPlace(ended uint64) uint64 { return 2*ended + 1 }

// run sends who leads, then every announcement, in order, until ctx ends
// (Observe's, or the Client's Close). It looks (reads who leads) once the
// watch is confirmed, after a reconnection, after an announcement it
// cannot place, and when the last leader's lease could have run out
// without an announcement. Announcements taken before a look are sent
// before it, so that the look is newer than everything already sent.
func (o *observer) run(ctx context.Context) {
	o.ctx = ctx
	defer close(o.out)
	var stop func()
	defer func() {
		if stop != nil {
			stop()
		}
	}()
	look := time.NewTimer(0)
	defer look.Stop()
	for {
		if stop == nil {
			wctx, cancel := context.WithTimeout(ctx, observeWatchTimeout)
			lw, err := capability[store.LeaderWatcher](o.e.c, "WatchLeader")
			if err == nil {
				stop, err = lw.WatchLeader(wctx, o.e.name, o.announced)
			}
			cancel()
			if err != nil {
				if !o.failed(err) || !o.pause() {
					return
				}
				continue
			}
			o.retry = 0
			look.Reset(0) // announcements flow: read who leads
		}
		looking := false
		select {
		case <-ctx.Done():
			return
		case <-look.C:
			looking = true
		case <-o.wake:
		}
		o.mu.Lock()
		batch, lost := o.pending, o.lost
		o.pending, o.lost = nil, false
		o.mu.Unlock()
		for _, a := range batch {
			switch {
			case a.Term != 0:
				l := Leader{Value: a.Value, Term: a.Term, Holder: Holder{ID: a.ID, Host: a.Host, PID: a.PID, Since: a.Since}}
				if !o.send(l, leaderPlace(a.Term), false) {
					return
				}
				look.Reset(o.e.spec.Lease) // its lease could run out without a word
			case a.Ended != 0:
				if !o.send(Leader{}, vacancyPlace(a.Ended), false) {
					return
				}
			default:
				lost = true // a vacancy without its term cannot be placed: look
			}
		}
		if !looking && !lost {
			continue
		}
		st, err := o.e.state(ctx)
		if err != nil {
			if !o.failed(err) {
				return
			}
			look.Reset(o.backoff())
			continue
		}
		o.retry = 0
		if l, ttl, ok := leaderOf(st); ok {
			if !o.send(l, leaderPlace(l.Term), true) {
				return
			}
			if ttl < 0 {
				ttl = o.e.spec.Lease // a lock without expiry: set by hand
			}
			look.Reset(ttl + time.Millisecond)
			continue
		}
		place := o.placed | 1 // the vacancy after what was said (the fencing counter has expired)
		if st.LastToken != 0 {
			place = vacancyPlace(st.LastToken)
		}
		if !o.send(Leader{}, place, true) {
			return
		}
		look.Stop() // nobody leads: only a script that announces it can change that
	}
}

// send sends l, whose place is p, unless the channel has said it or
// something newer; from a look (fresh), anything but what was said last
// is newer. A vacancy after a vacancy is not sent again. It reports false
// if ctx ended first.
func (o *observer) send(l Leader, p uint64, fresh bool) bool {
	if o.sent && (p == o.placed || !fresh && p < o.placed) {
		return true
	}
	if o.sent && l.Term == 0 && o.said.Term == 0 {
		o.placed = p // still nobody leads
		return true
	}
	select {
	case o.out <- l:
		o.said, o.placed, o.sent = l, p, true
		return true
	case <-o.ctx.Done():
		return false
	}
}

// failed reports err to the Client's event handler and logger, unless ctx
// has ended or the Client is closing (it reports false then).
func (o *observer) failed(err error) bool {
	if o.ctx.Err() != nil || errors.Is(err, ErrClosed) {
		return false
	}
	emit(o.e.c.cfg.handler, o.e.c.cfg.logger, Event{Kind: EventObserveFailed, Name: o.e.name, Err: err})
	return true
}

// backoff returns how long to wait before the next try, from
// minObserveRetry, doubling up to maxObserveRetry.
func (o *observer) backoff() time.Duration {
	o.retry = min(max(2*o.retry, minObserveRetry), maxObserveRetry)
	return o.retry
}

// pause waits backoff's delay, or until ctx ends (it reports false then).
func (o *observer) pause() bool {
	t := time.NewTimer(o.backoff())
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-o.ctx.Done():
		return false
	}
}

// announced takes an announcement from the backend; it must not block.
func (o *observer) announced(a store.Announcement, lost bool) {
	o.mu.Lock()
	if lost {
		o.lost = true
	} else {
		o.pending = append(o.pending, a)
	}
	o.mu.Unlock()
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// observers are the goroutines behind a Client's Observe channels: Close
// ends them, and waits for them.
type observers struct {
	mu     sync.Mutex
	closed bool
	ended  context.Context // ends at Close; made by the first start
	end    context.CancelFunc
	wg     sync.WaitGroup
}

// start runs fn in a goroutine, with a context that ends with ctx or at
// close, unless close was called (it reports false then).
func (obs *observers) start(ctx context.Context, fn func(ctx context.Context)) bool {
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if obs.closed {
		return false
	}
	if obs.ended == nil {
		obs.ended, obs.end = context.WithCancel(context.Background())
	}
	ctx, cancel := context.WithCancelCause(ctx)
	unhook := context.AfterFunc(obs.ended, func() { cancel(ErrClosed) })
	obs.wg.Go(func() {
		defer cancel(nil)
		defer unhook()
		fn(ctx)
	})
	return true
}

// close ends the goroutines of start and waits for them until ctx ends:
// one may be in a request to Redis that its context does not interrupt.
func (obs *observers) close(ctx context.Context) error {
	obs.mu.Lock()
	obs.closed = true
	if obs.end != nil {
		obs.end()
	}
	obs.mu.Unlock()
	done := make(chan struct{})
	go func() {
		obs.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%w: an Observe still waits for Redis", ErrBackend)
	}
}
