package redisbackend

import (
	"context"
	"errors"
	"net"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// GoRedis returns the Conn of a go-redis client: standalone, Sentinel
// (failover) or Cluster.
func GoRedis(rdb redis.UniversalClient) Conn {
	cc, _ := rdb.(*redis.ClusterClient)
	return &goRedis{rdb: rdb, cluster: cc}
}

type goRedis struct {
	rdb     redis.UniversalClient
	cluster *redis.ClusterClient // nil but on a Cluster
}

func (g *goRedis) Sharded() bool { return g.cluster != nil }

// evalSha returns the command of a call, as go-redis takes it: the call's
// args are the command's arguments, built to be used as they are.
func evalSha(ctx context.Context, args []any) *redis.Cmd {
	cmd := redis.NewCmd(ctx, args...)
	cmd.SetFirstKeyPos(3)
	return cmd
}

// eval returns the call as EVAL with script's text, which makes Redis
// load it: for a call refused with NOSCRIPT.
func eval(ctx context.Context, script *Script, args []any) *redis.Cmd {
	all := append([]any{"eval", script.text}, args[2:]...)
	cmd := redis.NewCmd(ctx, all...)
	cmd.SetFirstKeyPos(3)
	return cmd
}

// noScript reports whether err is the refusal of an EVALSHA whose script
// the server does not have.
func noScript(err error) bool {
	return err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") // HasErrorPrefix allocates
}

func (g *goRedis) Eval(ctx context.Context, script *Script, args []any) (any, error) {
	cmd := evalSha(ctx, args)
	_ = g.rdb.Process(ctx, cmd)
	if noScript(cmd.Err()) {
		cmd = eval(ctx, script, args)
		_ = g.rdb.Process(ctx, cmd)
	}
	return cmd.Val(), cmd.Err()
}

// EvalPipeline sends calls in one pipeline of the client (a Cluster
// client's routes each to its slot's master, following redirections);
// calls whose script the server does not have go again in full in a
// second one.
func (g *goRedis) EvalPipeline(ctx context.Context, calls []*Call) {
	run := func(which []*Call, full bool) {
		pipe := g.rdb.Pipeline()
		cmds := make([]*redis.Cmd, len(which))
		for i, c := range which {
			if full {
				cmds[i] = eval(ctx, c.Script, c.Args)
			} else {
				cmds[i] = evalSha(ctx, c.Args)
			}
			_ = pipe.Process(ctx, cmds[i])
		}
		_, _ = pipe.Exec(ctx)
		for i, c := range which {
			c.Reply, c.Err = cmds[i].Val(), cmds[i].Err()
		}
	}
	run(calls, false)
	var again []*Call
	for _, c := range calls {
		if noScript(c.Err) {
			again = append(again, c)
		}
	}
	if len(again) > 0 {
		run(again, true)
	}
}

// EvalAcked: on a Cluster, WAIT must run at the master of the calls'
// slot, on their connection: the calls go to that master's client
// (MasterForKey), whose pipeline is one connection, rather than through
// the cluster pipeline, which would send a keyless WAIT to any node.
func (g *goRedis) EvalAcked(ctx context.Context, calls []*Call, replicas int, timeout time.Duration) {
	SendAcked(ctx, g, calls, func(addr string, calls []*Call, asking map[*Call]bool) {
		var client redis.Cmdable = g.rdb
		switch {
		case g.cluster != nil && addr == "":
			node, err := g.cluster.MasterForKey(ctx, firstKey(calls[0].Args))
			if err != nil {
				failCalls(calls, err)
				return
			}
			client = node
		case g.cluster != nil:
			node := g.nodeAt(ctx, addr)
			if node == nil {
				return
			}
			client = node
		}
		g.pipelineAcked(ctx, client, calls, asking, false, replicas, timeout)
		var again []*Call
		for _, c := range calls {
			if noScript(c.Err) {
				again = append(again, c)
			}
		}
		if len(again) > 0 {
			g.pipelineAcked(ctx, client, again, asking, true, replicas, timeout)
		}
	})
}

// pipelineAcked sends calls in one pipeline of client, with EVAL if full
// (else EVALSHA), followed by WAIT if any of them needs it, and sets their
// outcomes.
//
// go-redis does not send it again after a failure (see noRetry), but for a
// connection that could not be made: nothing was sent then, and it is
// tried again, as go-redis would, dialRetries times.
func (g *goRedis) pipelineAcked(ctx context.Context, client redis.Cmdable, calls []*Call, asking map[*Call]bool, full bool,
	replicas int, timeout time.Duration) {
	cmds := make([]*redis.Cmd, len(calls))
	var wait *redis.IntCmd
	for try := 0; ; try++ {
		pipe := client.Pipeline()
		needWait := false
		for i, c := range calls {
			if asking[c] {
				_ = pipe.Process(ctx, redis.NewStatusCmd(ctx, "asking"))
			}
			if full {
				cmds[i] = eval(ctx, c.Script, c.Args)
			} else {
				cmds[i] = evalSha(ctx, c.Args)
			}
			_ = pipe.Process(ctx, cmds[i])
			needWait = needWait || c.Wait
		}
		wait = nil
		if needWait {
			wait = redis.NewIntCmd(ctx, "wait", replicas, timeout.Milliseconds())
			_ = pipe.Process(ctx, noRetry{wait})
		}
		_, err := pipe.Exec(ctx)
		var op *net.OpError
		if try == dialRetries || !errors.As(err, &op) || op.Op != "dial" || !Sleep(ctx, dialBackoff<<try) {
			break
		}
	}
	for i, c := range calls {
		c.Reply, c.Err = cmds[i].Val(), cmds[i].Err()
		if c.Wait && wait != nil {
			c.Acked, c.AckErr = wait.Result()
		}
	}
}

// An acknowledged pipeline that could not connect is tried again
// dialRetries times, after dialBackoff, then twice that, and so on.
const (
	dialRetries = 3
	dialBackoff = 8 * time.Millisecond
)

// Sleep waits for d, or until ctx ends; it reports whether d passed. It
// is for a Conn's retries.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// noRetry is a command that keeps go-redis from sending its pipeline again
// after a failure (MaxRetries), which it otherwise does after a lost reply
// or a read timeout: a second copy of a script whose first copy was
// applied finds its work done and writes nothing, so the WAIT after it
// would count the replicas of the new connection's previous write, not of
// the lock. The failure is the outcome instead (unknown: the engine cleans
// up).
type noRetry struct{ *redis.IntCmd }

// NoRetry implements redis.Cmder.
func (noRetry) NoRetry() bool { return true }

// nodeAt returns the client of the cluster node at addr, as the slot map
// knows it, or nil.
func (g *goRedis) nodeAt(ctx context.Context, addr string) *redis.Client {
	var mu sync.Mutex
	var node *redis.Client
	_ = g.cluster.ForEachShard(ctx, func(_ context.Context, c *redis.Client) error {
		if c.Options().Addr == addr {
			mu.Lock()
			node = c
			mu.Unlock()
		}
		return nil
	})
	return node
}

func (g *goRedis) Masters(ctx context.Context, keys []string) ([]string, []bool) {
	addrs, ok := make([]string, len(keys)), make([]bool, len(keys))
	for i, k := range keys {
		if g.cluster == nil {
			ok[i] = true
			continue
		}
		if node, err := g.cluster.MasterForKey(ctx, k); err == nil {
			addrs[i], ok[i] = node.Options().Addr, true
		}
	}
	return addrs, ok
}

func (g *goRedis) Reload(ctx context.Context) {
	if g.cluster != nil {
		g.cluster.ReloadState(ctx)
	}
}

func (g *goRedis) Info(ctx context.Context) (string, error) {
	return g.rdb.Info(ctx, "server").Result()
}

func (g *goRedis) Del(ctx context.Context, key string) (int64, error) {
	return g.rdb.Del(ctx, key).Result()
}

func (g *goRedis) Subscribers(ctx context.Context, channel string) (int64, error) {
	var m map[string]int64
	var err error
	if g.cluster != nil {
		// Sharded subscriptions are counted by the node of the slot.
		node, nerr := g.cluster.MasterForKey(ctx, channel)
		if nerr != nil {
			return 0, nerr
		}
		m, err = node.PubSubShardNumSub(ctx, channel).Result()
	} else {
		m, err = g.rdb.PubSubNumSub(ctx, channel).Result()
	}
	return m[channel], err
}

func (g *goRedis) Scan(ctx context.Context, match string, fn func(key string)) error {
	var mu sync.Mutex
	scan := func(ctx context.Context, c redis.UniversalClient) error {
		iter := c.Scan(ctx, 0, match, 1000).Iterator()
		for iter.Next(ctx) {
			mu.Lock()
			fn(iter.Val())
			mu.Unlock()
		}
		return iter.Err()
	}
	if g.cluster != nil {
		return g.cluster.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return scan(ctx, c) })
	}
	return scan(ctx, g.rdb)
}

