package redlock

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/distlock/distlock/internal/engine"
)

// maxRounds bounds the proposals of one acquisition attempt: a proposal
// that some nodes refuse as too low is made again above what they hold.
const maxRounds = 3

// Acquire implements engine.Backend: it asks every node at once to take
// the lock with one proposed fencing token, and holds it once a quorum
// did. When too many nodes failed for a quorum, it returns an error
// wrapping ErrBackend (and the engine abandons the owner). Otherwise it
// abandons the owner on every node itself (releasing what was taken, and
// refusing requests of this attempt that land later) before it answers:
// not acquired, with a randomised time to try again after.
//
// Only the validity is left to the engine: it measures the lease from
// before the first request was sent, less a margin for clock drift, and
// treats a grant that comes after that deadline as no grant.
func (b *Backend) Acquire(ctx context.Context, r engine.Request) (engine.Grant, error) {
	if r.Kind != engine.Plain {
		return engine.Grant{}, Unsupported(r.Kind)
	}
	if r.Reenter {
		return b.reenter(ctx, r)
	}
	token := b.propose()
	for round := 1; ; round++ {
		t := b.acquireRound(ctx, r, token)
		if t.acquired >= b.quorum {
			b.saw(token)
			return engine.Grant{Acquired: true, Token: token, Holds: 1}, nil
		}
		if t.low > 0 && t.acquired+t.low >= b.quorum && round < maxRounds {
			b.saw(t.counter)
			token = b.propose()
			continue
		}
		if t.failed > len(b.nodes)-b.quorum {
			// The engine abandons the owner, in the background, after an
			// error: the masters that failed may not answer for a while.
			return engine.Grant{}, b.noQuorum("acquire", t.failed, t.err)
		}
		if err := b.giveUp(ctx, r); err != nil {
			return engine.Grant{}, err
		}
		if t.wrongKind >= b.quorum {
			return engine.Grant{}, engine.ErrWrongKind
		}
		return engine.Grant{TTL: t.retryIn(b.quorum, len(b.nodes), r.Lease)}, nil
	}
}

// A tally counts the answers of the nodes to one proposal.
type tally struct {
	acquired  int
	low       int    // refused: the token is not above the node's counter
	counter   uint64 // the highest counter of those
	held      []time.Duration
	wrongKind int
	failed    int
	err       error // the first failure
}

// acquireRound proposes token to every node, and returns as soon as the
// outcome is known: a quorum acquired, or it cannot any more.
func (b *Backend) acquireRound(ctx context.Context, r engine.Request, token uint64) tally {
	var t tally
	pending := len(b.nodes)
	type result struct {
		g       engine.Grant
		counter uint64
	}
	fanOut(b, ctx, nodeTimeout(r.Lease), func(ctx context.Context, n node) (result, error) {
		g, c, err := n.AcquireToken(ctx, r, token)
		return result{g, c}, err
	}, func(rep reply[result]) bool {
		pending--
		switch g := rep.val.g; {
		case errors.Is(rep.err, engine.ErrWrongKind):
			t.wrongKind++
			t.held = append(t.held, -1)
		case rep.err != nil:
			t.failed++
			if t.err == nil {
				t.err = rep.err
			}
		case g.Acquired:
			t.acquired++
		case rep.val.counter > 0:
			t.low++
			t.counter = max(t.counter, rep.val.counter)
		default:
			t.held = append(t.held, g.TTL)
		}
		return t.acquired >= b.quorum || t.acquired+t.low+pending < b.quorum
	}, nil)
	return t
}

// retryIn is when to try again after a tally that did not acquire: once
// enough nodes are free for a quorum, as far as their holders' remaining
// leases tell, plus a random delay, so that contenders that split the
// nodes between them do not meet again.
func (t tally) retryIn(quorum, nodes int, lease time.Duration) time.Duration {
	jitter := rand.N(max(nodeTimeout(lease)/2, time.Millisecond))
	// The lock can be had once quorum nodes are not held by another owner.
	short := quorum - (nodes - len(t.held))
	if short <= 0 {
		return jitter // taken by nobody: split, or failed nodes
	}
	slices.Sort(t.held)
	ttl := t.held[short-1]
	if ttl < 0 {
		return -1 // unknown
	}
	return ttl + jitter
}

// giveUp abandons the owner of r on every node: the nodes that took the
// lock release it, and a request of this attempt that lands later takes
// nothing.
func (b *Backend) giveUp(ctx context.Context, r engine.Request) error {
	r.Hold = 0
	r.Lease = engine.AbandonFor(r.Lease)
	_, err := b.Abandon(ctx, r)
	return err
}

// reenter adds hold r.Hold to a lock that r.Owner holds: acquired when a
// quorum added it, not acquired (the hold is lost) when a quorum cannot.
// A hold added on fewer nodes is released by the engine.
func (b *Backend) reenter(ctx context.Context, r engine.Request) (engine.Grant, error) {
	var added, refused, failed, holds int
	var token uint64
	var first error
	fanOut(b, ctx, nodeTimeout(r.Lease), func(ctx context.Context, n node) (engine.Grant, error) {
		return n.Acquire(ctx, r)
	}, func(rep reply[engine.Grant]) bool {
		switch {
		case rep.err != nil:
			failed++
			if first == nil {
				first = rep.err
			}
		case rep.val.Acquired:
			added++
			holds = max(holds, rep.val.Holds)
			token = max(token, rep.val.Token)
		default:
			refused++
		}
		return added >= b.quorum || refused > len(b.nodes)-b.quorum
	}, nil)
	switch {
	case added >= b.quorum:
		return engine.Grant{Acquired: true, Token: token, Holds: holds}, nil
	case refused > len(b.nodes)-b.quorum:
		return engine.Grant{TTL: -1}, nil
	}
	return engine.Grant{}, b.noQuorum("re-enter", failed, first)
}

// AcquireAll implements engine.Backend: one member at a time, each with
// Acquire (the members are not taken in one atomic step; the engine
// abandons those taken when a later one is not).
func (b *Backend) AcquireAll(ctx context.Context, rs []engine.Request) ([]engine.Grant, error) {
	return engine.AcquireEach(ctx, b, rs)
}

// propose returns a fencing token to propose: this machine's clock in µs,
// or above the highest token seen if that is ahead.
func (b *Backend) propose() uint64 {
	return max(uint64(time.Now().UnixMicro()), b.floor.Load()+1)
}

// saw records a token (or a node's counter) seen.
func (b *Backend) saw(token uint64) {
	for {
		f := b.floor.Load()
		if token <= f || b.floor.CompareAndSwap(f, token) {
			return
		}
	}
}
