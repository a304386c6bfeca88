package etcdbench

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/distlock/distlock/bench/internal/harness"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// untilStop runs a goroutine per Worker of ws, each calling op with its
// index g, the count i of its earlier calls, and its Worker, again and
// again until stop or op's first error; it returns the first error of any.
func untilStop(ws []Worker, stop time.Time, op func(g, i int, w Worker) error) error {
	return harness.Each(ws, func(g int, w Worker) error {
		for i := 0; time.Now().Before(stop); i++ {
			if err := op(g, i, w); err != nil {
				return err
			}
		}
		return nil
	})
}

// Uncontended runs goroutines goroutines of l for d, each with a Worker of
// its own, and returns acquire+release pairs per second. With one
// goroutine every pair takes a new key (prefix + a counter); with more,
// each goroutine takes and releases a key of its own again and again.
func Uncontended(l Locker, prefix string, goroutines int, d time.Duration) (float64, error) {
	ws, err := harness.OpenAll(goroutines, l.Worker)
	if err != nil {
		return 0, err
	}
	defer harness.CloseAll(ws)
	ctx, cancel := context.WithTimeout(context.Background(), d+30*time.Second)
	defer cancel()
	var ops atomic.Int64
	start := time.Now()
	err = untilStop(ws, start.Add(d), func(g, i int, w Worker) error {
		key := prefix + strconv.Itoa(g)
		if goroutines == 1 {
			key = prefix + strconv.Itoa(i)
		}
		unlock, err := w.Lock(ctx, key)
		if err == nil {
			err = unlock(ctx)
		}
		if err == nil {
			ops.Add(1)
		}
		return err
	})
	return float64(ops.Load()) / time.Since(start).Seconds(), err
}

// ContendedResult is what Contended measured.
type ContendedResult = harness.ContentionResult

// Contended runs len(lockers) × perLocker goroutines on one key for d:
// each takes the lock, holds it for hold and releases it, again and
// again. Every Locker is a client of its own (its own connections, as a
// process of its own would have); the goroutines of one Locker share it as
// the library intends (distlock: one Client; concurrency: a Session
// each). Mutual exclusion is checked by a guard in memory.
func Contended(lockers []Locker, perLocker int, key string, hold, d time.Duration) (ContendedResult, error) {
	ws, err := harness.OpenEach(lockers, perLocker, Locker.Worker)
	if err != nil {
		return ContendedResult{}, err
	}
	defer harness.CloseAll(ws)
	ctx, cancel := context.WithTimeout(context.Background(), d+30*time.Second)
	defer cancel()
	stop := time.Now().Add(d)
	ct := harness.NewContention(len(ws), stop)
	err = untilStop(ws, stop, func(g, _ int, w Worker) error {
		unlock, err := w.Lock(ctx, key)
		if err != nil {
			return err
		}
		t0 := ct.Enter(g)
		time.Sleep(hold)
		ct.Exit(t0)
		return unlock(ctx)
	})
	return ct.Result(d), err
}

// HandoverResult is what Handover measured.
type HandoverResult struct {
	Handovers []time.Duration // start of the holder's Unlock → the waiter's Lock returned
	Releases  []time.Duration // the holder's Unlock call
	// SlowWatchers is, per round, the server's unsynced watchers
	// (etcd_debugging_mvcc_slow_watcher_total) just before the release,
	// if a probe was given.
	SlowWatchers []float64
}

