package redlock

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/distlock/distlock/store"
)

// Renew implements store.Store: every node renews the whole batch at
// once (one round trip per node), and a lease counts as renewed once a
// quorum set it. It is reported lost (ErrNotHeld) once so many nodes found
// it gone that a quorum cannot hold it any more, superseded when a quorum
// applied this renewal or a later one, and unknown otherwise.
func (b *Backend) Renew(ctx context.Context, rs []store.Request, report func(int, store.Grant, error)) {
	votes := make([]renewVotes, len(rs))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, n := range b.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n.Renew(ctx, rs, func(i int, _ store.Grant, err error) {
				if i < 0 || i >= len(votes) {
					return
				}
				mu.Lock()
				out, decided := votes[i].add(err, b.quorum, len(b.nodes))
				mu.Unlock()
				if decided {
					report(i, store.Grant{}, out)
				}
			})
		}()
	}
	wg.Wait()
	for i := range votes {
		if out, decided := votes[i].end(b.quorum, len(b.nodes)); decided {
			report(i, store.Grant{}, out)
		}
	}
}

// renewVotes counts the nodes' outcomes of one renewal.
type renewVotes struct {
	ok, notHeld, superseded, failed int
	first                           error
	decided                         bool
}

// add counts one node's outcome, and reports the renewal's once it is
// known (and only once).
func (v *renewVotes) add(err error, quorum, nodes int) (error, bool) {
	switch {
	case err == nil:
		v.ok++
	case errors.Is(err, store.ErrNotHeld):
		v.notHeld++
	case errors.Is(err, store.ErrSuperseded):
		v.superseded++
	default:
		v.failed++
		if v.first == nil {
			v.first = err
		}
	}
	if v.decided {
		return nil, false
	}
	switch {
	case v.ok >= quorum:
		v.decided = true
		return nil, true
	case v.notHeld > nodes-quorum:
		v.decided = true
		return fmt.Errorf("%w: held by fewer masters than a quorum (%d of %d found it gone)", store.ErrNotHeld, v.notHeld, nodes), true
	}
	return nil, false
}

// end decides a renewal that every node has answered or will not answer.
func (v *renewVotes) end(quorum, nodes int) (error, bool) {
	if v.decided {
		return nil, false
	}
	v.decided = true
	if v.ok+v.superseded >= quorum {
		return store.ErrSuperseded, true
	}
	return fmt.Errorf("%w: renewal confirmed by %d of %d masters, a quorum is %d (%d found it gone, %d failed, first: %v)",
		store.ErrBackend, v.ok, nodes, quorum, v.notHeld, nodes-v.ok-v.notHeld-v.superseded, v.first), true
}
