package redlock

import (
	"context"
	"fmt"
	"time"

	"github.com/distlock/distlock/internal/engine"
)

// A reply is one node's answer to a request sent to every node.
type reply[T any] struct {
	node int
	val  T
	err  error
}

// fanOut sends op to every node at once and hands the replies to decide as
// they come; it returns once decide returns true or every node replied.
//
// A node that has not answered within timeout counts as failed (an error
// wrapping ErrBackend): fanOut keeps that bound itself, since go-redis
// bounds a read by its ReadTimeout, not by the context's deadline, unless
// ContextTimeoutEnabled is set. The request itself runs on under a context
// of its own (ctx's values without its cancellation, and timeout): it may
// be applied whether or not anyone waits for it. A reply that comes after
// the outcome was decided goes to late, if not nil, in the background
// (Close waits for it and for every request).
func fanOut[T any](b *Backend, ctx context.Context, timeout time.Duration,
	op func(ctx context.Context, n node) (T, error), decide func(reply[T]) bool, late func(reply[T])) {
	replies := make(chan reply[T], len(b.nodes))
	base := context.WithoutCancel(ctx)
	for i, n := range b.nodes {
		b.bg.Add(2)
		done := make(chan reply[T], 1)
		go func() {
			defer b.bg.Done()
			nctx, cancel := context.WithTimeout(base, timeout)
			defer cancel()
			v, err := op(nctx, n)
			done <- reply[T]{node: i, val: v, err: err}
		}()
		go func() {
			defer b.bg.Done()
			t := time.NewTimer(timeout)
			defer t.Stop()
			select {
			case r := <-done:
				replies <- r
			case <-t.C:
				replies <- reply[T]{node: i, err: fmt.Errorf("%w: master %s: no reply within %v", engine.ErrBackend, n.addr, timeout)}
			}
		}()
	}
	left := len(b.nodes)
	for left > 0 {
		r := <-replies
		left--
		if decide(r) {
			break
		}
	}
	if left == 0 {
		return
	}
	b.bg.Add(1)
	go func() {
		defer b.bg.Done()
		for ; left > 0; left-- {
			r := <-replies
			if late != nil {
				late(r)
			}
		}
	}()
}
