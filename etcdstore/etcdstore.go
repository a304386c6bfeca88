package etcdstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/distlock/distlock/store"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
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
	prefix string
	err    error
	host   string
	pid    int

	// watches is the context of every watch: Close ends them.
	watches    context.Context
	endWatches context.CancelFunc
	wg         sync.WaitGroup
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
	s := &Store{cli: cli, prefix: cfg.prefix, err: cfg.err, host: host, pid: os.Getpid()}
	s.watches, s.endWatches = context.WithCancel(context.Background())
	return s
}

// Err implements store.Validator.
func (s *Store) Err() error { return s.err }

// Validate implements store.Validator: it serves plain mutexes, with
// leases of MinLease or more.
func (s *Store) Validate(kind store.Kind, lease, _ time.Duration) error {
	switch {
	case s.err != nil:
		return s.err
	case kind != store.Plain:
		return fmt.Errorf("%w: %v on etcd: this version of etcdstore serves Mutex and MultiMutex only", store.ErrUnsupported, kind)
	case lease < MinLease:
		return fmt.Errorf("%w: a lease of %v on etcd: the shortest is %v (etcd's leases are whole seconds, with a floor)", store.ErrInvalidOption, lease, MinLease)
	}
	return nil
}

// Close ends the store's watches. It does not close the etcd client.
func (s *Store) Close() error {
	s.endWatches()
	s.wg.Wait()
	return nil
}

// lockKey is the key of the lock name; markKey the abandonment mark of
// owner on it.
func (s *Store) lockKey(name string) string        { return s.prefix + "lock/" + name }
func (s *Store) markKey(owner, name string) string { return s.prefix + "mark/" + owner + "/" + name }

// A holding is the value of a lock's key.
type holding struct {
	Owner string   `json:"owner"` // secret: it releases the lock
	Holds []uint64 `json:"holds"` // hold ids
	Seq   uint64   `json:"seq"`   // the last renewal applied
	// Revoked: Revoke was called; renewals are refused, and the lock is
	// held until its owner releases it or its lease runs out.
	Revoked bool   `json:"revoked,omitempty"`
	Host    string `json:"host"`
	PID     int    `json:"pid"`
	Since   int64  `json:"since"` // ms since the epoch, by the holder's clock
}

func (h holding) encode() string {
	b, _ := json.Marshal(h)
	return string(b)
}

func decode(kv *mvccpb.KeyValue) (holding, bool) {
	var h holding
	return h, json.Unmarshal(kv.Value, &h) == nil && h.Owner != ""
}

// backendErr wraps an error of etcd as store.ErrBackend.
func backendErr(err error) error {
	if err == nil || errors.Is(err, store.ErrBackend) {
		return err
	}
	return fmt.Errorf("%w: etcd: %w", store.ErrBackend, err)
}

// ttlOf is the TTL of an etcd lease that lasts lease at least.
func ttlOf(lease time.Duration) int64 {
	return int64((lease + time.Second - 1) / time.Second)
}

// Acquire implements store.Store for plain mutexes.
func (s *Store) Acquire(ctx context.Context, r store.Request) (store.Grant, error) {
	if err := s.Validate(r.Kind, r.Lease, r.Queue); err != nil {
		return store.Grant{}, err
	}
	key := s.lockKey(r.Name)
	if r.Reenter {
		return s.reenter(ctx, key, r)
	}
	lease, err := s.cli.Grant(ctx, ttlOf(r.Lease))
	if err != nil {
		return store.Grant{}, backendErr(err)
	}
	h := holding{Owner: r.Owner, Holds: []uint64{r.Hold}, Host: s.host, PID: s.pid, Since: time.Now().UnixMilli()}
	resp, err := s.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0),
			clientv3.Compare(clientv3.CreateRevision(s.markKey(r.Owner, r.Name)), "=", 0)).
		Then(clientv3.OpPut(key, h.encode(), clientv3.WithLease(lease.ID))).
		Else(clientv3.OpGet(key), clientv3.OpGet(s.markKey(r.Owner, r.Name), clientv3.WithCountOnly())).
		Commit()
	if err != nil {
		// The lease may have been applied: it expires with its TTL, and
		// the key, if the put was applied, with it (the engine abandons
		// the owner).
		return store.Grant{}, backendErr(err)
	}
	if resp.Succeeded {
		return store.Grant{Acquired: true, Token: uint64(resp.Header.Revision), Holds: 1}, nil
	}
	// Not taken: the lease is of no use.
	_, _ = s.cli.Revoke(ctx, lease.ID)
	kvs := resp.Responses[0].GetResponseRange().Kvs
	if resp.Responses[1].GetResponseRange().Count > 0 {
		return store.Grant{TTL: -1}, nil // abandoned: never taken for this owner
	}
	if len(kvs) == 0 {
		return store.Grant{TTL: 0}, nil // freed in between: try again
	}
	held, _ := decode(kvs[0])
	if held.Owner == r.Owner {
		// An earlier copy of this request took it.
		return store.Grant{Acquired: true, Token: uint64(kvs[0].CreateRevision), Holds: len(held.Holds)}, nil
	}
	return store.Grant{TTL: s.leaseLeft(ctx, clientv3.LeaseID(kvs[0].Lease))}, nil
}

