package redlock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/distlock/distlock/store"
)

// maxRounds bounds the proposals of one acquisition attempt: a proposal
// that some nodes refuse as too low is made again above what they hold.
const maxRounds = 3

// Acquire implements store.Store: it asks every node at once to take
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
func (b *Backend) Acquire(ctx context.Context, r store.Request) (store.Grant, error) {
	if r.Kind != store.Plain {
		return store.Grant{}, Unsupported(r.Kind)
	}
	if r.Reenter {
		return b.reenter(ctx, r)
	}
	token := b.propose()
	touched := make([]touch, len(b.nodes))
	for round := 1; ; round++ {
		t := b.acquireRound(ctx, r, token, touched)
		if t.acquired >= b.quorum {
			b.saw(token)
			return store.Grant{Acquired: true, Token: token, Holds: 1}, nil
		}
		if t.low > 0 && t.acquired+t.low >= b.quorum && round < maxRounds {
			b.saw(t.counter)
			token = b.propose()
			continue
		}
		if t.failed+t.pending > len(b.nodes)-b.quorum {
			// Too many masters failed (or had not answered when the
			// outcome was known) for a quorum, whoever holds the others.
			// The engine abandons the owner, in the background, after an
			// error: the masters that failed may not answer for a while.
			return store.Grant{}, b.noQuorum("acquire", t.failed+t.pending, t.err)
		}
		if err := b.giveUp(ctx, r, touched); err != nil {
			return store.Grant{}, err
		}
		if t.wrongKind >= b.quorum {
			return store.Grant{}, store.ErrWrongKind
		}
		return store.Grant{TTL: t.retryIn(b.quorum, len(b.nodes), r.Lease)}, nil
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
	pending   int   // not answered when the outcome was known
	err       error // the first failure
}

// What an attempt may have done on a node.
type touch int

const (
	untouched touch = iota // refused, or not asked: nothing applied
	taken                  // the owner holds the lock there
	unknown                // no answer, or a failure: it may apply, now or later
)

// acquireRound proposes token to every node, and returns as soon as the
// outcome is known: a quorum acquired, or it cannot any more. It records in
// touched what the attempt did on each node (over all its rounds: a node
// taken, or perhaps taken, in an earlier round stays so).
func (b *Backend) acquireRound(ctx context.Context, r store.Request, token uint64, touched []touch) tally {
	var t tally
	answered := make([]bool, len(b.nodes))
	defer func() {
		for i, ok := range answered {
			if !ok {
				touched[i] = max(touched[i], unknown)
			}
		}
	}()
	pending := len(b.nodes)
	type result struct {
		g       store.Grant
		counter uint64
	}
	fanOut(b, ctx, nodeTimeout(r.Lease), func(ctx context.Context, n node) (result, error) {
		g, c, err := n.AcquireToken(ctx, r, token)
		return result{g, c}, err
	}, func(rep reply[result]) bool {
		pending--
		answered[rep.node] = rep.err == nil || errors.Is(rep.err, store.ErrWrongKind)
		switch g := rep.val.g; {
		case errors.Is(rep.err, store.ErrWrongKind):
			t.wrongKind++
			t.held = append(t.held, -1)
		case rep.err != nil:
			t.failed++
			if t.err == nil {
				t.err = rep.err
			}
		case g.Acquired:
			t.acquired++
			touched[rep.node] = max(touched[rep.node], taken)
		case rep.val.counter > 0:
			t.low++
			t.counter = max(t.counter, rep.val.counter)
		default:
			t.held = append(t.held, g.TTL)
		}
		return t.acquired >= b.quorum || t.acquired+t.low+pending < b.quorum
	}, nil)
	t.pending = pending
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

// giveUp undoes an attempt that did not acquire, as touched says: a node
// where the owner took the lock releases it, and giveUp fails if one does
// not confirm (the engine then abandons the owner everywhere, until
// confirmed); a node whose outcome is unknown abandons the owner, so that
// a request of the attempt that lands there later takes nothing (that
// leaves a mark for AbandonFor), as far as it answers: giveUp does not
// wait for it, and if it does not answer (it is down, or frozen), a late
// request may take the lock there, on this one node, for one lease. A
// node that refused needs nothing.
func (b *Backend) giveUp(ctx context.Context, r store.Request, touched []touch) error {
	r.Hold = 0
	abandon := r
	abandon.Lease = store.AbandonFor(r.Lease)
	releases := 0
	for _, t := range touched {
		if t == taken {
			releases++
		}
	}
	failed := 0
	var first error
	// A node that frees the lock tells this process's waiters, which may
	// have found it taken (see localWatchers): an abandonment that freed
	// it (the attempt's request had landed there after all), and any
	// reply that comes after giveUp decided (a release that did not answer
	// in time: giveUp failed). A release of a node the attempt took,
	// answered in time, does not: the attempt's own waiter would try again
	// at once, and contenders that split the nodes between them must wait
	// their random delays (retryIn) instead.
	freed := func(rep reply[bool]) bool { return rep.err == nil && rep.val }
	fanOut(b, ctx, nodeTimeout(r.Lease), func(ctx context.Context, n node) (bool, error) {
		switch touched[n.i] {
		case taken:
			res, err := n.Release(ctx, r)
			return res == store.Freed, err
		case unknown:
			return n.Abandon(ctx, abandon)
		}
		return false, nil
	}, func(rep reply[bool]) bool {
		if touched[rep.node] == unknown && freed(rep) {
			b.local.freed(r.Name)
		}
		if touched[rep.node] == taken {
			releases--
			if rep.err != nil && !unreachable(rep.err) {
				failed++
				if first == nil {
					first = rep.err
				}
			}
		}
		return releases == 0
	}, func(rep reply[bool]) {
		if freed(rep) {
			b.local.freed(r.Name)
		}
	})
	if failed > 0 {
		return fmt.Errorf("undoing an attempt: %d of %d masters did not confirm its release: %w", failed, len(b.nodes), asBackendErr(first))
	}
	return nil
}

// reenter adds hold r.Hold to a lock that r.Owner holds: acquired when a
// quorum added it, not acquired (the hold is lost) when a quorum cannot.
// A hold added on fewer nodes is released by the engine.
func (b *Backend) reenter(ctx context.Context, r store.Request) (store.Grant, error) {
	var added, refused, failed, holds int
	var token uint64
	var first error
	fanOut(b, ctx, nodeTimeout(r.Lease), func(ctx context.Context, n node) (store.Grant, error) {
		return n.Acquire(ctx, r)
	}, func(rep reply[store.Grant]) bool {
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
		return store.Grant{Acquired: true, Token: token, Holds: holds}, nil
	case refused > len(b.nodes)-b.quorum:
		return store.Grant{TTL: -1}, nil
	}
	return store.Grant{}, b.noQuorum("re-enter", failed, first)
}

// AcquireAll implements store.Store: one member at a time, each with
// Acquire (the members are not taken in one atomic step; the engine
// abandons those taken when a later one is not).
func (b *Backend) AcquireAll(ctx context.Context, rs []store.Request) ([]store.Grant, error) {
	return store.AcquireEach(ctx, b, rs)
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
