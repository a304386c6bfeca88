package redisbackend

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/distlock/distlock/store"
	"github.com/redis/go-redis/v9"
)

// renewChunkSize is how many locks one renew script covers.
const renewChunkSize = 256

// A renewScriptKind is what a renewal chunk's script does.
type renewScriptKind int

const (
	renewLeases   renewScriptKind = iota // renew.lua: leases of plain and fair mutexes
	renewHolders                         // shared_renew.lua: leases of read-write lock and semaphore holders
	refreshPlaces                        // refresh.lua: places in queues
)

// A renewChunk is one renew or refresh script call: up to renewChunkSize
// requests of one slot.
type renewChunk struct {
	kind renewScriptKind
	idx  []int    // positions in the batch
	keys []string // the script call's keys and arguments
	argv []any
	// The script call as sent (made of keys and args), its reply and,
	// under replica acknowledgement (Config.Replicas), whether the
	// replicas acknowledged the pipeline that carried it.
	ackedCall
}

// scriptOf is the script of a chunk of kind.
func scriptOf(kind renewScriptKind) *redis.Script {
	switch kind {
	case renewHolders:
		return sharedRenewScript
	case refreshPlaces:
		return refreshScript
	}
	return renewScript
}

// Renew implements store.Store. Each Redis node gets one pipeline, all
// of them at once: one round trip per node, whatever the number of locks
// and places, and a node that does not answer holds up only its own
// outcomes.
func (b *Backend) Renew(ctx context.Context, rs []store.Request, report func(int, store.Grant, error)) {
	var chunks []*renewChunk
	type group struct {
		slot int
		kind renewScriptKind
	}
	open := map[group]*renewChunk{} // chunk being filled
	k := b.cfg.Keys
	for i, r := range rs {
		g := group{kind: renewLeases}
		switch {
		case r.Queue > 0:
			g.kind = refreshPlaces
		case r.Kind == store.Read || r.Kind == store.Write || r.Kind == store.Semaphore:
			g.kind = renewHolders
		}
		if b.sharded {
			g.slot = Slot(r.Name)
		}
		c := open[g]
		if c == nil || len(c.idx) == renewChunkSize {
			// A place's refresh is not acknowledged (see replicas.go).
			c = &renewChunk{kind: g.kind, ackedCall: ackedCall{script: scriptOf(g.kind), wait: g.kind != refreshPlaces}}
			open[g] = c
			chunks = append(chunks, c)
		}
		c.idx = append(c.idx, i)
		switch g.kind {
		case refreshPlaces:
			capacity := 0
			if r.Kind == store.Semaphore {
				capacity = r.Capacity
			}
			refreshItem{Keys: k.script(r.Name, r.Owner), Owner: r.Owner, Lease: r.Lease.Milliseconds(),
				Queue: r.Queue.Milliseconds(), Seq: r.Seq, Retention: b.retentionArg, Mode: b.modeArg, Capacity: capacity}.addTo(c)
		case renewHolders:
			sharedRenewItem{Keys: k.shared(r.Name), Owner: r.Owner, Lease: r.Lease.Milliseconds(), Seq: r.Seq}.addTo(c)
		default:
			renewItem{L: k.Lock(r.Name), Owner: r.Owner, Lease: r.Lease.Milliseconds(), Seq: r.Seq}.addTo(c)
		}
	}
	groups := b.byNode(ctx, chunks)
	if len(groups) == 1 {
		b.renewNode(ctx, groups[0], report)
		return
	}
	var wg sync.WaitGroup
	for _, g := range groups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b.renewNode(ctx, g, report)
		}()
	}
	wg.Wait()
}

// A nodeChunks is the chunks of the locks of one master.
type nodeChunks struct {
	// master is the master's client on a Cluster (nil if the slot map
	// does not say); nil on a standalone or Sentinel client.
	master *redis.Client
	chunks []*renewChunk
}

