package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/distlock/distlock/store"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// DefaultPrefix is the prefix of every key a store uses.
const DefaultPrefix = "distlock/"

// MinLease is the shortest lease a store accepts: etcd's leases are
// counted in whole seconds, and the server raises a shorter TTL to its
// own floor (1.5 election timeouts, 1.5 s by default).
const MinLease = 2 * time.Second

// An Option configures a store.
type Option func(*config)

type config struct {
	prefix string
	err    error
}

// WithPrefix sets the prefix of every key the store uses (default
// "distlock/"). Clients that share locks must use the same prefix.
func WithPrefix(prefix string) Option {
	return func(c *config) {
		if prefix == "" {
			c.err = fmt.Errorf("%w: empty etcd key prefix", store.ErrInvalidOption)
		}
		c.prefix = prefix
	}
}

// Store implements store.Store on an etcd client. New returns it.
type Store struct {
	cli    *clientv3.Client
	wire   wire // the uncontended pair's requests
	prefix string
	err    error
	host   string
	pid    int

	// watches is the context of every watch: Close ends them.
	watches    context.Context
	endWatches context.CancelFunc
	wg         sync.WaitGroup

	mu      sync.Mutex
	places  map[string]*place              // by owner: the places of this store's owners
	keys    map[string]*place              // the same, by key
	ownKeys map[string]*ownKeys            // by prefix: the shared watches of its owners' keys (ownkeys.go)
	wakers  map[string]map[*waker]struct{} // by lock name: the Watches of queued kinds
	lines   map[string]*line               // by lock name: its key in the line of a plain mutex (line.go)
	classes map[int64]*classLease          // by TTL: the leases of the store's keys
	marks   map[int64]*markLease           // by TTL: the leases of abandonment marks
	slots   slots                          // the names of its owners' keys
}

// New returns a store on cli. It does not contact etcd until it is used,
// and never closes cli: close it after the Client. A nil cli or an invalid
// option makes every operation of a Client on the store fail with
// store.ErrInvalidOption.
func New(cli *clientv3.Client, opts ...Option) *Store {
	cfg := config{prefix: DefaultPrefix}
	for _, o := range opts {
		o(&cfg)
	}
	if cli == nil && cfg.err == nil {
		cfg.err = fmt.Errorf("%w: nil etcd client", store.ErrInvalidOption)
	}
	host, _ := os.Hostname()
	s := &Store{cli: cli, wire: newWire(cli), prefix: cfg.prefix, err: cfg.err, host: host, pid: os.Getpid(),
		places: map[string]*place{}, keys: map[string]*place{}, ownKeys: map[string]*ownKeys{}, wakers: map[string]map[*waker]struct{}{},
		lines:   map[string]*line{},
		classes: map[int64]*classLease{}, marks: map[int64]*markLease{},
		slots: newSlots()}
	s.watches, s.endWatches = context.WithCancel(context.Background())
	return s
}

// Err implements store.Validator.
func (s *Store) Err() error { return s.err }

// Validate implements store.Validator: it serves every kind, with leases
// and queue timeouts of MinLease or more.
func (s *Store) Validate(kind store.Kind, lease, queue time.Duration) error {
	switch {
	case s.err != nil:
		return s.err
	case lease < MinLease:
		return fmt.Errorf("%w: a lease of %v on etcd: the shortest is %v (etcd's leases are whole seconds, with a floor)", store.ErrInvalidOption, lease, MinLease)
	case kind.Queued() && queue > 0 && queue < MinLease:
		return fmt.Errorf("%w: a queue timeout of %v on etcd: the shortest is %v (a place is a key on an etcd lease)", store.ErrInvalidOption, queue, MinLease)
	}
	return nil
}

// System names the store for observers (store.SystemNamer): "etcd".
func (s *Store) System() string { return "etcd" }

// Close ends the store's watches and revokes its leases: the keys its
// Client could not release go with them. It does not close the etcd
// client.
func (s *Store) Close() error {
	s.endWatches()
	s.wg.Wait()
	s.revokeLeases()
	return nil
}

// backendErr wraps an error of etcd as store.ErrBackend.
func backendErr(err error) error {
	if err == nil || errors.Is(err, store.ErrBackend) {
		return err
	}
	return fmt.Errorf("%w: etcd: %w", store.ErrBackend, err)
}

// ttlOf is the TTL of an etcd lease that lasts d at least.
func ttlOf(d time.Duration) int64 {
	return int64((d + time.Second - 1) / time.Second)
}

// newHolding is the value of the key of r's owner, as it is made.
func (s *Store) newHolding(r store.Request) holding {
	h := holding{Owner: r.Owner, Holds: []uint64{max(r.Hold, 1)}, Seq: r.Seq, Value: r.Value,
		Host: s.host, PID: s.pid, Since: time.Now().UnixMilli()}
	switch r.Kind {
	case store.Write:
		h.Writes = []uint64{max(r.Hold, 1)}
	case store.Semaphore:
		h.Permits, h.Capacity = r.Permits, r.Capacity
	}
	return h
}

// get reads the key of owner: nil if it does not exist, or is another
// owner's (its name went to that owner since: slots.go).
func (s *Store) get(ctx context.Context, key, owner string) (*mvccpb.KeyValue, holding, error) {
	resp, err := s.cli.Get(ctx, key)
	if err != nil {
		return nil, holding{}, backendErr(err)
	}
	if len(resp.Kvs) == 0 {
		return nil, holding{}, nil
	}
	var h holding
	if decodeHolding(resp.Kvs[0].Value, &h) != nil || h.Owner == "" {
		return nil, holding{}, fmt.Errorf("%w: etcd: unreadable lock key %q", store.ErrBackend, key)
	}
	if h.Owner != owner {
		return nil, holding{}, nil
	}
	return resp.Kvs[0], h, nil
}

// update writes h to an owner's key if it has not changed since kv,
// keeping its lease, and applies also with it; it reports false if it had.
func (s *Store) update(ctx context.Context, key string, kv *mvccpb.KeyValue, h holding, also ...clientv3.Op) (bool, error) {
	resp, err := s.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision)).
		Then(append([]clientv3.Op{clientv3.OpPut(key, h.encode(), clientv3.WithIgnoreLease())}, also...)...).
		Commit()
	if err != nil {
		return false, backendErr(err)
	}
	return resp.Succeeded, nil
}

// delete deletes an owner's key if it has not changed since kv, with
// also; it reports false if it had changed.
func (s *Store) delete(ctx context.Context, key string, kv *mvccpb.KeyValue, also ...clientv3.Op) (bool, error) {
	resp, err := s.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision)).
		Then(append([]clientv3.Op{clientv3.OpDelete(key)}, also...)...).
		Commit()
	if err != nil {
		return false, backendErr(err)
	}
	return resp.Succeeded, nil
}

// leaseLeft is what is left of a lease, or -1 if it cannot be known.
func (s *Store) leaseLeft(ctx context.Context, id int64) time.Duration {
	ttl, err := s.cli.TimeToLive(ctx, clientv3.LeaseID(id))
	if err != nil || ttl.TTL < 0 {
		return -1
	}
	return time.Duration(ttl.TTL) * time.Second
}

// What a Store implements.
var _ interface {
	store.Store
	store.Validator
	store.Inspector
	store.Lister
	store.ForceUnlocker
	store.Revoker
	store.RevokeWatcher
	store.OnceKeeper
	store.LeaderWatcher
} = (*Store)(nil)
