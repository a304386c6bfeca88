package redisbackend

import (
	"context"
	"strings"
	"sync"

	"github.com/distlock/distlock/store"
	"github.com/redis/go-redis/v9"
)

// WatchRevoked implements store.RevokeWatcher: it subscribes to the channel of
// this process (Keys.HolderChannel of Config.Host and Config.PID), on which
// ForceUnlock tells a holder's process that its lock is gone, and passes
// each notice to fn, until stop is called. Every Backend of the process
// hears the notices of all of them. It returns once Redis confirmed the
// subscription. On a standalone or Sentinel client it shares the
// connection of the release channels; on a Cluster, where those are
// sharded, it is a classic subscription of its own, which every node's
// PUBLISH reaches (the channel is not a lock's).
func (b *Backend) WatchRevoked(ctx context.Context, fn func(name, grantee string)) (func(), error) {
	channel := b.cfg.Keys.HolderChannel(b.cfg.Host, b.pid)
	if !b.sharded {
		return b.notify.watch(ctx, channel, func(payload string, _ bool) {
			if grantee, name, ok := strings.Cut(payload, "\n"); ok {
				fn(name, grantee)
			}
		})
	}
	ps := b.rdb.Subscribe(ctx)
	if err := ps.Subscribe(ctx, channel); err != nil {
		_ = ps.Close()
		return nil, backendErr(ctx, err)
	}
	for {
		m, err := ps.Receive(ctx)
		if err != nil {
			_ = ps.Close()
			return nil, backendErr(ctx, err)
		}
		if _, ok := m.(*redis.Subscription); ok {
			break
		}
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for m := range ps.Channel() {
			if grantee, name, ok := strings.Cut(m.Payload, "\n"); ok {
				fn(name, grantee)
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			_ = ps.Close()
			wg.Wait()
		})
	}, nil
}

var _ store.RevokeWatcher = (*Backend)(nil)
