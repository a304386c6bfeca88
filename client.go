package distlock

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/distlock/distlock/internal/engine"
	"github.com/distlock/distlock/internal/redisbackend"
	"github.com/distlock/distlock/internal/redlock"
	"github.com/redis/go-redis/v9"
)

// A Client makes locks on one Redis deployment (New), or on a quorum of
// independent Redis masters (NewRedlock). It renews the leases of all the
// locks it holds in batches and shares one subscription among all of its
// waiters. It is safe for concurrent use; create one per process and Close
// it on shutdown.
type Client struct {
	cfg     clientConfig
	backend store
	redlock bool
	engine  *engine.Engine
	close   sync.Once
	closed  atomic.Bool

	observers observers // the goroutines of Election.Observe
}

// New returns a Client on rdb, which may be a standalone, Sentinel
// (failover) or Cluster go-redis client; the caller keeps ownership of rdb
// and closes it after the Client. New does not contact Redis. Invalid
// options do not panic: every operation of the Client then returns an
// error wrapping ErrInvalidOption.
func New(rdb redis.UniversalClient, opts ...Option) *Client {
	cfg := newConfig(opts)
	if rdb == nil {
		cfg.fail(fmt.Errorf("%w: nil Redis client", ErrInvalidOption))
	}
	b := redisbackend.New(rdb, cfg.backendConfig())
	return &Client{cfg: cfg, backend: b, engine: engine.New(b, cfg.observer(), holdCause)}
}

// NewRedlock returns a Client whose locks are held on a majority of the
// independent Redis masters rdbs, with the Redlock algorithm: an odd
// number of standalone (or Sentinel) clients, at least 3, one per master.
// It refuses fewer, an even number, or one master twice, with
// ErrInvalidOption. The caller keeps ownership of the clients.
//
// Mutex, MultiMutex, Inspect, ForceUnlock and List work as on a Client of
// New; a lock is held once a quorum of masters took it within its lease,
// renewed while a quorum confirms, and its fencing token increases per
// name across holders. The kinds whose state a quorum cannot keep in one
// order (FairMutex, RWMutex, Semaphore, Election, Once) fail with
// ErrUnsupported. WithReplicaAck is refused. See "Redlock" in the package
// documentation for what it guarantees, and on what.
func NewRedlock(rdbs []redis.UniversalClient, opts ...Option) *Client {
	cfg := newConfig(opts)
	if cfg.replicas > 0 {
		cfg.fail(fmt.Errorf("%w: replica acknowledgement with Redlock: each master stands alone, the quorum is what replicates", ErrInvalidOption))
	}
	b, err := redlock.New(rdbs, cfg.backendConfig())
	if err != nil {
		cfg.fail(err)
	}
	return &Client{cfg: cfg, backend: b, redlock: true, engine: engine.New(b, cfg.observer(), holdCause)}
}

// holdCause is the cause of the lease contexts of the lock name that the
// engine ends for err.
func holdCause(name string, err error) error { return opErr("hold", name, err) }

// newConfig applies opts to the defaults.
func newConfig(opts []Option) clientConfig {
	cfg := clientConfig{prefix: DefaultPrefix, fenceRetention: DefaultFenceRetention, logger: slog.Default()}
	for _, o := range opts {
		o(&cfg)
	}
	return cfg
}

// backendConfig configures a Redis backend after c.
func (c *clientConfig) backendConfig() redisbackend.Config {
	host, _ := os.Hostname()
	return redisbackend.Config{
		Keys:           redisbackend.Keys{Prefix: c.prefix},
		FenceRetention: c.fenceRetention,
		Host:           host,
		PID:            os.Getpid(),
		Replicas:       c.replicas,
		ReplicaTimeout: c.replicaTimeout,
	}
}

// Close cancels the lease contexts of every lock the Client still holds
// (with ErrClosed), then releases those locks, and the locks revoked from
// it (Revoke) whose leases were not unlocked yet, ends waits with ErrClosed
// (removing their places in queues, and making Redis refuse an
// acquisition of theirs still on its way), stops renewals and
// subscriptions, and waits for every request still on its way (an
// acquisition whose reply has not come is waited for, and what it took is
// released) and for background clean-ups, for five seconds at most: it
// then gives up on requests that Redis has not answered, and the locks
// they may hold expire with their leases. It returns an error wrapping
// ErrBackend when it gave up on anything or a release failed; nil means
// nothing of the Client is left in Redis. Requests that never left the
// client (go-redis could not connect) are not waited for. Close is
// idempotent; after it, every operation returns ErrClosed.
//
// The channels of Election.Observe are closed, and their goroutines gone,
// before Close returns.
func (c *Client) Close() error {
	var err error
	c.close.Do(func() {
		c.closed.Store(true)
		ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
		defer cancel()
		err = c.observers.close(ctx)
		if eerr := c.engine.Close(ctx); err == nil {
			err = eerr
		}
		if berr := c.backend.Close(); err == nil {
			err = berr
		}
	})
	return clientErr("close", err)
}

