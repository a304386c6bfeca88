package distlock

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/distlock/distlock/internal/engine"
	"github.com/distlock/distlock/store"
)

// A Client makes locks on one store: Redis (package redisstore), or any
// other implementation of package store. It renews the leases of all the
// locks it holds in batches and shares the store's notifications among all
// of its waiters. It is safe for concurrent use; create one per process
// and Close it on shutdown.
type Client struct {
	cfg    clientConfig
	store  store.Store
	system string // what the store keeps locks in, for observers
	engine *engine.Engine
	close  sync.Once
	closed atomic.Bool

	observers observers // the goroutines of Election.Observe
}

// New returns a Client on the store s, for example
//
//	distlock.New(redisstore.New(rdb))
//
// New does not contact the store. A store serves one Client, which closes
// it when it is closed (a store does not close the connections it was
// given: the caller does, after the Client); Clients that share locks
// have stores of their own on the same servers. Invalid options, a nil store, or a store made with
// invalid settings do not panic: every operation of the Client then
// returns an error wrapping ErrInvalidOption.
func New(s store.Store, opts ...Option) *Client {
	cfg := newConfig(opts)
	if s == nil {
		cfg.fail(errNilStore)
		s = nilStore{}
	}
	if v, ok := s.(store.Validator); ok {
		if err := v.Err(); err != nil {
			cfg.fail(err)
		}
	}
	system := systemOf(s)
	return &Client{cfg: cfg, store: s, system: system, engine: engine.New(s, cfg.observer(system), holdCause)}
}

// holdCause is the cause of the lease contexts of the lock name that the
// engine ends for err.
func holdCause(name string, err error) error { return opErr("hold", name, err) }

// newConfig applies opts to the defaults.
func newConfig(opts []Option) clientConfig {
	cfg := clientConfig{logger: slog.Default()}
	for _, o := range opts {
		o(&cfg)
	}
	return cfg
}

// Close cancels the lease contexts of every lock the Client still holds
// (with ErrClosed), then releases those locks, and the locks revoked from
// it (Revoke) whose leases were not unlocked yet, ends waits with ErrClosed
// (removing their places in queues, and making the store refuse an
// acquisition of theirs still on its way), stops renewals and
// subscriptions, and waits for every request still on its way (an
// acquisition whose reply has not come is waited for, and what it took is
// released) and for background clean-ups, for five seconds at most: it
// then gives up on requests that the store has not answered, and the
// locks they may hold expire with their leases. It returns an error
// wrapping ErrBackend when it gave up on anything or a release failed;
// nil means nothing of the Client is left in the store. Requests that
// never left the client (no connection could be made) are not waited
// for. Last, it closes the store. Close is idempotent; after it, every
// operation returns ErrClosed.
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
		if berr := c.store.Close(); err == nil {
			err = berr
		}
	})
	return clientErr("close", err)
}

const closeTimeout = 5 * time.Second

// Mutex returns the named mutex. It is cheap and does not contact the store;
// Mutex values of the same name, in any process, are the same lock. An
// invalid name or option makes every method return a typed error.
func (c *Client) Mutex(name string, opts ...MutexOption) *Mutex {
	return c.mutex(name, engine.Plain, opts)
}

// FairMutex returns the named fair mutex: a Mutex whose waiters, in every
// process, are served in the order their requests reached the store. It
// is cheap and does not contact the store. A name is used either as a Mutex or as
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
	if lk.err == nil {
		lk.err = mc.err
	}
	if lk.err == nil {
		lk.err = c.validate(kind, mc.ttl, mc.queue)
	}
	return lk, engine.Spec{Name: name, Kind: kind, Lease: mc.ttl, Renew: mc.renew, Queue: mc.queue}
}

// validate returns the error of the store's Validator for a lock of kind
// with a lease of ttl and a queue timeout of queue, if the store has one.
func (c *Client) validate(kind engine.Kind, ttl, queue time.Duration) error {
	if v, ok := c.store.(store.Validator); ok {
		return v.Validate(kind, ttl, queue)
	}
	return nil
}

// Err returns, without contacting the store, the error every operation of
// c returns because an option given to New or to the store's constructor
// is invalid, or the store is nil (wrapping ErrInvalidOption), or nil.
func (c *Client) Err() error { return clientErr("", c.cfg.err) }

// List returns, sorted, the names of the locks that are held now and match
// the glob pattern ("*" for all; as Redis's SCAN MATCH reads it: *
// matches any characters, / included, ? one, [abc] one of a class, and \
// escapes the next character). The Redis store finds them with SCAN
// (never KEYS) on every master. A store that cannot list fails with
// ErrUnsupported.
func (c *Client) List(ctx context.Context, pattern string) ([]string, error) {
	if pattern == "" {
		pattern = "*"
	}
	if err := c.usable(); err != nil {
		return nil, opErr("list", pattern, err)
	}
	l, err := capability[store.Lister](c, "List")
	if err != nil {
		return nil, opErr("list", pattern, err)
	}
	names, err := l.List(ctx, pattern)
	slices.Sort(names)
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
