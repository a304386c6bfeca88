package etcdstore

import (
	"context"
	"strings"
	"sync"

	"github.com/distlock/distlock/store"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A waiting place must learn at once that its own key is gone (its lease
// expired or was revoked, an operator deleted it): it then queues again
// (a Notice with Gone). The keys of this store's owners on a lock share a
// prefix, P lock/{name}/<t>/<id>., so one watch of that prefix, for
// deletes, serves every place of the store on the lock: the lock's Watch
// makes it before it returns (so before the places its waiters put), and
// it lasts while a Watch of the lock's queued kinds does. A waiter then
// makes one watch of its own (the key before it) rather than two, each
// created and cancelled.
//
// A place counts on it only if it has run without a break since a read
// that saw the place's key (ownKeys.since): otherwise (it broke and was
// made again, or no Watch uses it any more) the place watches its own key
// itself.

// An ownKeys is the watch of the keys of this store's owners in one kind
// directory of a lock, shared by the Watches of the lock's queued kinds.
type ownKeys struct {
	ready chan struct{} // closed once the watch is made, or failed
	stop  func()
	refs  int // the Watches that use it
	// since is the revision from which the watch has run without a break:
	// every delete of a key under its prefix after since comes through it.
	since int64
}

// ownPrefix is the prefix of the keys of this store's owners of kind on
// the lock name.
func (s *Store) ownPrefix(name string, kind store.Kind) string {
	return s.kindDir(name, kind) + s.slots.id + "."
}

// watchOwnKeys watches the keys of this store's owners of kind on the lock
// name, unless a watch of them is up already, and returns once it is; the
// returned release says that the caller no longer needs it.
func (s *Store) watchOwnKeys(ctx context.Context, name string, kind store.Kind) (func(), error) {
	prefix := s.ownPrefix(name, kind)
	for {
		s.mu.Lock()
		w := s.ownKeys[prefix]
		if w == nil {
			w = &ownKeys{ready: make(chan struct{})}
			s.ownKeys[prefix] = w
			s.mu.Unlock()
			stop, since, err := s.watch(ctx, prefix, []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithFilterPut()},
				s.ownKeysDeleted, func(since int64) { s.ownKeysBroken(prefix, w, since) })
			s.mu.Lock()
			close(w.ready)
			if err != nil {
				delete(s.ownKeys, prefix) // those who waited for it try again
				s.mu.Unlock()
				return nil, err
			}
			w.stop, w.since = stop, max(w.since, since)
		} else {
			s.mu.Unlock()
			select {
			case <-w.ready:
			case <-ctx.Done():
				return nil, backendErr(ctx.Err())
			}
			s.mu.Lock()
			if s.ownKeys[prefix] != w {
				// It failed, or was ended before this Watch counted in it.
				s.mu.Unlock()
				continue
			}
		}
		w.refs++
		s.mu.Unlock()
		var once sync.Once
		return func() { once.Do(func() { s.releaseOwnKeys(prefix, w) }) }, nil
	}
}

// releaseOwnKeys ends the watch w of prefix once no Watch uses it.
func (s *Store) releaseOwnKeys(prefix string, w *ownKeys) {
	s.mu.Lock()
	if w.refs--; w.refs > 0 {
		s.mu.Unlock()
		return
	}
	delete(s.ownKeys, prefix)
	sets := s.placeWatchesLocked(prefix)
	s.mu.Unlock()
	w.stop()
	for _, ws := range sets {
		ws.saw(0, true) // they watch their own keys from now on
	}
}

// ownKeysSinceLocked is the revision from which the deletes of p's key
// have come through a shared watch without a break, or 0 if none watches
// it. s.mu is held.
func (s *Store) ownKeysSinceLocked(p *place) int64 {
	if w := s.ownKeys[s.ownPrefix(p.name, p.kind)]; w != nil {
		return w.since
	}
	return 0
}

// ownKeysDeleted tells the places whose keys evs delete.
func (s *Store) ownKeysDeleted(evs []*clientv3.Event) {
	type change struct {
		ws  *watchSet
		rev int64
	}
	var changes []change
	s.mu.Lock()
	for _, ev := range evs {
		// A delete's ModRevision is its own; a place made later (a slot's
		// name given again) is not the key deleted.
		if p := s.keys[string(ev.Kv.Key)]; p != nil && p.token < ev.Kv.ModRevision {
			p.deleted = max(p.deleted, ev.Kv.ModRevision)
			if p.ws != nil {
				changes = append(changes, change{p.ws, ev.Kv.ModRevision})
			}
		}
	}
	s.mu.Unlock()
	for _, c := range changes {
		c.ws.saw(c.rev, false)
	}
}

// ownKeysBroken records that w, the shared watch of prefix, was made
// again after a break, starting after since: deletes may have been missed,
// so its places watch again.
func (s *Store) ownKeysBroken(prefix string, w *ownKeys, since int64) {
	s.mu.Lock()
	w.since = since
	sets := s.placeWatchesLocked(prefix)
	s.mu.Unlock()
	for _, ws := range sets {
		ws.saw(0, true)
	}
}

// placeWatchesLocked returns the watches of the places whose keys are
// under prefix. s.mu is held.
func (s *Store) placeWatchesLocked(prefix string) []*watchSet {
	var sets []*watchSet
	for key, p := range s.keys {
		if strings.HasPrefix(key, prefix) && p.ws != nil {
			sets = append(sets, p.ws)
		}
	}
	return sets
}
