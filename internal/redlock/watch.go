package redlock

import (
	"context"
	"sync"

	"github.com/distlock/distlock/store"
)

// Watch implements store.Store: it watches the lock's releases on every
// node, and returns once a quorum of nodes confirmed. A release that frees
// the lock reaches a quorum of nodes, and two quorums meet, so it is heard
// on at least one watched node. A node that confirms later is watched too;
// one that never does is not (its releases are heard from the others).
// wake also hears of this Backend's own frees that come after the call
// that made them returned (see localWatchers).
func (b *Backend) Watch(ctx context.Context, name string, kind store.Kind, wake func(store.Notice)) (func(), error) {
	if kind != store.Plain {
		return nil, Unsupported(kind)
	}
	remove := b.local.add(name, wake) // before the nodes: nothing freed meanwhile is missed
	stop, err := b.watchNodes(ctx, "watch", b.quorum, func(ctx context.Context, n node) (func(), error) {
		return n.Watch(ctx, name, kind, wake)
	})
	if err != nil {
		remove()
		return nil, err
	}
	return func() {
		remove()
		stop()
	}, nil
}

// WatchRevoked implements store.RevokeWatcher: it watches every node for the
// force-unlocks of this process's locks, and returns once one node
// confirmed (ForceUnlock deletes the lock on every node, each of which
// tells the holder).
func (b *Backend) WatchRevoked(ctx context.Context, fn func(name, grantee string)) (func(), error) {
	return b.watchNodes(ctx, "watch force-unlocks", 1, func(ctx context.Context, n node) (func(), error) {
		return n.WatchRevoked(ctx, fn)
	})
}

// watchNodes starts watch on every node at once and returns once need of
// them confirmed, with a stop that ends every watch that started, also
// those that confirm after it returned.
func (b *Backend) watchNodes(ctx context.Context, what string, need int, watch func(context.Context, node) (func(), error)) (func(), error) {
	var mu sync.Mutex
	var stops []func()
	stopped := false
	keep := func(rep reply[func()]) {
		if rep.err != nil {
			return
		}
		mu.Lock()
		if stopped {
			mu.Unlock()
			rep.val()
			return
		}
		stops = append(stops, rep.val)
		mu.Unlock()
	}
	stop := func() {
		mu.Lock()
		stopped = true
		s := stops
		stops = nil
		mu.Unlock()
		for _, f := range s {
			f()
		}
	}
	var ok, failed int
	var first error
	fanOut(b, ctx, maxNodeTimeout, watch, func(rep reply[func()]) bool {
		keep(rep)
		if rep.err != nil {
			failed++
			if first == nil {
				first = rep.err
			}
		} else {
			ok++
		}
		return ok >= need || failed > len(b.nodes)-need
	}, keep)
	if ok < need {
		stop()
		return nil, b.noQuorum(what, failed, first)
	}
	return stop, nil
}

var _ store.RevokeWatcher = (*Backend)(nil)
