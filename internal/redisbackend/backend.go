// Package redisbackend stores distlock locks in Redis: one Lua script per
// atomic step (acquire, release, renew, inspect, force-unlock) and pub/sub
// release notifications. It works with standalone, Sentinel and Cluster
// clients; on Cluster it publishes with SPUBLISH and batches renewals per
// slot.
package redisbackend

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/distlock/distlock/internal/engine"
	"github.com/redis/go-redis/v9"
)

// renewChunkSize is how many locks one renew script covers.
const renewChunkSize = 256

// pipelineLimit is how many acquire and release round trips may be on their
// way at once before further calls are pipelined together.
const pipelineLimit = 2

// Config configures a Backend.
type Config struct {
	Keys Keys
	// FenceRetention is how long a fencing counter outlives the last
	// acquisition of its lock.
	FenceRetention time.Duration
	// Host and PID describe this process in the lock state.
	Host string
	PID  int
}

// Backend implements engine.Backend on a go-redis client.
type Backend struct {
	rdb     redis.UniversalClient
	cfg     Config
	pid     string
	sharded bool   // Redis Cluster: sharded pub/sub, renewals grouped by slot
	id      string // random; published with this backend's releases
	notify  *notifier
	pipe    *pipeliner

	checkMu sync.Mutex
	checked atomic.Bool
}

// New returns a Backend on rdb. It does not talk to Redis until it is used.
func New(rdb redis.UniversalClient, cfg Config) *Backend {
	_, sharded := rdb.(*redis.ClusterClient)
	var id [8]byte
	_, _ = rand.Read(id[:])
	b := &Backend{rdb: rdb, cfg: cfg, pid: strconv.Itoa(cfg.PID), sharded: sharded, id: hex.EncodeToString(id[:])}
	b.notify = newNotifier(rdb, sharded, b.id)
	b.pipe = newPipeliner(rdb, pipelineLimit)
	return b
}

// Close stops notifications. It does not close the go-redis client, which
// belongs to the caller.
func (b *Backend) Close() error { return b.notify.close() }

func (b *Backend) publishMode() string {
	if b.sharded {
		return "s"
	}
	return "p"
}

// Acquire implements engine.Backend.
func (b *Backend) Acquire(ctx context.Context, r engine.Request) (engine.Grant, error) {
	if err := b.checkServer(ctx); err != nil {
		return engine.Grant{}, err
	}
	k := b.cfg.Keys
	res, err := b.pipe.run(ctx, acquireScript,
		[]string{k.Lock(r.Name), k.Fence(r.Name), k.Abandoned(r.Name, r.Owner)},
		r.Owner, r.Hold, r.Lease.Milliseconds(), b.cfg.FenceRetention.Milliseconds(),
		b.cfg.Host, b.pid, reenterFlag(r.Reenter), time.Now().UnixMilli()).Slice()
	if err != nil {
		return engine.Grant{}, backendErr(ctx, err)
	}
	if len(res) < 2 {
		return engine.Grant{}, fmt.Errorf("%w: acquire: unexpected reply %v", engine.ErrBackend, res)
	}
	if n, _ := res[0].(int64); n == 0 {
		ttl, _ := res[1].(int64)
		if ttl < 0 {
			return engine.Grant{TTL: -1}, nil
		}
		return engine.Grant{TTL: time.Duration(ttl) * time.Millisecond}, nil
	}
	tok, err := strconv.ParseUint(fmt.Sprint(res[1]), 10, 64)
	if err != nil || len(res) < 3 {
		return engine.Grant{}, fmt.Errorf("%w: acquire: unexpected reply %v", engine.ErrBackend, res)
	}
	holds, _ := res[2].(int64)
	return engine.Grant{Acquired: true, Token: tok, Holds: int(holds)}, nil
}

// Release implements engine.Backend.
func (b *Backend) Release(ctx context.Context, r engine.Request) (engine.Release, error) {
	k := b.cfg.Keys
	n, err := b.pipe.run(ctx, releaseScript, []string{k.Lock(r.Name)},
		r.Owner, r.Hold, k.Channel(r.Name), b.publishMode(), b.id).Int64()
	if err != nil {
		return 0, backendErr(ctx, err)
	}
	switch n {
	case 1:
		return engine.Freed, nil
	case 2:
		return engine.Remaining, nil
	case -1:
		return engine.AlreadyReleased, nil
	default:
		return engine.NotOwner, nil
	}
}

