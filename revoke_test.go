package distlock_test

import (
	"context"
	"errors"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/redistest"
	"github.com/redis/go-redis/v9"
)

// revokedWithin bounds how soon a holder must learn of a force-unlock: far
// below the first renewal of a one-minute lease (10 s), so that only the
// notice can explain it.
const revokedWithin = 5 * time.Second

// awaitRevoked waits for l's lease context to end with the force-unlock's
// cause.
func awaitRevoked(t *testing.T, l *distlock.Lease, what string) {
	t.Helper()
	select {
	case <-l.Context().Done():
	case <-time.After(revokedWithin):
		t.Fatalf("%s: not told of the force-unlock within %v", what, revokedWithin)
	}
	cause := context.Cause(l.Context())
	if !errors.Is(cause, distlock.ErrLockLost) || !strings.Contains(cause.Error(), "force-unlocked") {
		t.Fatalf("%s: cause %v, want ErrLockLost, force-unlocked", what, cause)
	}
}

// TestForceUnlockTellsHolder: ForceUnlock tells the holder's process, whose
// lease context ends at once rather than at its next renewal (a minute's
// lease renews after 10 s at the earliest; a fixed lease never does):
// a mutex's holder, a fixed lease's, every reader of a read-write lock,
// and a holder over Redlock. A notice for another lock changes nothing.
func TestForceUnlockTellsHolder(t *testing.T) {
	srv := redistest.Start(t)
	c, rdb := newClient(t, srv)
	other, _ := newClient(t, srv)
	ops, _ := newClient(t, srv)
	ctx := testCtx(t)
	ttl := distlock.WithTTL(time.Minute)
	host, _ := os.Hostname()
	channel := distlock.DefaultPrefix + "holder:" + host + ":" + strconv.Itoa(os.Getpid())

	t.Run("mutex", func(t *testing.T) {
		l, err := c.Mutex("tell", ttl).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// Each client starts to watch for notices with its first hold, in
		// the background; a notice before that is heard at the next
		// renewal only.
		waitFor(t, func() bool { return rdb.PubSubNumSub(ctx, channel).Val()[channel] >= 1 })
		if ok, err := ops.Mutex("tell").ForceUnlock(ctx); !ok || err != nil {
			t.Fatalf("ForceUnlock = %v, %v", ok, err)
		}
		awaitRevoked(t, l, "mutex")
		if err := l.Unlock(ctx); !errors.Is(err, distlock.ErrLockLost) {
			t.Errorf("Unlock after the force-unlock: %v, want ErrLockLost", err)
		}
	})

	t.Run("fixed lease", func(t *testing.T) {
		l, err := c.Mutex("tell-fixed", distlock.WithFixedLease(time.Minute)).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ops.Mutex("tell-fixed").ForceUnlock(ctx); err != nil {
			t.Fatal(err)
		}
		awaitRevoked(t, l, "fixed lease")
	})

	t.Run("readers", func(t *testing.T) {
		r1, err := c.RWMutex("tell-rw", ttl).RLock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		r2, err := other.RWMutex("tell-rw", ttl).RLock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, func() bool { return rdb.PubSubNumSub(ctx, channel).Val()[channel] >= 2 })
		if _, err := ops.Mutex("tell-rw").ForceUnlock(ctx); err != nil {
			t.Fatal(err)
		}
		awaitRevoked(t, r1, "first reader")
		awaitRevoked(t, r2, "second reader")
	})

	t.Run("another lock's notice", func(t *testing.T) {
		kept, err := c.Mutex("tell-kept", ttl).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		gone, err := c.Mutex("tell-gone", ttl).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// A notice naming a lock this client holds, with an owner that is
		// not its own, then the real force-unlock of another lock: the
		// process hears them in this order, on one connection.
		if err := rdb.Publish(ctx, channel, strings.Repeat("0", 40)+"\ntell-kept").Err(); err != nil {
			t.Fatal(err)
		}
		if _, err := ops.Mutex("tell-gone").ForceUnlock(ctx); err != nil {
			t.Fatal(err)
		}
		awaitRevoked(t, gone, "the force-unlocked lock")
		if err := kept.Context().Err(); err != nil {
			t.Fatalf("a notice for another owner ended the lease: %v", context.Cause(kept.Context()))
		}
		if err := kept.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("redlock", func(t *testing.T) {
		q := startQuorum(t, 3)
		l, err := q.c.Mutex("tell", ttl).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, func() bool {
			return slices.ContainsFunc(q.rdbs, func(r *redis.Client) bool { return r.PubSubNumSub(ctx, channel).Val()[channel] >= 1 })
		})
		if _, err := q.client(t).Mutex("tell").ForceUnlock(ctx); err != nil {
			t.Fatal(err)
		}
		awaitRevoked(t, l, "redlock")
	})
}
