// Package quorumbench compares Redlock implementations over the same
// independent Redis masters, in one run: distlock's NewRedlock and
// redsync's Redlock. It measures uncontended acquire+release (one
// goroutine on a new key each time, and many goroutines on keys of their
// own) and the hand-over to a waiter.
package quorumbench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/redisstore"
	"github.com/distlock/distlock/rueidisstore"
	"github.com/distlock/distlock/store"
	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
)

// The libraries.
const (
	Distlock = "distlock"
	// DistlockRueidis is rueidisstore.NewRedlock: distlock's Redlock over
	// rueidis clients.
	DistlockRueidis = "distlock-rueidis"
	Redsync         = "redsync"
)

// Libs are the libraries compared, in report order.
var Libs = []string{Distlock, DistlockRueidis, Redsync}

// TTL is the lease of every lock.
const TTL = 10 * time.Second

// A Locker takes a lock over the masters and returns its release.
type Locker interface {
	Lock(ctx context.Context, key string) (unlock func(context.Context) error, err error)
	// Waiting reports when a Lock call of this Locker found the lock
	// taken and waits (nil if the library does not say).
	Waiting() <-chan struct{}
	Close() error
}

// New returns a Locker of lib over the masters at addrs, with go-redis
// clients of its own.
func New(lib string, addrs []string) (Locker, error) {
	var rdbs []*redis.Client
	for _, a := range addrs {
		rdbs = append(rdbs, redis.NewClient(&redis.Options{Addr: a}))
	}
	closeAll := func() error {
		var errs []error
		for _, r := range rdbs {
			errs = append(errs, r.Close())
		}
		return errors.Join(errs...)
	}
	switch lib {
	case Distlock:
		var u []redis.UniversalClient
		for _, r := range rdbs {
			u = append(u, r)
		}
		return newDistLocker(redisstore.NewRedlock(u), closeAll)
	case DistlockRueidis:
		var clients []rueidis.Client
		closeRueidis := func() error {
			for _, c := range clients {
				c.Close()
			}
			return closeAll()
		}
		for _, a := range addrs {
			c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{a}})
			if err != nil {
				_ = closeRueidis()
				return nil, err
			}
			clients = append(clients, c)
		}
		return newDistLocker(rueidisstore.NewRedlock(clients), closeRueidis)
	case Redsync:
		var pools []redsyncredis.Pool
		for _, r := range rdbs {
			pools = append(pools, goredis.NewPool(r))
		}
		return &redsyncLocker{rs: redsync.New(pools...), close: closeAll}, nil
	}
	return nil, fmt.Errorf("unknown library %q (want %v)", lib, Libs)
}

// newDistLocker returns a Locker of distlock on s; closeClients closes
// the clients under s.
func newDistLocker(s store.Store, closeClients func() error) (Locker, error) {
	waiting := make(chan struct{}, 1)
	c := distlock.New(s, distlock.WithLogger(nil), distlock.WithEventHandler(func(e distlock.Event) {
		if e.Kind == distlock.EventWaiting {
			select {
			case waiting <- struct{}{}:
			default:
			}
		}
	}))
	if err := c.Err(); err != nil {
		return nil, errors.Join(err, closeClients())
	}
	return &distLocker{c: c, waiting: waiting, close: closeClients}, nil
}

type distLocker struct {
	c       *distlock.Client
	waiting chan struct{}
	close   func() error
}

func (d *distLocker) Lock(ctx context.Context, key string) (func(context.Context) error, error) {
	l, err := d.c.Mutex(key, distlock.WithTTL(TTL)).Lock(ctx)
	if err != nil {
		return nil, err
	}
	return l.Unlock, nil
}

func (d *distLocker) Waiting() <-chan struct{} { return d.waiting }

func (d *distLocker) Close() error { return errors.Join(d.c.Close(), d.close()) }

// redsync with its defaults (retry delay 50-250 ms, drift factor 0.01,
// timeout factor 0.05) but unlimited tries, so that Lock waits as
// distlock's does.
type redsyncLocker struct {
	rs    *redsync.Redsync
	close func() error
}

func (r *redsyncLocker) Lock(ctx context.Context, key string) (func(context.Context) error, error) {
	m := r.rs.NewMutex(key, redsync.WithExpiry(TTL), redsync.WithTries(math.MaxInt32))
	if err := m.LockContext(ctx); err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		_, err := m.UnlockContext(ctx)
		return err
	}, nil
}

func (r *redsyncLocker) Waiting() <-chan struct{} { return nil }

func (r *redsyncLocker) Close() error { return r.close() }

// Uncontended runs goroutines goroutines for d, each taking and releasing
// keys of its own (a new key each time), and returns acquire+release pairs
// per second.
func Uncontended(l Locker, goroutines int, d time.Duration) (float64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d+30*time.Second)
	defer cancel()
	var ops atomic.Int64
	var firstErr error
	var once sync.Once
	stop := time.Now().Add(d)
	var wg sync.WaitGroup
	start := time.Now()
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; time.Now().Before(stop); i++ {
				unlock, err := l.Lock(ctx, "u:"+strconv.Itoa(g)+":"+strconv.Itoa(i))
				if err == nil {
					err = unlock(ctx)
				}
				if err != nil {
					once.Do(func() { firstErr = err })
					return
				}
				ops.Add(1)
			}
		}()
	}
	wg.Wait()
	return float64(ops.Load()) / time.Since(start).Seconds(), firstErr
}

// Handover measures rounds hand-overs from a holder (holder) to a waiter
// (waiter, another Locker: other connections, another client): the time
// from the start of the holder's release call to the waiter's Lock
// returning. The holder releases once the waiter waits (as the library
// tells, or after pause), and pause later.
func Handover(holder, waiter Locker, rounds int, pause time.Duration) ([]time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rounds)*(TTL+time.Second))
	defer cancel()
	var out []time.Duration
	for i := range rounds {
		key := "h:" + strconv.Itoa(i)
		unlock, err := holder.Lock(ctx, key)
		if err != nil {
			return out, err
		}
		type got struct {
			at  time.Time
			err error
		}
		done := make(chan got, 1)
		go func() {
			u, err := waiter.Lock(ctx, key)
			at := time.Now()
			if err == nil {
				err = u(ctx)
			}
			done <- got{at, err}
		}()
		if w := waiter.Waiting(); w != nil {
			select {
			case <-w:
			case <-ctx.Done():
				return out, ctx.Err()
			}
		}
		time.Sleep(pause) // the waiter is asleep in its wait, as a real one would be
		released := time.Now()
		if err := unlock(ctx); err != nil {
			return out, err
		}
		g := <-done
		if g.err != nil {
			return out, g.err
		}
		out = append(out, g.at.Sub(released))
	}
	return out, nil
}

// Percentile returns the p-th percentile (0-100) of ds.
func Percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[max(i, 0)]
}

// Median returns the median of xs.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
