package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/distlock/distlock/store"
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

// Watch implements store.Store. A plain lock's waiters hear of the deletes
// of its keys (its own releases too: a waiter woken for nothing tries and
// waits again). A queued kind's grants to this store's owners come from the
// goroutines that follow their places (places.go), which wake delivers.
func (s *Store) Watch(ctx context.Context, name string, kind store.Kind, wake func(store.Notice)) (func(), error) {
	if err := s.Validate(kind, MinLease, 0); err != nil {
		return nil, err
	}
	if !kind.Queued() {
		return s.watch(ctx, s.lockDir(name), []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithFilterPut()},
			func(evs []*clientv3.Event) {
				if len(evs) > 0 {
					wake(store.Notice{})
				}
			},
			func() { wake(store.Notice{}) }) // notices may have been lost
	}
	w := &waker{wake: wake}
	s.mu.Lock()
	if s.wakers[name] == nil {
		s.wakers[name] = map[*waker]struct{}{}
	}
	s.wakers[name][w] = struct{}{}
	s.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			delete(s.wakers[name], w)
			if len(s.wakers[name]) == 0 {
				delete(s.wakers, name)
			}
		})
	}, nil
}
