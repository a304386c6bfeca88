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
	"slices"
	"sync"
	"time"

	"github.com/bsm/redislock"
	"github.com/distlock/distlock"
	"github.com/distlock/distlock/redisstore"
	"github.com/distlock/distlock/rueidisstore"
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
	Raw      = "raw"
	Distlock = "distlock"
	// DistlockFair is distlock's FairMutex: waiters queue in Redis and the
	// release grants the lock to the first of them.
	DistlockFair = "distlock-fair"
	// DistlockRueidis is distlock's Mutex on rueidisstore: through a
	// rueidis client instead of go-redis.
	DistlockRueidis = "distlock-rueidis"
	Redsync         = "redsync"
	Redislock       = "redislock"
	Rueidislock     = "rueidislock"
	// RawPubSub is a reference for scenario e only: the least a push-based
	// waiter can cost, raw go-redis with no library around it.
	RawPubSub = "rawpubsub"
	// DistlockRWRead and DistlockRWWrite are the two sides of distlock's
	// RWMutex, RLock and Lock, as libraries of their own (scenario g and
	// the go test benchmarks of uncontended acquire+release).
	DistlockRWRead  = "distlock-rw-read"
	DistlockRWWrite = "distlock-rw-write"
	// DistlockRW is distlock's RWMutex in scenario h: the readers take its
	// read side (RLock), the writer its write side (Lock).
	DistlockRW = "distlock-rw"
	// DistlockSem is distlock's Semaphore: each Lock is Acquire of one
	// permit (Options.Permits of them, DefaultPermits if 0), its Unlock
	// returns it (scenarios i, j, k).
	DistlockSem = "distlock-sem"
	// RawSem is the baseline of the semaphore's scenarios: a naive
	// counting semaphore on raw go-redis, a counter of the permits in use
	// with no owner and no lease (as Redisson's RSemaphore), whose
	// attempts spin as the raw mutex baseline's do.
	RawSem = "raw-sem"
)

// DefaultPermits is the capacity of the semaphores of scenarios i, j and k.
const DefaultPermits = 8

// AllLibs lists the libraries in report order.
var AllLibs = []string{Raw, Distlock, DistlockRueidis, DistlockFair, Redsync, Redislock, Rueidislock}

// RateLibs are the libraries of scenario g: the baseline, distlock's
// Mutex and FairMutex, and the two sides of its RWMutex. None of the peers
// has a read-write lock (redsync/v4, bsm/redislock and rueidislock offer
// exclusive locks only).
var RateLibs = []string{Raw, Distlock, DistlockFair, DistlockRWRead, DistlockRWWrite}

// StreamLibs are the locks of scenario h: the RWMutex, and distlock's
// Mutex and FairMutex taken by readers and writer alike.
var StreamLibs = []string{DistlockRW, Distlock, DistlockFair}

// SemRateLibs are the libraries of scenario i: the mutex baseline,
// distlock's Mutex and FairMutex, the naive counting semaphore and
// distlock's Semaphore. None of the peers has a semaphore (redsync/v4,
// bsm/redislock and rueidislock offer exclusive locks only).
var SemRateLibs = []string{Raw, Distlock, DistlockFair, RawSem, DistlockSem}

// SemLibs are the semaphores of scenarios j and k; RawSem is their
// baseline.
var SemLibs = []string{RawSem, DistlockSem}

// LibTitle is how a library is named in reports.
func LibTitle(lib string) string {
	switch lib {
	case Raw:
		return "raw go-redis (spin)"
	case Distlock:
		return "distlock"
	case DistlockFair:
		return "distlock FairMutex"
	case DistlockRueidis:
		return "distlock on rueidis"
	case Redsync:
		return "redsync/v4"
	case Redislock:
		return "bsm/redislock"
	case Rueidislock:
		return "rueidislock"
	case RawPubSub:
		return "raw go-redis pub/sub (reference)"
	case DistlockRWRead:
		return "distlock RWMutex RLock"
	case DistlockRWWrite:
		return "distlock RWMutex Lock"
	case DistlockRW:
		return "distlock RWMutex"
	case DistlockSem:
		return "distlock Semaphore"
	case RawSem:
		return "raw go-redis counting semaphore (spin)"
	case DistlockProm:
		return "distlock + Prometheus"
	case DistlockOtel:
		return "distlock + OpenTelemetry"
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
	// Permits is the capacity of a semaphore (DistlockSem, RawSem);
	// DefaultPermits if 0. Each Lock takes one permit.
	Permits int
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
	permits := o.Permits
	if permits == 0 {
		permits = DefaultPermits
	}
	switch lib {
	case Raw:
		return &rawLocker{rdb: newRDB(), ttl: ttl}, nil
	case RawSem:
		return &rawSemLocker{rdb: newRDB(), permits: permits}, nil
	case Distlock, DistlockFair, DistlockRWRead, DistlockRWWrite, DistlockSem, DistlockProm, DistlockOtel:
		var opts []distlock.Option
		if o.Events != nil {
			opts = append(opts, distlock.WithEventHandler(o.Events))
		}
		var obs *observation
		if slices.Contains(ObservedLibs, lib) {
			var err error
			if obs, err = newObservation(lib); err != nil {
				return nil, err
			}
			opts = append(opts, distlock.WithObserver(obs.obs))
		}
		rdb := newRDB()
		return &distLocker{closeClient: rdb.Close, c: distlock.New(redisstore.New(rdb), opts...), ttl: ttl, kind: lib, permits: permits,
			obs: obs}, nil
	case DistlockRueidis:
		var opts []distlock.Option
		if o.Events != nil {
			opts = append(opts, distlock.WithEventHandler(o.Events))
		}
		client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}})
		if err != nil {
			return nil, err
		}
		closeClient := func() error { client.Close(); return nil }
		return &distLocker{closeClient: closeClient, c: distlock.New(rueidisstore.New(client), opts...), ttl: ttl, kind: lib}, nil
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

