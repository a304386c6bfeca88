package redisbackend

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// pipeliner sends script calls from many goroutines in shared pipelines.
// While fewer than limit calls are on their way, a call goes out at once
// on its own, so a lone caller pays nothing. Beyond that, calls queue, and
// each call that completes sends everything queued meanwhile as one
// pipeline: under load, one round trip and one pair of syscalls carry many
// calls.
type pipeliner struct {
	rdb   redis.UniversalClient
	limit int

	mu       sync.Mutex
	inflight int // round trips on their way: single calls and pipelines
	queue    []*call
}

type call struct {
	ctx    context.Context
	script *redis.Script
	args   []any // see callArgs
	cmd    *redis.Cmd
	done   chan struct{}
}

func newPipeliner(rdb redis.UniversalClient, limit int) *pipeliner {
	return &pipeliner{rdb: rdb, limit: limit}
}

// run makes the call of script whose arguments are args (see callArgs),
// within ctx. A queued call whose ctx ends before its pipeline is answered
// returns ctx's error, and may still be sent: its outcome is unknown.
func (p *pipeliner) run(ctx context.Context, script *redis.Script, args []any) *redis.Cmd {
	p.mu.Lock()
	if p.inflight < p.limit {
		p.inflight++
		p.mu.Unlock()
		cmd := process(ctx, p.rdb, script, args)
		p.finish()
		return cmd
	}
	c := &call{ctx: ctx, script: script, args: args, done: make(chan struct{})}
	p.queue = append(p.queue, c)
	p.mu.Unlock()
	select {
	case <-c.done:
		return c.cmd
	case <-ctx.Done():
		cmd := redis.NewCmd(ctx)
		cmd.SetErr(ctx.Err())
		return cmd
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

// send runs a batch as one pipeline; calls whose script the server does not
// have (NOSCRIPT) are run again on their own, which loads it.
//
// The pipeline is bounded by the latest deadline of its calls (a reply
// after that is of use to none of them), or by the client's own timeouts
// if one of them has none.
func (p *pipeliner) send(batch []*call) {
	ctx, cancel := batchContext(batch)
	defer cancel()
	pipe := p.rdb.Pipeline()
	for _, c := range batch {
		c.cmd = evalSha(ctx, c.args)
		_ = pipe.Process(ctx, c.cmd)
	}
	_, _ = pipe.Exec(ctx)
	for _, c := range batch {
		if err := c.cmd.Err(); err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			c.cmd = eval(ctx, c.script, c.args)
			_ = p.rdb.Process(ctx, c.cmd)
		}
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