// leaseLeft is what is left of a lease, or -1 if it cannot be known.
func (s *Store) leaseLeft(ctx context.Context, id clientv3.LeaseID) time.Duration {
	ttl, err := s.cli.TimeToLive(ctx, id)
	if err != nil || ttl.TTL < 0 {
		return -1
	}
	return time.Duration(ttl.TTL) * time.Second
}

// reenter adds hold r.Hold to a lock that r.Owner holds.
func (s *Store) reenter(ctx context.Context, key string, r store.Request) (store.Grant, error) {
	for {
		kv, h, err := s.get(ctx, key)
		if err != nil {
			return store.Grant{}, err
		}
		if kv == nil || h.Owner != r.Owner {
			return store.Grant{TTL: -1}, nil
		}
		if slices.Contains(h.Holds, r.Hold) {
			return store.Grant{Acquired: true, Token: uint64(kv.CreateRevision), Holds: len(h.Holds)}, nil
		}
		h.Holds = append(h.Holds, r.Hold)
		ok, err := s.update(ctx, key, kv, h)
		if err != nil {
			return store.Grant{}, err
		}
		if ok {
			return store.Grant{Acquired: true, Token: uint64(kv.CreateRevision), Holds: len(h.Holds)}, nil
		}
	}
}

// get reads the lock key: nil if it does not exist.
func (s *Store) get(ctx context.Context, key string) (*mvccpb.KeyValue, holding, error) {
	resp, err := s.cli.Get(ctx, key)
	if err != nil {
		return nil, holding{}, backendErr(err)
	}
	if len(resp.Kvs) == 0 {
		return nil, holding{}, nil
	}
	h, ok := decode(resp.Kvs[0])
	if !ok {
		return nil, holding{}, fmt.Errorf("%w: etcd: unreadable lock %q", store.ErrBackend, key)
	}
	return resp.Kvs[0], h, nil
}

// update writes h to the lock key if it has not changed since kv, keeping
// its lease, and applies also with it; it reports false if it had.
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

// AcquireAll implements store.Store: one member after another.
func (s *Store) AcquireAll(ctx context.Context, rs []store.Request) ([]store.Grant, error) {
	return store.AcquireEach(ctx, s, rs)
}

// Release implements store.Store.
func (s *Store) Release(ctx context.Context, r store.Request) (store.Release, error) {
	key := s.lockKey(r.Name)
	for {
		kv, h, err := s.get(ctx, key)
		if err != nil {
			return store.NotOwner, err
		}
		if kv == nil || h.Owner != r.Owner {
			return store.NotOwner, nil
		}
		if r.Hold != 0 {
			i := slices.Index(h.Holds, r.Hold)
			if i < 0 {
				return store.AlreadyReleased, nil
			}
			h.Holds = slices.Delete(h.Holds, i, i+1)
		}
		if r.Hold != 0 && len(h.Holds) > 0 {
			ok, err := s.update(ctx, key, kv, h)
			if err != nil {
				return store.NotOwner, err
			}
			if ok {
				return store.Remaining, nil
			}
			continue
		}
		ok, err := s.delete(ctx, key, kv)
		if err != nil {
			return store.NotOwner, err
		}
		if ok {
			return store.Freed, nil
		}
	}
}

// delete deletes the lock key if it has not changed since kv, with also,
// and revokes its lease; it reports false if it had changed.
func (s *Store) delete(ctx context.Context, key string, kv *mvccpb.KeyValue, also ...clientv3.Op) (bool, error) {
	resp, err := s.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision)).
		Then(append([]clientv3.Op{clientv3.OpDelete(key)}, also...)...).
		Commit()
	if err != nil {
		return false, backendErr(err)
	}
	if resp.Succeeded && kv.Lease != 0 {
		_, _ = s.cli.Revoke(ctx, clientv3.LeaseID(kv.Lease))
	}
	return resp.Succeeded, nil
}

