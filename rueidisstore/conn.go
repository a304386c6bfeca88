package rueidisstore

import (
	"context"
	"errors"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/distlock/distlock/internal/redisbackend"
	"github.com/redis/rueidis"
)

// conn is the redisbackend.Conn of a rueidis client: standalone,
// Sentinel or Cluster. rueidis sends a script call once: it retries
// read-only commands only, and EVALSHA and EVAL are not.
type conn struct {
	client rueidis.Client
	slots  *slotMap // a Cluster's; nil elsewhere
}

func newConn(client rueidis.Client) *conn {
	c := &conn{client: client}
	if client.Mode() == rueidis.ClientModeCluster {
		c.slots = &slotMap{client: client}
	}
	return c
}

func (c *conn) Sharded() bool { return c.slots != nil }

func (c *conn) AutoPipelines() bool { return true }

// command builds a script call as client sends it: EVALSHA with the
// call's SHA-1, or, full, EVAL with the script's text. It is routed by its
// first key (rueidis's builder would panic on keys of several slots,
// which the server refuses anyway).
func command(client rueidis.Client, script *redisbackend.Script, args []any, full bool) rueidis.Completed {
	nkeys, _ := args[2].(int)
	head := []string{"EVALSHA", script.Hash(), strconv.Itoa(nkeys)}
	if full {
		head[0], head[1] = "EVAL", script.Text()
	}
	rest := make([]string, 0, len(args)-4)
	for _, a := range args[4:] {
		rest = append(rest, text(a))
	}
	return client.B().Arbitrary(head...).Keys(text(args[3])).Args(rest...).Build()
}

// text is a script argument as Redis gets it.
func text(a any) string {
	switch a := a.(type) {
	case string:
		return a
	case int:
		return strconv.Itoa(a)
	case int64:
		return strconv.FormatInt(a, 10)
	case uint64:
		return strconv.FormatUint(a, 10)
	}
	panic("rueidisstore: a script argument of an unexpected type") // the backend's arguments: cannot happen
}

// noScript reports whether err is the refusal of an EVALSHA whose script
// the server does not have.
func noScript(err error) bool {
	e, ok := rueidis.IsRedisErr(err)
	return ok && e.IsNoScript()
}

// Eval: see routed.
func (c *conn) Eval(ctx context.Context, script *redisbackend.Script, args []any) (reply any, err error) {
	c.routed(ctx, text(args[3]), func(client rueidis.Client) error {
		reply, err = eval(ctx, client, script, args)
		return err
	})
	return reply, err
}

// routed runs do with the client, for a command routed by key. On a
// Cluster, a command that could not be sent because its master does not
// answer (it died, and rueidis's own slot map, which it reads again in its
// own time, still names it) goes again, a few times, to the master that
// the store's slot map names once read again: right after a failover, a
// release or an Inspect would otherwise fail.
func (c *conn) routed(ctx context.Context, key string, do func(rueidis.Client) error) {
	err := do(c.client)
	for try := 0; c.slots != nil && c.Unsent(err) && try < unsentRetries && redisbackend.Sleep(ctx, unsentBackoff<<try); try++ {
		if c.slots.load(ctx) != nil {
			continue
		}
		addrs, ok := c.slots.masters(ctx, []string{key})
		if node := c.client.Nodes()[addrs[0]]; ok[0] && node != nil {
			err = do(node)
		}
	}
}

// A call not sent is sent again unsentRetries times at most, after
// unsentBackoff, then twice that, and so on.
const (
	unsentRetries = 4
	unsentBackoff = 50 * time.Millisecond
)

// eval makes one script call with client: EVALSHA, then EVAL if the
// server does not have the script.
func eval(ctx context.Context, client rueidis.Client, script *redisbackend.Script, args []any) (any, error) {
	reply, err := client.Do(ctx, command(client, script, args, false)).ToAny()
	if noScript(err) {
		reply, err = client.Do(ctx, command(client, script, args, true)).ToAny()
	}
	return reply, err
}

