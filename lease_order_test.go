package distlock_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/redisstore"
	"github.com/distlock/distlock/redistest"
	"github.com/redis/go-redis/v9"
)

// orderLease is long enough that the engine's margin (lease/50 + 5 ms,
// 165 ms here) dwarfs the scheduling delay between the lease context's
// cancellation and the moment a test goroutine records it, on a loaded
// machine too. (The subtests run in parallel: the test takes one lease.)
const orderLease = 8 * time.Second

// cancelledAt records when ctx ends, as seen by a goroutine started by its
// cancellation: no earlier than the cancellation itself.
func cancelledAt(ctx context.Context) <-chan time.Time {
	at := make(chan time.Time, 1)
	context.AfterFunc(ctx, func() { at <- time.Now() })
	return at
}

// serverEnd is when the holder's lease ends on the server, read from Redis
// itself: the lock hash's expiry (PEXPIRETIME) for an exclusive holder,
// the holder's score in the holders set for a shared one. Both are Unix
// times in ms of the server's clock, which is this machine's.
func serverEnd(t *testing.T, rdb *redis.Client, name string, shared bool) time.Time {
	t.Helper()
	key := redisstore.DefaultPrefix + "{" + name + "}"
	if shared {
		holders, err := rdb.ZRangeWithScores(t.Context(), key+":h", 0, -1).Result()
		if err != nil || len(holders) != 1 {
			t.Fatalf("holders of %s: %v, %v; want one", name, holders, err)
		}
		return time.UnixMilli(int64(holders[0].Score))
	}
	ms, err := rdb.Do(t.Context(), "PEXPIRETIME", key).Int64()
	if err != nil || ms < 0 {
		t.Fatalf("PEXPIRETIME %s = %d, %v; want an expiry", key, ms, err)
	}
	return time.UnixMilli(ms)
}

// endsBefore fails the test unless the lease's context ends before end,
// the lease's end on the server (or on a quorum of servers).
func endsBefore(t *testing.T, l *distlock.Lease, at <-chan time.Time, end time.Time) {
	t.Helper()
	var cancelled time.Time
	select {
	case cancelled = <-at:
	case <-time.After(2 * orderLease):
		t.Fatalf("the lease context did not end within %v of a lease whose renewals were cut", 2*orderLease)
	}
	if !cancelled.Before(end) {
		t.Fatalf("the lease context was cancelled %v after the lease ended on the server", cancelled.Sub(end))
	}
	t.Logf("the lease context was cancelled %v before the lease ended on the server", end.Sub(cancelled))
	if err := context.Cause(l.Context()); err == nil {
		t.Fatal("no cause")
	}
}