// Abandon implements store.Store: it marks the owner, so that its later
// acquisitions are refused for r.Lease, then releases what it holds.
func (s *Store) Abandon(ctx context.Context, r store.Request) (bool, error) {
	lease, err := s.cli.Grant(ctx, ttlOf(r.Lease))
	if err != nil {
		return false, backendErr(err)
	}
	if _, err := s.cli.Put(ctx, s.markKey(r.Owner, r.Name), "", clientv3.WithLease(lease.ID)); err != nil {
		return false, backendErr(err)
	}
	res, err := s.Release(ctx, store.Request{Name: r.Name, Kind: r.Kind, Owner: r.Owner})
	return res == store.Freed, err
}

// Renew implements store.Store: for each lock, a keep-alive of its lease,
// then a check that the key is still the owner's and on that lease (a
// keep-alive of a lease whose key was deleted keeps nothing). A renewal
// to another lease length moves the key to a new lease.
func (s *Store) Renew(ctx context.Context, rs []store.Request, report func(int, store.Grant, error)) {
	var wg sync.WaitGroup
	for i, r := range rs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			report(i, store.Grant{}, s.renew(ctx, r))
		}()
	}
	wg.Wait()
}

func (s *Store) renew(ctx context.Context, r store.Request) error {
	key := s.lockKey(r.Name)
	kv, h, err := s.get(ctx, key)
	if err != nil {
		return err
	}
	if kv == nil || h.Owner != r.Owner {
		return fmt.Errorf("%w: etcd: the lock is not the owner's", store.ErrNotHeld)
	}
	if h.Revoked {
		return fmt.Errorf("%w: etcd: the lock was revoked", store.ErrNotHeld)
	}
	if h.Seq > r.Seq {
		return store.ErrSuperseded
	}
	id := clientv3.LeaseID(kv.Lease)
	ka, err := s.cli.KeepAliveOnce(ctx, id)
	switch {
	case errors.Is(err, rpctypes.ErrLeaseNotFound):
		return fmt.Errorf("%w: etcd: the lock's lease is gone", store.ErrNotHeld)
	case err != nil:
		return backendErr(err)
	}
	if ka.TTL < ttlOf(r.Lease) {
		// Another lease length (Extend): a new lease, the key moved to it
		// if it is still the owner's and unchanged.
		return s.moveLease(ctx, key, kv, h, r)
	}
	// The key is the owner's, on the lease kept alive, unless it changed
	// since it was read.
	again, h2, err := s.get(ctx, key)
	switch {
	case err != nil:
		return err
	case again == nil || h2.Owner != r.Owner || again.Lease != kv.Lease:
		return fmt.Errorf("%w: etcd: the lock is not the owner's", store.ErrNotHeld)
	case h2.Revoked:
		return fmt.Errorf("%w: etcd: the lock was revoked", store.ErrNotHeld)
	}
	return nil
}

// moveLease puts the lock key of r on a new lease of r.Lease.
func (s *Store) moveLease(ctx context.Context, key string, kv *mvccpb.KeyValue, h holding, r store.Request) error {
	lease, err := s.cli.Grant(ctx, ttlOf(r.Lease))
	if err != nil {
		return backendErr(err)
	}
	h.Seq = max(h.Seq, r.Seq)
	resp, err := s.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision)).
		Then(clientv3.OpPut(key, h.encode(), clientv3.WithLease(lease.ID))).
		Commit()
	if err != nil {
		return backendErr(err)
	}
	if !resp.Succeeded {
		_, _ = s.cli.Revoke(ctx, lease.ID)
		return fmt.Errorf("%w: etcd: the lock changed while its lease was renewed", store.ErrBackend)
	}
	_, _ = s.cli.Revoke(ctx, clientv3.LeaseID(kv.Lease))
	return nil
}

// Watch implements store.Store: a plain lock's releases are the deletes
// of its key (its own releases too: a waiter woken for nothing tries and
// waits again).
func (s *Store) Watch(ctx context.Context, name string, kind store.Kind, wake func(store.Notice)) (func(), error) {
	if err := s.Validate(kind, MinLease, 0); err != nil {
		return nil, err
	}
	return s.watch(ctx, s.lockKey(name), []clientv3.OpOption{clientv3.WithFilterPut()},
		func(evs []*clientv3.Event) {
			if len(evs) > 0 {
				wake(store.Notice{})
			}
		},
		func() { wake(store.Notice{}) }) // notices may have been lost
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
} = (*Store)(nil)
