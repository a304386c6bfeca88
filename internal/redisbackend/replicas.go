package redisbackend

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/distlock/distlock/store"
	"github.com/redis/go-redis/v9"
)

// Replica acknowledgement: with Config.Replicas set, every script that
// takes or renews a lock (and once_done.lua, which records a run) is
// followed, on the same connection and in the same pipeline, by WAIT
// Replicas ReplicaTimeout, and counts only if that many replicas
// acknowledged it.
//
// WAIT waits for the replication offset of its connection's last write,
// and a master replicates one stream, in the order of its writes: an
// acknowledged write carries every earlier write of that master with it,
// whoever made it. So:
//
//   - an acquisition (a plain, fair or shared lock taken by its own
//     script), a renewal and Extend are covered by the WAIT after them. A
//     script that writes nothing would leave WAIT counting the
//     connection's previous write instead: the scripts write whenever they
//     take or renew, and go-redis is told not to send an acknowledged
//     pipeline again (noRetry), since a second copy of a script whose first
//     copy was applied finds its work done and writes nothing;
//   - a grant written by another client's script (a release, an
//     abandonment) or found by a refresh is confirmed by the grantee's own
//     renewal, the engine's confirmation (store.GrantConfirmer): the grant
//     was written before that renewal, so the WAIT after the renewal
//     covers it;
//   - a place in a queue is not acknowledged: a place that a failover loses
//     is found gone at its next refresh, and its waiter queues again.
//
// On a Cluster, WAIT must run at the master of the script's slot, on the
// script's connection: the scripts go to the slot's master client
// (MasterForKey), whose pipeline is one connection, rather than through
// the cluster pipeline, which would send a keyless WAIT to any node. A
// script refused with MOVED or ASK (the slot moved or is moving) was not
// run; it is sent again, with its own WAIT, to the node named, after
// ASKING for ASK, at most maxRedirects times. A redirection not followed
// is the script's outcome: an error, never a success.

// maxRedirects is how many MOVED or ASK redirections an acknowledged call
// follows, as go-redis's cluster client does by default.
const maxRedirects = 3

// An ackedCall is one script call of an acknowledged pipeline.
type ackedCall struct {
	script *redis.Script
	args   []any // see callArgs
	// wait: the call takes or renews a lock, and counts only once WAIT
	// acknowledged it (a place's refresh does not).
	wait bool
	// asking: send ASKING before it (the node is importing its slot).
	asking bool
	cmd    *redis.Cmd
	// ackErr is not nil if too few replicas acknowledged the pipeline that
	// carried cmd, or WAIT failed (wait calls only).
	ackErr error
}

// runAcked runs script as the pipeliner would, followed by WAIT when
// replicas are required. It returns the script's command, and an error
// wrapping ErrNotReplicated if the script succeeded but too few replicas
// acknowledged it in time.
func (b *Backend) runAcked(ctx context.Context, script *redis.Script, args []any) (*redis.Cmd, error) {
	if b.cfg.Replicas <= 0 {
		return b.pipe.run(ctx, script, args), nil
	}
	c := &ackedCall{script: script, args: args, wait: true}
	calls := []*ackedCall{c}
	if master, err := b.masterOf(ctx, firstKey(args)); err != nil {
		failCalls(ctx, calls, err)
	} else {
		b.sendAcked(ctx, master, calls, 0)
	}
	if c.cmd.Err() != nil {
		return c.cmd, nil
	}
	return c.cmd, c.ackErr
}

// masterOf returns the client of the master that serves key: the client
// itself but on a Cluster.
func (b *Backend) masterOf(ctx context.Context, key string) (redis.Cmdable, error) {
	cc, ok := b.rdb.(*redis.ClusterClient)
	if !ok {
		return b.rdb, nil
	}
	return cc.MasterForKey(ctx, key)
}

// failCalls makes err the outcome of calls that could not be sent.
func failCalls(ctx context.Context, calls []*ackedCall, err error) {
	for _, c := range calls {
		c.cmd = redis.NewCmd(ctx)
		c.cmd.SetErr(err)
	}
}

