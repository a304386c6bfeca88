// Package harness runs the lock benchmarks of distlock and its Go peers: the
// scenarios of cmd/lockbench, the worker processes they re-execute, the
// statistics, the markdown report and the PNG chart.
package harness

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/bsm/redislock"
	"github.com/distlock/distlock"
	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidislock"
)

// LockTTL is the lease every library gets in the throughput and hand-over
// scenarios: long enough that no lease runs out during a run.
const LockTTL = 10 * time.Second

// An Unlock releases a lock obtained from a Locker.
type Unlock func(ctx context.Context) error

// A Locker is one library's client, shared by the goroutines of a process.
type Locker interface {
	// Lock blocks until it holds key, or until ctx ends.
	Lock(ctx context.Context, key string) (Unlock, error)
	Close() error
}

// Lib names the libraries; Raw is the baseline every ratio refers to.
const (
	Raw         = "raw"
	Distlock    = "distlock"
	Redsync     = "redsync"
	Redislock   = "redislock"
	Rueidislock = "rueidislock"
	// RawPubSub is a reference for scenario e only: the least a push-based
	// waiter can cost, raw go-redis with no library around it.
	RawPubSub = "rawpubsub"
)

// AllLibs lists the libraries in report order.
var AllLibs = []string{Raw, Distlock, Redsync, Redislock, Rueidislock}

// LibTitle is how a library is named in reports.
func LibTitle(lib string) string {
	switch lib {
	case Raw:
		return "raw go-redis (spin)"
	case Distlock:
		return "distlock"
	case Redsync:
		return "redsync/v4"
	case Redislock:
		return "bsm/redislock"
	case Rueidislock:
		return "rueidislock"
	case RawPubSub:
		return "raw go-redis pub/sub (reference)"
	}
	return lib
}

// Options tune a Locker beyond the common defaults.
type Options struct {
	// Hook, if set, is added to the go-redis client of the go-redis based
	// libraries (to count round trips).
	Hook redis.Hook
	// Events is passed to distlock.WithEventHandler.
	Events func(distlock.Event)
	// TTL overrides LockTTL.
	TTL time.Duration
}

// NewLocker returns a client of lib on the Redis server at addr (a
// loopback address).
func NewLocker(lib, addr string, o Options) (Locker, error) {
	ttl := o.TTL
	if ttl == 0 {
		ttl = LockTTL
	}
	newRDB := func() *redis.Client {
		rdb := redis.NewClient(&redis.Options{Addr: addr})
		if o.Hook != nil {
			rdb.AddHook(o.Hook)
		}
		return rdb
	}
	switch lib {
	case Raw:
		return &rawLocker{rdb: newRDB(), ttl: ttl}, nil
	case Distlock:
		rdb := newRDB()
		var opts []distlock.Option
		if o.Events != nil {
			opts = append(opts, distlock.WithEventHandler(o.Events))
		}
		return &distLocker{rdb: rdb, c: distlock.New(rdb, opts...), ttl: ttl}, nil
	case Redsync:
		rdb := newRDB()
		return &redsyncLocker{rdb: rdb, rs: redsync.New(goredis.NewPool(rdb)), ttl: ttl}, nil
	case Redislock:
		rdb := newRDB()
		return &redisLocker{rdb: rdb, c: redislock.New(rdb), ttl: ttl}, nil
	case RawPubSub:
		return newRawPubSub(newRDB(), ttl), nil
	case Rueidislock:
		l, err := rueidislock.NewLocker(rueidislock.LockerOption{
			ClientOption: rueidis.ClientOption{InitAddress: []string{addr}},
			KeyMajority:  1,
			KeyValidity:  ttl,
			// NoLoopTracking stays off (its default): with it on, an
			// attempt that timed out deletes its key on the locker's own
			// connection, NOLOOP suppresses that invalidation, and a
			// Lock without a deadline waited forever in one of our runs.
		})
		if err != nil {
			return nil, err
		}
		return &rueidisLocker{l: l}, nil
	}
	return nil, fmt.Errorf("unknown library %q", lib)
}

// --- raw go-redis baseline: SET NX PX, spin until it succeeds; release
// with EVALSHA compare-and-delete.

var rawRelease = redis.NewScript(`if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) end return 0`)

type rawLocker struct {
	rdb *redis.Client
	ttl time.Duration
}

