package etcdstore

import (
	"context"
	"time"

	"github.com/distlock/distlock/internal/glob"
	"github.com/distlock/distlock/store"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Inspect implements store.Inspector. LastToken is the highest token of
// the holders while the lock is held, 0 when it is free (etcd keeps no
// counter of its own: the next token is a revision above every earlier
// one). A holder's TTL is its lease's, in whole seconds. Watchers counts
// the processes in a plain mutex's line (line.go).
func (s *Store) Inspect(ctx context.Context, name string) (store.State, error) {
	if s.err != nil {
		return store.State{}, s.err
	}
	line, err := s.cli.Get(ctx, s.lineDir(name), clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return store.State{}, backendErr(err)
	}
	cs, _, err := s.queue(ctx, name)
	if err != nil || len(cs) == 0 {
		return store.State{TTL: -1, Watchers: int(line.Count)}, err
	}
	st := store.State{Kind: kindOf(cs[0].letter), InUse: true, TTL: -1, Watchers: int(line.Count)}
	capacity := capacityOf(cs, 0)
	if st.Kind == store.Semaphore {
		st.Capacity = capacity
	}
	for i, c := range cs {
		if !admitted(cs, i, capacity) {
			st.Queued++
			st.QueuedPermits += c.Permits
			if c.writes() {
				st.QueuedWriters++
			} else if c.letter == 'w' {
				st.QueuedReaders++
			}
			continue
		}
		ttl := s.leaseLeft(ctx, c.kv.Lease)
		st.TTL = max(st.TTL, ttl)
		st.LastToken = max(st.LastToken, c.token())
		st.Used += c.Permits
		st.Holders = append(st.Holders, store.Holder{Owner: c.Owner, Token: c.token(), Holds: len(c.Holds),
			Writes: len(c.Writes), Permits: max(c.Permits, 1), Value: c.Value, Host: c.Host, PID: c.PID,
			Since: time.UnixMilli(c.Since), TTL: ttl, Revoked: c.Revoked})
	}
	if st.Kind != store.Semaphore {
		st.Used, st.QueuedPermits = 0, 0
	}
	return st, nil
}

// List implements store.Lister: the names of the locks with a key.
func (s *Store) List(ctx context.Context, pattern string) ([]string, error) {
	if s.err != nil {
		return nil, s.err
	}
	resp, err := s.cli.Get(ctx, s.lockRoot(), clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return nil, backendErr(err)
	}
	var names []string
	seen := map[string]bool{}
	for _, kv := range resp.Kvs {
		if name, ok := s.nameOf(string(kv.Key)); ok && !seen[name] && glob.Match(pattern, name) {
			seen[name] = true
			names = append(names, name)
		}
	}
	return names, nil
}

// Revoke implements store.Revoker: the holders' renewals are refused from
// now on, their processes are told (RevokeWatcher), and the lock stays
// held until they release it or their leases run out, at most the
// returned time.
func (s *Store) Revoke(ctx context.Context, name string) (time.Duration, error) {
	if s.err != nil {
		return 0, s.err
	}
	for {
		cs, _, err := s.queue(ctx, name)
		if err != nil {
			return 0, err
		}
		hs := holders(cs)
		if len(hs) == 0 {
			return 0, nil
		}
		changed := false
		var most time.Duration
		for _, c := range hs {
			if !c.Revoked {
				c.Revoked = true
				notice, err := s.notice(ctx, c.Owner, name)
				if err != nil {
					return 0, err
				}
				ok, err := s.update(ctx, string(c.kv.Key), c.kv, c.holding, notice)
				if err != nil {
					return 0, err
				}
				changed = changed || !ok
			}
			// At most: etcd counts in whole seconds, and its leader checks
			// for expired leases every half second.
			if ttl := s.leaseLeft(ctx, c.kv.Lease); ttl >= 0 {
				most = max(most, ttl+time.Second)
			}
		}
		if !changed {
			return most, nil
		}
	}
}

// ForceUnlock implements store.ForceUnlocker: the holders' keys are
// deleted (the next in line holds the lock at once, the plain mutex's
// waiters are told by their watches) and their leases revoked, and the
// holders' processes are told (RevokeWatcher).
func (s *Store) ForceUnlock(ctx context.Context, name string) (bool, error) {
	if s.err != nil {
		return false, s.err
	}
	deleted := false
	for {
		cs, _, err := s.queue(ctx, name)
		if err != nil {
			return deleted, err
		}
		hs := holders(cs)
		if len(hs) == 0 {
			return deleted, nil
		}
		for _, c := range hs {
			notice, err := s.notice(ctx, c.Owner, name)
			if err != nil {
				return deleted, err
			}
			ok, err := s.delete(ctx, string(c.kv.Key), c.kv, notice)
			if err != nil {
				return deleted, err
			}
			deleted = deleted || ok
		}
		if deleted {
			return true, nil
		}
	}
}