const closeTimeout = 5 * time.Second

// Mutex returns the named mutex. It is cheap and does not contact Redis;
// Mutex values of the same name, in any process, are the same lock. An
// invalid name or option makes every method return a typed error.
func (c *Client) Mutex(name string, opts ...MutexOption) *Mutex {
	return c.mutex(name, engine.Plain, opts)
}

// FairMutex returns the named fair mutex: a Mutex whose waiters, in every
// process, are served in the order their requests reached Redis. It is
// cheap and does not contact Redis. A name is used either as a Mutex or as
// a FairMutex: acquiring it as the other kind while it is in use fails
// with ErrWrongKind. See "Fair mutex" in the package documentation.
func (c *Client) FairMutex(name string, opts ...MutexOption) *Mutex {
	return c.mutex(name, engine.Fair, opts)
}

func (c *Client) mutex(name string, kind engine.Kind, opts []MutexOption) *Mutex {
	lk, spec := c.lock(name, kind, opts)
	return &Mutex{lock: lk, spec: spec}
}

// lock returns what every lock named name has, and the Spec of its kind
// under opts.
func (c *Client) lock(name string, kind engine.Kind, opts []MutexOption) (lock, engine.Spec) {
	mc := mutexConfig{ttl: DefaultTTL, renew: true, queue: DefaultQueueTimeout}
	if len(opts) > 0 {
		mc = applied(mc, opts) // in a call of its own: without options, mc stays on the stack
	}
	lk := lock{c: c, name: name, err: c.cfg.err}
	if lk.err == nil {
		lk.err = validateName(name)
	}
	if lk.err == nil && c.redlock && kind != engine.Plain {
		lk.err = redlock.Unsupported(kind)
	}
	if lk.err == nil {
		lk.err = mc.err
	}
	if lk.err == nil && c.cfg.replicas > 0 {
		short := c.shortLease(mc.ttl)
		switch {
		case short != nil:
			lk.err = short
		case kind.Queued() && mc.queue < 3*c.cfg.replicaTimeout:
			// A grant's first lease is the shorter of the lease and the
			// queue timeout, and its confirmation must be answered
			// within it.
			lk.err = fmt.Errorf("%w: a queue timeout of %v is shorter than three times the replica acknowledgement timeout %v", ErrInvalidOption, mc.queue, c.cfg.replicaTimeout)
		}
	}
	return lk, engine.Spec{Name: name, Kind: kind, Lease: mc.ttl, Renew: mc.renew, Queue: mc.queue}
}

// shortLease returns an error wrapping ErrInvalidOption if a lease of ttl
// is too short for c's replica acknowledgement: every lease, acquired or
// set by Extend, must be at least six times its timeout, so that a
// renewal that waits for the replicas is answered well within the lease.
func (c *Client) shortLease(ttl time.Duration) error {
	if c.cfg.replicas > 0 && ttl < 6*c.cfg.replicaTimeout {
		return fmt.Errorf("%w: a lease of %v is shorter than six times the replica acknowledgement timeout %v", ErrInvalidOption, ttl, c.cfg.replicaTimeout)
	}
	return nil
}

// Err returns, without contacting Redis, the error every operation of c
// returns because an option given to New is invalid (wrapping
// ErrInvalidOption), or nil.
func (c *Client) Err() error { return clientErr("", c.cfg.err) }

// List returns, sorted, the names of the locks that are held now and match
// the glob pattern ("*" for all), using SCAN (never KEYS) on every master.
func (c *Client) List(ctx context.Context, pattern string) ([]string, error) {
	if pattern == "" {
		pattern = "*"
	}
	if err := c.usable(); err != nil {
		return nil, opErr("list", pattern, err)
	}
	names, err := c.backend.List(ctx, pattern)
	return names, opErr("list", pattern, err)
}

// usable returns the error that operations of c fail with before any I/O:
// invalid options, or Close.
func (c *Client) usable() error {
	if c.cfg.err != nil {
		return c.cfg.err
	}
	if c.closed.Load() {
		return ErrClosed
	}
	return nil
}
