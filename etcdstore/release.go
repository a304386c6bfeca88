package etcdstore

import (
	"context"
	"slices"

	"github.com/distlock/distlock/store"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Release implements store.Store. Only the owner writes its key, and every
// write is a compare-and-swap on the key's mod revision: a late or
// repeated release never touches another owner's hold (its key has
// another name).
func (s *Store) Release(ctx context.Context, r store.Request) (store.Release, error) {
	key := s.ownKey(r.Name, r.Kind, r.Owner)
	for {
		kv, h, err := s.get(ctx, key)
		if err != nil {
			return store.NotOwner, err
		}
		if kv == nil {
			s.dropPlace(r.Owner, nil)
			return store.NotOwner, nil
		}
		if r.Hold != 0 {
			i := slices.Index(h.Holds, r.Hold)
			if i < 0 {
				return store.AlreadyReleased, nil
			}
			h.Holds = slices.Delete(h.Holds, i, i+1)
			if j := slices.Index(h.Writes, r.Hold); j >= 0 {
				h.Writes = slices.Delete(h.Writes, j, j+1)
			}
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
			s.dropPlace(r.Owner, nil)
			return store.Freed, nil
		}
	}
}

// Abandon implements store.Store: in one transaction, it marks the owner,
// so that its later acquisitions are refused for r.Lease (the mark's
// lease is never kept alive), and deletes its key, whatever it holds.
func (s *Store) Abandon(ctx context.Context, r store.Request) (bool, error) {
	lease, err := s.markLeaseFor(ctx, r.Lease)
	if err != nil {
		return false, err
	}
	dir, key := s.lockDir(r.Name), s.ownKey(r.Name, r.Kind, r.Owner)
	resp, err := s.cli.Txn(ctx).Then(
		clientv3.OpPut(s.markKey(r.Owner, r.Name), "", clientv3.WithLease(lease)),
		rangeOp(dir),
		clientv3.OpDelete(key),
	).Commit()
	if err != nil {
		return false, backendErr(err)
	}
	s.dropPlace(r.Owner, nil)
	cs := contenders(dir, resp.Responses[1].GetResponseRange().Kvs)
	i := find(cs, r.Owner)
	return i >= 0 && admitted(cs, i, capacityOf(cs, 0)), nil
}