// EvalPipeline: a Cluster client's DoMulti sends each call to its slot's
// master, following redirections.
func (c *conn) EvalPipeline(ctx context.Context, calls []*redisbackend.Call) {
	pipeline(ctx, c.client, calls, nil, 0, 0)
}

// pipeline sends calls with one DoMulti of client (on one connection, in
// order, but on a Cluster client), each after ASKING if asking says so,
// followed by WAIT if replicas is above 0; calls whose script the server
// does not have go again in full in a second one.
func pipeline(ctx context.Context, client rueidis.Client, calls []*redisbackend.Call, asking map[*redisbackend.Call]bool,
	replicas int, timeout time.Duration) {
	run := func(which []*redisbackend.Call, full bool) {
		cmds := make(rueidis.Commands, 0, 2*len(which)+1)
		at := make([]int, len(which)) // where each call's command is in cmds
		wait := false
		for i, call := range which {
			if asking[call] {
				cmds = append(cmds, client.B().Asking().Build())
			}
			at[i] = len(cmds)
			cmds = append(cmds, command(client, call.Script, call.Args, full))
			wait = wait || call.Wait
		}
		wait = wait && replicas > 0
		if wait {
			cmds = append(cmds, client.B().Wait().Numreplicas(int64(replicas)).Timeout(timeout.Milliseconds()).Build())
		}
		res := client.DoMulti(ctx, cmds...)
		for i, call := range which {
			call.Reply, call.Err = res[at[i]].ToAny()
			if wait && call.Wait {
				call.Acked, call.AckErr = res[len(cmds)-1].AsInt64()
			}
		}
	}
	run(calls, false)
	var again []*redisbackend.Call
	for _, call := range calls {
		if noScript(call.Err) {
			again = append(again, call)
		}
	}
	if len(again) > 0 {
		run(again, true)
	}
}

// EvalAcked: rueidis sends a DoMulti of a standalone or Sentinel client,
// or of one node's client, on one connection, its commands one after the
// other, so the WAIT that ends it counts the calls' writes. On a Cluster
// the calls go to their master's own client (Nodes), which follows no
// redirection: SendAcked does.
func (c *conn) EvalAcked(ctx context.Context, calls []*redisbackend.Call, replicas int, timeout time.Duration) {
	if c.slots == nil {
		pipeline(ctx, c.client, calls, nil, replicas, timeout)
		return
	}
	redisbackend.SendAcked(ctx, c, calls, func(addr string, calls []*redisbackend.Call, asking map[*redisbackend.Call]bool) {
		if addr != "" {
			if node := c.client.Nodes()[addr]; node != nil {
				pipeline(ctx, node, calls, asking, replicas, timeout)
			}
			return // a redirection to a node not known: it stays the outcome
		}
		// The master of the calls' slot, as the store's slot map says: read
		// again when it does not know it, or when it named a master that
		// could not be reached (a failover), before each try again.
		key := text(calls[0].Args[3])
		unsent := calls
		for try := 0; ; try++ {
			node := c.masterOf(ctx, key)
			if node == nil {
				failCalls(unsent, errNoMaster)
			} else {
				pipeline(ctx, node, unsent, asking, replicas, timeout)
			}
			unsent = slices.DeleteFunc(slices.Clone(unsent), func(call *redisbackend.Call) bool {
				return !c.Unsent(call.Err) && !errors.Is(call.Err, errNoMaster)
			})
			if len(unsent) == 0 || try == unsentRetries || !redisbackend.Sleep(ctx, unsentBackoff<<try) || c.slots.load(ctx) != nil {
				return
			}
		}
	})
}

// masterOf returns the client of the master of key's slot, as the store's
// slot map names it, reading the map again if the client does not know
// that master; nil if it still does not.
func (c *conn) masterOf(ctx context.Context, key string) rueidis.Client {
	for try := 0; ; try++ {
		addrs, ok := c.slots.masters(ctx, []string{key})
		if node := c.client.Nodes()[addrs[0]]; ok[0] && node != nil {
			return node
		}
		if try > 0 || c.slots.load(ctx) != nil {
			return nil
		}
	}
}

