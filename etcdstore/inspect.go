package etcdstore

import (
	"context"
	"strings"
	"time"

	"github.com/distlock/distlock/store"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Inspect implements store.Inspector. LastToken is the holder's token
// while the lock is held, 0 when it is free (etcd keeps no counter of
// its own: the next token is a revision above every earlier one).
func (s *Store) Inspect(ctx context.Context, name string) (store.State, error) {
	if s.err != nil {
		return store.State{}, s.err
	}
	kv, h, err := s.get(ctx, s.lockKey(name))
	if err != nil || kv == nil {
		return store.State{TTL: -1}, err
	}
	ttl := s.leaseLeft(ctx, clientv3.LeaseID(kv.Lease))
	return store.State{Kind: store.Plain, InUse: true, TTL: ttl, LastToken: uint64(kv.CreateRevision),
		Holders: []store.Holder{{Owner: h.Owner, Token: uint64(kv.CreateRevision), Holds: len(h.Holds), Permits: 1,
			Host: h.Host, PID: h.PID, Since: time.UnixMilli(h.Since), TTL: ttl, Revoked: h.Revoked}}}, nil
}

// List implements store.Lister.
func (s *Store) List(ctx context.Context, pattern string) ([]string, error) {
	if s.err != nil {
		return nil, s.err
	}
	dir := s.prefix + "lock/"
	resp, err := s.cli.Get(ctx, dir, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return nil, backendErr(err)
	}
	var names []string
	for _, kv := range resp.Kvs {
		if name := strings.TrimPrefix(string(kv.Key), dir); match(pattern, name) {
			names = append(names, name)
		}
	}
	return names, nil
}

// Revoke implements store.Revoker: the holder's renewals are refused from
// now on, its process is told (RevokeWatcher), and the lock stays held
// until it releases it or its lease runs out, at most the returned time.
func (s *Store) Revoke(ctx context.Context, name string) (time.Duration, error) {
	if s.err != nil {
		return 0, s.err
	}
	key := s.lockKey(name)
	for {
		kv, h, err := s.get(ctx, key)
		if err != nil || kv == nil {
			return 0, err
		}
		if !h.Revoked {
			h.Revoked = true
			notice, err := s.notice(ctx, h.Owner, name)
			if err != nil {
				return 0, err
			}
			ok, err := s.update(ctx, key, kv, h, notice)
			if err != nil {
				return 0, err
			}
			if !ok {
				continue
			}
		}
		// At most: etcd counts in whole seconds, and its leader checks
		// for expired leases every half second.
		ttl, err := s.cli.TimeToLive(ctx, clientv3.LeaseID(kv.Lease))
		if err != nil {
			return 0, backendErr(err)
		}
		return time.Duration(max(ttl.TTL, 0)+1) * time.Second, nil
	}
}

// ForceUnlock implements store.ForceUnlocker: the key is deleted (its
// waiters are told by their watches) and its lease revoked, and the
// holder's process is told (RevokeWatcher).
func (s *Store) ForceUnlock(ctx context.Context, name string) (bool, error) {
	if s.err != nil {
		return false, s.err
	}
	key := s.lockKey(name)
	for {
		kv, h, err := s.get(ctx, key)
		if err != nil || kv == nil {
			return false, err
		}
		notice, err := s.notice(ctx, h.Owner, name)
		if err != nil {
			return false, err
		}
		ok, err := s.delete(ctx, key, kv, notice)
		if err != nil || ok {
			return ok, err
		}
	}
}
