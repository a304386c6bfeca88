package etcdstore

import (
	"context"
	"slices"

	"github.com/distlock/distlock/store"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Release implements store.Store. Only the owner writes its key (but for
// Revoke and ForceUnlock), and a late or repeated release never touches
// another owner's hold. A release of every hold (r.Hold 0: the Client's
// release of its last lease) is a plain delete of the owner's key, whose
// name no other owner gets while that delete may still land (slots.go);
// a release of one hold reads the key and writes it back by
// compare-and-swap on its mod revision.
func (s *Store) Release(ctx context.Context, r store.Request) (store.Release, error) {
	if key, at, ok := s.pinOwnKey(r); ok {
		// The common case, in one request as cheap as etcd has.
		resp, err := s.wire.delete(ctx, key)
		s.unpin(at, err != nil)
		if err != nil {
			return store.NotOwner, backendErr(err)
		}
		s.forget(r.Owner, r.Name)
		if resp.Deleted == 0 {
			return store.NotOwner, nil // gone with its lease, or forced
		}
		return store.Freed, nil
	}
	key := s.ownKey(r.Name, r.Kind, r.Owner)
	for {
		kv, h, err := s.get(ctx, key, r.Owner)
		if err != nil {
			return store.NotOwner, err
		}
		if kv == nil {
			s.forget(r.Owner, r.Name)
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
			s.forget(r.Owner, r.Name)
			return store.Freed, nil
		}
	}
}

// Abandon implements store.Store: in one transaction, it marks the owner,
// so that its later acquisitions are refused for r.Lease (the mark's
// lease is never kept alive), and deletes its key, whatever it holds. It
// deletes the key only where it marks the owner for the first time: an
// owner once marked has no key and can make none, and a copy of an
// Abandon that lands after another never deletes the key of the owner the
// name went to since (slots.go).
func (s *Store) Abandon(ctx context.Context, r store.Request) (bool, error) {
	lease, err := s.markLeaseFor(ctx, r.Lease)
	if err != nil {
		return false, err
	}
	dir, key, mark := s.lockDir(r.Name), s.abandonKey(r.Name, r.Kind, r.Owner), s.markKey(r.Owner, r.Name)
	resp, err := s.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(mark), "=", 0)).
		Then(clientv3.OpPut(mark, "", clientv3.WithLease(lease)), rangeOp(dir), clientv3.OpDelete(key)).
		Else(clientv3.OpPut(mark, "", clientv3.WithLease(lease)), rangeOp(dir)).
		Commit()
	if err != nil {
		return false, backendErr(err)
	}
	s.abandoned(r.Owner, r.Name)
	s.forget(r.Owner, r.Name)
	cs := contenders(dir, resp.Responses[1].GetResponseRange().Kvs)
	i := find(cs, r.Owner)
	return i >= 0 && admitted(cs, i, capacityOf(cs, 0)), nil
}

// pinOwnKey returns, for a release of every hold of r's owner, its key,
// and pins the key's slot (the caller unpins it once its delete of the key
// is answered). It reports false for a release of one hold, or an owner
// with no key name.
func (s *Store) pinOwnKey(r store.Request) (string, slotAt, bool) {
	if r.Hold != 0 {
		return "", slotAt{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n, ok := s.slots.of[slotOf{r.Owner, r.Name}]
	if !ok {
		return "", slotAt{}, false
	}
	at := slotAt{r.Name, n}
	s.slots.pin(at)
	return s.slotKey(r.Name, r.Kind, n), at, true
}

// forget stops tracking the key of owner in the lock name, which is gone
// for good: its place and its slot.
func (s *Store) forget(owner, name string) {
	s.dropPlace(owner, nil)
	s.unbind(owner, name)
}
