package safety

import (
	"context"
	"sync"

	"github.com/distlock/distlock/internal/redisbackend"
	"github.com/redis/go-redis/v9"
)

// go-redis hooks that hold back or watch the calls of one of distlock's
// scripts, recognised with redisbackend.ScriptCall.

// scriptGate holds back every call of one of distlock's scripts until
// release (or the call's context ends: the call then fails without being
// sent), as a network that drops them would.
type scriptGate struct {
	script string
	open   chan struct{}
	once   sync.Once
}

func (g *scriptGate) release() { g.once.Do(func() { close(g.open) }) }

func (g *scriptGate) DialHook(next redis.DialHook) redis.DialHook { return next }

func (g *scriptGate) hold(ctx context.Context, cmds ...redis.Cmder) error {
	for _, cmd := range cmds {
		if name, _, _, ok := redisbackend.ScriptCall(cmd.Args()); ok && name == g.script {
			select {
			case <-g.open:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	return nil
}

func (g *scriptGate) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if err := g.hold(ctx, cmd); err != nil {
			cmd.SetErr(err)
			return err
		}
		return next(ctx, cmd)
	}
}

func (g *scriptGate) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if err := g.hold(ctx, cmds...); err != nil {
			for _, cmd := range cmds {
				cmd.SetErr(err)
			}
			return err
		}
		return next(ctx, cmds)
	}
}

// scriptWatch reports the outcome of every call of one of distlock's
// scripts (nil, or its error) on ch, without blocking.
type scriptWatch struct {
	script string
	ch     chan error
}

func (w *scriptWatch) DialHook(next redis.DialHook) redis.DialHook { return next }

func (w *scriptWatch) report(cmds ...redis.Cmder) {
	for _, cmd := range cmds {
		if name, _, _, ok := redisbackend.ScriptCall(cmd.Args()); ok && name == w.script {
			select {
			case w.ch <- cmd.Err():
			default:
			}
		}
	}
}

func (w *scriptWatch) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		w.report(cmd)
		return err
	}
}

func (w *scriptWatch) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		w.report(cmds...)
		return err
	}
}
