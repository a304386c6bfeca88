package redisbackend

import (
	"context"
	"fmt"

	"github.com/distlock/distlock/internal/engine"
	"github.com/redis/go-redis/v9"
)

// Replica acknowledgement: with Config.Replicas set, every script that
// takes or renews a lock is followed, on the same connection and in the
// same pipeline, by WAIT Replicas ReplicaTimeout, and counts only if that
// many replicas acknowledged it. WAIT covers the writes of its connection
// before it, so it needs the script and itself on one connection: a
// standalone or Sentinel client's pipeline (a Cluster client would send a
// keyless WAIT to any node; Client refuses that combination).

// runAcked runs script as the pipeliner would, followed by WAIT when
// replicas are required. It returns the script's command, and an error
// wrapping ErrNotReplicated if the script succeeded but too few replicas
// acknowledged it in time.
func (b *Backend) runAcked(ctx context.Context, script *redis.Script, keys []string, args ...any) (*redis.Cmd, error) {
	if b.cfg.Replicas <= 0 {
		return b.pipe.run(ctx, script, keys, args...), nil
	}
	exec := func(eval func(redis.Pipeliner) *redis.Cmd) (*redis.Cmd, *redis.IntCmd) {
		pipe := b.rdb.Pipeline()
		cmd := eval(pipe)
		wait := b.wait(ctx, pipe)
		_, _ = pipe.Exec(ctx)
		return cmd, wait
	}
	cmd, wait := exec(func(p redis.Pipeliner) *redis.Cmd { return script.EvalSha(ctx, p, keys, args...) })
	if redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
		cmd, wait = exec(func(p redis.Pipeliner) *redis.Cmd { return script.Eval(ctx, p, keys, args...) })
	}
	if cmd.Err() != nil {
		return cmd, nil
	}
	return cmd, b.acked(wait)
}

// wait queues WAIT on pipe.
func (b *Backend) wait(ctx context.Context, pipe redis.Pipeliner) *redis.IntCmd {
	cmd := redis.NewIntCmd(ctx, "wait", b.cfg.Replicas, b.cfg.ReplicaTimeout.Milliseconds())
	_ = pipe.Process(ctx, cmd)
	return cmd
}

// acked is nil if wait's reply counts enough replicas, an error wrapping
// ErrNotReplicated (or the failure of WAIT itself, as ErrBackend)
// otherwise.
func (b *Backend) acked(wait *redis.IntCmd) error {
	n, err := wait.Result()
	switch {
	case err != nil:
		return fmt.Errorf("%w: WAIT: %w", engine.ErrBackend, err)
	case n < int64(b.cfg.Replicas):
		return fmt.Errorf("%w: %d of %d replicas within %v", engine.ErrNotReplicated, n, b.cfg.Replicas, b.cfg.ReplicaTimeout)
	}
	return nil
}
