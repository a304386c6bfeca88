package redisbackend

import (
	"context"
	"strings"
	"sync"

	"github.com/distlock/distlock/store"
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
	ps := b.conn.Subscribe(false)
	if err := ps.Subscribe(ctx, channel); err != nil {
		_ = ps.Close()
		return nil, b.backendErr(ctx, err)
	}
	for {
		e, err := ps.Receive(ctx, 0)
		if err != nil {
			_ = ps.Close()
			return nil, b.backendErr(ctx, err)
		}
		if e.Kind == Subscribed {
			break
		}
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		ps.Run(func(e Event) {
			if e.Kind != Message {
				return
			}
			if grantee, name, ok := strings.Cut(e.Payload, "\n"); ok {
				fn(name, grantee)
			}
		})
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