// --- raw go-redis counting semaphore, the naive kind (Redisson's
// RSemaphore is one): a counter of the permits in use. An attempt is one
// EVALSHA that adds the permit (INCRBY) and takes it back at once
// (DECRBY) if that went over the capacity, so the counter never shows a
// permit that is not held; it is retried at once until it succeeds
// (spinning, as the raw mutex baseline does). Release is DECRBY. There is
// no owner and no lease: a holder that dies keeps its permit forever (the
// semaphore shrinks by one), an Unlock called twice returns two permits,
// and waiters have no order.

var rawSemAcquire = redis.NewScript(`local v = redis.call("INCRBY", KEYS[1], ARGV[1]) if v > tonumber(ARGV[2]) then redis.call("DECRBY", KEYS[1], ARGV[1]) return 0 end return 1`)

type rawSemLocker struct {
	rdb     *redis.Client
	permits int
}

func (r *rawSemLocker) Lock(ctx context.Context, key string) (Unlock, error) {
	for {
		ok, err := rawSemAcquire.Run(ctx, r.rdb, []string{key}, 1, r.permits).Int()
		if err != nil {
			return nil, err
		}
		if ok == 1 {
			return func(ctx context.Context) error { return r.rdb.DecrBy(ctx, key, 1).Err() }, nil
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
}

func (r *rawSemLocker) Close() error { return r.rdb.Close() }

// --- distlock: Client.Mutex, Client.FairMutex (default queue timeout,
// 5 s: a grant sets a lease of min(TTL, queue timeout) and the grantee's
// watchdog renews it to the full TTL at its first tick), or one side of
// Client.RWMutex (same queue and options as the FairMutex), or one permit
// of Client.Semaphore (same options; a key is a semaphore's name); the
// observed libraries are the Mutex with an observer (observed.go).

type distLocker struct {
	closeClient func() error // closes the Redis client under c
	c           *distlock.Client
	ttl         time.Duration
	kind        string       // Distlock (also the zero value), DistlockRueidis, DistlockFair, DistlockRWRead, DistlockRWWrite, DistlockSem, DistlockProm, DistlockOtel
	permits     int          // the Semaphore's capacity
	obs         *observation // DistlockProm, DistlockOtel: the observer installed
}

func (d *distLocker) Lock(ctx context.Context, key string) (Unlock, error) {
	var l *distlock.Lease
	var err error
	switch d.kind {
	case DistlockFair:
		l, err = d.c.FairMutex(key, distlock.WithTTL(d.ttl)).Lock(ctx)
	case DistlockRWRead:
		l, err = d.c.RWMutex(key, distlock.WithTTL(d.ttl)).RLock(ctx)
	case DistlockRWWrite:
		l, err = d.c.RWMutex(key, distlock.WithTTL(d.ttl)).Lock(ctx)
	case DistlockSem:
		l, err = d.c.Semaphore(key, d.permits, distlock.WithTTL(d.ttl)).Acquire(ctx, 1)
	default: // Distlock, DistlockRueidis, DistlockProm, DistlockOtel
		l, err = d.c.Mutex(key, distlock.WithTTL(d.ttl)).Lock(ctx)
	}
	if err != nil {
		return nil, err
	}
	return l.Unlock, nil
}

func (d *distLocker) Close() error {
	err := d.c.Close() // ends the holds, which the observer sees
	if d.obs != nil {
		err = errors.Join(err, d.obs.close())
	}
	return errors.Join(err, d.closeClient())
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
