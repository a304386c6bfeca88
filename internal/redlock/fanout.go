package redlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/distlock/distlock/store"
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
// ContextTimeoutEnabled is set. The requests run on under a context of
// their own (ctx's values without its cancellation, and timeout): a
// request may be applied whether or not anyone waits for it. A reply that
// comes after the outcome was decided (or after its node was counted as
// failed) goes to late, if not nil, in the background; Close waits for it
// and for every request.
func fanOut[T any](b *Backend, ctx context.Context, timeout time.Duration,
	op func(ctx context.Context, n node) (T, error), decide func(reply[T]) bool, late func(reply[T])) {
	n := len(b.nodes)
	replies := make(chan reply[T], n)
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	b.bg.Add(n)
	noReply := func(i int) error {
		return fmt.Errorf("%w: master %s: no reply within %v", store.ErrBackend, b.nodes[i].addr, timeout)
	}
	for i, nd := range b.nodes {
		go func() {
			defer b.bg.Done()
			v, err := op(rctx, nd)
			if err != nil && rctx.Err() != nil && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)) {
				// rctx ends by the node's timeout alone (it is cut off
				// from ctx's cancellation): not the caller's context,
				// whose error the caller would take this for.
				err = noReply(i)
			}
			replies <- reply[T]{node: i, val: v, err: asSent(err)}
		}()
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	counted := make([]bool, n) // decided on: replied, or timed out
	received, left := 0, n
	decided := false
	for left > 0 && !decided {
		select {
		case r := <-replies:
			received++
			if counted[r.node] {
				if late != nil {
					late(r)
				}
				continue
			}
			counted[r.node] = true
			left--
			decided = decide(r)
		case <-timer.C:
			for i := 0; i < n && !decided; i++ {
				if !counted[i] {
					counted[i] = true
					left--
					decided = decide(reply[T]{node: i, err: noReply(i)})
				}
			}
		}
	}
	if received == n {
		cancel()
		return
	}
	b.bg.Add(1)
	go func() {
		defer b.bg.Done()
		defer cancel()
		for ; received < n; received++ {
			if r := <-replies; late != nil {
				late(r)
			}
		}
	}()
}

// asSent hides store.ErrUnsent in a node's err: one master's request that
// was not sent says nothing of the others', so no error of the quorum's
// claims that its request was not sent.
func asSent(err error) error {
	if err == nil || !errors.Is(err, store.ErrUnsent) {
		return err
	}
	return sentError{err}
}

// A sentError is err, matching every error that err matches but
// store.ErrUnsent.
type sentError struct{ err error }

func (e sentError) Error() string { return e.err.Error() }
func (e sentError) Is(target error) bool {
	return target != store.ErrUnsent && errors.Is(e.err, target)
}
func (e sentError) As(target any) bool { return errors.As(e.err, target) }
