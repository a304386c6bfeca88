package distlock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/redisstore"
	"github.com/distlock/distlock/redistest"
)

// Close after a Revoke releases the revoked lock: Revoke keeps the lock
// held until its holder stops and releases it, and a holder that stops by
// closing its Client has stopped (issue "every guarantee with a test that
// can fail": Close returned nil and the lock stayed held, revoked, for the
// whole lease).
func TestCloseReleasesRevokedLock(t *testing.T) {
	srv := redistest.Start(t)
	ctx := testCtx(t)
	other, _ := newClient(t, srv)
	for _, tc := range []struct {
		name string
		take func(c *distlock.Client) (*distlock.Lease, error)
		try  func() error
	}{
		{"mutex", func(c *distlock.Client) (*distlock.Lease, error) {
			return c.Mutex("close-revoked", distlock.WithTTL(time.Minute)).Lock(ctx)
		}, func() error {
			l, err := other.Mutex("close-revoked").TryLock(ctx)
			if err == nil {
				l.Unlock(ctx)
			}
			return err
		}},
		{"semaphore", func(c *distlock.Client) (*distlock.Lease, error) {
			return c.Semaphore("close-revoked-sem", 1, distlock.WithTTL(time.Minute)).Acquire(ctx, 1)
		}, func() error {
			l, err := other.Semaphore("close-revoked-sem", 1).TryAcquire(ctx, 1)
			if err == nil {
				l.Unlock(ctx)
			}
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := distlock.New(redisstore.New(srv.Client(t)), distlock.WithLogger(nil))
			l, err := tc.take(c)
			if err != nil {
				t.Fatal(err)
			}
			name := l.Name()
			if _, err := other.Mutex(name).Revoke(ctx); err != nil {
				t.Fatal(err)
			}
			<-l.Context().Done()
			if err := tc.try(); !errors.Is(err, distlock.ErrNotAcquired) {
				t.Fatalf("TryLock of the revoked lock before its holder stopped: %v, want ErrNotAcquired", err)
			}
			if err := c.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			if err := tc.try(); err != nil {
				t.Fatalf("after the holder's Close returned nil, the revoked lock is still held: %v", err)
			}
			if err := l.Unlock(ctx); !errors.Is(err, distlock.ErrLockLost) {
				t.Fatalf("Unlock after Close of a revoked lease: %v, want ErrLockLost", err)
			}
		})
	}
}

// A revoked lock whose holder never unlocks (stopped, or a bug) ends with
// the holder's current lease: its renewals are refused once it is revoked,
// so the lock expires on the server, and a waiter gets it, with a higher
// token, although the holder neither unlocked nor closed.
func TestRevokedLockEndsWithItsLease(t *testing.T) {
	srv := redistest.Start(t)
	ctx := testCtx(t)
	c, _ := newClient(t, srv)
	other, _ := newClient(t, srv)
	admin, _ := newClient(t, srv)
	const lease = time.Second
	l, err := c.Mutex("revoked-expires", distlock.WithTTL(lease)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	left, err := admin.Mutex("revoked-expires").Revoke(ctx)
	if err != nil || left <= 0 || left > lease {
		t.Fatalf("Revoke: %v, %v; want the lease left, within (0, %v]", left, err, lease)
	}
	awaitRevoked(t, l, "the revoked holder")
	// The holder does nothing more; the waiter waits out the lease.
	next, err := other.Mutex("revoked-expires").Lock(ctx)
	if err != nil {
		t.Fatalf("a waiter for a revoked lock its holder never unlocked: %v", err)
	}
	if next.Token() <= l.Token() {
		t.Fatalf("the waiter's token %d is not above the revoked holder's %d", next.Token(), l.Token())
	}
	if err := next.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}
