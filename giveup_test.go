package distlock_test

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/redisstore"
	"github.com/distlock/distlock/redistest"
	"github.com/redis/go-redis/v9"
)

// These tests check the rule that a call that gives up leaves nothing of
// itself behind: when an acquisition returns an error, its place in a
// queue is gone, and a lock granted to it meanwhile has gone to the next
// in line (item 3 of the second hardening round); Close does the same for
// the acquisitions it ends (item 2).

// A queuedKind is one way to wait in a lock's queue: hold takes the lock
// so that wait must queue, and script is the acquisition's script.
type queuedKind struct {
	name   string
	script string
	hold   func(ctx context.Context, c *distlock.Client, name string) (*distlock.Lease, error)
	wait   func(ctx context.Context, c *distlock.Client, name string) (*distlock.Lease, error)
}

var queuedKinds = []queuedKind{
	{"fair", "fair_acquire",
		func(ctx context.Context, c *distlock.Client, n string) (*distlock.Lease, error) {
			return c.FairMutex(n).Lock(ctx)
		},
		func(ctx context.Context, c *distlock.Client, n string) (*distlock.Lease, error) {
			return c.FairMutex(n).Lock(ctx)
		}},
	{"election", "fair_acquire",
		func(ctx context.Context, c *distlock.Client, n string) (*distlock.Lease, error) {
			return c.Election(n).Campaign(ctx, "leader")
		},
		func(ctx context.Context, c *distlock.Client, n string) (*distlock.Lease, error) {
			return c.Election(n).Campaign(ctx, "candidate")
		}},
	{"write", "rw_acquire",
		func(ctx context.Context, c *distlock.Client, n string) (*distlock.Lease, error) {
			return c.RWMutex(n).Lock(ctx)
		},
		func(ctx context.Context, c *distlock.Client, n string) (*distlock.Lease, error) {
			return c.RWMutex(n).Lock(ctx)
		}},
	{"read", "rw_acquire",
		func(ctx context.Context, c *distlock.Client, n string) (*distlock.Lease, error) {
			return c.RWMutex(n).Lock(ctx)
		},
		func(ctx context.Context, c *distlock.Client, n string) (*distlock.Lease, error) {
			return c.RWMutex(n).RLock(ctx)
		}},
	{"semaphore", "sem_acquire",
		func(ctx context.Context, c *distlock.Client, n string) (*distlock.Lease, error) {
			return c.Semaphore(n, 1).Acquire(ctx, 1)
		},
		func(ctx context.Context, c *distlock.Client, n string) (*distlock.Lease, error) {
			return c.Semaphore(n, 1).Acquire(ctx, 1)
		}},
}

// waitEvents is an option that reports each EventWaiting on the channel
// it returns.
func waitEvents() (distlock.Option, <-chan struct{}) {
	ch := make(chan struct{}, 100)
	return distlock.WithEventHandler(func(e distlock.Event) {
		if e.Kind == distlock.EventWaiting {
			ch <- struct{}{}
		}
	}), ch
}

