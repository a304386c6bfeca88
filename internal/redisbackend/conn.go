package redisbackend

import (
	"context"
	"strings"
	"time"
)

// A Conn is the Redis client under a Backend: the few things the backend
// asks of Redis, whichever client library carries them. GoRedis makes one
// of a go-redis client; a Conn of another library lives in a module of its
// own (so that go-redis users do not build it; its users still build
// go-redis, which this package imports for GoRedis), and passes the
// same tests.
//
// A script call's args are those of EVALSHA as callArgs builds them:
// "evalsha", the script's SHA-1, the number of keys, the keys, then the
// script's arguments (strings, integers). Its reply is the script's, in Go
// values: int64, string, nil, []any, and an error value for an error
// reply inside an array. A Conn answers NOSCRIPT by sending the call
// again as EVAL with the script's text, which loads it.
//
// A Conn must not send a script call twice on its own (a retry after a
// lost reply): a second copy of a call whose first was applied finds its
// work done and answers otherwise, and under replica acknowledgement the
// WAIT after it would count another write. A call whose reply was lost is
// an error, which the engine counts as possibly applied.
type Conn interface {
	// Sharded reports a Redis Cluster: pub/sub sharded by slot
	// (SPUBLISH, SSUBSCRIBE), renewals grouped by master.
	Sharded() bool

	// Eval makes one script call, at the master of its first key.
	Eval(ctx context.Context, script *Script, args []any) (any, error)
	// EvalPipeline makes calls in one pipeline (per master, on a
	// Cluster), and sets each one's outcome.
	EvalPipeline(ctx context.Context, calls []*Call)
	// EvalAcked makes calls, which all live on one master (the master of
	// the first call's first key), in one pipeline on one connection of
	// it, followed by WAIT replicas timeout if any of them has Wait set,
	// and sets each one's outcome and, for those with Wait, the WAIT's. A
	// call refused with MOVED or ASK (its slot moved, or is moving) was
	// not run: the Conn sends it again, with a WAIT of its own, to the
	// node named, a few times at most; a redirection not followed is the
	// call's error.
	EvalAcked(ctx context.Context, calls []*Call, replicas int, timeout time.Duration)
	// Masters returns the address of the master of each key's slot on a
	// Cluster (ok false when the slot map does not say), and "" with ok
	// true for each key elsewhere: one master serves them all.
	Masters(ctx context.Context, keys []string) (addrs []string, ok []bool)
	// Reload has a Cluster client read the slot map again, after a node
	// could not be reached or answered MOVED; elsewhere it does nothing.
	Reload(ctx context.Context)

	// Info returns the reply to INFO server (of any node of a Cluster).
	Info(ctx context.Context) (string, error)
	// Del deletes key and returns how many keys it deleted.
	Del(ctx context.Context, key string) (int64, error)
	// Subscribers returns how many connections subscribe to channel: with
	// PUBSUB SHARDNUMSUB at the master of its slot on a Cluster, PUBSUB
	// NUMSUB elsewhere.
	Subscribers(ctx context.Context, channel string) (int64, error)
	// Scan calls fn with every key that matches the glob pattern match,
	// on every master (SCAN, never KEYS).
	Scan(ctx context.Context, match string, fn func(key string)) error

	// Subscribe returns a new pub/sub connection: sharded (SSUBSCRIBE, on
	// the master of its channels' slot) or not. It connects when its
	// first channel is subscribed.
	Subscribe(sharded bool) PubSub

	// IsReply reports whether err is an error reply of the server (a
	// command refused), as opposed to a failure to reach it or to read
	// its reply.
	IsReply(err error) bool
	// Unsent reports whether err, the failure of a command, says that the
	// command was not sent: no connection could be made, none was free in
	// time, or the client is closed. A Conn that cannot tell says false.
	Unsent(err error) bool
}

// A Call is one script call of a pipeline, and once made, its outcome.
type Call struct {
	Script *Script
	Args   []any // see callArgs
	// Wait: under replica acknowledgement, the call counts only once
	// WAIT acknowledged it (EvalAcked).
	Wait bool

	Reply any
	Err   error
	// Acked is the reply to the WAIT that followed the call (calls with
	// Wait, if Err is nil), and AckErr the failure of that WAIT.
	Acked  int64
	AckErr error
}

// A PubSub is a connection that subscribes to channels. Its events come
// to the function given to Run, or, before Run, from Receive. A PubSub
// that loses its connection connects again and subscribes its channels
// again: the confirmations of those subscriptions come as events too,
// which is how its reader learns that messages may have been lost.
type PubSub interface {
	// Subscribe subscribes to channels: it returns once the command is
	// sent; the confirmation comes as an event.
	Subscribe(ctx context.Context, channels ...string) error
	// Unsubscribe ends the subscription of channel.
	Unsubscribe(ctx context.Context, channel string) error
	// Receive returns the next event, waiting for timeout at most (0:
	// until ctx ends). It is not to be called once Run has started.
	Receive(ctx context.Context, timeout time.Duration) (Event, error)
	// Run passes every event to fn, in order, until the PubSub is
	// closed.
	Run(fn func(Event))
	// Close ends the connection; Run returns.
	Close() error
}

// An Event is what a PubSub receives.
type Event struct {
	Kind    EventKind
	Channel string
	Payload string // a Message's
}

// The kinds of Event.
type EventKind int

const (
	Message      EventKind = iota + 1 // a message published on Channel
	Subscribed                        // a subscription of Channel confirmed (SUBSCRIBE, SSUBSCRIBE)
	Unsubscribed                      // Channel's subscription ended (by Unsubscribe, or, sharded, by the server: its slot moved)
)

// isReply reports whether err is an error reply of the server that
// starts with prefix (after an "ERR " that some servers put before it).
func isReply(c Conn, err error, prefix string) bool {
	if err == nil || !c.IsReply(err) {
		return false
	}
	msg := strings.TrimPrefix(err.Error(), "ERR ")
	return strings.HasPrefix(msg, prefix)
}
