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
// it returns once the watch is created, with the revision it starts after
// (every change after it comes through), then hands events the events of
// each response until the returned stop is called or the store is closed.
// A watch that ends (compaction, a member lost, no leader) is made again
// after a pause, and lost is called once it is: events may have been
// missed in between, and none after the revision lost is given (the one
// the new watch starts after).
func (s *Store) watch(ctx context.Context, key string, opts []clientv3.OpOption, events func([]*clientv3.Event), lost func(since int64)) (func(), int64, error) {
	if s.err != nil {
		return nil, 0, s.err
	}
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(s.watches))
	open := func() clientv3.WatchChan {
		return s.cli.Watch(wctx, key, append([]clientv3.OpOption{clientv3.WithCreatedNotify()}, opts...)...)
	}
	w := open()
	var since int64
	select {
	case resp, ok := <-w:
		if !ok || resp.Err() != nil || !resp.Created {
			cancel()
			return nil, 0, backendErr(errWatch(key, resp.Err()))
		}
		since = resp.Header.Revision
	case <-ctx.Done():
		cancel()
		return nil, 0, backendErr(ctx.Err())
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			for resp := range w {
				if resp.Err() != nil {
					break
				}
				if resp.Created {
					lost(resp.Header.Revision) // made again
					continue
				}
				events(resp.Events)
			}
			if wctx.Err() != nil {
				return
			}
			select {
			case <-wctx.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
			w = open()
		}
	}()
	var once sync.Once
	return func() { once.Do(cancel) }, since, nil
}

// errWatch is the error of a watch of key that was not created.
func errWatch(key string, err error) error {
	if err == nil {
		err = errors.New("no reason given")
	}
	return fmt.Errorf("watch of %q not created: %w", key, err)
}

// Watch implements store.Store. A plain lock's waiters take their turns
// in its line (line.go): they are woken when, as this store last saw the
// lock, it is free and their turn has come. A queued kind's grants to this store's owners come from the
// goroutines that follow their places (places.go), which wake delivers;
// the Watch makes sure, before it returns, that the deletes of this
// store's keys on the lock are watched (ownkeys.go).
func (s *Store) Watch(ctx context.Context, name string, kind store.Kind, wake func(store.Notice)) (func(), error) {
	if err := s.Validate(kind, MinLease, 0); err != nil {
		return nil, err
	}
	if !kind.Queued() {
		return s.joinLine(ctx, name, wake)
	}
	release, err := s.watchOwnKeys(ctx, name, kind)
	if err != nil {
		return nil, err
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
			delete(s.wakers[name], w)
			if len(s.wakers[name]) == 0 {
				delete(s.wakers, name)
			}
			s.mu.Unlock()
			release()
		})
	}, nil
}
