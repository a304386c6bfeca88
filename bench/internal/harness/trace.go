package harness

import (
	"context"
	"net"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// A traceHook timestamps, once armed, the first read from any connection
// of a go-redis client (for a waiter: the release notification arriving)
// and the first command sent after it (the acquisition attempt) and its
// reply. The hand-over scenario uses it in the waiter process to split a
// hand-over's latency into its steps.
type traceHook struct {
	armed             atomic.Bool
	read, issue, done atomic.Int64 // unix ns; 0 when not seen
}

var _ redis.Hook = (*traceHook)(nil)

// arm clears the timestamps and starts recording.
func (h *traceHook) arm() {
	h.read.Store(0)
	h.issue.Store(0)
	h.done.Store(0)
	h.armed.Store(true)
}

func (h *traceHook) disarm() { h.armed.Store(false) }

type tracedConn struct {
	net.Conn
	h *traceHook
}

func (c tracedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 && c.h.armed.Load() {
		c.h.read.CompareAndSwap(0, time.Now().UnixNano())
	}
	return n, err
}

func (h *traceHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := next(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return tracedConn{c, h}, nil
	}
}

func (h *traceHook) around(next func() error) error {
	if !h.armed.Load() || h.read.Load() == 0 {
		return next()
	}
	first := h.issue.CompareAndSwap(0, time.Now().UnixNano())
	err := next()
	if first {
		h.done.Store(time.Now().UnixNano())
	}
	return err
}

func (h *traceHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		return h.around(func() error { return next(ctx, cmd) })
	}
}

func (h *traceHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		return h.around(func() error { return next(ctx, cmds) })
	}
}

// A Breakdown splits one hand-over: from the start of the release to the
// notification's first byte read by the waiter process, to the waiter
// sending its acquisition attempt, to that attempt's reply, to Lock
// returning. Zero when not traced.
type Breakdown struct {
	ToRead, ToIssue, RoundTrip, ToReturn time.Duration
}

// tracedLibs are the libraries whose waiter can be traced: go-redis based
// and woken by a message (the spinning baseline never waits, redsync and
// bsm/redislock poll on a timer).
func traced(lib string) bool { return lib == Distlock || lib == RawPubSub }