// sendAcked sends calls on one connection of client (a master), in one
// pipeline ended by WAIT if any of them needs it; calls whose script the
// server does not have (NOSCRIPT) go again in full in a second one. On a
// Cluster, calls refused with MOVED or ASK are sent to the node named;
// hops counts the redirections so far.
func (b *Backend) sendAcked(ctx context.Context, client redis.Cmdable, calls []*ackedCall, hops int) {
	b.pipelineAcked(ctx, client, calls, false)
	var again []*ackedCall
	for _, c := range calls {
		if redis.HasErrorPrefix(c.cmd.Err(), "NOSCRIPT") {
			again = append(again, c)
		}
	}
	if len(again) > 0 {
		b.pipelineAcked(ctx, client, again, true)
	}

	cc, ok := b.rdb.(*redis.ClusterClient)
	if !ok || hops >= maxRedirects {
		return
	}
	var addrs []string
	to := map[string][]*ackedCall{}
	moved := false
	for _, c := range calls {
		err := c.cmd.Err()
		if err == nil {
			continue
		}
		addr, ask := redis.IsAskError(err)
		if !ask {
			var isMoved bool
			if addr, isMoved = redis.IsMovedError(err); !isMoved {
				continue
			}
			moved = true
		}
		c.asking = ask
		if to[addr] == nil {
			addrs = append(addrs, addr)
		}
		to[addr] = append(to[addr], c)
	}
	if moved {
		cc.ReloadState(ctx) // the slot map is out of date
	}
	for _, addr := range addrs {
		if node := b.nodeAt(ctx, cc, addr); node != nil {
			b.sendAcked(ctx, node, to[addr], hops+1)
		}
		// A node not known: the redirection stays the outcome (nothing
		// was applied), and the engine counts it as a failure.
	}
}

// pipelineAcked sends calls in one pipeline of client, with EVAL if full
// (else EVALSHA), followed by WAIT if any of them needs it, and sets their
// acknowledgement.
//
// go-redis does not send it again after a failure (see noRetry), but for a
// connection that could not be made: nothing was sent then, and it is
// tried again, as go-redis would, dialRetries times.
func (b *Backend) pipelineAcked(ctx context.Context, client redis.Cmdable, calls []*ackedCall, full bool) {
	var cmd *redis.IntCmd
	for try := 0; ; try++ {
		pipe := client.Pipeline()
		wait := false
		for _, c := range calls {
			if c.asking {
				_ = pipe.Process(ctx, redis.NewStatusCmd(ctx, "asking"))
			}
			if full {
				c.cmd = eval(ctx, c.script, c.args)
			} else {
				c.cmd = evalSha(ctx, c.args)
			}
			_ = pipe.Process(ctx, c.cmd)
			wait = wait || c.wait
		}
		cmd = nil
		if wait {
			cmd = b.wait(ctx, pipe)
		}
		_, err := pipe.Exec(ctx)
		var op *net.OpError
		if try == dialRetries || !errors.As(err, &op) || op.Op != "dial" || !sleep(ctx, dialBackoff<<try) {
			break
		}
	}
	if cmd == nil {
		return
	}
	ackErr := b.acked(cmd)
	for _, c := range calls {
		if c.wait {
			c.ackErr = ackErr
		}
	}
}

// An acknowledged pipeline that could not connect is tried again
// dialRetries times, after dialBackoff, then twice that, and so on.
const (
	dialRetries = 3
	dialBackoff = 8 * time.Millisecond
)

// sleep waits for d, or until ctx ends; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// nodeAt returns the client of the cluster node at addr, as the slot map
// (reloaded first) knows it, or nil.
func (b *Backend) nodeAt(ctx context.Context, cc *redis.ClusterClient, addr string) *redis.Client {
	var mu sync.Mutex
	var node *redis.Client
	_ = cc.ForEachShard(ctx, func(_ context.Context, c *redis.Client) error {
		if c.Options().Addr == addr {
			mu.Lock()
			node = c
			mu.Unlock()
		}
		return nil
	})
	return node
}

// wait queues WAIT on pipe, marked so that go-redis never sends the
// pipeline twice (see noRetry).
func (b *Backend) wait(ctx context.Context, pipe redis.Pipeliner) *redis.IntCmd {
	cmd := redis.NewIntCmd(ctx, "wait", b.cfg.Replicas, b.cfg.ReplicaTimeout.Milliseconds())
	_ = pipe.Process(ctx, noRetry{cmd})
	return cmd
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

// acked is nil if wait's reply counts enough replicas, an error wrapping
// ErrNotReplicated (or the failure of WAIT itself, as ErrBackend)
// otherwise.
func (b *Backend) acked(wait *redis.IntCmd) error {
	n, err := wait.Result()
	switch {
	case err != nil:
		return fmt.Errorf("%w: WAIT: %w", store.ErrBackend, err)
	case n < int64(b.cfg.Replicas):
		return fmt.Errorf("%w: %d of %d replicas within %v", store.ErrNotReplicated, n, b.cfg.Replicas, b.cfg.ReplicaTimeout)
	}
	return nil
}

// ConfirmGrants implements store.GrantConfirmer: under replica
// acknowledgement, a grant written by another client's script counts once
// the grantee's own renewal after it was acknowledged.
func (b *Backend) ConfirmGrants() bool { return b.cfg.Replicas > 0 }

// errNoMaster is the outcome of renewals whose slot's master is unknown:
// under replica acknowledgement they cannot go through the cluster
// pipeline, which would send WAIT to any node.
var errNoMaster = errors.New("the master of the slot is unknown")