func token() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func (r *rawLocker) Lock(ctx context.Context, key string) (Unlock, error) {
	tok := token()
	ms := r.ttl.Milliseconds()
	for {
		err := r.rdb.Do(ctx, "SET", key, tok, "NX", "PX", ms).Err()
		if err == nil {
			return func(ctx context.Context) error {
				return rawRelease.Run(ctx, r.rdb, []string{key}, tok).Err()
			}, nil
		}
		if !errors.Is(err, redis.Nil) {
			return nil, err
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
}

func (r *rawLocker) Close() error { return r.rdb.Close() }

// --- distlock

type distLocker struct {
	rdb *redis.Client
	c   *distlock.Client
	ttl time.Duration
}

func (d *distLocker) Lock(ctx context.Context, key string) (Unlock, error) {
	l, err := d.c.Mutex(key, distlock.WithTTL(d.ttl)).Lock(ctx)
	if err != nil {
		return nil, err
	}
	return l.Unlock, nil
}

func (d *distLocker) Close() error {
	err := d.c.Close()
	return errors.Join(err, d.rdb.Close())
}

// Client exposes the distlock client (for the scale scenario).
func (d *distLocker) Client() *distlock.Client { return d.c }

// --- go-redsync/redsync/v4, default retry delay (50-250 ms) but unlimited
// tries, so that Lock waits like the others do.

type redsyncLocker struct {
	rdb *redis.Client
	rs  *redsync.Redsync
	ttl time.Duration
}

func (r *redsyncLocker) Lock(ctx context.Context, key string) (Unlock, error) {
	m := r.rs.NewMutex(key, redsync.WithExpiry(r.ttl), redsync.WithTries(math.MaxInt32))
	if err := m.LockContext(ctx); err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		_, err := m.UnlockContext(ctx)
		return err
	}, nil
}

func (r *redsyncLocker) Close() error { return r.rdb.Close() }

// --- bsm/redislock with a 10 ms linear retry.

type redisLocker struct {
	rdb *redis.Client
	c   *redislock.Client
	ttl time.Duration
}

func (r *redisLocker) Lock(ctx context.Context, key string) (Unlock, error) {
	l, err := r.c.Obtain(ctx, key, r.ttl, &redislock.Options{RetryStrategy: redislock.LinearBackoff(10 * time.Millisecond)})
	if err != nil {
		return nil, err
	}
	return l.Release, nil
}

func (r *redisLocker) Close() error { return r.rdb.Close() }

// --- rueidislock, KeyMajority 1 (one key, as its README advises for a
// single Redis).

type rueidisLocker struct {
	l rueidislock.Locker
}

func (r *rueidisLocker) Lock(ctx context.Context, key string) (Unlock, error) {
	_, cancel, err := r.l.WithContext(ctx, key)
	if err != nil {
		return nil, err
	}
	return func(context.Context) error { cancel(); return nil }, nil
}

func (r *rueidisLocker) Close() error { r.l.Close(); return nil }

// --- raw go-redis pub/sub: the reference for push-based hand-over. SET NX
// PX; when taken, subscribe to the key's channel (one shared connection,
// kept subscribed), try again, and wait for a message (or 100 ms); the
// release script deletes the key and publishes in one step.

var rawPubRelease = redis.NewScript(`if redis.call("GET", KEYS[1]) == ARGV[1] then redis.call("DEL", KEYS[1]) redis.call("PUBLISH", ARGV[2], "1") return 1 end return 0`)

type rawPubSubLocker struct {
	rdb  *redis.Client
	ttl  time.Duration
	ps   *redis.PubSub
	mu   sync.Mutex
	subs map[string]map[chan struct{}]bool // channel -> waiters
	done chan struct{}
}

func newRawPubSub(rdb *redis.Client, ttl time.Duration) *rawPubSubLocker {
	r := &rawPubSubLocker{rdb: rdb, ttl: ttl, ps: rdb.Subscribe(context.Background()), subs: map[string]map[chan struct{}]bool{}, done: make(chan struct{})}
	go r.read()
	return r
}

func (r *rawPubSubLocker) read() {
	defer close(r.done)
	for {
		m, err := r.ps.Receive(context.Background())
		if err != nil {
			if errors.Is(err, redis.ErrClosed) {
				return
			}
			continue
		}
		if msg, ok := m.(*redis.Message); ok {
			r.mu.Lock()
			for ch := range r.subs[msg.Channel] {
				select {
				case ch <- struct{}{}:
				default:
				}
			}
			r.mu.Unlock()
		}
	}
}

func (r *rawPubSubLocker) try(ctx context.Context, key, tok string) (bool, error) {
	err := r.rdb.Do(ctx, "SET", key, tok, "NX", "PX", r.ttl.Milliseconds()).Err()
	if errors.Is(err, redis.Nil) {
		return false, nil
	}
	return err == nil, err
}

func (r *rawPubSubLocker) Lock(ctx context.Context, key string) (Unlock, error) {
	tok := token()
	channel := key + ":released"
	unlock := func(ctx context.Context) error {
		return rawPubRelease.Run(ctx, r.rdb, []string{key}, tok, channel).Err()
	}
	if ok, err := r.try(ctx, key, tok); ok || err != nil {
		return unlock, err
	}
	wake := make(chan struct{}, 1)
	r.mu.Lock()
	if r.subs[channel] == nil {
		r.subs[channel] = map[chan struct{}]bool{}
		if err := r.ps.Subscribe(ctx, channel); err != nil {
			r.mu.Unlock()
			return nil, err
		}
	}
	r.subs[channel][wake] = true
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.subs[channel], wake)
		r.mu.Unlock()
	}()
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		if ok, err := r.try(ctx, key, tok); ok || err != nil {
			return unlock, err
		}
		t.Reset(100 * time.Millisecond)
		select {
		case <-wake:
		case <-t.C:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (r *rawPubSubLocker) Close() error {
	err := r.ps.Close()
	<-r.done
	return errors.Join(err, r.rdb.Close())
}
