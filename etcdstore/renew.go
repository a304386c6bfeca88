package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/distlock/distlock/store"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Renew implements store.Store: a hold's renewal or a place's refresh per
// request, side by side.
func (s *Store) Renew(ctx context.Context, rs []store.Request, report func(int, store.Grant, error)) {
	var wg sync.WaitGroup
	for i, r := range rs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if r.Queue > 0 {
				g, err := s.refresh(ctx, r)
				report(i, g, err)
				return
			}
			report(i, store.Grant{}, s.renew(ctx, r))
		}()
	}
	wg.Wait()
}

var (
	errNotOwners = fmt.Errorf("%w: etcd: the lock is not the owner's", store.ErrNotHeld)
	errRevoked   = fmt.Errorf("%w: etcd: the lock was revoked", store.ErrNotHeld)
	errNotHolder = fmt.Errorf("%w: etcd: the owner's key does not hold the lock", store.ErrNotHeld)
	errLeaseGone = fmt.Errorf("%w: etcd: the owner's lease is gone", store.ErrNotHeld)
	errPlaceGone = fmt.Errorf("%w: etcd: the place in the queue is gone", store.ErrNotHeld)
)

// renew keeps the lease of a held lock: a keep-alive of the lease of the
// owner's key, once the key is seen to hold the lock (which it does until
// it is deleted: see admit.go), then a check that the key is still on that
// lease (a keep-alive of a lease whose key was deleted keeps nothing). A
// renewal to another lease length moves the key to a new lease, which is
// also how a granted place becomes a hold of the lock's full lease.
func (s *Store) renew(ctx context.Context, r store.Request) error {
	cs, _, err := s.queue(ctx, r.Name)
	if err != nil {
		return err
	}
	i := find(cs, r.Owner)
	switch {
	case i < 0:
		return errNotOwners
	case cs[i].Revoked:
		return errRevoked
	case cs[i].Seq > r.Seq:
		return store.ErrSuperseded
	case !admitted(cs, i, capacityOf(cs, r.Capacity)):
		return errNotHolder
	}
	c := cs[i]
	ka, err := s.cli.KeepAliveOnce(ctx, clientv3.LeaseID(c.kv.Lease))
	switch {
	case errors.Is(err, rpctypes.ErrLeaseNotFound):
		return errLeaseGone
	case err != nil:
		return backendErr(err)
	}
	if ka.TTL < ttlOf(r.Lease) {
		return s.moveLease(ctx, c.kv, c.holding, r)
	}
	kv, h, err := s.get(ctx, string(c.kv.Key))
	switch {
	case err != nil:
		return err
	case kv == nil || kv.Lease != c.kv.Lease:
		return errNotOwners
	case h.Revoked:
		return errRevoked
	}
	s.dropPlace(r.Owner, nil) // a grant confirmed: no place any more
	return nil
}

// moveLease puts the owner's key kv on a new lease of r.Lease, if it has
// not changed since it was read, and revokes the old one.
func (s *Store) moveLease(ctx context.Context, kv *mvccpb.KeyValue, h holding, r store.Request) error {
	lease, err := s.cli.Grant(ctx, ttlOf(r.Lease))
	if err != nil {
		return backendErr(err)
	}
	h.Seq = max(h.Seq, r.Seq)
	key := string(kv.Key)
	resp, err := s.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision)).
		Then(clientv3.OpPut(key, h.encode(), clientv3.WithLease(lease.ID))).
		Commit()
	if err != nil {
		return backendErr(err)
	}
	if !resp.Succeeded {
		s.revoke(int64(lease.ID))
		return fmt.Errorf("%w: etcd: the lock changed while its lease was renewed", store.ErrBackend)
	}
	s.revoke(kv.Lease)
	s.dropPlace(r.Owner, nil)
	return nil
}

// refresh keeps a place: a keep-alive of its key's lease, and whether the
// key holds the lock now.
func (s *Store) refresh(ctx context.Context, r store.Request) (store.Grant, error) {
	cs, _, err := s.queue(ctx, r.Name)
	if err != nil {
		return store.Grant{}, err
	}
	i := find(cs, r.Owner)
	if i < 0 {
		return store.Grant{}, errPlaceGone
	}
	ka, err := s.cli.KeepAliveOnce(ctx, clientv3.LeaseID(cs[i].kv.Lease))
	switch {
	case errors.Is(err, rpctypes.ErrLeaseNotFound):
		return store.Grant{}, errPlaceGone
	case err != nil:
		return store.Grant{}, backendErr(err)
	}
	_ = ka
	s.confirmed(r.Owner, r.Seq)
	capacity := capacityOf(cs, r.Capacity)
	var g store.Grant
	if admitted(cs, i, capacity) {
		g = store.Grant{Acquired: true, Token: cs[i].token(), Seq: r.Seq, Lease: min(r.Lease, r.Queue)}
	} else {
		g = store.Grant{Queued: true, TTL: -1}
	}
	if r.Kind == store.Semaphore {
		g.Capacity = capacity
	}
	return g, nil
}