func (g *goRedis) IsReply(err error) bool {
	var e redis.Error
	return errors.As(err, &e)
}

// Unsent: go-redis reports the error of a command's last attempt, and
// retries (MaxRetries) a command whose connection broke after it was
// written. So a command written on a connection that then broke, and
// whose every retry failed to connect, is reported unsent although its
// first attempt may have been applied: by a server that ran it and went
// down before it replied, and still had it when it came back. What that
// attempt took then expires with its lease; MaxRetries -1 rules it out.
func (g *goRedis) Unsent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial" ||
		errors.Is(err, redis.ErrPoolTimeout) || errors.Is(err, redis.ErrClosed)
}

func (g *goRedis) Subscribe(sharded bool) PubSub {
	ctx := context.Background()
	if sharded && g.cluster != nil {
		return &goRedisPubSub{ps: g.cluster.SSubscribe(ctx), sharded: true}
	}
	return &goRedisPubSub{ps: g.rdb.Subscribe(ctx)}
}

// goRedisPubSub is the PubSub of go-redis, which connects again and
// subscribes again by itself.
type goRedisPubSub struct {
	ps      *redis.PubSub
	sharded bool
}

func (p *goRedisPubSub) Subscribe(ctx context.Context, channels ...string) error {
	if p.sharded {
		return p.ps.SSubscribe(ctx, channels...)
	}
	return p.ps.Subscribe(ctx, channels...)
}

