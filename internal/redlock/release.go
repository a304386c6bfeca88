package redlock

import (
	"context"
	"time"

	"github.com/distlock/distlock/store"
)

// Release implements store.Store: every node releases at once. The
// outcome is the one a quorum agrees on (a release that an earlier attempt
// already made counts with Freed); once every node answered without
// agreement, Freed if any node freed the lock, Remaining if any kept other
// holds, and NotOwner if none failed. A node that answers after the
// outcome is known still releases. A node that freed the lock where the
// outcome is not Freed, or after it was known, tells this process's
// waiters (see localWatchers).
func (b *Backend) Release(ctx context.Context, r store.Request) (store.Release, error) {
	var freed, remaining, already, notOwner, failed int
	var first error
	fanOut(b, ctx, nodeTimeout(r.Lease), func(ctx context.Context, n node) (store.Release, error) {
		return n.Release(ctx, r)
	}, func(rep reply[store.Release]) bool {
		switch {
		case rep.err != nil:
			failed++
			if first == nil {
				first = rep.err
			}
		case rep.val == store.Freed:
			freed++
		case rep.val == store.Remaining:
			remaining++
		case rep.val == store.AlreadyReleased:
			already++
		default:
			notOwner++
		}
		return freed+already >= b.quorum || remaining >= b.quorum || notOwner > len(b.nodes)-b.quorum
	}, func(rep reply[store.Release]) {
		if rep.err == nil && rep.val == store.Freed {
			b.local.freed(r.Name)
		}
	})
	res, err := func() (store.Release, error) {
		switch {
		case freed+already >= b.quorum && freed == 0:
			return store.AlreadyReleased, nil
		case freed+already >= b.quorum:
			return store.Freed, nil
		case remaining >= b.quorum:
			return store.Remaining, nil
		case notOwner > len(b.nodes)-b.quorum:
			return store.NotOwner, nil
		case freed > 0:
			return store.Freed, nil
		case remaining > 0:
			return store.Remaining, nil
		case failed > 0:
			return 0, b.noQuorum("release", failed, first)
		}
		return store.NotOwner, nil
	}()
	if freed > 0 && res != store.Freed {
		// Some node freed the lock, but the Client is not told it is free,
		// so it hands nothing over: this process's waiters hear of it here.
		b.local.freed(r.Name)
	}
	return res, err
}

// Abandon implements store.Store: every node abandons the owner at
// once. It succeeds once a quorum confirmed (a node that answers later
// still abandons), or once every node confirmed or could not be reached
// (a node that is down has taken nothing since it went down). It reports
// whether any node freed the lock.
//
// A node gets abandonTimeout to answer, longer than for other requests:
// a clean-up is not in a hurry, and a client that cannot connect may try
// for a while before it says so (go-redis dials 5 times, about 2 s), where
// a shorter wait could not tell a node that is down from one that is slow.
// A node that frees the lock after the outcome is known tells this
// process's waiters (see localWatchers).
func (b *Backend) Abandon(ctx context.Context, r store.Request) (bool, error) {
	var confirmed, down, answered int
	freed := false
	var first error
	fanOut(b, ctx, abandonTimeout, func(ctx context.Context, n node) (bool, error) {
		return n.Abandon(ctx, r)
	}, func(rep reply[bool]) bool {
		answered++
		switch {
		case rep.err == nil:
			confirmed++
			freed = freed || rep.val
		case unreachable(rep.err):
			down++
		case first == nil:
			first = rep.err
		}
		return confirmed >= b.quorum
	}, func(rep reply[bool]) {
		if rep.err == nil && rep.val {
			b.local.freed(r.Name)
		}
	})
	if confirmed >= b.quorum || confirmed+down == len(b.nodes) {
		return freed, nil
	}
	return freed, b.noQuorum("abandon", len(b.nodes)-confirmed, first)
}

// abandonTimeout bounds one node's part of an Abandon.
const abandonTimeout = 4 * time.Second
