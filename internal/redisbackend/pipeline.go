package redisbackend

import (
	"context"
	"sync"
	"time"
)

// pipeliner sends script calls from many goroutines in shared pipelines.
// While fewer than limit calls are on their way, a call goes out at once
// on its own, so a lone caller pays nothing. Beyond that, calls queue, and
// each call that completes sends everything queued meanwhile as one
// pipeline: under load, one round trip and one pair of syscalls carry many
// calls.
type pipeliner struct {
	conn  Conn
	limit int

	mu       sync.Mutex
	inflight int // round trips on their way: single calls and pipelines
	queue    []*call
}

type call struct {
	ctx context.Context
	Call
	done chan struct{}
}

func newPipeliner(conn Conn, limit int) *pipeliner {
	return &pipeliner{conn: conn, limit: limit}
}

// run makes the call of script whose arguments are args (see callArgs),
// within ctx. A queued call whose ctx ends before its pipeline is answered
// returns ctx's error, and may still be sent: its outcome is unknown.
func (p *pipeliner) run(ctx context.Context, script *Script, args []any) (any, error) {
	p.mu.Lock()
	if p.inflight < p.limit {
		p.inflight++
		p.mu.Unlock()
		reply, err := p.conn.Eval(ctx, script, args)
		p.finish()
		return reply, err
	}
	c := &call{ctx: ctx, Call: Call{Script: script, Args: args}, done: make(chan struct{})}
	p.queue = append(p.queue, c)
	p.mu.Unlock()
	select {
	case <-c.done:
		return c.Reply, c.Err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// finish ends a round trip: the queue, if any, takes over its place.
func (p *pipeliner) finish() {
	p.mu.Lock()
	if len(p.queue) == 0 {
		p.inflight--
		p.mu.Unlock()
		return
	}
	batch := p.queue
	p.queue = nil
	p.mu.Unlock()
	go func() {
		p.send(batch)
		p.finish()
	}()
}

// send runs a batch as one pipeline (see Conn.EvalPipeline).
//
// The pipeline is bounded by the latest deadline of its calls (a reply
// after that is of use to none of them), or by the client's own timeouts
// if one of them has none.
func (p *pipeliner) send(batch []*call) {
	ctx, cancel := batchContext(batch)
	defer cancel()
	calls := make([]*Call, len(batch))
	for i, c := range batch {
		calls[i] = &c.Call
	}
	p.conn.EvalPipeline(ctx, calls)
	for _, c := range batch {
		close(c.done)
	}
}

// batchContext returns a context for sending batch: it ends at the latest
// deadline of the calls' contexts, and never if one of them has none.
func batchContext(batch []*call) (context.Context, context.CancelFunc) {
	var last time.Time
	for _, c := range batch {
		d, ok := c.ctx.Deadline()
		if !ok {
			return context.Background(), func() {}
		}
		if d.After(last) {
			last = d
		}
	}
	return context.WithDeadline(context.Background(), last)
}