var errNoMaster = errors.New("rueidisstore: the master of the slot is unknown")

// failCalls makes err the outcome of calls that could not be sent.
func failCalls(calls []*redisbackend.Call, err error) {
	for _, call := range calls {
		call.Reply, call.Err = nil, err
	}
}

func (c *conn) Masters(ctx context.Context, keys []string) ([]string, []bool) {
	if c.slots != nil {
		return c.slots.masters(ctx, keys)
	}
	ok := make([]bool, len(keys))
	for i := range ok {
		ok[i] = true
	}
	return make([]string, len(keys)), ok
}

func (c *conn) Reload(ctx context.Context) {
	if c.slots != nil {
		_ = c.slots.load(ctx)
	}
}

func (c *conn) Info(ctx context.Context) (string, error) {
	s, err := c.client.Do(ctx, c.client.B().Info().Section("server").Build()).ToString()
	return strings.TrimPrefix(s, "txt:"), err // RESP3 replies with a verbatim string
}

func (c *conn) Del(ctx context.Context, key string) (int64, error) {
	return c.client.Do(ctx, c.client.B().Del().Key(key).Build()).AsInt64()
}

func (c *conn) Subscribers(ctx context.Context, channel string) (n int64, err error) {
	c.routed(ctx, channel, func(client rueidis.Client) error {
		cmd := client.B().PubsubNumsub().Channel(channel).Build()
		if c.slots != nil { // sharded subscriptions, counted at the slot's master
			cmd = client.B().PubsubShardnumsub().Channel(channel).Build()
		}
		var res []rueidis.RedisMessage
		if res, err = client.Do(ctx, cmd).ToArray(); err != nil {
			return err
		}
		if len(res) != 2 {
			err = errors.New("PUBSUB NUMSUB: unexpected reply")
			return err
		}
		n, err = res[1].AsInt64()
		return err
	})
	return n, err
}

func (c *conn) Scan(ctx context.Context, match string, fn func(key string)) error {
	if c.slots == nil {
		return scan(ctx, c.client, match, fn)
	}
	nodes, err := c.masterNodes(ctx)
	if err != nil {
		return err
	}
	for _, node := range nodes {
		if err := scan(ctx, node, match, fn); err != nil {
			return err
		}
	}
	return nil
}

// masterNodes returns the clients of every master of the store's slot
// map, reading the map again, once, if the client does not know one of
// them (a failover).
func (c *conn) masterNodes(ctx context.Context) ([]rueidis.Client, error) {
	for try := 0; ; try++ {
		addrs, err := c.slots.all(ctx)
		if err != nil {
			return nil, err
		}
		known := c.client.Nodes()
		nodes, missing := make([]rueidis.Client, 0, len(addrs)), ""
		for _, addr := range addrs {
			if node := known[addr]; node != nil {
				nodes = append(nodes, node)
			} else {
				missing = addr
			}
		}
		switch {
		case missing == "":
			return nodes, nil
		case try > 0:
			return nil, errors.New("rueidisstore: master " + missing + " not known to the client")
		}
		if err := c.slots.load(ctx); err != nil {
			return nil, err
		}
	}
}

// scan calls fn with every key of client's node that matches match.
func scan(ctx context.Context, client rueidis.Client, match string, fn func(key string)) error {
	var cursor uint64
	for {
		e, err := client.Do(ctx, client.B().Scan().Cursor(cursor).Match(match).Count(1000).Build()).AsScanEntry()
		if err != nil {
			return err
		}
		for _, k := range e.Elements {
			fn(k)
		}
		if cursor = e.Cursor; cursor == 0 {
			return nil
		}
	}
}

func (c *conn) IsReply(err error) bool {
	var e *rueidis.RedisError
	return errors.As(err, &e) && !e.IsNil()
}

// Unsent: rueidis reports a connection it could not make with the
// dialer's error, and sends the command on no other.
func (c *conn) Unsent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}
