package distlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/redistest"
)

// A revokedKind is a queued kind of lock, as TestRevokeQueuedKinds takes,
// revokes (with the kind's own Revoke; Mutex.Revoke, which distlock unlock
// --force calls, works on a name of any kind too) and inspects it: each
// kind reports the revocation in its own Inspect (an election in its
// Leader too).
type revokedKind struct {
	name    string
	acquire func(ctx context.Context, c *distlock.Client, name string) (*distlock.Lease, error)
	revoke  func(ctx context.Context, c *distlock.Client, name string) (time.Duration, error)
	inspect func(ctx context.Context, t *testing.T, c *distlock.Client, name string) lockView
}

// A lockView is what a kind's Inspect says of its one holder and its
// queue.
type lockView struct {
	held    bool
	token   uint64
	revoked bool
	ttl     time.Duration // what is left of the holder's lease
	queued  int
}

var revokedKinds = []revokedKind{
	{"fair",
		func(ctx context.Context, c *distlock.Client, n string) (*distlock.Lease, error) {
			return c.FairMutex(n, distlock.WithTTL(time.Minute)).Lock(ctx)
		},
		func(ctx context.Context, c *distlock.Client, n string) (time.Duration, error) {
			return c.FairMutex(n).Revoke(ctx)
		},
		mutexView},
	{"semaphore",
		func(ctx context.Context, c *distlock.Client, n string) (*distlock.Lease, error) {
			return c.Semaphore(n, 1, distlock.WithTTL(time.Minute)).Acquire(ctx, 1)
		},
		func(ctx context.Context, c *distlock.Client, n string) (time.Duration, error) {
			return c.Semaphore(n, 1).Revoke(ctx)
		},
		func(ctx context.Context, t *testing.T, c *distlock.Client, n string) lockView {
			t.Helper()
			info, err := c.Semaphore(n, 1).Inspect(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if info.Kind != distlock.KindSemaphore || len(info.Holders) > 1 || info.InUse != len(info.Holders) {
				t.Fatalf("Inspect: %+v; want a semaphore with at most one holder of its one permit", info)
			}
			v := lockView{queued: info.Queued}
			if len(info.Holders) == 1 {
				h := info.Holders[0]
				v.held, v.token, v.revoked, v.ttl = true, h.Token, h.Revoked, h.TTL
			}
			return v
		}},
	{"election",
		func(ctx context.Context, c *distlock.Client, n string) (*distlock.Lease, error) {
			return c.Election(n, distlock.WithTTL(time.Minute)).Campaign(ctx, "candidate")
		},
		func(ctx context.Context, c *distlock.Client, n string) (time.Duration, error) {
			return c.Election(n).Revoke(ctx)
		},
		func(ctx context.Context, t *testing.T, c *distlock.Client, n string) lockView {
			t.Helper()
			v := mutexView(ctx, t, c, n)
			// The election's own view must say the same.
			leader, err := c.Election(n).Leader(ctx)
			switch {
			case !v.held && !errors.Is(err, distlock.ErrNotHeld):
				t.Fatalf("Leader of an election nobody leads: %+v, %v; want ErrNotHeld", leader, err)
			case v.held && (err != nil || leader.Term != v.token || leader.Holder.Revoked != v.revoked):
				t.Fatalf("Leader: %+v, %v; want term %d, revoked %v as Inspect says", leader, err, v.token, v.revoked)
			}
			return v
		}},
}

// mutexView inspects a fair mutex or an election.
func mutexView(ctx context.Context, t *testing.T, c *distlock.Client, n string) lockView {
	t.Helper()
	info, err := c.Mutex(n).Inspect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Kind != distlock.KindFairMutex && info.Kind != distlock.KindElection {
		t.Fatalf("Inspect: %+v; want a fair mutex or an election", info)
	}
	return lockView{held: info.Locked, token: info.Token, revoked: info.Holder.Revoked, ttl: info.TTL, queued: info.Queued}
}

// TestRevokeQueuedKinds: Revoke stops the holder of a fair mutex, a
// semaphore and an election (each with its own Revoke) without letting its queued waiter in: the holder's
// lease context ends with ErrLockLost, the lock stays held by it, revoked,
// with the waiter still in the queue and not served, until the holder's
// Unlock, which reports the loss; then the waiter gets the lock, with a
// higher fencing token. Revoke returns the holder's remaining lease, at
// least what is left of it after the revocation (renewals are refused).
func TestRevokeQueuedKinds(t *testing.T) {
	srv := redistest.Start(t)
	holder, _ := newClient(t, srv)
	ops, _ := newClient(t, srv)
	for _, k := range revokedKinds {
		t.Run(k.name, func(t *testing.T) {
			name := "revoke-queued-" + k.name
			ctx := testCtx(t)
			opt, waiting := waitEvents()
			waiter, _ := newClient(t, srv, opt)

			l, err := k.acquire(ctx, holder, name)
			if err != nil {
				t.Fatal(err)
			}
			next := make(chan lockResult, 1)
			go func() {
				l, err := k.acquire(ctx, waiter, name)
				next <- lockResult{l, err}
			}()
			await(t, waiting, "the waiter to queue") // the place is in the store
			if v := k.inspect(ctx, t, ops, name); !v.held || v.token != l.Token() || v.revoked || v.queued != 1 {
				t.Fatalf("before Revoke: %+v; want held by token %d, not revoked, one waiter", v, l.Token())
			}

			left, err := k.revoke(ctx, ops, name)
			if err != nil || left <= 0 || left > time.Minute {
				t.Fatalf("Revoke = %v, %v; want the holder's remaining lease, in (0, 1m]", left, err)
			}
			awaitRevoked(t, l, k.name)

			// The holder has been told and has not unlocked: the lock is
			// still its own, revoked, and the waiter still waits.
			v := k.inspect(ctx, t, ops, name)
			if !v.held || v.token != l.Token() || !v.revoked || v.queued != 1 {
				t.Fatalf("after the revocation, before the holder's Unlock: %+v; want held by the revoked token %d, one waiter", v, l.Token())
			}
			if v.ttl <= 0 || v.ttl > left {
				t.Errorf("the revoked lease has %v left, Revoke said it could last %v", v.ttl, left)
			}
			select {
			case w := <-next:
				t.Fatalf("the waiter got in before the revoked holder's Unlock: %v, %v", w.l, w.err)
			default:
			}

			if err := l.Unlock(ctx); !errors.Is(err, distlock.ErrLockLost) {
				t.Errorf("Unlock of the revoked lease: %v, want ErrLockLost", err)
			}
			w := <-next
			if w.err != nil {
				t.Fatalf("the waiter after the holder's Unlock: %v", w.err)
			}
			if w.l.Token() <= l.Token() {
				t.Errorf("the waiter's token %d is not above the revoked holder's %d", w.l.Token(), l.Token())
			}
			if v := k.inspect(ctx, t, ops, name); !v.held || v.token != w.l.Token() || v.revoked || v.queued != 0 {
				t.Errorf("after the holder's Unlock: %+v; want held by the waiter's token %d, not revoked, nobody queued", v, w.l.Token())
			}
			if err := w.l.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}
