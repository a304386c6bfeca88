package sqlbench

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/distlock/distlock/bench/internal/harness"
)

// A Meter reads a server's CPU time so far (Servers.CPU of a library).
type Meter func() time.Duration

// workers makes n Workers of l; the caller closes them.
func workers(l Locker, n int) ([]Worker, error) {
	var ws []Worker
	for range n {
		w, err := l.Worker()
		if err != nil {
			closeWorkers(ws)
			return nil, err
		}
		ws = append(ws, w)
	}
	return ws, nil
}

func closeWorkers(ws []Worker) {
	for _, w := range ws {
		_ = w.Close()
	}
}

// each runs f for every Worker of ws in a goroutine of its own and
// returns the first error.
func each(ws []Worker, f func(g int, w Worker) error) error {
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	for g, w := range ws {
		wg.Go(func() {
			if err := f(g, w); err != nil {
				once.Do(func() { firstErr = err })
			}
		})
	}
	wg.Wait()
	return firstErr
}

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
	ws, err := workers(l, goroutines)
	if err != nil {
		return Rate{}, err
	}
	defer closeWorkers(ws)
	ctx, cancel := context.WithTimeout(context.Background(), d+60*time.Second)
	defer cancel()
	name := func(g int) string { return prefix + strconv.Itoa(g) }
	if err := each(ws, func(g int, w Worker) error { return pair(ctx, w, name(g)) }); err != nil {
		return Rate{}, err
	}
	var pairs atomic.Int64
	s0, c0, t0 := server(), harness.CPUTime(), time.Now()
	stop := t0.Add(d)
	err = each(ws, func(g int, w Worker) error {
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

// ContendedResult is what Contended measured.
type ContendedResult struct {
	AcqPerS     float64 // acquisitions per second before the stop
	ChangesPerS float64 // owner changes per second (an acquisition by another goroutine than the previous holder)
	Jain        float64 // Jain's index over the acquisitions per goroutine before the stop
	Counts      []int64 // acquisitions per goroutine before the stop
	// Violations counts the holders that entered the critical section
	// while another was inside (a guard in memory).
	Violations int64
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
	HoldMean  time.Duration
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
	var ws []Worker
	defer func() { closeWorkers(ws) }()
	for _, l := range lockers {
		lws, err := workers(l, perLocker)
		if err != nil {
			return ContendedResult{}, err
		}
		ws = append(ws, lws...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), d+60*time.Second)
	defer cancel()
	// One untimed pair per goroutine, each on a name of its own, so that
	// the pools have opened their connections.
	if err := each(ws, func(g int, w Worker) error { return pair(ctx, w, name+"/warm/"+strconv.Itoa(g)) }); err != nil {
		return ContendedResult{}, err
	}
	counts := make([]int64, len(ws))
	var inside, viol, changes, held, heldFor, acq, counter atomic.Int64
	var cancelled atomic.Int64
	last := -1
	var lastMu sync.Mutex
	s0, c0, t0 := server(), harness.CPUTime(), time.Now()
	stop := t0.Add(d)
	lctx, lcancel := context.WithCancel(ctx)
	defer lcancel()
	timer := time.AfterFunc(d+Grace, lcancel)
	defer timer.Stop()
	err := each(ws, func(g int, w Worker) error {
		for time.Now().Before(stop) {
			unlock, err := w.Lock(lctx, name)
			if err != nil {
				if lctx.Err() != nil && time.Now().After(stop) {
					cancelled.Add(1)
					return nil
				}
				return err
			}
			if !inside.CompareAndSwap(0, 1) {
				viol.Add(1)
				inside.Add(1)
			}
			t := time.Now()
			acq.Add(1)
			if t.Before(stop) {
				counts[g]++
				lastMu.Lock()
				if last != g {
					changes.Add(1)
					last = g
				}
				lastMu.Unlock()
			}
			v := counter.Load() // read, hold, write: not atomic as a whole
			sleep(hold)
			counter.Store(v + 1)
			heldFor.Add(int64(time.Since(t)))
			held.Add(1)
			inside.Add(-1)
			if err := unlock(ctx); err != nil {
				return err
			}
		}
		return nil
	})
	r := ContendedResult{
		AcqPerS:      float64(harness.Sum(counts)) / d.Seconds(),
		ChangesPerS:  float64(changes.Load()) / d.Seconds(),
		Jain:         harness.Jain(counts),
		Counts:       counts,
		Violations:   viol.Load(),
		Acquisitions: acq.Load(),
		Counter:      counter.Load(),
		Cancelled:    int(cancelled.Load()),
		ServerCPU:    server() - s0,
		ClientCPU:    harness.CPUTime() - c0,
	}
	if n := held.Load(); n > 0 {
		r.HoldMean = time.Duration(heldFor.Load() / n)
	}
	return r, err
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
	hws, err := workers(holder, 1)
	if err != nil {
		return res, err
	}
	defer closeWorkers(hws)
	wws, err := workers(waiter, 1)
	if err != nil {
		return res, err
	}
	defer closeWorkers(wws)
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

// sleep blocks the thread for d with nanosleep (as lockbench's hold):
// time.Sleep rounds short sleeps up to about a millisecond on Linux when
// the process has nothing else to do (the network poller waits in whole
// milliseconds), which would slow the libraries whose clients are idle
// while they wait (the server queues them) more than the others.
func sleep(d time.Duration) {
	if d <= 0 {
		return
	}
	ts := syscall.NsecToTimespec(int64(d))
	for syscall.Nanosleep(&ts, &ts) == syscall.EINTR {
	}
}
