package rueidisstore

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/distlock/distlock/internal/redisbackend"
	"github.com/redis/rueidis"
)

// conn is the redisbackend.Conn of a standalone or Sentinel rueidis
// client. rueidis sends a script call once: it retries read-only
// commands only, and EVALSHA and EVAL are not.
type conn struct {
	client rueidis.Client
}

func newConn(client rueidis.Client) *conn { return &conn{client: client} }

func (c *conn) Sharded() bool { return false }

// command builds a script call as rueidis sends it: EVALSHA with the
// call's SHA-1, or, full, EVAL with the script's text.
func (c *conn) command(script *redisbackend.Script, args []any, full bool) rueidis.Completed {
	nkeys, _ := args[2].(int)
	head := []string{"EVALSHA", script.Hash(), strconv.Itoa(nkeys)}
	if full {
		head[0], head[1] = "EVAL", script.Text()
	}
	keys := make([]string, 0, nkeys)
	for _, k := range args[3 : 3+nkeys] {
		keys = append(keys, text(k))
	}
	argv := make([]string, 0, len(args)-3-nkeys)
	for _, a := range args[3+nkeys:] {
		argv = append(argv, text(a))
	}
	return c.client.B().Arbitrary(head...).Keys(keys...).Args(argv...).Build()
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

func (c *conn) Eval(ctx context.Context, script *redisbackend.Script, args []any) (any, error) {
	reply, err := c.client.Do(ctx, c.command(script, args, false)).ToAny()
	if noScript(err) {
		reply, err = c.client.Do(ctx, c.command(script, args, true)).ToAny()
	}
	return reply, err
}

func (c *conn) EvalPipeline(ctx context.Context, calls []*redisbackend.Call) {
	c.pipeline(ctx, calls, 0, 0)
}

// pipeline sends calls with one DoMulti (on one connection, in order),
// followed by WAIT if replicas is above 0; calls whose script the server
// does not have go again in full in a second one.
func (c *conn) pipeline(ctx context.Context, calls []*redisbackend.Call, replicas int, timeout time.Duration) {
	run := func(which []*redisbackend.Call, full bool) {
		cmds := make(rueidis.Commands, 0, len(which)+1)
		wait := false
		for _, call := range which {
			cmds = append(cmds, c.command(call.Script, call.Args, full))
			wait = wait || call.Wait
		}
		wait = wait && replicas > 0
		if wait {
			cmds = append(cmds, c.client.B().Wait().Numreplicas(int64(replicas)).Timeout(timeout.Milliseconds()).Build())
		}
		res := c.client.DoMulti(ctx, cmds...)
		for i, call := range which {
			call.Reply, call.Err = res[i].ToAny()
			if wait && call.Wait {
				call.Acked, call.AckErr = res[len(which)].AsInt64()
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

// EvalAcked: rueidis sends a DoMulti on one connection, its commands one
// after the other, so the WAIT that ends it counts the calls' writes.
func (c *conn) EvalAcked(ctx context.Context, calls []*redisbackend.Call, replicas int, timeout time.Duration) {
	c.pipeline(ctx, calls, replicas, timeout)
}

func (c *conn) Masters(_ context.Context, keys []string) ([]string, []bool) {
	ok := make([]bool, len(keys))
	for i := range ok {
		ok[i] = true
	}
	return make([]string, len(keys)), ok
}

func (c *conn) Reload(context.Context) {}

func (c *conn) Info(ctx context.Context) (string, error) {
	s, err := c.client.Do(ctx, c.client.B().Info().Section("server").Build()).ToString()
	return strings.TrimPrefix(s, "txt:"), err // RESP3 replies with a verbatim string
}

func (c *conn) Del(ctx context.Context, key string) (int64, error) {
	return c.client.Do(ctx, c.client.B().Del().Key(key).Build()).AsInt64()
}

func (c *conn) Subscribers(ctx context.Context, channel string) (int64, error) {
	res, err := c.client.Do(ctx, c.client.B().PubsubNumsub().Channel(channel).Build()).ToArray()
	if err != nil {
		return 0, err
	}
	if len(res) != 2 {
		return 0, errors.New("PUBSUB NUMSUB: unexpected reply")
	}
	return res[1].AsInt64()
}

func (c *conn) Scan(ctx context.Context, match string, fn func(key string)) error {
	var cursor uint64
	for {
		e, err := c.client.Do(ctx, c.client.B().Scan().Cursor(cursor).Match(match).Count(1000).Build()).AsScanEntry()
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
