package sqlbench

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/distlock/distlock/bench/internal/harness"
)

// A Meter reads a server's CPU time so far (Servers.CPU of a library).
type Meter func() time.Duration

// pair takes and releases name once.
func pair(ctx context.Context, w Worker, name string) error {
	u, err := w.Lock(ctx, name)
	if err == nil {
		err = u(ctx)
	}
	return err
}

// Rate is what Uncontended measured.
type Rate struct {
	Pairs     int64         // acquire+release pairs
	Secs      float64       // the time they took
	ServerCPU time.Duration // the server's CPU meanwhile (Meter)
	ClientCPU time.Duration // this process's (getrusage): the clients', and the harness's small share
}

// PerS is pairs per second.
func (r Rate) PerS() float64 { return float64(r.Pairs) / r.Secs }

// ServerPerPair and ClientPerPair are CPU µs per pair.
func (r Rate) ServerPerPair() float64 { return float64(r.ServerCPU.Microseconds()) / float64(r.Pairs) }
func (r Rate) ClientPerPair() float64 { return float64(r.ClientCPU.Microseconds()) / float64(r.Pairs) }

// Uncontended runs goroutines goroutines of l for d, each with a Worker of
// its own taking and releasing one name of its own (prefix + its index)
// again and again, and returns the pairs and the CPU they cost. Every
// goroutine makes one untimed pair first (so that pools have opened their
// connections).
func Uncontended(l Locker, prefix string, goroutines int, d time.Duration, server Meter) (Rate, error) {
	ws, err := harness.OpenAll(goroutines, l.Worker)
	if err != nil {
		return Rate{}, err
	}
	defer harness.CloseAll(ws)
	ctx, cancel := context.WithTimeout(context.Background(), d+60*time.Second)
	defer cancel()
	name := func(g int) string { return prefix + strconv.Itoa(g) }
	if err := harness.Each(ws, func(g int, w Worker) error { return pair(ctx, w, name(g)) }); err != nil {
		return Rate{}, err
	}
	var pairs atomic.Int64
	s0, c0, t0 := server(), harness.CPUTime(), time.Now()
	stop := t0.Add(d)
	err = harness.Each(ws, func(g int, w Worker) error {
		for time.Now().Before(stop) {
			if err := pair(ctx, w, name(g)); err != nil {
				return err
			}
			pairs.Add(1)
		}
		return nil
	})
	return Rate{Pairs: pairs.Load(), Secs: time.Since(t0).Seconds(), ServerCPU: server() - s0, ClientCPU: harness.CPUTime() - c0}, err
}

// ContendedResult is what Contended measured: the rates, Jain's index,
// the acquisitions per goroutine before the stop, the violations of the
// guard in memory and the mean hold (harness.ContentionResult), and
// more.
type ContendedResult struct {
	harness.ContentionResult
	// Acquisitions counts every acquisition, those after the stop (of
	// the goroutines that were waiting then) included; Counter is a
	// shared counter that every holder incremented by a read, its hold
	// and a write: with mutual exclusion, no increment is lost and
	// Counter = Acquisitions.
	Acquisitions, Counter int64
	// Cancelled counts the goroutines whose wait was cancelled at the
	// end (still waiting Grace after the stop: pglock's waiters sleep a
	// lease between attempts).
	Cancelled int
	ServerCPU time.Duration // over the whole run, the drain included
	ClientCPU time.Duration
}

// ServerPerAcq and ClientPerAcq are CPU µs per acquisition (and its
// release), the acquisitions after the stop included.
func (r ContendedResult) ServerPerAcq() float64 {
	return float64(r.ServerCPU.Microseconds()) / float64(max(r.Acquisitions, 1))
}
func (r ContendedResult) ClientPerAcq() float64 {
	return float64(r.ClientCPU.Microseconds()) / float64(max(r.Acquisitions, 1))
}

// Grace is how long Contended lets goroutines that are waiting at the
// stop finish their acquisition before it cancels their waits.
const Grace = 2 * time.Second