func (p *goRedisPubSub) Unsubscribe(ctx context.Context, channel string) error {
	if p.sharded {
		return p.ps.SUnsubscribe(ctx, channel)
	}
	return p.ps.Unsubscribe(ctx, channel)
}

func (p *goRedisPubSub) Receive(ctx context.Context, timeout time.Duration) (Event, error) {
	for {
		m, err := p.ps.ReceiveTimeout(ctx, timeout)
		if err != nil {
			return Event{}, err
		}
		if e, ok := event(m); ok {
			return e, nil
		}
	}
}

func (p *goRedisPubSub) Run(fn func(Event)) {
	for m := range p.ps.ChannelWithSubscriptions(redis.WithChannelSize(1024)) {
		if e, ok := event(m); ok {
			fn(e)
		}
	}
}

func (p *goRedisPubSub) Close() error { return p.ps.Close() }

// event reads a message of go-redis's pub/sub as an Event.
func event(m any) (Event, bool) {
	switch m := m.(type) {
	case *redis.Message:
		return Event{Kind: Message, Channel: m.Channel, Payload: m.Payload}, true
	case *redis.Subscription:
		switch m.Kind {
		case "subscribe", "ssubscribe":
			return Event{Kind: Subscribed, Channel: m.Channel}, true
		case "unsubscribe", "sunsubscribe":
			return Event{Kind: Unsubscribed, Channel: m.Channel}, true
		}
	}
	return Event{}, false
}

// LoadScripts loads every script of the backend on rdb (SCRIPT LOAD), so
// that their first EVALSHA does not fail with NOSCRIPT. The backend does
// not need it; tests that intercept EVALSHA calls do.
func LoadScripts(ctx context.Context, rdb redis.Scripter) error {
	for _, s := range scripts {
		if err := rdb.ScriptLoad(ctx, s.text).Err(); err != nil {
			return err
		}
	}
	return nil
}
