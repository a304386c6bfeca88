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
	DefaultPrefix         = "distlock:"
	DefaultTTL            = 30 * time.Second
	DefaultFenceRetention = time.Hour
	DefaultQueueTimeout   = 5 * time.Second
)

// An Option configures a Client.
type Option func(*clientConfig)

type clientConfig struct {
	prefix         string
	fenceRetention time.Duration
	logger         *slog.Logger
	handler        func(Event)
	replicas       int
	replicaTimeout time.Duration
	err            error
}

func (c *clientConfig) fail(err error) {
	if c.err == nil {
		c.err = err
	}
}

// WithPrefix sets the prefix of every Redis key and channel the client
// uses. The default is "distlock:". Clients that share locks must use the
// same prefix.
func WithPrefix(prefix string) Option {
	return func(c *clientConfig) {
		if err := validatePrefix(prefix); err != nil {
			c.fail(err)
		}
		c.prefix = prefix
	}
}

// WithFenceRetention sets how long a lock's fencing counter outlives the
// last acquisition of the lock (default one hour, at least one second).
// Within that time tokens increase even if the Redis server's clock steps
// back by less than it; after it, the counter key is gone and tokens rest on
// the server clock alone. See the package documentation.
func WithFenceRetention(d time.Duration) Option {
	return func(c *clientConfig) {
		if d < time.Second || d > 365*24*time.Hour {
			c.fail(fmt.Errorf("%w: fence retention %v outside [1s, 365d]", ErrInvalidOption, d))
		}
		c.fenceRetention = d
	}
}

// MaxReplicaTimeout is the longest wait WithReplicaAck accepts: WAIT must
// answer within go-redis's default read timeout (3 s).
const MaxReplicaTimeout = 2 * time.Second

// WithReplicaAck makes every acquisition, renewal and Extend, of every
// kind of lock, and the record of a Once run, count only once replicas
// replicas have acknowledged it, within timeout (Redis WAIT, sent after
// the script on the same connection, at the master of the lock's slot on
// a Cluster). An acquisition that too few replicas acknowledged is rolled
// back (released, as any acquisition whose outcome is unknown: a queued
// kind's next waiter gets the lock) and returns an error wrapping
// ErrNotReplicated; a renewal that too few acknowledged is not confirmed:
// it is retried, and if none is acknowledged before the lease's local
// deadline, the lease context ends with ErrLockLost. A Once run whose
// record too few acknowledged returns RanHere and an error wrapping
// ErrNotReplicated.
//
// A queued kind (FairMutex, RWMutex, Semaphore, Election) granted to a
// waiter by another client's release is written by that client's script:
// the waiter confirms it with a renewal of its own, which WAIT covers,
// and with the grant before it, in the master's one replication stream,
// before Lock returns (one more round trip). Places in a queue are not
// acknowledged: a failover that loses one sends its waiter to the back.
//
// What it buys: a lock that a replica had acknowledged survives that
// replica's promotion (the failover of TestFailoverReplicaAck). What it
// does not: WAIT does not make the write durable on the replica (a
// replica that restarts before it is promoted can lose it), it counts any
// replica, not the one that will be promoted (ask for all of them), and
// Redis does not roll a write back when WAIT times out: the master keeps
// the lock until the engine's release reaches it. See docs/guarantees.md.
//
// timeout is at most MaxReplicaTimeout; a lock's TTL must be at least six
// times timeout, and a queued kind's queue timeout (WithQueueTimeout)
// three times: other locks fail with ErrInvalidOption. NewRedlock refuses
// the option.
func WithReplicaAck(replicas int, timeout time.Duration) Option {
	return func(c *clientConfig) {
		if replicas < 1 || replicas > 64 {
			c.fail(fmt.Errorf("%w: replica acknowledgement by %d replicas, outside [1, 64]", ErrInvalidOption, replicas))
			return
		}
		if timeout < time.Millisecond || timeout > MaxReplicaTimeout {
			c.fail(fmt.Errorf("%w: replica acknowledgement timeout %v outside [1ms, %v]", ErrInvalidOption, timeout, MaxReplicaTimeout))
			return
		}
		c.replicas, c.replicaTimeout = replicas, timeout
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
