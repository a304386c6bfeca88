package redlock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/distlock/distlock/store"
)

// A node that does not answer within the node timeout fails with
// ErrBackend, never with a context error: the request's context ends by
// that timeout, not by the caller's context, and a caller that saw
// context.DeadlineExceeded would take it for its own. Both ways a node
// times out are raced (fanOut's timer, and the node's own request ending
// with its context), many times.
func TestFanOutTimeoutIsNotTheCallersDeadline(t *testing.T) {
	b := &Backend{nodes: []node{{i: 0, addr: "a"}, {i: 1, addr: "b"}, {i: 2, addr: "c"}}, quorum: 2}
	for range 200 {
		var errs []error
		fanOut(b, context.Background(), time.Millisecond,
			func(ctx context.Context, _ node) (struct{}, error) {
				<-ctx.Done()
				return struct{}{}, ctx.Err() // as go-redis does for a context that ended
			},
			func(r reply[struct{}]) bool { errs = append(errs, r.err); return false }, nil)
		for _, err := range errs {
			if !errors.Is(err, store.ErrBackend) || errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("a node's timeout: %v; want ErrBackend, not the context's error", err)
			}
		}
	}
	b.bg.Wait()
}
