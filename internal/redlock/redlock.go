package redlock

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/distlock/distlock/internal/redisbackend"
	"github.com/distlock/distlock/store"
)

// Backend implements store.Store over independent Redis masters, with
// the Redlock algorithm: a request counts once a majority of the nodes
// (the quorum) confirmed it. Only plain mutexes are supported; other kinds
// are refused with an error wrapping store.ErrUnsupported.
type Backend struct {
	nodes  []node
	quorum int
	floor  atomic.Uint64 // the highest fencing token this Backend has seen
	bg     sync.WaitGroup
	local  localWatchers // this process's watches (see localWatchers)
	err    error         // New's
}

// System names the store for observers (store.SystemNamer).
func (b *Backend) System() string { return "redlock" }

// A node is one Redis master of the quorum.
type node struct {
	*redisbackend.Backend
	i    int    // its index in Backend.nodes
	addr string // for messages: the address, or "node <i>"
}

// A Master is one Redis master of a quorum: the Conn to it, what
// identifies it (two Masters of one ID are one master: the same client, or
// two clients of one address) and its address, for messages ("" if not
// known). A nil Conn is refused.
type Master struct {
	Conn redisbackend.Conn
	ID   any
	Addr string
}

// New returns a Backend on masters, each with a redisbackend.Backend
// configured by cfg. It refuses (with an error wrapping
// store.ErrInvalidOption) fewer than 3 masters, an even number of them, a
// nil Conn, and a master given twice: the quorum would not mean what it
// says. The Backend it returns is usable (on the valid masters) even
// then, so that a caller that reports the error later does not have to
// handle a nil one.
func New(masters []Master, cfg redisbackend.Config) (*Backend, error) {
	var err error
	fail := func(format string, args ...any) {
		if err == nil {
			err = fmt.Errorf("%w: "+format, append([]any{store.ErrInvalidOption}, args...)...)
		}
	}
	switch {
	case len(masters) < 3:
		fail("Redlock needs at least 3 Redis masters, got %d", len(masters))
	case len(masters)%2 == 0:
		fail("Redlock needs an odd number of Redis masters, got %d (an even number tolerates no more failures than one fewer)", len(masters))
	}
	b := &Backend{}
	seen := map[any]int{}
	for i, m := range masters {
		if m.Conn == nil {
			fail("Redlock master %d is a nil client", i)
			continue
		}
		addr := m.Addr
		if addr == "" {
			addr = fmt.Sprintf("node %d", i)
		}
		if j, dup := seen[m.ID]; dup {
			fail("Redlock masters %d and %d are the same (%s)", j, i, addr)
			continue
		}
		seen[m.ID] = i
		b.nodes = append(b.nodes, node{Backend: redisbackend.New(m.Conn, cfg), i: len(b.nodes), addr: addr})
	}
	b.quorum = len(b.nodes)/2 + 1
	b.err = err
	return b, err
}

// Close stops every node's notifications and waits for the requests still
// on their way to slow nodes (each is bounded by its node timeout).
func (b *Backend) Close() error {
	var errs []error
	for _, n := range b.nodes {
		errs = append(errs, n.Close())
	}
	b.bg.Wait()
	return errors.Join(errs...)
}

// nodeTimeout bounds one node's part of a request about a lease of lease:
// small against the lease, so that a node that does not answer costs a
// small part of it (a tenth, between 10 ms and a second).
func nodeTimeout(lease time.Duration) time.Duration {
	if lease <= 0 {
		return maxNodeTimeout
	}
	return min(max(lease/10, 10*time.Millisecond), maxNodeTimeout)
}

// maxNodeTimeout bounds one node's part of any request, and of the
// requests that are about no lease (watching, inspecting).
const maxNodeTimeout = time.Second

// unreachable reports whether err says that the request never reached the
// node: the connection could not be made, so nothing was applied.
func unreachable(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// noQuorum is the error of a request that too few nodes answered.
func (b *Backend) noQuorum(what string, failed int, first error) error {
	return fmt.Errorf("%s: %d of %d masters failed, a quorum is %d: %w", what, failed, len(b.nodes), b.quorum, asBackendErr(first))
}

// asBackendErr wraps a node's failure in ErrBackend, unless it says more
// (ErrUnsupported: a server too old).
func asBackendErr(err error) error {
	if err == nil {
		return store.ErrBackend
	}
	if errors.Is(err, store.ErrBackend) || errors.Is(err, store.ErrUnsupported) {
		return err
	}
	return fmt.Errorf("%w: %w", store.ErrBackend, err)
}
