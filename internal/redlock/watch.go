package redlock

import (
	"context"
	"sync"

	"github.com/distlock/distlock/internal/engine"
)

// Watch implements engine.Backend: it watches the lock's releases on every
// node, and returns once a quorum of nodes confirmed. A release that frees
// the lock reaches a quorum of nodes, and two quorums meet, so it is heard
// on at least one watched node. A node that confirms later is watched too;
// one that never does is not (its releases are heard from the others).
func (b *Backend) Watch(ctx context.Context, name string, kind engine.Kind, wake func(engine.Notice)) (func(), error) {
	if kind != engine.Plain {
		return nil, Unsupported(kind)
	}
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
	fanOut(b, ctx, maxNodeTimeout, func(ctx context.Context, n node) (func(), error) {
		return n.Watch(ctx, name, kind, wake)
	}, func(rep reply[func()]) bool {
		keep(rep)
		if rep.err != nil {
			failed++
			if first == nil {
				first = rep.err
			}
		} else {
			ok++
		}
		return ok >= b.quorum || failed > len(b.nodes)-b.quorum
	}, keep)
	if ok < b.quorum {
		stop()
		return nil, b.noQuorum("watch", failed, first)
	}
	return stop, nil
}
