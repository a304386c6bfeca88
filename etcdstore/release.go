package etcdstore

import (
	"context"
	"slices"

	"github.com/distlock/distlock/store"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Release implements store.Store. Only the owner writes its key (but for
// Revoke and ForceUnlock), and a late or repeated release never touches
// another owner's hold: the owner's last hold, with its key as this store
// last wrote it, is released by a plain delete of the key, whose name no
// other owner gets while that delete may still land (slots.go); every
// other write is a compare-and-swap on the key's mod revision.
func (s *Store) Release(ctx context.Context, r store.Request) (store.Release, error) {
	if key, at, ok := s.lastHold(r); ok {
		// The common case, in one request as cheap as etcd has.
		resp, err := s.cli.Delete(ctx, key)
		s.unpin(at, err != nil, r.Lease)
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
	s.unown(r.Owner)
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

// own records that the store wrote the key of owner with holds: until it
// is forgotten (unown), the owner holds the lock with them, and a release
// of its last hold is a plain delete of its key (Release). Only the owner
// writes its key but for Revoke and ForceUnlock; its re-entries forget it
// while they change the key, and then the release reads the key first.
func (s *Store) own(owner string, holds []uint64) {
	s.mu.Lock()
	s.owned[owner] = holds
	s.mu.Unlock()
}

// unown forgets what the store knew of the key of owner.
func (s *Store) unown(owner string) {
	s.mu.Lock()
	delete(s.owned, owner)
	s.mu.Unlock()
}

// lastHold reports whether r releases its owner's last hold, with the
// owner's key as the store last wrote it. If so, it returns the key, and
// pins its slot: the caller unpins it once its delete of the key is
// answered.
func (s *Store) lastHold(r store.Request) (string, slotAt, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	holds, ok := s.owned[r.Owner]
	if !ok || r.Hold != 0 && (len(holds) != 1 || holds[0] != r.Hold) {
		return "", slotAt{}, false
	}
	n, ok := s.slots.of[slotOf{r.Owner, r.Name}]
	if !ok {
		return "", slotAt{}, false
	}
	at := slotAt{r.Name, n}
	s.slots.pin(at)
	return s.slotKey(r.Name, r.Kind, n), at, true
}

// forget stops tracking the key of owner in the lock name, which is gone
// for good: its place, what the store knew of it, and its slot.
func (s *Store) forget(owner, name string) {
	s.dropPlace(owner, nil)
	s.unown(owner)
	s.unbind(owner, name)
}
