package rueidisstore

import (
	"context"
	"errors"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/distlock/distlock/internal/redisbackend"
	"github.com/redis/rueidis"
)

// slotMap is the store's own map of a Cluster's slots to their masters,
// read with CLUSTER SLOTS: rueidis routes commands by slot itself, but does
// not say where, and the store needs it to renew each master's locks on
// their own and to send WAIT to the right master. It is read on first use
// and again at every Reload (a master that did not answer, a MOVED).
type slotMap struct {
	client rueidis.Client

	mu      sync.Mutex
	master  []string // by slot; "" where no master serves it
	loaded  bool
	loading chan struct{} // closed when a load under way ends
}

// load reads the slot map again.
func (m *slotMap) load(ctx context.Context) error {
	m.mu.Lock()
	if m.loading != nil { // one load at a time: wait for the one under way
		done := m.loading
		m.mu.Unlock()
		select {
		case <-done:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	done := make(chan struct{})
	m.loading = done
	m.mu.Unlock()
	master, err := m.read(ctx)
	m.mu.Lock()
	if err == nil {
		m.master, m.loaded = master, true
	}
	m.loading = nil
	close(done)
	m.mu.Unlock()
	return err
}

// read asks the nodes the client knows, one after the other, for the
// slots' masters, until one answers: after a failover, some are gone.
func (m *slotMap) read(ctx context.Context) ([]string, error) {
	err := errors.New("rueidisstore: no node known")
	for asked, node := range m.client.Nodes() {
		nctx, cancel := context.WithTimeout(ctx, nodeTimeout)
		var ranges []rueidis.RedisMessage
		ranges, err = node.Do(nctx, node.B().ClusterSlots().Build()).ToArray()
		cancel()
		if err == nil {
			return parseSlots(ranges, asked)
		}
		if ctx.Err() != nil {
			break
		}
	}
	return nil, err
}

// nodeTimeout bounds a node's answer to CLUSTER SLOTS.
const nodeTimeout = time.Second

// parseSlots reads a reply to CLUSTER SLOTS from the node at asked. A
// master whose host the reply leaves empty is on asked's host (as rueidis
// reads it too); one whose endpoint is unknown ("?") serves no slot here.
func parseSlots(ranges []rueidis.RedisMessage, asked string) ([]string, error) {
	master := make([]string, 16384)
	for _, r := range ranges {
		f, err := r.ToArray()
		if err != nil || len(f) < 3 {
			return nil, errors.New("rueidisstore: CLUSTER SLOTS: unexpected reply")
		}
		first, err1 := f[0].AsInt64()
		last, err2 := f[1].AsInt64()
		node, err3 := f[2].ToArray()
		if err1 != nil || err2 != nil || err3 != nil || len(node) < 2 || first < 0 || last >= 16384 || first > last {
			return nil, errors.New("rueidisstore: CLUSTER SLOTS: unexpected reply")
		}
		host, _ := node[0].ToString()
		port, err := node[1].AsInt64()
		if err != nil {
			return nil, errors.New("rueidisstore: CLUSTER SLOTS: unexpected reply")
		}
		switch host {
		case "?":
			continue
		case "":
			host, _, _ = net.SplitHostPort(asked)
		}
		addr := net.JoinHostPort(host, strconv.FormatInt(port, 10))
		for s := first; s <= last; s++ {
			master[s] = addr
		}
	}
	return master, nil
}

// current returns the map, read first if it never was.
func (m *slotMap) current(ctx context.Context) ([]string, error) {
	m.mu.Lock()
	master, loaded := m.master, m.loaded
	m.mu.Unlock()
	if loaded {
		return master, nil
	}
	if err := m.load(ctx); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.master, nil
}

// masters returns the master of each key's slot (ok false where the map
// does not say).
func (m *slotMap) masters(ctx context.Context, keys []string) ([]string, []bool) {
	addrs, ok := make([]string, len(keys)), make([]bool, len(keys))
	master, err := m.current(ctx)
	if err != nil {
		return addrs, ok
	}
	for i, k := range keys {
		addrs[i] = master[redisbackend.KeySlot(k)]
		ok[i] = addrs[i] != ""
	}
	return addrs, ok
}

// all returns every master that serves a slot.
func (m *slotMap) all(ctx context.Context) ([]string, error) {
	master, err := m.current(ctx)
	if err != nil {
		return nil, err
	}
	var addrs []string
	for _, a := range master {
		if a != "" && !slices.Contains(addrs, a) {
			addrs = append(addrs, a)
		}
	}
	return addrs, nil
}
