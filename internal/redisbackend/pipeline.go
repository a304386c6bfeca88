package redisbackend

import (
	"context"
	"sync"

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
	script *redis.Script
	keys   []string
	args   []any
	cmd    *redis.Cmd
	done   chan struct{}
}

func newPipeliner(rdb redis.UniversalClient, limit int) *pipeliner {
	return &pipeliner{rdb: rdb, limit: limit}
}

// run calls script. ctx bounds a call sent on its own; a queued call is
// sent with its pipeline, within the client's own timeouts.
func (p *pipeliner) run(ctx context.Context, script *redis.Script, keys []string, args ...any) *redis.Cmd {
	p.mu.Lock()
	if p.inflight < p.limit {
		p.inflight++
		p.mu.Unlock()
		cmd := evalSha(ctx, script, keys, args)
		_ = p.rdb.Process(ctx, cmd)
		if err := cmd.Err(); err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			cmd = script.Eval(ctx, p.rdb, keys, args...)
		}
		p.finish()
		return cmd
	}
	c := &call{script: script, keys: keys, args: args, done: make(chan struct{})}
	p.queue = append(p.queue, c)
	p.mu.Unlock()
	<-c.done
	return c.cmd
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
func (p *pipeliner) send(batch []*call) {
	ctx := context.Background()
	pipe := p.rdb.Pipeline()
	for _, c := range batch {
		c.cmd = evalSha(ctx, c.script, c.keys, c.args)
		_ = pipe.Process(ctx, c.cmd)
	}
	_, _ = pipe.Exec(ctx)
	for _, c := range batch {
		if err := c.cmd.Err(); err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			c.cmd = c.script.Eval(ctx, p.rdb, c.keys, c.args...)
		}
		close(c.done)
	}
}

// evalSha returns the EVALSHA command of script on keys and args, as
// go-redis's Script.EvalSha makes it, in one slice of arguments.
func evalSha(ctx context.Context, script *redis.Script, keys []string, args []any) *redis.Cmd {
	all := make([]any, 0, 3+len(keys)+len(args))
	all = append(all, "evalsha", hashes[script], len(keys))
	for _, k := range keys {
		all = append(all, k)
	}
	cmd := redis.NewCmd(ctx, append(all, args...)...)
	cmd.SetFirstKeyPos(3)
	return cmd
}