// Contended runs len(lockers) × perLocker goroutines on one name for d:
// each takes the lock, holds it for hold and releases it, again and
// again. Every Locker is a client of its own (its own pool, as a process
// of its own would have); the goroutines of one Locker share it as the
// library intends. At the stop, a goroutine waiting finishes its
// acquisition (not counted in the rates), or is cancelled after Grace.
func Contended(lockers []Locker, perLocker int, name string, hold, d time.Duration, server Meter) (ContendedResult, error) {
	ws, err := harness.OpenEach(lockers, perLocker, Locker.Worker)
	if err != nil {
		return ContendedResult{}, err
	}
	defer harness.CloseAll(ws)
	ctx, cancel := context.WithTimeout(context.Background(), d+60*time.Second)
	defer cancel()
	// One untimed pair per goroutine, each on a name of its own, so that
	// the pools have opened their connections.
	if err := harness.Each(ws, func(g int, w Worker) error { return pair(ctx, w, name+"/warm/"+strconv.Itoa(g)) }); err != nil {
		return ContendedResult{}, err
	}
	var acq, counter, cancelled atomic.Int64
	s0, c0, t0 := server(), harness.CPUTime(), time.Now()
	stop := t0.Add(d)
	ct := harness.NewContention(len(ws), stop)
	lctx, lcancel := context.WithCancel(ctx)
	defer lcancel()
	timer := time.AfterFunc(d+Grace, lcancel)
	defer timer.Stop()
	err = harness.Each(ws, func(g int, w Worker) error {
		for time.Now().Before(stop) {
			unlock, err := w.Lock(lctx, name)
			if err != nil {
				if lctx.Err() != nil && time.Now().After(stop) {
					cancelled.Add(1)
					return nil
				}
				return err
			}
			t := ct.Enter(g)
			acq.Add(1)
			v := counter.Load() // read, hold, write: not atomic as a whole
			// Not time.Sleep, whose rounding up would slow the libraries
			// whose clients are idle while they wait (the server queues
			// them) more than the others.
			harness.Sleep(hold)
			counter.Store(v + 1)
			ct.Exit(t)
			if err := unlock(ctx); err != nil {
				return err
			}
		}
		return nil
	})
	return ContendedResult{
		ContentionResult: ct.Result(d),
		Acquisitions:     acq.Load(),
		Counter:          counter.Load(),
		Cancelled:        int(cancelled.Load()),
		ServerCPU:        server() - s0,
		ClientCPU:        harness.CPUTime() - c0,
	}, err
}

// HandoverResult is what Handover measured.
type HandoverResult struct {
	// Handovers are the rounds' hand-overs, from the start of the
	// holder's Unlock call to the waiter's Lock returning; a round over
	// the cap counts as the cap.
	Handovers []time.Duration
	Releases  []time.Duration // the holder's Unlock call
	Capped    int             // rounds whose waiter had not the lock Cap after the release
	Skipped   int             // rounds not run after CapLimit capped rounds
}

// CapLimit is how many rounds over the cap end a Handover run: the rest
// are skipped.
const CapLimit = 2

// Handover measures rounds hand-overs of a lock from a holder (a Worker
// of holder) to a waiter (a Worker of waiter, another client): the time
// from the start of the holder's Unlock call to the waiter's Lock
// returning. Each round the holder takes a new name, the waiter starts
// its Lock, and once the waiter waits (waiter.AwaitWaiting) the holder
// sleeps pause and releases. A waiter that has not the lock cap after the
// release is cancelled and the round counts as cap; after CapLimit such
// rounds the rest are skipped.
func Handover(holder, waiter Locker, prefix string, rounds int, pause, cap time.Duration) (HandoverResult, error) {
	var res HandoverResult
	hws, err := harness.OpenAll(1, holder.Worker)
	if err != nil {
		return res, err
	}
	defer harness.CloseAll(hws)
	wws, err := harness.OpenAll(1, waiter.Worker)
	if err != nil {
		return res, err
	}
	defer harness.CloseAll(wws)
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rounds)*(pause+cap+30*time.Second))
	defer cancel()
	// A pair each first: the connections are open.
	if err := pair(ctx, hws[0], prefix+"warm"); err != nil {
		return res, err
	}
	if err := pair(ctx, wws[0], prefix+"warm"); err != nil {
		return res, err
	}
	for i := range rounds {
		if res.Capped >= CapLimit {
			res.Skipped = rounds - i
			break
		}
		name := prefix + strconv.Itoa(i)
		unlock, err := hws[0].Lock(ctx, name)
		if err != nil {
			return res, err
		}
		waiter.ResetWaiting()
		type got struct {
			at  time.Time
			err error
		}
		done := make(chan got, 1)
		wctx, wcancel := context.WithCancel(ctx)
		go func() {
			u, err := wws[0].Lock(wctx, name)
			at := time.Now()
			if err == nil {
				err = u(ctx)
			}
			done <- got{at, err}
		}()
		actx, acancel := context.WithTimeout(ctx, 30*time.Second)
		err = waiter.AwaitWaiting(actx, name)
		acancel()
		if err != nil {
			wcancel()
			return res, err
		}
		time.Sleep(pause)
		released := time.Now()
		if err := unlock(ctx); err != nil {
			wcancel()
			return res, err
		}
		res.Releases = append(res.Releases, time.Since(released))
		var g got
		select {
		case g = <-done:
		case <-time.After(cap - time.Since(released)):
			wcancel()
			g = <-done
			if g.err != nil {
				if wctx.Err() == nil {
					return res, g.err
				}
				res.Capped++
				res.Handovers = append(res.Handovers, cap)
				continue
			}
		}
		wcancel()
		if g.err != nil {
			return res, fmt.Errorf("waiter: %w", g.err)
		}
		res.Handovers = append(res.Handovers, min(g.at.Sub(released), cap))
		if g.at.Sub(released) >= cap {
			res.Capped++
		}
	}
	return res, nil
}
