package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/distlock/distlock/store"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

var (
	errNotOwners = fmt.Errorf("%w: etcd: the lock is not the owner's", store.ErrNotHeld)
	errRevoked   = fmt.Errorf("%w: etcd: the lock was revoked", store.ErrNotHeld)
	errNotHolder = fmt.Errorf("%w: etcd: the owner's key does not hold the lock", store.ErrNotHeld)
	errPlaceGone = fmt.Errorf("%w: etcd: the place in the queue is gone", store.ErrNotHeld)
)

// Renew implements store.Store. The holds' keys are read in transactions
// of readBatch keys; the holds whose key is on the store's lease of their
// length are then renewed together by one keep-alive of that lease (the
// send-time rule of leases.go), so a thousand holds cost a few reads and
// one keep-alive. A key on another lease (a grant's first renewal, an
// Extend to another length) is moved to the right one. Places are
// refreshed one by one.
func (s *Store) Renew(ctx context.Context, rs []store.Request, report func(int, store.Grant, error)) {
	start := time.Now()
	var wg sync.WaitGroup
	var holds []int
	for i, r := range rs {
		if r.Queue > 0 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				g, err := s.refresh(ctx, r, start)
				report(i, g, err)
			}()
			continue
		}
		if kv := s.heldPlace(r.Owner); kv != nil && r.Kind.Queued() {
			// A grant's first renewal, from its key as read when it was
			// seen holding the lock.
			wg.Add(1)
			go func() {
				defer wg.Done()
				report(i, store.Grant{}, s.move(ctx, r, kv, true, start))
			}()
			continue
		}
		holds = append(holds, i)
	}
	keys := make([]string, len(holds))
	for j, i := range holds {
		keys[j] = s.ownKey(rs[i].Name, rs[i].Kind, rs[i].Owner)
	}
	kvs, errs := s.readKeys(ctx, keys)
	type group struct {
		c   *classLease
		id  clientv3.LeaseID
		idx []int // of holds
	}
	groups := map[clientv3.LeaseID]*group{}
	for j, i := range holds {
		r := rs[i]
		if errs[j] != nil {
			report(i, store.Grant{}, errs[j])
			continue
		}
		var h holding
		switch kv := kvs[j]; {
		case kv == nil || decodeHolding(kv.Value, &h) != nil || h.Owner != r.Owner:
			report(i, store.Grant{}, errNotOwners)
			continue
		case h.Revoked:
			report(i, store.Grant{}, errRevoked)
			continue
		case h.Seq > r.Seq:
			report(i, store.Grant{}, store.ErrSuperseded)
			continue
		}
		c := s.class(leaseTTL(r.Lease))
		if id := c.current(); id != 0 && kvs[j].Lease == int64(id) {
			g := groups[id]
			if g == nil {
				g = &group{c: c, id: id}
				groups[id] = g
			}
			g.idx = append(g.idx, j)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			report(i, store.Grant{}, s.move(ctx, r, kvs[j], false, start))
		}()
	}
	for _, g := range groups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := s.keepAlive(ctx, g.c, g.id, start)
			for _, j := range g.idx {
				report(holds[j], store.Grant{}, err)
			}
		}()
	}
	wg.Wait()
}

// readBatch is how many keys a renewal reads per transaction (etcd's
// default limit is 128 operations per transaction).
const readBatch = 100

// readKeys reads keys, readBatch at a time, a few transactions at once:
// a nil KeyValue for a key that does not exist, and an error for each key
// of a transaction that failed.
func (s *Store) readKeys(ctx context.Context, keys []string) ([]*mvccpb.KeyValue, []error) {
	kvs := make([]*mvccpb.KeyValue, len(keys))
	errs := make([]error, len(keys))
	limit := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for lo := 0; lo < len(keys); lo += readBatch {
		hi := min(lo+readBatch, len(keys))
		ops := make([]clientv3.Op, 0, hi-lo)
		for _, k := range keys[lo:hi] {
			ops = append(ops, clientv3.OpGet(k))
		}
		wg.Add(1)
		limit <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-limit }()
			resp, err := s.cli.Txn(ctx).Then(ops...).Commit()
			for i := lo; i < hi; i++ {
				switch {
				case err != nil:
					errs[i] = backendErr(err)
				case len(resp.Responses[i-lo].GetResponseRange().Kvs) > 0:
					kvs[i] = resp.Responses[i-lo].GetResponseRange().Kvs[0]
				}
			}
		}()
	}
	wg.Wait()
	return kvs, errs
}

