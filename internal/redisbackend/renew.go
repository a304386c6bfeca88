package redisbackend

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/distlock/distlock/store"
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
	idx  []int // positions in the batch
	// The script call (see build), its reply and, under replica
	// acknowledgement (Config.Replicas), the WAIT's.
	Call
}

// scriptOf is the script of a chunk of kind.
func scriptOf(kind renewScriptKind) *Script {
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
			c = &renewChunk{kind: g.kind, Call: Call{Script: scriptOf(g.kind), Wait: g.kind != refreshPlaces}}
			if !b.sharded { // else the requests spread over the slots
				c.idx = make([]int, 0, min(renewChunkSize, len(rs)-i))
			}
			open[g] = c
			chunks = append(chunks, c)
		}
		c.idx = append(c.idx, i)
	}
	for _, c := range chunks {
		c.build(b, rs)
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
	// known: the master is known (always, but on a Cluster whose slot
	// map does not say).
	known  bool
	chunks []*renewChunk
}

// renewNode renews the chunks of one node. On a Cluster, a node gets
// clusterRenewTimeout (and the WAIT timeout, under replica
// acknowledgement), and a failure to reach it has the client reload the
// slot map: a master that died is replaced by its replica within seconds,
// but a client may keep sending to the dead one (go-redis does, and dials
// it again, for seconds each time) until it reloads, so without this every
// renewal until the lease's deadline would go to the dead master and the
// lock would be lost even where the promoted replica has it.
func (b *Backend) renewNode(ctx context.Context, g nodeChunks, report func(int, store.Grant, error)) {
	if !b.sharded {
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
		if err != nil && !b.conn.IsReply(err) && !errors.Is(err, store.ErrNotHeld) && !errors.Is(err, store.ErrSuperseded) &&
			!errors.Is(err, store.ErrNotReplicated) {
			unreachable = true
		}
		report(i, gr, err)
	})
	if unreachable {
		b.conn.Reload(ctx)
	}
}

// clusterRenewTimeout bounds the renewal of one Cluster node's locks.
const clusterRenewTimeout = time.Second

// byNode groups chunks by the master that serves their slot (one group on
// a standalone or Sentinel client). A slot whose master is unknown goes
// with the others of unknown master; the cluster pipeline still routes it
// (but under replica acknowledgement, see renewChunks).
func (b *Backend) byNode(ctx context.Context, chunks []*renewChunk) []nodeChunks {
	if !b.sharded {
		return []nodeChunks{{known: true, chunks: chunks}}
	}
	first := make([]string, len(chunks))
	for i, c := range chunks {
		first[i] = firstKey(c.Args)
	}
	addrs, known := b.conn.Masters(ctx, first)
	var groups []nodeChunks
	at := map[string]int{}
	for i, c := range chunks {
		addr := addrs[i]
		if !known[i] {
			addr = "?" // not an address
		}
		j, ok := at[addr]
		if !ok {
			j = len(groups)
			at[addr] = j
			groups = append(groups, nodeChunks{known: known[i]})
		}
		groups[j].chunks = append(groups[j].chunks, c)
	}
	return groups
}

// renewChunks sends the chunks of g in one pipeline and reports every
// outcome. Under replica acknowledgement the pipeline goes to g's master
// (on a Cluster) and ends with WAIT (see replicas.go).
func (b *Backend) renewChunks(ctx context.Context, g nodeChunks, report func(int, store.Grant, error)) {
	chunks := g.chunks
	calls := make([]*Call, len(chunks))
	for i, c := range chunks {
		calls[i] = &c.Call
	}
	switch {
	case b.cfg.Replicas == 0:
		b.conn.EvalPipeline(ctx, calls)
	case g.known:
		b.conn.EvalAcked(ctx, calls, b.cfg.Replicas, b.cfg.ReplicaTimeout)
	default:
		failCalls(calls, errNoMaster)
	}
	for _, c := range chunks {
		vals, err := slice(c.Reply, c.Err)
		if err == nil && len(vals) != len(c.idx) {
			err = fmt.Errorf("renew: %d replies for %d requests", len(vals), len(c.idx))
		}
		var ackErr error
		if err == nil && c.Wait && b.cfg.Replicas > 0 {
			ackErr = b.acked(&c.Call) // if not nil, applied on the master only: not confirmed
		}
		for j, i := range c.idx {
			switch {
			case err != nil:
				report(i, store.Grant{}, b.backendErr(ctx, err))
			case c.kind == refreshPlaces:
				g, err := refreshOutcome(vals[j])
				report(i, g, err)
			default:
				err := renewOutcome(vals[j])
				if err == nil {
					err = ackErr
				}
				report(i, store.Grant{}, err)
			}
		}
	}
}