// queueLen is how many places the queue of the lock name has.
func queueLen(t *testing.T, rdb *redis.Client, name string) int64 {
	t.Helper()
	n, err := rdb.ZCard(context.Background(), redisstore.DefaultPrefix+"{"+name+"}:q").Result()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// held reports whether anyone holds the lock name.
func held(t *testing.T, rdb *redis.Client, name string) bool {
	t.Helper()
	n, err := rdb.Exists(context.Background(), redisstore.DefaultPrefix+"{"+name+"}").Result()
	if err != nil {
		t.Fatal(err)
	}
	return n == 1
}

// A waiter whose context ends returns once its place is gone: the next
// release does not grant the lock to the caller that already left. The
// waiter's clean-up is made slow (a slow network), so that a call that
// returned before it would be caught.
func TestCancelledWaitLeavesNothing(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	holder, _ := newClient(t, srv)
	for _, k := range queuedKinds {
		t.Run(k.name, func(t *testing.T) {
			name := "giveup-" + k.name
			ctx := testCtx(t)
			opt, waiting := waitEvents()
			waiter, h := interceptedClient(t, srv, opt)
			h.slow(name, "abandon", 1, 300*time.Millisecond)
			l, err := k.hold(ctx, holder, name)
			if err != nil {
				t.Fatal(err)
			}
			wctx, cancel := context.WithCancel(ctx)
			out := make(chan error, 1)
			go func() {
				l, err := k.wait(wctx, waiter, name)
				if err == nil {
					l.Unlock(ctx)
				}
				out <- err
			}()
			await(t, waiting, "the waiter to queue") // the place is in the store
			cancel()
			if err := <-out; !errors.Is(err, distlock.ErrNotAcquired) || !errors.Is(err, context.Canceled) {
				t.Fatalf("cancelled wait: %v, want ErrNotAcquired and context.Canceled", err)
			}
			if n := queueLen(t, rdb, name); n != 0 {
				t.Fatalf("the cancelled call returned with %d places left in the queue", n)
			}
			if err := l.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			if held(t, rdb, name) {
				t.Fatal("after the holder's Unlock, the lock is held: granted to the caller that had left")
			}
		})
	}
}

// A queued acquisition whose reply was lost, while its request is still
// on its way, returns an error once its owner is marked abandoned; the
// request, landing after that, is refused by the mark: it leaves no place
// and takes no lock, so the holder's release grants nothing to the caller
// that left. (The reply never comes, so the client cannot clean up after
// the late request: only the server's refusal stands between it and a
// place.)
func TestAbandonedQueuedAcquisitionLandingLate(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	holder, _ := newClient(t, srv)
	for _, k := range queuedKinds {
		t.Run(k.name, func(t *testing.T) {
			name := "late-" + k.name
			ctx := testCtx(t)
			waiter, h := interceptedClient(t, srv)
			// The first acquisition is a try that never queues; the second
			// would make the place.
			late := h.on(name, k.script, 2, true)
			cleaned := h.observe(name, "abandon", 1)
			l, err := k.hold(ctx, holder, name)
			if err != nil {
				t.Fatal(err)
			}
			_, err = k.wait(ctx, waiter, name)
			if !errors.Is(err, distlock.ErrBackend) {
				t.Fatalf("an acquisition whose reply was lost: %v, want ErrBackend", err)
			}
			await(t, cleaned.matched, "the clean-up")
			late.free() // the request lands after the call returned
			await(t, late.landed, "the late acquisition to land")
			if n := queueLen(t, rdb, name); n != 0 {
				t.Fatalf("the late acquisition left %d places in the queue", n)
			}
			if err := l.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			if held(t, rdb, name) {
				t.Fatal("after the holder's Unlock, the lock is held: granted to the caller that had left")
			}
		})
	}
}

// A grant that races a waiter's give-up goes to the next in line before
// the call returns. The holder's fixed lease runs out, so no release
// pushes the grant: the first waiter takes the lock in its own refresh,
// whose reply is lost, so that the waiter holds the lock on the server
// without knowing it when its context is cancelled. When its call returns
// its error, the second waiter must already hold the lock.
func TestGrantRacingGiveUpGoesToNextInLine(t *testing.T) {
	srv := redistest.Start(t)
	// The holder's lease runs out after 3 s (both waiters queue well
	// before); the waiters' places are refreshed every 5 to 10 s (a third
	// of their 30 s lease, their queue timeout being longer), so the first
	// waiter's first refresh is the one it sends when the holder's lease
	// ends.
	fixed := distlock.WithFixedLease(3 * time.Second)
	patient := distlock.WithQueueTimeout(time.Hour)
	type acquire func(ctx context.Context, c *distlock.Client, n string) (*distlock.Lease, error)
	fair := func(opt distlock.MutexOption) acquire {
		return func(ctx context.Context, c *distlock.Client, n string) (*distlock.Lease, error) {
			return c.FairMutex(n, opt).Lock(ctx)
		}
	}
	writer := func(opt distlock.MutexOption) acquire {
		return func(ctx context.Context, c *distlock.Client, n string) (*distlock.Lease, error) {
			return c.RWMutex(n, opt).Lock(ctx)
		}
	}
	semaphore := func(opt distlock.MutexOption) acquire {
		return func(ctx context.Context, c *distlock.Client, n string) (*distlock.Lease, error) {
			return c.Semaphore(n, 1, opt).Acquire(ctx, 1)
		}
	}
	campaign := func(opt distlock.MutexOption, value string) acquire {
		return func(ctx context.Context, c *distlock.Client, n string) (*distlock.Lease, error) {
			return c.Election(n, opt).Campaign(ctx, value)
		}
	}
	fairHolding := func(ctx context.Context, c *distlock.Client, n string) uint64 {
		info, err := c.Mutex(n).Inspect(ctx)
		if err != nil || !info.Locked {
			return 0
		}
		return info.Token
	}
	rwHolding := func(ctx context.Context, c *distlock.Client, n string) uint64 {
		info, err := c.RWMutex(n).Inspect(ctx)
		var top uint64
		if err != nil {
			return 0
		}
		if info.Writer != nil {
			top = info.Writer.Token
		}
		for _, r := range info.Readers {
			top = max(top, r.Token)
		}
		return top
	}
	for _, tc := range []struct {
		name                string
		hold, first, second acquire
		holding             func(ctx context.Context, c *distlock.Client, n string) uint64 // the highest token held, 0 if none
	}{
		{"fair", fair(fixed), fair(patient), fair(patient), fairHolding},
		{"election", campaign(fixed, "leader"), campaign(patient, "first"), campaign(patient, "second"), fairHolding},
		{"write", writer(fixed), writer(patient), writer(patient), rwHolding},
		{"read", writer(fixed), func(ctx context.Context, c *distlock.Client, n string) (*distlock.Lease, error) {
			return c.RWMutex(n, patient).RLock(ctx)
		}, writer(patient), rwHolding},
		{"semaphore", semaphore(fixed), semaphore(patient), semaphore(patient), func(ctx context.Context, c *distlock.Client, n string) uint64 {
			info, err := c.Semaphore(n, 1).Inspect(ctx)
			var top uint64
			if err != nil {
				return 0
			}
			for _, h := range info.Holders {
				top = max(top, h.Token)
			}
			return top
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			name := "raced-" + tc.name
			ctx := testCtx(t)
			// The holder's clean-up when its lease runs out would grant
			// the lock by a release, pushed to the first waiter: cut it.
			holder, hh := interceptedClient(t, srv)
			hh.cut(name, "release,abandon")
			firstOpt, firstWaiting := waitEvents()
			first, h := interceptedClient(t, srv, firstOpt)
			// The first waiter's refreshes run, unanswered (its
			// acquisition is another script).
			taken := h.dropReplies(name, "refresh")
			secondOpt, secondWaiting := waitEvents()
			second, _ := newClient(t, srv, secondOpt)
			look, _ := newClient(t, srv)

			l, err := tc.hold(ctx, holder, name)
			if err != nil {
				t.Fatal(err)
			}
			held := l.Token()
			fctx, cancel := context.WithCancel(ctx)
			firstOut := make(chan error, 1)
			go func() {
				l, err := tc.first(fctx, first, name)
				if err == nil {
					l.Unlock(ctx)
				}
				firstOut <- err
			}()
			await(t, firstWaiting, "the first waiter to queue")
			secondOut := make(chan lockResult, 1)
			go func() {
				l, err := tc.second(ctx, second, name)
				secondOut <- lockResult{l, err}
			}()
			await(t, secondWaiting, "the second waiter to queue")
			await(t, taken.matched, "the first waiter's refresh")
			granted := tc.holding(ctx, look, name)
			if granted <= held {
				t.Fatalf("after the first waiter's refresh, the highest token held is %d (the holder's was %d): it did not take the lock, the test raced nothing", granted, held)
			}
			cancel()
			if err := <-firstOut; err == nil {
				t.Fatal("the first waiter's call succeeded")
			}
			if now := tc.holding(ctx, look, name); now <= granted {
				t.Fatalf("when the first waiter's call returned its error, the highest token held is %d, the one it was granted (%d): the grant was not passed on", now, granted)
			}
			r := <-secondOut
			if r.err != nil {
				t.Fatalf("the second waiter: %v", r.err)
			}
			if r.l.Token() <= granted {
				t.Fatalf("the second waiter's token %d is not above the raced grant's %d", r.l.Token(), granted)
			}
			r.l.Unlock(ctx)
		})
	}
}

// Close racing a queued acquisition whose request is held up in the
// network: Close returns nil only once the acquisition can take nothing,
// so the request, landing after Close, leaves no place and takes no lock.
func TestCloseRacingQueuedAcquisition(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	holder, _ := newClient(t, srv)
	for _, k := range queuedKinds {
		t.Run(k.name, func(t *testing.T) {
			name := "close-race-" + k.name
			ctx := testCtx(t)
			waiter, h := interceptedClient(t, srv)
			// The first acquisition is a try that never queues; the second
			// makes the place.
			late := h.holdBack(name, k.script, 2)
			cleaned := h.observe(name, "abandon,release", 1)
			l, err := k.hold(ctx, holder, name)
			if err != nil {
				t.Fatal(err)
			}
			out := make(chan error, 1)
			go func() {
				l, err := k.wait(ctx, waiter, name)
				if err == nil {
					l.Unlock(ctx)
				}
				out <- err
			}()
			await(t, late.matched, "the held-up acquisition")
			closed := make(chan error, 1)
			go func() { closed <- waiter.Close() }()
			await(t, cleaned.matched, "Close's clean-up of the place")
			late.free() // the acquisition lands after the clean-up
			if err := <-closed; err != nil {
				t.Fatalf("Close: %v", err)
			}
			if err := <-out; !errors.Is(err, distlock.ErrClosed) {
				t.Fatalf("the wait ended by Close: %v, want ErrClosed", err)
			}
			if n := queueLen(t, rdb, name); n != 0 {
				t.Fatalf("Close returned nil with %d places left in the queue", n)
			}
			if err := l.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			if held(t, rdb, name) {
				t.Fatal("after the holder's Unlock, the lock is held: granted to the closed client")
			}
		})
	}
}

// Close after calls that failed because Redis refused the connection:
// nothing was sent, so nothing can be held, and Close returns nil at once
// instead of waiting for clean-ups that cannot reach Redis (item 9).
func TestCloseAfterRedisUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	c := distlock.New(redisstore.New(rdb), distlock.WithLogger(nil))
	ctx := testCtx(t)
	if _, err := c.Mutex("x").Lock(ctx); !errors.Is(err, distlock.ErrBackend) {
		t.Fatalf("Lock with Redis down: %v, want ErrBackend", err)
	}
	if _, err := c.FairMutex("y").TryLock(ctx); !errors.Is(err, distlock.ErrBackend) {
		t.Fatalf("TryLock of a fair mutex with Redis down: %v, want ErrBackend", err)
	}
	if _, err := c.Semaphore("z", 2).Acquire(ctx, 1); !errors.Is(err, distlock.ErrBackend) {
		t.Fatalf("Acquire with Redis down: %v, want ErrBackend", err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("Close after calls that never reached Redis: %v, want nil", err)
	}
}

// The first lock of a Client returns only once the Client hears of
// revocations: a Revoke right after it reaches the holder, even one with
// a fixed lease, which no renewal would tell (item 5). The connection
// that carries the notices is made slow to open, so that a Lock that
// returned before it was set up would miss the revocation.
func TestRevokeRightAfterFirstLock(t *testing.T) {
	srv := redistest.Start(t)
	ctx := testCtx(t)
	for _, tc := range []struct {
		name string
		take func(c *distlock.Client, name string) (*distlock.Lease, error)
	}{
		{"renewed", func(c *distlock.Client, n string) (*distlock.Lease, error) {
			return c.Mutex(n, distlock.WithTTL(time.Minute)).Lock(ctx)
		}},
		{"fixed", func(c *distlock.Client, n string) (*distlock.Lease, error) {
			return c.Mutex(n, distlock.WithFixedLease(time.Minute)).Lock(ctx)
		}},
		{"semaphore", func(c *distlock.Client, n string) (*distlock.Lease, error) {
			return c.Semaphore(n, 2, distlock.WithFixedLease(time.Minute)).Acquire(ctx, 1)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := "revoke-first-" + tc.name
			rdb := srv.Client(t)
			rdb.AddHook(&slowDials{after: 1, delay: 300 * time.Millisecond})
			c := distlock.New(redisstore.New(rdb), distlock.WithLogger(nil))
			l, err := tc.take(c, name)
			if err != nil {
				t.Fatal(err)
			}
			other, _ := newClient(t, srv)
			if _, err := other.Mutex(name).Revoke(ctx); err != nil {
				t.Fatal(err)
			}
			select {
			case <-l.Context().Done():
			case <-time.After(10 * time.Second):
				t.Fatal("the holder's context was live 10 s after a Revoke sent right after its first lock")
			}
			if !errors.Is(context.Cause(l.Context()), distlock.ErrLockLost) {
				t.Fatalf("cause %v, want ErrLockLost", context.Cause(l.Context()))
			}
			l.Unlock(ctx)
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// slowDials is a go-redis hook that delays every connection it dials
// after the first after ones.
type slowDials struct {
	after int32
	delay time.Duration
	n     atomic.Int32
}

func (s *slowDials) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if s.n.Add(1) > s.after {
			time.Sleep(s.delay) // the fault: a connection slow to open
		}
		return next(ctx, network, addr)
	}
}

func (s *slowDials) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (s *slowDials) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