// Abandon implements engine.Backend.
func (b *Backend) Abandon(ctx context.Context, r engine.Request) (bool, error) {
	k := b.cfg.Keys
	n, err := b.pipe.run(ctx, abandonScript, []string{k.Lock(r.Name), k.Abandoned(r.Name, r.Owner)},
		r.Owner, max(r.Lease.Milliseconds(), 1), k.Channel(r.Name), b.publishMode(), b.id).Int64()
	if err != nil {
		return false, backendErr(ctx, err)
	}
	return n == 1, nil
}

// A renewChunk is one renew script call: up to renewChunkSize locks of one
// slot.
type renewChunk struct {
	idx  []int // positions in the batch
	keys []string
	args []any
	cmd  *redis.Cmd
}

// Renew implements engine.Backend. Each Redis node gets one pipeline, all
// of them at once: one round trip per node, whatever the number of locks,
// and a node that does not answer holds up only its own locks' outcomes.
func (b *Backend) Renew(ctx context.Context, rs []engine.Request, report func(int, error)) {
	var chunks []*renewChunk
	open := map[int]*renewChunk{} // slot (or 0) -> chunk being filled
	for i, r := range rs {
		slot := 0
		if b.sharded {
			slot = Slot(r.Name)
		}
		c := open[slot]
		if c == nil || len(c.idx) == renewChunkSize {
			c = &renewChunk{}
			open[slot] = c
			chunks = append(chunks, c)
		}
		c.idx = append(c.idx, i)
		c.keys = append(c.keys, b.cfg.Keys.Lock(r.Name))
		c.args = append(c.args, r.Owner, r.Lease.Milliseconds(), r.Seq)
	}
	groups := b.byNode(ctx, chunks)
	if len(groups) == 1 {
		b.renewChunks(ctx, groups[0], report)
		return
	}
	var wg sync.WaitGroup
	for _, g := range groups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b.renewChunks(ctx, g, report)
		}()
	}
	wg.Wait()
}

// byNode groups chunks by the master that serves their slot (one group on
// a standalone or Sentinel client). A slot whose master is unknown goes
// with the others of unknown master; the cluster pipeline still routes it.
func (b *Backend) byNode(ctx context.Context, chunks []*renewChunk) [][]*renewChunk {
	cc, ok := b.rdb.(*redis.ClusterClient)
	if !ok {
		return [][]*renewChunk{chunks}
	}
	var groups [][]*renewChunk
	at := map[string]int{}
	for _, c := range chunks {
		addr := ""
		if node, err := cc.MasterForKey(ctx, c.keys[0]); err == nil {
			addr = node.Options().Addr
		}
		i, ok := at[addr]
		if !ok {
			i = len(groups)
			at[addr] = i
			groups = append(groups, nil)
		}
		groups[i] = append(groups[i], c)
	}
	return groups
}

// renewChunks sends chunks in one pipeline and reports every lock's outcome.
func (b *Backend) renewChunks(ctx context.Context, chunks []*renewChunk, report func(int, error)) {
	run := func(eval func(redis.Pipeliner, *renewChunk) *redis.Cmd, which []*renewChunk) {
		pipe := b.rdb.Pipeline()
		for _, c := range which {
			c.cmd = eval(pipe, c)
		}
		_, _ = pipe.Exec(ctx)
	}
	run(func(p redis.Pipeliner, c *renewChunk) *redis.Cmd {
		return renewScript.EvalSha(ctx, p, c.keys, c.args...)
	}, chunks)
	// Scripts flushed or never loaded: send the failed chunks in full.
	var again []*renewChunk
	for _, c := range chunks {
		if redis.HasErrorPrefix(c.cmd.Err(), "NOSCRIPT") {
			again = append(again, c)
		}
	}
	if len(again) > 0 {
		run(func(p redis.Pipeliner, c *renewChunk) *redis.Cmd {
			return renewScript.Eval(ctx, p, c.keys, c.args...)
		}, again)
	}
	for _, c := range chunks {
		vals, err := c.cmd.Int64Slice()
		if err == nil && len(vals) != len(c.idx) {
			err = fmt.Errorf("renew: %d replies for %d locks", len(vals), len(c.idx))
		}
		for j, i := range c.idx {
			switch {
			case err != nil:
				report(i, backendErr(ctx, err))
			case vals[j] == 1:
				report(i, nil)
			case vals[j] == 2:
				report(i, engine.ErrSuperseded)
			default:
				report(i, fmt.Errorf("%w: renewal found another owner or none", engine.ErrNotHeld))
			}
		}
	}
}

// Watch implements engine.Backend.
func (b *Backend) Watch(ctx context.Context, name string, wake func()) (func(), error) {
	return b.notify.watch(ctx, b.cfg.Keys.Channel(name), wake)
}