// Handover measures rounds hand-overs of a lock from a holder (a Worker
// of holder) to a waiter (a Worker of waiter, another client): the time
// from the start of the holder's Unlock call to the waiter's Lock
// returning. The holder releases pause after the waiter waits: as the
// library tells (distlock's EventWaiting), or, for concurrency.Mutex,
// once the waiter's key is in the server (it then reads, and watches the
// holder's key, within a round trip or two). probe, if not nil, is read
// just before each release. Each round starts after a random sleep of up
// to jitter: a loop of rounds that start as soon as the last ended runs in
// step with the server's 100 ms watch resync (see concurrency-rev1), so
// every round of concurrency.Mutex waits about as long; jitter ≥ 100 ms
// gives each round a random phase, as independent waiters would have.
func Handover(holder, waiter Locker, prefix string, rounds int, pause, jitter time.Duration, probe func() (float64, error)) (HandoverResult, error) {
	var res HandoverResult
	hws, err := harness.OpenAll(1, holder.Worker)
	if err != nil {
		return res, err
	}
	defer hws[0].Close()
	wws, err := harness.OpenAll(1, waiter.Worker)
	if err != nil {
		return res, err
	}
	defer wws[0].Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rounds)*(pause+jitter+10*time.Second))
	defer cancel()
	for i := range rounds {
		if jitter > 0 {
			time.Sleep(rand.N(jitter))
		}
		key := prefix + strconv.Itoa(i)
		unlock, err := hws[0].Lock(ctx, key)
		if err != nil {
			return res, err
		}
		if w := waiter.Waiting(); w != nil {
			select { // a stale signal
			case <-w:
			default:
			}
		}
		type got struct {
			at  time.Time
			err error
		}
		done := make(chan got, 1)
		go func() {
			u, err := wws[0].Lock(ctx, key)
			at := time.Now()
			if err == nil {
				err = u(ctx)
			}
			done <- got{at, err}
		}()
		if err := awaitWaiting(ctx, holder.Client(), waiter, key); err != nil {
			return res, err
		}
		time.Sleep(pause)
		if probe != nil {
			v, err := probe()
			if err != nil {
				return res, err
			}
			res.SlowWatchers = append(res.SlowWatchers, v)
		}
		released := time.Now()
		if err := unlock(ctx); err != nil {
			return res, err
		}
		res.Releases = append(res.Releases, time.Since(released))
		g := <-done
		if g.err != nil {
			return res, g.err
		}
		res.Handovers = append(res.Handovers, g.at.Sub(released))
	}
	return res, nil
}

// awaitWaiting returns once the waiter waits for key: at its Waiting
// signal, or, if it has none (concurrency.Mutex), once its key under
// key+"/" is in the server (polled every millisecond).
func awaitWaiting(ctx context.Context, cli *clientv3.Client, waiter Locker, key string) error {
	if w := waiter.Waiting(); w != nil {
		select {
		case <-w:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	for {
		r, err := cli.Get(ctx, key+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			return err
		}
		if r.Count >= 2 {
			return nil
		}
		select {
		case <-time.After(time.Millisecond):
		case <-ctx.Done():
			return errors.New("the waiter never queued")
		}
	}
}

// Interleaved runs the uncontended pair (one goroutine, a new key per
// pair) on the Workers ws, one per library, in turns of block pairs until
// each has run for d: every library sees the same moments of a host
// whose speed drifts, which one library after another for d each does
// not. before and after bracket each turn of library i (for its CPU and
// request counts). It returns each library's pairs and the time its turns
// took.
func Interleaved(ws []Worker, prefixes []string, block int, d time.Duration, before, after func(i int)) ([]int, []time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*d+time.Minute)
	defer cancel()
	pairs, took := make([]int, len(ws)), make([]time.Duration, len(ws))
	order := make([]int, len(ws))
	for i := range order {
		order[i] = i
	}
	for turn := 0; ; turn++ {
		done := true
		for _, i := range harness.Rotated(order, turn) {
			if took[i] >= d {
				continue
			}
			done = false
			before(i)
			t0 := time.Now()
			for range block {
				unlock, err := ws[i].Lock(ctx, prefixes[i]+strconv.Itoa(pairs[i]))
				if err == nil {
					err = unlock(ctx)
				}
				if err != nil {
					return nil, nil, err
				}
				pairs[i]++
			}
			took[i] += time.Since(t0)
			after(i)
		}
		if done {
			return pairs, took, nil
		}
	}
}