// renewNode renews the chunks of one node. On a Cluster, a node gets
// clusterRenewTimeout (and the WAIT timeout, under replica
// acknowledgement), and a failure to reach it has the client reload the
// slot map: a master that died is replaced by its replica within seconds,
// but go-redis keeps sending to the dead one (and dialling it again, for
// seconds each time) until it reloads, so without this every renewal
// until the lease's deadline would go to the dead master and the lock
// would be lost even where the promoted replica has it.
func (b *Backend) renewNode(ctx context.Context, g nodeChunks, report func(int, store.Grant, error)) {
	cc, ok := b.rdb.(*redis.ClusterClient)
	if !ok {
		b.renewChunks(ctx, g, report)
		return
	}
	limit := clusterRenewTimeout
	if b.cfg.Replicas > 0 {
		limit += b.cfg.ReplicaTimeout
	}
	nctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	unreachable := false
	b.renewChunks(nctx, g, func(i int, gr store.Grant, err error) {
		var rerr redis.Error
		if err != nil && !errors.As(err, &rerr) && !errors.Is(err, store.ErrNotHeld) && !errors.Is(err, store.ErrSuperseded) &&
			!errors.Is(err, store.ErrNotReplicated) {
			unreachable = true
		}
		report(i, gr, err)
	})
	if unreachable {
		cc.ReloadState(ctx)
	}
}

// clusterRenewTimeout bounds the renewal of one Cluster node's locks.
const clusterRenewTimeout = time.Second

// byNode groups chunks by the master that serves their slot (one group on
// a standalone or Sentinel client). A slot whose master is unknown goes
// with the others of unknown master; the cluster pipeline still routes it
// (but under replica acknowledgement, see renewChunks).
func (b *Backend) byNode(ctx context.Context, chunks []*renewChunk) []nodeChunks {
	cc, ok := b.rdb.(*redis.ClusterClient)
	if !ok {
		return []nodeChunks{{chunks: chunks}}
	}
	var groups []nodeChunks
	at := map[string]int{}
	for _, c := range chunks {
		addr := ""
		node, err := cc.MasterForKey(ctx, c.keys[0])
		if err == nil {
			addr = node.Options().Addr
		} else {
			node = nil
		}
		i, ok := at[addr]
		if !ok {
			i = len(groups)
			at[addr] = i
			groups = append(groups, nodeChunks{master: node})
		}
		groups[i].chunks = append(groups[i].chunks, c)
	}
	return groups
}

// renewChunks sends the chunks of g in one pipeline and reports every
// outcome. Under replica acknowledgement the pipeline goes to g's master
// (on a Cluster) and ends with WAIT (see replicas.go).
func (b *Backend) renewChunks(ctx context.Context, g nodeChunks, report func(int, store.Grant, error)) {
	chunks := g.chunks
	if b.cfg.Replicas > 0 {
		calls := make([]*ackedCall, len(chunks))
		for i, c := range chunks {
			c.ackedCall.args = scriptArgs(c.script, c.keys, c.argv...)
			calls[i] = &c.ackedCall
		}
		switch {
		case !b.sharded:
			b.sendAcked(ctx, b.rdb, calls, 0)
		case g.master != nil:
			b.sendAcked(ctx, g.master, calls, 0)
		default:
			failCalls(ctx, calls, errNoMaster)
		}
	} else {
		b.renewPipelined(ctx, chunks)
	}
	for _, c := range chunks {
		vals, err := c.cmd.Slice()
		if err == nil && len(vals) != len(c.idx) {
			err = fmt.Errorf("renew: %d replies for %d requests", len(vals), len(c.idx))
		}
		for j, i := range c.idx {
			switch {
			case err != nil:
				report(i, store.Grant{}, backendErr(ctx, err))
			case c.kind == refreshPlaces:
				g, err := refreshOutcome(vals[j])
				report(i, g, err)
			default:
				err := renewOutcome(vals[j])
				if err == nil && c.ackErr != nil {
					err = c.ackErr // applied on the master only: not confirmed
				}
				report(i, store.Grant{}, err)
			}
		}
	}
}

// renewPipelined sends chunks in one pipeline of the client (a Cluster
// client's routes each to its slot's master, following redirections).
func (b *Backend) renewPipelined(ctx context.Context, chunks []*renewChunk) {
	run := func(eval func(redis.Pipeliner, *renewChunk) *redis.Cmd, which []*renewChunk) {
		pipe := b.rdb.Pipeline()
		for _, c := range which {
			c.cmd = eval(pipe, c)
		}
		_, _ = pipe.Exec(ctx)
	}
	run(func(p redis.Pipeliner, c *renewChunk) *redis.Cmd {
		return c.script.EvalSha(ctx, p, c.keys, c.argv...)
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
			return c.script.Eval(ctx, p, c.keys, c.argv...)
		}, again)
	}
}
