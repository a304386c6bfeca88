package distlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/redistest"
)

// A reentrantKind is a kind of lock whose owner can hold it more than
// once: enter takes it, or re-enters it with a context that carries one
// of its Leases; holds reads from Redis the owner's hold count (0 if the
// lock is not held); try is another owner's attempt, which fails with
// ErrNotAcquired while the lock is held (nil if the kind has none: an
// election has no TryCampaign).
type reentrantKind struct {
	name  string
	enter func(ctx context.Context, c *distlock.Client, name string) (*distlock.Lease, error)
	holds func(ctx context.Context, t *testing.T, c *distlock.Client, name string) int
	try   func(ctx context.Context, c *distlock.Client, name string) (*distlock.Lease, error)
}

var reentrantKinds = []reentrantKind{
	{"mutex",
		func(ctx context.Context, c *distlock.Client, n string) (*distlock.Lease, error) {
			return c.Mutex(n, distlock.WithTTL(time.Minute)).Lock(ctx)
		},
		mutexHolds,
		func(ctx context.Context, c *distlock.Client, n string) (*distlock.Lease, error) {
			return c.Mutex(n).TryLock(ctx)
		}},
	{"fair",
		func(ctx context.Context, c *distlock.Client, n string) (*distlock.Lease, error) {
			return c.FairMutex(n, distlock.WithTTL(time.Minute)).Lock(ctx)
		},
		mutexHolds,
		func(ctx context.Context, c *distlock.Client, n string) (*distlock.Lease, error) {
			return c.FairMutex(n).TryLock(ctx)
		}},
	{"election",
		func(ctx context.Context, c *distlock.Client, n string) (*distlock.Lease, error) {
			return c.Election(n, distlock.WithTTL(time.Minute)).Campaign(ctx, "leader")
		},
		mutexHolds,
		nil},
	{"read",
		func(ctx context.Context, c *distlock.Client, n string) (*distlock.Lease, error) {
			return c.RWMutex(n, distlock.WithTTL(time.Minute)).RLock(ctx)
		},
		func(ctx context.Context, t *testing.T, c *distlock.Client, n string) int {
			t.Helper()
			info, err := c.RWMutex(n).Inspect(ctx)
			if err != nil || info.Writer != nil || len(info.Readers) > 1 {
				t.Fatalf("Inspect: %+v, %v; want one reader at most", info, err)
			}
			if len(info.Readers) == 0 {
				return 0
			}
			return info.Readers[0].Holds
		},
		func(ctx context.Context, c *distlock.Client, n string) (*distlock.Lease, error) {
			return c.RWMutex(n).TryLock(ctx)
		}},
	{"write",
		func(ctx context.Context, c *distlock.Client, n string) (*distlock.Lease, error) {
			return c.RWMutex(n, distlock.WithTTL(time.Minute)).Lock(ctx)
		},
		func(ctx context.Context, t *testing.T, c *distlock.Client, n string) int {
			t.Helper()
			info, err := c.RWMutex(n).Inspect(ctx)
			if err != nil || len(info.Readers) > 0 {
				t.Fatalf("Inspect: %+v, %v; want no reader", info, err)
			}
			if info.Writer == nil {
				return 0
			}
			return info.Writer.Holds
		},
		func(ctx context.Context, c *distlock.Client, n string) (*distlock.Lease, error) {
			return c.RWMutex(n).TryRLock(ctx)
		}},
}

// mutexHolds is the hold count of a mutex, a fair mutex or an election.
func mutexHolds(ctx context.Context, t *testing.T, c *distlock.Client, n string) int {
	t.Helper()
	info, err := c.Mutex(n).Inspect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return info.Holds
}