// The central claim, checked against the server itself: a lease whose
// renewals never reach Redis (cut in the network, or Redis frozen) has its
// context cancelled before the lease ends on the server, for every way a
// lease comes about. Each case reads the lease's end from Redis once the
// last request that could set it has run, then waits for the context.
func TestLeaseContextEndsBeforeServerExpiry(t *testing.T) {
	// acquire takes the lease whose order is checked; other is a second
	// Client on the same server (for the queued kinds, the holder that
	// grants it). It returns the lease and whether its holder is shared.
	type acquire func(t *testing.T, c, other *distlock.Client, name string) (*distlock.Lease, bool)
	// granted runs first, on other, what makes c's acquisition wait, and
	// ends it once c is queued: the lease under test is granted by a
	// release, the path that sets its start from the grant.
	granted := func(hold func(ctx context.Context, c *distlock.Client, name string) (*distlock.Lease, error),
		wait func(ctx context.Context, c *distlock.Client, name string) (*distlock.Lease, error),
		queued func(t *testing.T, c *distlock.Client, name string), shared bool) acquire {
		return func(t *testing.T, c, other *distlock.Client, name string) (*distlock.Lease, bool) {
			ctx := testCtx(t)
			first, err := hold(ctx, other, name)
			if err != nil {
				t.Fatal(err)
			}
			got := make(chan lockResult, 1)
			go func() {
				l, err := wait(ctx, c, name)
				got <- lockResult{l, err}
			}()
			queued(t, other, name)
			if err := first.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			r := <-got
			if r.err != nil {
				t.Fatal(r.err)
			}
			return r.l, shared
		}
	}
	ttl := distlock.WithTTL(orderLease)
	fairQueued := func(t *testing.T, c *distlock.Client, name string) { queued(t, c.FairMutex(name), 1) }
	for _, tc := range []struct {
		name   string
		paused bool // freeze Redis instead of cutting the renewals
		take   acquire
	}{
		{"mutex", false, func(t *testing.T, c, _ *distlock.Client, name string) (*distlock.Lease, bool) {
			l, err := c.Mutex(name, ttl).Lock(testCtx(t))
			return must(t, l, err), false
		}},
		{"mutex, Redis paused", true, func(t *testing.T, c, _ *distlock.Client, name string) (*distlock.Lease, bool) {
			l, err := c.Mutex(name, ttl).Lock(testCtx(t))
			return must(t, l, err), false
		}},
		{"fixed lease", false, func(t *testing.T, c, _ *distlock.Client, name string) (*distlock.Lease, bool) {
			l, err := c.Mutex(name, distlock.WithFixedLease(orderLease)).Lock(testCtx(t))
			return must(t, l, err), false
		}},
		{"re-entered", false, func(t *testing.T, c, _ *distlock.Client, name string) (*distlock.Lease, bool) {
			m := c.Mutex(name, ttl)
			first, err := m.Lock(testCtx(t))
			must(t, first, err)
			l, err := m.Lock(first.Context())
			return must(t, l, err), false
		}},
		{"fair mutex, granted", false, granted(
			func(ctx context.Context, c *distlock.Client, name string) (*distlock.Lease, error) {
				return c.FairMutex(name, ttl).Lock(ctx)
			},
			func(ctx context.Context, c *distlock.Client, name string) (*distlock.Lease, error) {
				return c.FairMutex(name, ttl).Lock(ctx)
			}, fairQueued, false)},
		{"election, granted", false, granted(
			func(ctx context.Context, c *distlock.Client, name string) (*distlock.Lease, error) {
				return c.Election(name, ttl).Campaign(ctx, "first")
			},
			func(ctx context.Context, c *distlock.Client, name string) (*distlock.Lease, error) {
				return c.Election(name, ttl).Campaign(ctx, "second")
			}, fairQueued, false)},
		{"read lock, granted", false, granted(
			func(ctx context.Context, c *distlock.Client, name string) (*distlock.Lease, error) {
				return c.RWMutex(name, ttl).Lock(ctx)
			},
			func(ctx context.Context, c *distlock.Client, name string) (*distlock.Lease, error) {
				return c.RWMutex(name, ttl).RLock(ctx)
			},
			func(t *testing.T, c *distlock.Client, name string) {
				waitFor(t, func() bool {
					info, err := c.RWMutex(name).Inspect(testCtx(t))
					return err == nil && info.QueuedReaders == 1
				})
			}, true)},
		{"semaphore, granted", false, granted(
			func(ctx context.Context, c *distlock.Client, name string) (*distlock.Lease, error) {
				return c.Semaphore(name, 1, ttl).Acquire(ctx, 1)
			},
			func(ctx context.Context, c *distlock.Client, name string) (*distlock.Lease, error) {
				return c.Semaphore(name, 1, ttl).Acquire(ctx, 1)
			},
			func(t *testing.T, c *distlock.Client, name string) {
				waitFor(t, func() bool {
					info, err := c.Semaphore(name, 1).Inspect(testCtx(t))
					return err == nil && info.Queued == 1
				})
			}, true)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := redistest.Start(t)
			rdb := srv.Client(t)
			h := newInterceptor(t)
			h.load(t, rdb)
			rdb.AddHook(h)
			c := distlock.New(redisstore.New(rdb), distlock.WithLogger(nil))
			t.Cleanup(func() { c.Close() })
			other, check := newClient(t, srv)
			name := "order"
			if !tc.paused {
				// From the start, so that no renewal of the lease under
				// test reaches Redis: its end is the one its acquisition
				// (or grant) set.
				h.cut(name, "renew,shared_renew")
			}
			l, shared := tc.take(t, c, other, name)
			at := cancelledAt(l.Context())
			end := serverEnd(t, check, name, shared)
			if tc.paused {
				if err := srv.Pause(); err != nil {
					t.Fatal(err)
				}
				defer srv.Resume()
			}
			endsBefore(t, l, at, end)
		})
	}
}

// The same for Redlock: the lease ends on a quorum once the quorum-th
// earliest of the nodes' expiries has passed (from then on, a quorum of
// nodes is free for another owner), and the context must end before that.
func TestRedlockLeaseContextEndsBeforeQuorumExpiry(t *testing.T) {
	var servers []*redistest.Server
	var rdbs []redis.UniversalClient
	h := newInterceptor(t)
	for range 3 {
		srv := redistest.Start(t)
		servers = append(servers, srv)
		rdb := srv.Client(t)
		h.load(t, rdb)
		rdb.AddHook(h)
		rdbs = append(rdbs, rdb)
	}
	c := distlock.New(redisstore.NewRedlock(rdbs), distlock.WithLogger(nil))
	t.Cleanup(func() { c.Close() })
	h.cut("order", "renew")
	l, err := c.Mutex("order", distlock.WithTTL(orderLease)).Lock(testCtx(t))
	must(t, l, err)
	at := cancelledAt(l.Context())
	var ends []time.Time
	for _, srv := range servers {
		ends = append(ends, serverEnd(t, srv.Client(t), "order", false))
	}
	slices.SortFunc(ends, time.Time.Compare)
	endsBefore(t, l, at, ends[1]) // a quorum of 2: free once 2 have expired
}

// must fails the test if err is set, and returns l.
func must(t *testing.T, l *distlock.Lease, err error) *distlock.Lease {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	return l
}
