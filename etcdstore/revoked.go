package etcdstore

import (
	"context"
	"strings"
	"sync"
	"time"

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
	if s.err != nil {
		return nil, s.err
	}
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(s.watches))
	watch := func() clientv3.WatchChan {
		return s.cli.Watch(wctx, s.noticePrefix(), clientv3.WithPrefix(), clientv3.WithFilterDelete(), clientv3.WithCreatedNotify())
	}
	w := watch()
	select {
	case resp, ok := <-w:
		if !ok || resp.Err() != nil || !resp.Created {
			cancel()
			return nil, backendErr(errWatch(resp.Err()))
		}
	case <-ctx.Done():
		cancel()
		return nil, backendErr(ctx.Err())
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			for resp := range w {
				if resp.Err() != nil {
					break
				}
				for _, ev := range resp.Events {
					grantee, name, ok := strings.Cut(strings.TrimPrefix(string(ev.Kv.Key), s.noticePrefix()), "/")
					if ok {
						fn(name, grantee)
					}
				}
			}
			select {
			case <-wctx.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
			w = watch()
		}
	}()
	var once sync.Once
	return func() { once.Do(cancel) }, nil
}
