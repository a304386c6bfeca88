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
	if mr, ok := s.lastHold(r); ok {
		// The common case, in one request: the owner's last hold, its key
		// as this store last wrote it.
		resp, err := s.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(key), "=", mr)).
			Then(clientv3.OpDelete(key)).
			Commit()
		if err != nil {
			return store.NotOwner, backendErr(err)
		}
		if resp.Succeeded {
			s.forget(r.Owner, r.Name)
			return store.Freed, nil
		}
	}
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

// An owned is what a store knows of the key of one of its owners that
// holds a lock, as it last wrote it: its mod revision and its holds. Only
// the owner writes its key but for Revoke and ForceUnlock (which change
// its revision), so a release can be a compare-and-swap on that revision,
// in one request, falling back to a read when the key changed.
type owned struct {
	mr    int64
	holds []uint64
}

// own records that the store wrote the key of owner at revision mr, with
// holds.
func (s *Store) own(owner string, mr int64, holds []uint64) {
	s.mu.Lock()
	s.owned[owner] = owned{mr: mr, holds: holds}
	s.mu.Unlock()
}

// unown forgets what the store knew of the key of owner.
func (s *Store) unown(owner string) {
	s.mu.Lock()
	delete(s.owned, owner)
	s.mu.Unlock()
}

// lastHold returns the mod revision of the key of r's owner when r
// releases the owner's last hold, as far as the store knows.
func (s *Store) lastHold(r store.Request) (int64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.owned[r.Owner]
	if !ok || r.Hold != 0 && (len(o.holds) != 1 || o.holds[0] != r.Hold) {
		return 0, false
	}
	return o.mr, true
}

// forget stops tracking the key of owner in the lock name, which is gone
// for good: its place, what the store knew of it, and its slot.
func (s *Store) forget(owner, name string) {
	s.dropPlace(owner, nil)
	s.unown(owner)
	s.unbind(owner, name)
}
