package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// watch watches key (with opts) from now on, on a leader-requiring watch:
// it returns once the watch is created, then hands events the events of
// each response until the returned stop is called or the store is
// closed. A watch that ends (compaction, a member lost, no leader) is
// made again after a pause, and lost is called first: events may have
// been missed meanwhile.
func (s *Store) watch(ctx context.Context, key string, opts []clientv3.OpOption, events func([]*clientv3.Event), lost func()) (func(), error) {
	if s.err != nil {
		return nil, s.err
	}
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(s.watches))
	open := func() clientv3.WatchChan {
		return s.cli.Watch(wctx, key, append([]clientv3.OpOption{clientv3.WithCreatedNotify()}, opts...)...)
	}
	w := open()
	select {
	case resp, ok := <-w:
		if !ok || resp.Err() != nil || !resp.Created {
			cancel()
			return nil, backendErr(errWatch(key, resp.Err()))
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
				events(resp.Events)
			}
			if wctx.Err() != nil {
				return
			}
			lost()
			select {
			case <-wctx.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
			w = open()
		}
	}()
	var once sync.Once
	return func() { once.Do(cancel) }, nil
}

// errWatch is the error of a watch of key that was not created.
func errWatch(key string, err error) error {
	if err == nil {
		err = errors.New("no reason given")
	}
	return fmt.Errorf("watch of %q not created: %w", key, err)
}
