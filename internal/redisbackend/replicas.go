package redisbackend

import (
	"context"
	"errors"
	"fmt"

	"github.com/distlock/distlock/store"
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
//     take or renew, and a Conn never sends a call again by itself (a
//     second copy of a script whose first copy was applied finds its work
//     done and writes nothing);
//   - a grant written by another client's script (a release, an
//     abandonment) or found by a refresh is confirmed by the grantee's own
//     renewal, the engine's confirmation (store.GrantConfirmer): the grant
//     was written before that renewal, so the WAIT after the renewal
//     covers it;
//   - a place in a queue is not acknowledged: a place that a failover loses
//     is found gone at its next refresh, and its waiter queues again.
//
// On a Cluster, WAIT must run at the master of the script's slot, on the
// script's connection (Conn.EvalAcked). A script refused with MOVED or ASK
// (the slot moved or is moving) was not run; it is sent again, with its
// own WAIT, to the node named, after ASKING for ASK, a few times at most.
// A redirection not followed is the script's outcome: an error, never a
// success.

// runAcked runs script as the pipeliner would, followed by WAIT when
// replicas are required. It returns the script's reply and error, and
// ackErr, an error wrapping ErrNotReplicated if the script succeeded but
// too few replicas acknowledged it in time.
func (b *Backend) runAcked(ctx context.Context, script *Script, args []any) (reply any, ackErr, err error) {
	if b.cfg.Replicas <= 0 {
		reply, err = b.pipe.run(ctx, script, args)
		return reply, nil, err
	}
	c := &Call{Script: script, Args: args, Wait: true}
	b.conn.EvalAcked(ctx, []*Call{c}, b.cfg.Replicas, b.cfg.ReplicaTimeout)
	if c.Err != nil {
		return nil, nil, c.Err
	}
	return c.Reply, b.acked(c), nil
}

// failCalls makes err the outcome of calls that could not be sent.
func failCalls(calls []*Call, err error) {
	for _, c := range calls {
		c.Reply, c.Err = nil, err
	}
}

// acked is nil if the WAIT after c counted enough replicas, an error
// wrapping ErrNotReplicated (or the failure of WAIT itself, as
// ErrBackend) otherwise.
func (b *Backend) acked(c *Call) error {
	switch {
	case c.AckErr != nil:
		return fmt.Errorf("%w: WAIT: %w", store.ErrBackend, c.AckErr)
	case c.Acked < int64(b.cfg.Replicas):
		return fmt.Errorf("%w: %d of %d replicas within %v", store.ErrNotReplicated, c.Acked, b.cfg.Replicas, b.cfg.ReplicaTimeout)
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
