package etcdstore

import (
	"context"
	"strings"

	"github.com/distlock/distlock/store"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A revocation notice (ForceUnlock, Revoke) is the key
// <prefix>revoked/<grantee>/<name>, written in the same transaction as
// the change it tells of, on a lease of noticeTTL: the holder's process
// watches the prefix (store.RevokeWatcher) and ends the hold at once,
// rather than at its next renewal. A notice missed (the watch was down)
// is found at that renewal all the same.
const noticeTTL = 10 // seconds

func (s *Store) noticePrefix() string { return s.prefix + "revoked/" }

func (s *Store) noticeKey(owner, name string) string {
	return s.noticePrefix() + store.GranteeID(owner) + "/" + name
}

// notice returns the operation that writes the notice of owner's lock
// name, on a lease of its own.
func (s *Store) notice(ctx context.Context, owner, name string) (clientv3.Op, error) {
	lease, err := s.cli.Grant(ctx, noticeTTL)
	if err != nil {
		return clientv3.Op{}, backendErr(err)
	}
	return clientv3.OpPut(s.noticeKey(owner, name), "", clientv3.WithLease(lease.ID)), nil
}

// WatchRevoked implements store.RevokeWatcher.
func (s *Store) WatchRevoked(ctx context.Context, fn func(name, grantee string)) (func(), error) {
	stop, _, err := s.watch(ctx, s.noticePrefix(), []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithFilterDelete()},
		func(evs []*clientv3.Event) {
			for _, ev := range evs {
				if grantee, name, ok := strings.Cut(strings.TrimPrefix(string(ev.Kv.Key), s.noticePrefix()), "/"); ok {
					fn(name, grantee)
				}
			}
		},
		func(int64) {}) // a notice missed is found at the holder's next renewal
	return stop, err
}