// TestRetriedUnlockReleasesOneHold: an Unlock whose reply is lost, which
// the engine therefore sends again and whose first copy reaches Redis only
// after that (two copies of one release applied), removes one hold of its
// owner, never two: the owner's other hold keeps the lock, and only its
// own Unlock frees it. This is the per-hold id checked in the release
// scripts (release_plain.lua for a mutex and a multi-lock's member,
// release.lua for the others), for every kind that an owner can hold more
// than once. A Semaphore is not re-entrant: see
// TestRetriedSemaphoreReleaseLeavesOtherOwner.
func TestRetriedUnlockReleasesOneHold(t *testing.T) {
	srv := redistest.Start(t)
	other, _ := newClient(t, srv)
	for _, k := range reentrantKinds {
		t.Run(k.name, func(t *testing.T) {
			name := "dup-release-" + k.name
			ctx := testCtx(t)
			c, h := interceptedClient(t, srv)
			outer, err := k.enter(ctx, c, name)
			if err != nil {
				t.Fatal(err)
			}
			inner, err := k.enter(outer.Context(), c, name)
			if err != nil {
				t.Fatal(err)
			}
			if inner.Token() != outer.Token() {
				t.Fatalf("re-entry token %d, want the hold's %d", inner.Token(), outer.Token())
			}
			if n := k.holds(ctx, t, other, name); n != 2 {
				t.Fatalf("holds after a re-entry: %d, want 2", n)
			}

			lost := h.on(name, "release", 1, true)
			if err := inner.Unlock(ctx); err != nil {
				t.Fatalf("Unlock of the re-entered hold, its first reply lost: %v", err)
			}
			await(t, lost.matched, "the release whose reply is lost")
			lost.free()
			await(t, lost.landed, "the lost release to land again")

			if n := k.holds(ctx, t, other, name); n != 1 {
				t.Fatalf("after one Unlock applied twice: %d holds, want the other hold left", n)
			}
			if err := outer.Context().Err(); err != nil {
				t.Fatalf("the remaining hold's lease ended: %v", context.Cause(outer.Context()))
			}
			if k.try != nil {
				if l, err := k.try(ctx, other, name); !errors.Is(err, distlock.ErrNotAcquired) {
					t.Fatalf("another owner's attempt while a hold remains: %v, %v; want ErrNotAcquired", l, err)
				}
			}

			if err := outer.Unlock(ctx); err != nil {
				t.Fatalf("Unlock of the last hold: %v", err)
			}
			if n := k.holds(ctx, t, other, name); n != 0 {
				t.Fatalf("after the last hold's Unlock: %d holds, want the lock free", n)
			}
			if k.try != nil {
				l, err := k.try(ctx, other, name)
				if err != nil {
					t.Fatalf("another owner's attempt after the last Unlock: %v", err)
				}
				if err := l.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
			}
		})
	}

	// A multi-lock's members are plain mutexes, each re-entered by a
	// Mutex of its name with the multi-lock's Lease context: a retried
	// Unlock of that re-entry leaves the multi-lock's own hold.
	t.Run("multi", func(t *testing.T) {
		a, b := "dup-release-multi-a", "dup-release-multi-b"
		ctx := testCtx(t)
		c, h := interceptedClient(t, srv)
		group, err := c.MultiMutex([]string{a, b}, distlock.WithTTL(time.Minute)).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		inner, err := c.Mutex(a, distlock.WithTTL(time.Minute)).Lock(group.Context())
		if err != nil {
			t.Fatal(err)
		}
		if inner.Token() != group.Tokens()[a] {
			t.Fatalf("re-entry token %d, want the member's %d", inner.Token(), group.Tokens()[a])
		}
		if n := mutexHolds(ctx, t, other, a); n != 2 {
			t.Fatalf("member holds after a re-entry: %d, want 2", n)
		}

		lost := h.on(a, "release", 1, true)
		if err := inner.Unlock(ctx); err != nil {
			t.Fatalf("Unlock of the re-entered member, its first reply lost: %v", err)
		}
		await(t, lost.matched, "the release whose reply is lost")
		lost.free()
		await(t, lost.landed, "the lost release to land again")

		if n := mutexHolds(ctx, t, other, a); n != 1 {
			t.Fatalf("after one Unlock applied twice: the member has %d holds, want the multi-lock's left", n)
		}
		if err := group.Context().Err(); err != nil {
			t.Fatalf("the multi-lock's lease ended: %v", context.Cause(group.Context()))
		}
		if l, err := other.Mutex(a).TryLock(ctx); !errors.Is(err, distlock.ErrNotAcquired) {
			t.Fatalf("another owner's TryLock of a member the multi-lock holds: %v, %v; want ErrNotAcquired", l, err)
		}

		if err := group.Unlock(ctx); err != nil {
			t.Fatalf("Unlock of the multi-lock: %v", err)
		}
		l, err := other.MultiMutex([]string{a, b}).TryLock(ctx)
		if err != nil {
			t.Fatalf("another owner's TryLock after the multi-lock's Unlock: %v", err)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// TestRetriedSemaphoreReleaseLeavesOtherOwner: a Semaphore is not
// re-entrant, so the per-hold id has nothing to tell apart; a second
// Acquire with a Lease's context is an owner of its own. An Unlock of one
// of two such acquisitions whose reply is lost, sent again by the engine
// and landing twice, returns that acquisition's permit only: the other
// owner's permit stays held (the owner id checked in release.lua), and
// its own Unlock returns it.
func TestRetriedSemaphoreReleaseLeavesOtherOwner(t *testing.T) {
	srv := redistest.Start(t)
	other, _ := newClient(t, srv)
	c, h := interceptedClient(t, srv)
	ctx := testCtx(t)
	const name = "dup-release-sem"
	sem := c.Semaphore(name, 2, distlock.WithTTL(time.Minute))
	first, err := sem.Acquire(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	second, err := sem.Acquire(first.Context(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if second.Token() == first.Token() {
		t.Fatalf("the second acquisition shares the first's token %d: a re-entry", first.Token())
	}

	lost := h.on(name, "release", 1, true)
	if err := second.Unlock(ctx); err != nil {
		t.Fatalf("Unlock, its first reply lost: %v", err)
	}
	await(t, lost.matched, "the release whose reply is lost")
	lost.free()
	await(t, lost.landed, "the lost release to land again")

	info, err := other.Semaphore(name, 2).Inspect(ctx)
	if err != nil || info.InUse != 1 || len(info.Holders) != 1 || info.Holders[0].Token != first.Token() {
		t.Fatalf("after one Unlock applied twice: %+v, %v; want the first acquisition's permit held", info, err)
	}
	if err := first.Context().Err(); err != nil {
		t.Fatalf("the first acquisition's lease ended: %v", context.Cause(first.Context()))
	}
	if l, err := other.Semaphore(name, 2).TryAcquire(ctx, 2); !errors.Is(err, distlock.ErrNotAcquired) {
		t.Fatalf("TryAcquire of both permits while one is held: %v, %v; want ErrNotAcquired", l, err)
	}

	if err := first.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	l, err := other.Semaphore(name, 2).TryAcquire(ctx, 2)
	if err != nil {
		t.Fatalf("TryAcquire of both permits after the last Unlock: %v", err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}