// State is what Inspect reports about one lock.
type State struct {
	Locked    bool
	Owner     string
	Token     uint64
	Holds     int
	Host      string
	PID       int
	Since     time.Time
	TTL       time.Duration // < 0: no expiry
	LastToken uint64        // last fencing token issued; 0 when its counter expired
	Watchers  int           // connections subscribed to the lock's release channel
}

// Inspect reads the state of the named lock.
func (b *Backend) Inspect(ctx context.Context, name string) (State, error) {
	k := b.cfg.Keys
	res, err := inspectScript.Run(ctx, b.rdb, []string{k.Lock(name), k.Fence(name)}).Slice()
	if err != nil {
		return State{}, backendErr(ctx, err)
	}
	if len(res) < 8 {
		return State{}, fmt.Errorf("%w: inspect: unexpected reply %v", engine.ErrBackend, res)
	}
	str := func(i int) string { s, _ := res[i].(string); return s }
	num := func(i int) int64 { n, _ := strconv.ParseInt(str(i), 10, 64); return n }
	var st State
	if owner := str(0); owner != "" {
		st.Locked = true
		st.Owner = owner
		st.Token = uint64(num(1))
		st.Holds = int(num(2))
		st.Host = str(3)
		st.PID = int(num(4))
		st.Since = time.UnixMilli(num(5))
		ttl, _ := res[6].(int64)
		st.TTL = time.Duration(ttl) * time.Millisecond
	}
	st.LastToken = uint64(num(7))
	st.Watchers, err = b.watchers(ctx, k.Channel(name))
	return st, err
}

func (b *Backend) watchers(ctx context.Context, channel string) (int, error) {
	var m map[string]int64
	var err error
	if cc, ok := b.rdb.(*redis.ClusterClient); ok {
		// Sharded subscriptions are counted by the node of the slot.
		node, nerr := cc.MasterForKey(ctx, channel)
		if nerr != nil {
			return 0, backendErr(ctx, nerr)
		}
		m, err = node.PubSubShardNumSub(ctx, channel).Result()
	} else {
		m, err = b.rdb.PubSubNumSub(ctx, channel).Result()
	}
	if err != nil {
		return 0, backendErr(ctx, err)
	}
	return int(m[channel]), nil
}

// ForceUnlock deletes the named lock whoever holds it and notifies waiters.
// It reports whether there was a lock to delete.
func (b *Backend) ForceUnlock(ctx context.Context, name string) (bool, error) {
	k := b.cfg.Keys
	n, err := forceUnlockScript.Run(ctx, b.rdb, []string{k.Lock(name)},
		k.Channel(name), b.publishMode()).Int64()
	if err != nil {
		return false, backendErr(ctx, err)
	}
	return n == 1, nil
}

// backendErr wraps err in ErrBackend, unless it is ctx's own end: a
// deadline that is not ctx's (a dial or read timeout of the client) is a
// backend failure.
func backendErr(ctx context.Context, err error) error {
	if ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return err
	}
	return fmt.Errorf("%w: %w", engine.ErrBackend, err)
}

func reenterFlag(reenter bool) string {
	if reenter {
		return "1"
	}
	return "0"
}

// List returns the names of the locks that exist now and match the glob
// pattern (SCAN, never KEYS; every master of a cluster).
func (b *Backend) List(ctx context.Context, pattern string) ([]string, error) {
	prefix := b.cfg.Keys.Lock("")
	prefix = prefix[:len(prefix)-2] // without "{}"
	match := escapeGlob(prefix) + "{" + pattern + "}"
	seen := map[string]bool{}
	var mu sync.Mutex
	scan := func(ctx context.Context, c redis.UniversalClient) error {
		iter := c.Scan(ctx, 0, match, 1000).Iterator()
		for iter.Next(ctx) {
			key := iter.Val()
			name := key[len(prefix)+1 : len(key)-1]
			if strings.ContainsAny(name, "{}") {
				continue // not ours: lock names have no braces
			}
			mu.Lock()
			seen[name] = true
			mu.Unlock()
		}
		return iter.Err()
	}
	var err error
	if cc, ok := b.rdb.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return scan(ctx, c) })
	} else {
		err = scan(ctx, b.rdb)
	}
	if err != nil {
		return nil, backendErr(ctx, err)
	}
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	slices.Sort(names)
	return names, nil
}

// escapeGlob quotes the characters that SCAN MATCH treats as a pattern.
func escapeGlob(s string) string {
	var out []byte
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '*', '?', '[', ']', '\\':
			out = append(out, '\\')
		}
		out = append(out, s[i])
	}
	return string(out)
}
