package etcdstore

import (
	"context"
	"sync"
	"time"

	"github.com/distlock/distlock/store"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// WatchLeader implements store.LeaderWatcher. An election's leader is the
// first key in its queue (admit.go), and its term that key's create
// revision, its token. Every change of the election's keys is followed by
// a read of the first key, announced if it is another than the last
// announced: so announcements come in the order of the terms, and a watch
// lost (compaction, a member lost) costs a read, not an announcement.
func (s *Store) WatchLeader(ctx context.Context, name string, fn func(a store.Announcement, lost bool)) (func(), error) {
	if s.err != nil {
		return nil, s.err
	}
	var mu sync.Mutex
	var last uint64 // the term announced last, 0 for nobody
	primed := false // last is known
	read := func(announce bool) error {
		// One read at a time, in order.
		mu.Lock()
		defer mu.Unlock()
		if !announce && primed {
			return nil // a change was read first
		}
		rctx, cancel := context.WithTimeout(clientv3.WithRequireLeader(s.watches), 10*time.Second)
		defer cancel()
		cs, _, err := s.queue(rctx, name)
		if err != nil {
			return err
		}
		primed = true
		switch {
		case !announce && len(cs) > 0:
			last = cs[0].token()
		case !announce:
		case len(cs) == 0 && last != 0:
			fn(store.Announcement{Ended: last}, false)
			last = 0
		case len(cs) > 0 && cs[0].token() != last:
			c := cs[0]
			last = c.token()
			fn(store.Announcement{Term: last, Value: c.Value, ID: store.OwnerID(c.Owner), Host: c.Host, PID: c.PID,
				Since: time.UnixMilli(c.Since)}, false)
		}
		return nil
	}
	changed := func() {
		if read(true) != nil {
			fn(store.Announcement{}, true) // unknown: announcements may be lost
		}
	}
	stop, _, err := s.watch(ctx, s.lockDir(name), []clientv3.OpOption{clientv3.WithPrefix()},
		func([]*clientv3.Event) { changed() }, func(int64) { changed() })
	if err != nil {
		return nil, err
	}
	// The leader now, so that only changes are announced.
	if err := read(false); err != nil {
		stop()
		return nil, err
	}
	return stop, nil
}
