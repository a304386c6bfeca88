package redlock

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/distlock/distlock/store"
)

// Inspect reads the lock on every node. The lock is held by the owner
// that holds it on a quorum of nodes, with the fencing token it has there,
// until the lease of the last of a quorum runs out (the holder's TTL),
// with as many holds as a quorum of those nodes has;
// otherwise it is free (a holder on fewer nodes, such as an attempt being
// given up, does not count). LastToken is the highest counter of any node,
// Watchers the most subscribers any node has. It fails with an error
// wrapping ErrBackend when fewer than a quorum of nodes answer.
func (b *Backend) Inspect(ctx context.Context, name string) (store.State, error) {
	states, err := collect(b, ctx, "inspect", func(ctx context.Context, n node) (store.State, error) {
		return n.Inspect(ctx, name)
	})
	if err != nil {
		return store.State{}, err
	}
	out := store.State{TTL: -1}
	holders := map[string][]store.Holder{}
	for _, st := range states {
		out.LastToken = max(out.LastToken, st.LastToken)
		out.Watchers = max(out.Watchers, st.Watchers)
		if h := st.Holder(); st.Kind == store.Plain && st.Locked() {
			holders[h.Owner] = append(holders[h.Owner], h)
		}
	}
	for _, hs := range holders {
		if len(hs) < b.quorum {
			continue
		}
		// Held until fewer than a quorum of these leases are left; with
		// as many holds as a quorum has (a re-entry counts once a quorum
		// took it, and may not have reached the others yet).
		slices.SortFunc(hs, func(x, y store.Holder) int { return cmp.Compare(y.TTL, x.TTL) })
		h := hs[b.quorum-1]
		holds := make([]int, len(hs))
		for i, o := range hs {
			h.Token = max(h.Token, o.Token)
			holds[i] = o.Holds
		}
		slices.Sort(holds)
		h.Holds = holds[len(holds)-b.quorum]
		out.Kind, out.InUse, out.TTL, out.Holders = store.Plain, true, h.TTL, []store.Holder{h}
	}
	return out, nil
}

// ForceUnlock deletes the lock on every node, whoever holds it, and
// reports whether any node had it. It fails with an error wrapping
// ErrBackend when fewer than a quorum of nodes answer (those that did
// deleted it).
func (b *Backend) ForceUnlock(ctx context.Context, name string) (bool, error) {
	had, err := collect(b, ctx, "force-unlock", func(ctx context.Context, n node) (bool, error) {
		return n.ForceUnlock(ctx, name)
	})
	return slices.Contains(had, true), err
}

// Revoke revokes the lock on every node, whoever holds it (see
// redisbackend.Backend.Revoke), and returns the longest any node may keep
// it held, 0 if none held it. It fails with an error wrapping ErrBackend
// when fewer than a quorum of nodes answer (those that did revoked it).
func (b *Backend) Revoke(ctx context.Context, name string) (time.Duration, error) {
	left, err := collect(b, ctx, "revoke", func(ctx context.Context, n node) (time.Duration, error) {
		return n.Revoke(ctx, name)
	})
	var most time.Duration
	for _, d := range left {
		most = max(most, d)
	}
	return most, err
}

// List returns the names of the locks that exist on any node and match the
// glob pattern. It fails with an error wrapping ErrBackend when fewer than
// a quorum of nodes answer.
func (b *Backend) List(ctx context.Context, pattern string) ([]string, error) {
	lists, err := collect(b, ctx, "list", func(ctx context.Context, n node) ([]string, error) {
		return n.List(ctx, pattern)
	})
	if err != nil {
		return nil, err
	}
	var names []string
	for _, l := range lists {
		names = append(names, l...)
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}

// collect asks every node, waits for all of them (each within the node
// timeout), and returns the answers; it fails when fewer than a quorum
// answered.
func collect[T any](b *Backend, ctx context.Context, what string, op func(context.Context, node) (T, error)) ([]T, error) {
	var out []T
	failed := 0
	var first error
	fanOut(b, ctx, maxNodeTimeout, op, func(rep reply[T]) bool {
		if rep.err != nil {
			failed++
			if first == nil {
				first = rep.err
			}
			return false
		}
		out = append(out, rep.val)
		return false
	}, nil)
	if len(out) < b.quorum {
		return out, b.noQuorum(what, failed, first)
	}
	return out, nil
}
