package redisbackend

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/distlock/distlock/store"
)

// The kinds of lock inspect.lua reports, by the names the scripts keep
// in the lock hash and the queue ("" when free and nobody waits).
var scriptKinds = map[string]store.Kind{
	"mutex": store.Plain,
	"fair":  store.Fair,
	"elect": store.Election,
	"rw":    store.Write,
	"sem":   store.Semaphore,
}

// Inspect reads the state of the named lock.
func (b *Backend) Inspect(ctx context.Context, name string) (store.State, error) {
	k := b.cfg.Keys
	res, err := slice(b.conn.Eval(ctx, inspectScript, inspectCall{Keys: k.script(name, "")}.args()))
	if err != nil {
		return store.State{}, b.backendErr(ctx, err)
	}
	st, err := parseState(res)
	if err != nil {
		return store.State{}, fmt.Errorf("%w: inspect: %w", store.ErrBackend, err)
	}
	if st.Kind == store.Plain || !st.InUse {
		st.Watchers, err = b.watchers(ctx, k.Channel(name))
	}
	return st, err
}

// parseState reads the reply of inspect.lua.
func parseState(res []any) (store.State, error) {
	if len(res) < 9 {
		return store.State{}, fmt.Errorf("unexpected reply %v", res)
	}
	str := func(v any) string { s, _ := v.(string); return s }
	num := func(v any) int64 {
		if n, ok := v.(int64); ok {
			return n
		}
		n, _ := strconv.ParseInt(str(v), 10, 64)
		return n
	}
	kind, inUse := scriptKinds[str(res[0])]
	st := store.State{Kind: kind, InUse: inUse, TTL: replyTTL(res, 1), LastToken: uint64(num(res[2])),
		Queued: int(num(res[3])), QueuedReaders: int(num(res[4])), QueuedWriters: int(num(res[5])),
		Capacity: int(num(res[6])), Used: int(num(res[7])), QueuedPermits: int(num(res[8]))}
	for _, v := range res[9:] {
		f, _ := v.([]any)
		if len(f) != 11 {
			return store.State{}, fmt.Errorf("unexpected holder %v", v)
		}
		st.Holders = append(st.Holders, store.Holder{
			Owner: str(f[0]), Token: uint64(num(f[1])), Holds: int(num(f[2])), Host: str(f[3]),
			PID: int(num(f[4])), Since: time.UnixMilli(num(f[5])), TTL: time.Duration(num(f[6])) * time.Millisecond,
			Writes: int(num(f[7])), Permits: int(num(f[8])), Value: str(f[9]), Revoked: num(f[10]) == 1,
		})
	}
	if !st.InUse && len(st.Holders) > 0 {
		st.Kind, st.InUse = store.Plain, true
	}
	return st, nil
}

func (b *Backend) watchers(ctx context.Context, channel string) (int, error) {
	n, err := b.conn.Subscribers(ctx, channel)
	if err != nil {
		return 0, b.backendErr(ctx, err)
	}
	return int(n), nil
}

// ForceUnlock deletes the named lock whoever holds it (every holder of a
// read-write lock) and hands it on: a plain mutex's waiters are told, a
// fair mutex or a read-write lock goes to the first in line. Each holder's
// process is told too (see WatchRevoked). It reports whether there was a
// lock to delete.
func (b *Backend) ForceUnlock(ctx context.Context, name string) (bool, error) {
	k := b.cfg.Keys
	n, err := integer(b.conn.Eval(ctx, forceUnlockScript, forceUnlockCall{Keys: k.script(name, ""), Channel: k.Channel(name),
		Mode: b.modeArg, Retention: b.retentionArg, Holders: k.holderChannels(), Name: name}.args()))
	if err != nil {
		return false, b.backendErr(ctx, err)
	}
	return n == 1, nil
}

// Revoke revokes the named lock whoever holds it, without freeing it:
// each holder's process is told (see WatchRevoked) and the holders'
// renewals are refused from now on, but the lock stays held until they
// release it or their leases run out. It returns how long that may take
// at most, or 0 if the lock was not held.
func (b *Backend) Revoke(ctx context.Context, name string) (time.Duration, error) {
	k := b.cfg.Keys
	ms, err := integer(b.conn.Eval(ctx, revokeScript, revokeCall{Keys: k.script(name, ""), Holders: k.holderChannels(),
		Name: name}.args()))
	if err != nil {
		return 0, b.backendErr(ctx, err)
	}
	return time.Duration(ms) * time.Millisecond, nil
}