// current is the id of the lease of c, 0 if it has none.
func (c *classLease) current() clientv3.LeaseID {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.id
}

// move puts the owner's key kv on the store's lease of r.Lease, if it has
// not changed since it was read: an Extend to another length, or the first
// renewal of a grant, whose key waited on the lease of places. A key of a
// queued kind moves only if it holds the lock: verified says that kv was
// seen holding it (a key that holds keeps holding), otherwise the queue is
// read first. A key changed meanwhile (revoked, re-entered) is
// read again.
func (s *Store) move(ctx context.Context, r store.Request, kv *mvccpb.KeyValue, verified bool, start time.Time) error {
	if r.Kind.Queued() && !verified {
		cs, _, err := s.queue(ctx, r.Name)
		if err != nil {
			return err
		}
		i := find(cs, r.Owner)
		switch {
		case i < 0:
			return errNotOwners
		case !admitted(cs, i, capacityOf(cs, r.Capacity)):
			return errNotHolder
		}
		kv = cs[i].kv
	}
	c := s.class(leaseTTL(r.Lease))
	key, token := string(kv.Key), kv.CreateRevision
	for tries := 0; ; tries++ {
		var h holding
		switch {
		case decodeHolding(kv.Value, &h) != nil || h.Owner != r.Owner || kv.CreateRevision != token:
			return errNotOwners
		case h.Revoked:
			return errRevoked
		case h.Seq > r.Seq:
			return store.ErrSuperseded
		case tries == 3:
			return fmt.Errorf("%w: etcd: the lock kept changing while its lease was renewed", store.ErrBackend)
		}
		h.Seq = r.Seq
		lease, err := s.lease(ctx, c)
		if err != nil {
			return err
		}
		// The lease must be known to last before the key moves onto it:
		// one last kept alive long ago may run out at any moment, taking
		// the key with it, while the Client counts with the deadline of the
		// lease the key is on now (a chaos run lost a lock so, its key
		// deleted 245 ms after the grant of a 2 s lease).
		if err := s.keepAlive(ctx, c, lease, start); errors.Is(err, errLeaseExpired) {
			continue
		} else if err != nil {
			return fmt.Errorf("%w: etcd: the keep-alive of a lock's lease: %w", store.ErrBackend, err)
		}
		resp, err := s.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision)).
			Then(clientv3.OpPut(key, h.encode(), clientv3.WithLease(lease))).
			Else(clientv3.OpGet(key)).
			Commit()
		switch {
		case errors.Is(err, rpctypes.ErrLeaseNotFound):
			c.expired(lease)
			continue
		case err != nil:
			return backendErr(err)
		case !resp.Succeeded:
			kvs := resp.Responses[0].GetResponseRange().Kvs
			if len(kvs) == 0 {
				return errNotOwners
			}
			kv = kvs[0]
			continue
		}
		s.dropPlace(r.Owner, nil) // a hold now: no place any more
		return nil
	}
}

// refresh keeps a place: a keep-alive of the lease of places, and whether
// the key holds the lock now.
func (s *Store) refresh(ctx context.Context, r store.Request, start time.Time) (store.Grant, error) {
	cs, _, err := s.queue(ctx, r.Name)
	if err != nil {
		return store.Grant{}, err
	}
	i := find(cs, r.Owner)
	if i < 0 {
		return store.Grant{}, errPlaceGone
	}
	c := s.class(leaseTTL(r.Queue))
	err = s.keepAlive(ctx, c, clientv3.LeaseID(cs[i].kv.Lease), start)
	switch {
	case errors.Is(err, errLeaseExpired):
		return store.Grant{}, errPlaceGone
	case err != nil:
		return store.Grant{}, err
	}
	s.confirmed(r.Owner, r.Seq)
	capacity := capacityOf(cs, r.Capacity)
	var g store.Grant
	if admitted(cs, i, capacity) {
		s.sawHeld(r.Owner, cs[i].kv)
		g = store.Grant{Acquired: true, Token: cs[i].token(), Seq: r.Seq, Lease: min(r.Lease, r.Queue)}
	} else {
		g = store.Grant{Queued: true, TTL: -1}
	}
	if r.Kind == store.Semaphore {
		g.Capacity = capacity
	}
	return g, nil
}
