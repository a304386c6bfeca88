// Package redisstore keeps distlock's locks in Redis: one deployment
// (standalone, Sentinel or Cluster) with New, or a quorum of independent
// masters (Redlock) with NewRedlock.
//
//	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
//	c := distlock.New(redisstore.New(rdb))
//	defer c.Close()
//
// A store does not contact Redis until it is used, and never closes the
// go-redis clients it is given: close them after the Client. A store
// serves one Client. Redis 6.2 or later is required (older servers fail
// with an error wrapping store.ErrUnsupported, distlock.ErrUnsupported).
package redisstore

import (
	"fmt"
	"time"

	"github.com/distlock/distlock/internal/redisbackend"
	"github.com/distlock/distlock/internal/redisopt"
	"github.com/distlock/distlock/internal/redlock"
	"github.com/distlock/distlock/store"
	"github.com/redis/go-redis/v9"
)

// Defaults.
const (
	DefaultPrefix         = redisopt.DefaultPrefix
	DefaultFenceRetention = redisopt.DefaultFenceRetention
)

// New returns a store on rdb, which may be a standalone, Sentinel
// (failover) or Cluster go-redis client. It serves every kind of lock and
// every operation of distlock: it implements every optional interface of
// package store (Validator, Inspector, Lister, ForceUnlocker, Revoker,
// RevokeWatcher, OnceKeeper, PermitSetter, LeaderWatcher, GrantConfirmer). Invalid options or a nil rdb do not panic:
// every operation of a Client on the store then returns an error wrapping
// store.ErrInvalidOption (distlock.ErrInvalidOption).
func New(rdb redis.UniversalClient, opts ...Option) store.Store {
	o := redisopt.Apply(opts)
	if rdb == nil {
		o.Fail(fmt.Errorf("%w: nil Redis client", store.ErrInvalidOption))
	}
	if o.Err != nil {
		return redisopt.Invalid(o.Err)
	}
	return redisbackend.New(redisbackend.GoRedis(rdb), o.Backend())
}

// NewRedlock returns a store whose locks are held on a majority of the
// independent Redis masters rdbs, with the Redlock algorithm: an odd
// number of standalone (or Sentinel) clients, at least 3, one per master.
// It refuses fewer, an even number, or one master twice, with
// ErrInvalidOption, and so it does WithReplicaAck: each master stands
// alone, the quorum is what replicates.
//
// Mutex, MultiMutex, Inspect, ForceUnlock, Revoke and List work as on a
// store of New (it is a store.Validator, Inspector, Lister,
// ForceUnlocker, Revoker and RevokeWatcher); a lock is held once a quorum of masters took it within
// its lease, renewed while a quorum confirms, and its fencing token
// increases per name across holders. The kinds whose state a quorum cannot
// keep in one order (FairMutex, RWMutex, Semaphore, Election) and Once
// fail with ErrUnsupported. See "Redlock" in distlock's package
// documentation for what it guarantees, and on what.
func NewRedlock(rdbs []redis.UniversalClient, opts ...Option) store.Store {
	o := redisopt.Apply(opts)
	if o.Replicas > 0 {
		o.Fail(fmt.Errorf("%w: replica acknowledgement with Redlock: each master stands alone, the quorum is what replicates", store.ErrInvalidOption))
	}
	if o.Err != nil {
		return redisopt.Invalid(o.Err)
	}
	masters := make([]redlock.Master, len(rdbs))
	for i, rdb := range rdbs {
		if rdb == nil {
			continue
		}
		masters[i] = redlock.Master{Conn: redisbackend.GoRedis(rdb), ID: rdb}
		if c, ok := rdb.(*redis.Client); ok {
			masters[i].Addr = c.Options().Addr
			masters[i].ID = c.Options().Network + "://" + c.Options().Addr
		}
	}
	b, err := redlock.New(masters, o.Backend())
	if err != nil {
		return redisopt.Invalid(err)
	}
	return b
}

// An Option configures a store.
type Option = redisopt.Option

// WithPrefix sets the prefix of every Redis key and channel the store
// uses. The default is "distlock:". Clients that share locks must use the
// same prefix. It follows the rules of a lock name, but may be empty.
func WithPrefix(prefix string) Option { return redisopt.Prefix(prefix) }

// WithFenceRetention sets how long a lock's fencing counter outlives the
// last acquisition of the lock (default one hour, at least one second).
// Within that time tokens increase even if the Redis server's clock steps
// back by less than it; after it, the counter key is gone and tokens rest on
// the server clock alone. See distlock's package documentation.
func WithFenceRetention(d time.Duration) Option { return redisopt.FenceRetention(d) }

// MaxReplicaTimeout is the longest wait WithReplicaAck accepts: WAIT must
// answer within go-redis's default read timeout (3 s).
const MaxReplicaTimeout = redisopt.MaxReplicaTimeout

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
	return redisopt.ReplicaAck(replicas, timeout)
}

// What New and NewRedlock say their stores implement.
type (
	redlockStore interface {
		store.Store
		store.Validator
		store.Inspector
		store.Lister
		store.ForceUnlocker
		store.Revoker
		store.RevokeWatcher
	}
	redisStore interface {
		redlockStore
		store.OnceKeeper
		store.PermitSetter
		store.LeaderWatcher
		store.GrantConfirmer
	}
)

var (
	_ redisStore   = (*redisbackend.Backend)(nil)
	_ redlockStore = (*redlock.Backend)(nil)
)
