package distlock

import (
	"fmt"
	"log/slog"
	"time"
)

// Bounds of lease lengths.
const (
	MinTTL = 50 * time.Millisecond
	MaxTTL = 7 * 24 * time.Hour
)

// Defaults.
const (
	DefaultTTL          = 30 * time.Second
	DefaultQueueTimeout = 5 * time.Second
)

// An Option configures a Client.
type Option func(*clientConfig)

type clientConfig struct {
	logger    *slog.Logger
	handler   func(Event)
	observers []Observer
	err       error
}

func (c *clientConfig) fail(err error) {
	if c.err == nil {
		c.err = err
	}
}

// WithLogger sets where the built-in event log goes: lost locks and failed
// renewals at Warn, everything else at Debug. The default is slog.Default();
// nil turns logging off. Owner ids are never logged.
func WithLogger(l *slog.Logger) Option {
	return func(c *clientConfig) { c.logger = l }
}

// WithEventHandler calls fn for every event (acquire, wait, renew, renew
// failure, loss, release, a failed Observe watch), for metrics or tracing.
// fn runs synchronously on the engine's goroutines, and on Observe's, and
// must not block.
func WithEventHandler(fn func(Event)) Option {
	return func(c *clientConfig) { c.handler = fn }
}

// A MutexOption configures a Mutex.
type MutexOption func(*mutexConfig)

type mutexConfig struct {
	ttl   time.Duration
	renew bool
	queue time.Duration
	err   error

	recordFailures bool // WithFailuresRecorded: for Once and OncePer
}

// applied returns mc with opts applied.
func applied(mc mutexConfig, opts []MutexOption) mutexConfig {
	for _, o := range opts {
		o(&mc)
	}
	return mc
}

// WithTTL sets the lease length (default 30 s, between MinTTL and MaxTTL).
// While the lock is held, the watchdog renews the lease every TTL/6 to TTL/3;
// if the holder dies, the lock is free at most TTL later.
func WithTTL(d time.Duration) MutexOption {
	return func(m *mutexConfig) {
		m.ttl, m.renew = d, true
		m.check(d)
	}
}

// WithFixedLease sets a lease of d that is never renewed (Redisson's
// leaseTime): the lock is released after d at the latest, and the lease
// context is cancelled shortly before, with ErrLeaseExpired (logged at
// Debug: it is the expiry asked for, not a loss); the context's Deadline
// is that instant. Lease.Extend can still lengthen it.
func WithFixedLease(d time.Duration) MutexOption {
	return func(m *mutexConfig) {
		m.ttl, m.renew = d, false
		m.check(d)
	}
}

// WithQueueTimeout sets how long a waiter of a queued kind keeps its
// place in the queue without refreshing it (default 5 s, between 100 ms
// and 1 h). A waiter refreshes its place every third of the queue timeout
// or of the TTL, whichever is shorter. A waiter that died, was paused or
// was cut off loses its place that long after its last refresh, and the
// next in line is served; if it had been granted the lock meanwhile, the
// lock is free again by then too (a granted lock expires when the
// grantee's place would have, until the grantee renews it). A shorter
// timeout skips dead waiters sooner and costs more refreshes. Mutex and
// MultiMutex ignore it; the queued kinds (FairMutex, RWMutex, Semaphore,
// Election) use it.
func WithQueueTimeout(d time.Duration) MutexOption {
	return func(m *mutexConfig) {
		m.queue = d
		if (d < 100*time.Millisecond || d > time.Hour) && m.err == nil {
			m.err = fmt.Errorf("%w: queue timeout %v outside [100ms, 1h]", ErrInvalidOption, d)
		}
	}
}

func (m *mutexConfig) check(d time.Duration) {
	if err := checkTTL(d); err != nil && m.err == nil {
		m.err = err
	}
}

func checkTTL(d time.Duration) error {
	if d < MinTTL || d > MaxTTL {
		return fmt.Errorf("%w: lease %v outside [%v, %v]", ErrInvalidOption, d, MinTTL, MaxTTL)
	}
	return nil
}
