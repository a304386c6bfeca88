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
	"github.com/distlock/distlock/redisstore"
	"github.com/distlock/distlock/redistest"
	"github.com/redis/go-redis/v9"
)

// revokedWithin bounds how soon a holder must learn of a force-unlock: far
// below the first renewal of a one-minute lease (10 s), so that only the
// notice can explain it.
const revokedWithin = 5 * time.Second

// awaitRevoked waits for l's lease context to end with the cause of a
// force-unlock or a revocation.
func awaitRevoked(t *testing.T, l *distlock.Lease, what string) {
	t.Helper()
	select {
	case <-l.Context().Done():
	case <-time.After(revokedWithin):
		t.Fatalf("%s: not told of the force-unlock within %v", what, revokedWithin)
	}
	cause := context.Cause(l.Context())
	if !errors.Is(cause, distlock.ErrLockLost) || !strings.Contains(cause.Error(), "revoked") {
		t.Fatalf("%s: cause %v, want ErrLockLost, revoked", what, cause)
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
	channel := holderChannel()

	t.Run("mutex", func(t *testing.T) {
		l, err := c.Mutex("tell", ttl).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// Each client starts to watch for notices with its first hold, in
		// the background; a notice before that is heard at the next
		// renewal only.
		awaitWatchers(t, rdb, channel, 1)
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
		awaitWatchers(t, rdb, channel, 2)
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
		awaitQuorumWatch(t, q, channel)
		if _, err := q.client(t).Mutex("tell").ForceUnlock(ctx); err != nil {
			t.Fatal(err)
		}
		awaitRevoked(t, l, "redlock")
	})
}

// TestRevoke: Revoke ends the holder's lease context at once, but keeps
// the lock held until the holder releases it: a waiter gets it only after
// the holder's Unlock, which reports the loss. It works the same for the
// readers of a read-write lock and over Redlock, and a holder that misses
// the notice learns of the revocation at its next renewal.
func TestRevoke(t *testing.T) {
	srv := redistest.Start(t)
	c, rdb := newClient(t, srv)
	other, _ := newClient(t, srv)
	ops, _ := newClient(t, srv)
	ctx := testCtx(t)
	ttl := distlock.WithTTL(time.Minute)
	channel := holderChannel()

	t.Run("not held", func(t *testing.T) {
		if left, err := ops.Mutex("rv-free").Revoke(ctx); left != 0 || err != nil {
			t.Fatalf("Revoke of a free lock = %v, %v; want 0, nil", left, err)
		}
	})

	t.Run("mutex", func(t *testing.T) {
		l, err := c.Mutex("rv", ttl).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		awaitWatchers(t, rdb, channel, 1)
		left, err := ops.Mutex("rv").Revoke(ctx)
		if err != nil || left <= 0 || left > time.Minute {
			t.Fatalf("Revoke = %v, %v; want the holder's remaining lease", left, err)
		}
		awaitRevoked(t, l, "mutex")
		if info, err := ops.Mutex("rv").Inspect(ctx); err != nil || !info.Locked || !info.Holder.Revoked {
			t.Fatalf("Inspect of the revoked lock: %+v, %v; want held, revoked", info, err)
		}
		waiter := mutexAsync(ctx, other.Mutex("rv"))
		if _, err := ops.Mutex("rv").TryLock(ctx); !errors.Is(err, distlock.ErrNotAcquired) {
			t.Fatalf("TryLock of a revoked lock before its holder's Unlock: %v, want ErrNotAcquired", err)
		}
		if again, err := ops.Mutex("rv").Revoke(ctx); err != nil || again <= 0 {
			t.Fatalf("Revoke again = %v, %v; want the same lock, still held", again, err)
		}
		if err := l.Unlock(ctx); !errors.Is(err, distlock.ErrLockLost) {
			t.Errorf("Unlock of the revoked lease: %v, want ErrLockLost", err)
		}
		next := <-waiter
		if next.err != nil {
			t.Fatalf("the waiter after the holder's Unlock: %v", next.err)
		}
		if next.l.Token() <= l.Token() {
			t.Errorf("the next holder's token %d is not above the revoked one's %d", next.l.Token(), l.Token())
		}
		if err := next.l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("notice missed", func(t *testing.T) {
		// The lock names another process, so the notice goes nowhere:
		// the holder learns of the revocation when its renewal (a third
		// of the 6 s lease) is refused, and the lock, a good 4 s from its
		// end then, stays held until the holder's Unlock.
		l, err := c.Mutex("rv-missed", distlock.WithTTL(6*time.Second)).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		key := redisstore.DefaultPrefix + "{rv-missed}"
		if err := rdb.HSet(ctx, key, "i", "1 0 elsewhere").Err(); err != nil { // pid since host
			t.Fatal(err)
		}
		if _, err := ops.Mutex("rv-missed").Revoke(ctx); err != nil {
			t.Fatal(err)
		}
		<-l.Context().Done()
		if cause := context.Cause(l.Context()); !errors.Is(cause, distlock.ErrLockLost) {
			t.Fatalf("cause %v, want ErrLockLost", cause)
		}
		if n := rdb.Exists(ctx, key).Val(); n != 1 {
			t.Fatalf("the revoked lock was freed before its holder's Unlock")
		}
		if err := l.Unlock(ctx); !errors.Is(err, distlock.ErrLockLost) {
			t.Errorf("Unlock of the revoked lease: %v, want ErrLockLost", err)
		}
		if n := rdb.Exists(ctx, key).Val(); n != 0 {
			t.Fatalf("the revoked lock outlived its holder's Unlock")
		}
	})

	t.Run("readers", func(t *testing.T) {
		r1, err := c.RWMutex("rv-rw", ttl).RLock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		r2, err := other.RWMutex("rv-rw", ttl).RLock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		awaitWatchers(t, rdb, channel, 2)
		if left, err := ops.RWMutex("rv-rw").Revoke(ctx); err != nil || left <= 0 {
			t.Fatalf("Revoke = %v, %v", left, err)
		}
		awaitRevoked(t, r1, "first reader")
		awaitRevoked(t, r2, "second reader")
		writer := make(chan lockResult, 1)
		go func() {
			l, err := ops.RWMutex("rv-rw").Lock(ctx)
			writer <- lockResult{l, err}
		}()
		if err := r1.Unlock(ctx); !errors.Is(err, distlock.ErrLockLost) {
			t.Errorf("first reader's Unlock: %v, want ErrLockLost", err)
		}
		info, err := ops.RWMutex("rv-rw").Inspect(ctx)
		if err != nil || len(info.Readers) != 1 || !info.Readers[0].Revoked {
			t.Fatalf("after one revoked reader's Unlock: %+v, %v; want the other reader still in, revoked", info, err)
		}
		select {
		case w := <-writer:
			t.Fatalf("the writer got in beside a revoked reader: %v", w.err)
		default:
		}
		if err := r2.Unlock(ctx); !errors.Is(err, distlock.ErrLockLost) {
			t.Errorf("second reader's Unlock: %v, want ErrLockLost", err)
		}
		w := <-writer
		if w.err != nil {
			t.Fatalf("the writer after both readers' Unlock: %v", w.err)
		}
		if err := w.l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("redlock", func(t *testing.T) {
		q := startQuorum(t, 3)
		l, err := q.c.Mutex("rv", ttl).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		awaitQuorumWatch(t, q, channel)
		ops := q.client(t)
		if left, err := ops.Mutex("rv").Revoke(ctx); err != nil || left <= 0 {
			t.Fatalf("Revoke = %v, %v", left, err)
		}
		awaitRevoked(t, l, "redlock")
		if _, err := ops.Mutex("rv").TryLock(ctx); !errors.Is(err, distlock.ErrNotAcquired) {
			t.Fatalf("TryLock of a revoked lock before its holder's Unlock: %v, want ErrNotAcquired", err)
		}
		if err := l.Unlock(ctx); !errors.Is(err, distlock.ErrLockLost) {
			t.Errorf("Unlock of the revoked lease: %v, want ErrLockLost", err)
		}
		next, err := ops.Mutex("rv").TryLock(ctx)
		if err != nil {
			t.Fatalf("TryLock after the holder's Unlock: %v", err)
		}
		if err := next.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// mutexAsync runs m.Lock in the background; its outcome arrives on the
// channel.
func mutexAsync(ctx context.Context, m *distlock.Mutex) <-chan lockResult {
	out := make(chan lockResult, 1)
	go func() {
		l, err := m.Lock(ctx)
		out <- lockResult{l, err}
	}()
	return out
}

// holderChannel is the channel on which this process hears that its
// locks were force-unlocked or revoked.
func holderChannel() string {
	host, _ := os.Hostname()
	return redisstore.DefaultPrefix + "holder:" + host + ":" + strconv.Itoa(os.Getpid())
}

// awaitWatchers waits until n clients listen on channel, the test
// process's channel of notices (each client starts to with its first
// hold, in the background).
func awaitWatchers(t *testing.T, rdb *redis.Client, channel string, n int64) {
	t.Helper()
	waitFor(t, func() bool { return rdb.PubSubNumSub(t.Context(), channel).Val()[channel] >= n })
}

// awaitQuorumWatch waits until a master of q has a subscriber on channel,
// the test process's channel of notices: the holder's client listens.
func awaitQuorumWatch(t *testing.T, q *quorum, channel string) {
	t.Helper()
	waitFor(t, func() bool {
		return slices.ContainsFunc(q.rdbs, func(r *redis.Client) bool {
			return r.PubSubNumSub(t.Context(), channel).Val()[channel] >= 1
		})
	})
}
