package distlock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/redisstore"
	"github.com/distlock/distlock/redistest"
	"github.com/redis/go-redis/v9"
)

// These tests check the rule the engine is built on: a request whose
// outcome is unknown (its reply lost or late) counts as possibly applied,
// now or later. Each one reproduces a way the lease guarantee used to break.

// interceptedClient returns a Client whose go-redis client carries an
// interceptor, and the interceptor.
func interceptedClient(t *testing.T, srv *redistest.Server, opts ...distlock.Option) (*distlock.Client, *interceptor) {
	t.Helper()
	rdb := srv.Client(t)
	h := newInterceptor(t)
	rdb.AddHook(h)
	c := distlock.New(redisstore.New(rdb), append([]distlock.Option{distlock.WithLogger(nil)}, opts...)...)
	t.Cleanup(func() { c.Close() })
	warm(t, c)
	h.load(t, rdb)
	return c, h
}

// warm loads every script on the server: a request that an interceptor
// lets land late must not fail with NOSCRIPT.
func warm(t *testing.T, c *distlock.Client) {
	t.Helper()
	ctx := testCtx(t)
	l, err := c.Mutex("warm").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Extend(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// lockedBy takes the lock name with other, and checks that l's lease context
// had ended by then: two live holders are the failure these tests look for.
func lockedBy(t *testing.T, other *distlock.Client, name string, l *distlock.Lease, within time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	o, err := other.Mutex(name).Lock(ctx)
	if err != nil {
		if l.Context().Err() == nil {
			return // still held: no second holder to compare with
		}
		t.Fatalf("the lease ended (%v) but the lock was not free within %v: %v", context.Cause(l.Context()), within, err)
	}
	defer o.Unlock(context.Background())
	if l.Context().Err() == nil {
		t.Fatalf("another client acquired %q (token %d) while the lease of token %d was live: two holders", name, o.Token(), l.Token())
	}
}

// Item 1: an Extend that times out at the client and is applied by Redis
// afterwards shortens the lease on the server; the holder's local deadline
// must follow, so its lease context ends before anyone else can acquire.
func TestExtendWithUnknownOutcomeShortensDeadline(t *testing.T) {
	srv := redistest.Start(t)
	opt := srv.Options()
	opt.ReadTimeout = 300 * time.Millisecond
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	c := distlock.New(redisstore.New(rdb), distlock.WithLogger(nil))
	defer c.Close()
	warm(t, c)
	other, _ := newClient(t, srv)
	ctx := testCtx(t)

	l, err := c.Mutex("ext", distlock.WithTTL(time.Minute)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	ectx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	err = l.Extend(ectx, time.Second)
	cancel()
	if err == nil {
		t.Fatal("Extend succeeded against a frozen Redis")
	}
	if err := srv.Resume(); err != nil { // the Extend request now runs: 1 s left
		t.Fatal(err)
	}
	// Either the late Extend's reply confirmed the 1 s lease (the watchdog
	// then renews it, and the lock stays held), or the lease context ended
	// by its deadline: in no case may another client get in while it lives.
	lockedBy(t, other, "ext", l, 3*time.Second)
}

// Item 1, reordering: a watchdog renewal whose reply was lost lands after a
// later, longer Extend. It must not shorten the lease behind the holder's
// back: the late renewal is refused, and the lock stays held.
func TestLateRenewalAfterLongerExtend(t *testing.T) {
	srv := redistest.Start(t)
	c, h := interceptedClient(t, srv)
	other, _ := newClient(t, srv)
	ctx := testCtx(t)
	stuck := h.on("reorder", "renew", 1, true)

	l, err := c.Mutex("reorder", distlock.WithTTL(1500*time.Millisecond)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	await(t, stuck.matched, "the first renewal")
	if err := l.Extend(ctx, 20*time.Second); err != nil {
		t.Fatalf("Extend: %v", err)
	}
	stuck.free()
	await(t, stuck.landed, "the late renewal to land")
	lockedBy(t, other, "reorder", l, 4*time.Second)
	if err := l.Context().Err(); err != nil {
		t.Errorf("the lease ended after a stale renewal landed: %v", context.Cause(l.Context()))
	}
	if err := l.Unlock(ctx); err != nil {
		t.Errorf("Unlock: %v", err)
	}
}

// Item 2: Unlock cancels the lease context before the release can take
// effect: a waiter that gets the lock while the release's reply is still on
// its way finds the old lease context already ended.
func TestUnlockCancelsBeforeRelease(t *testing.T) {
	srv := redistest.Start(t)
	c, h := interceptedClient(t, srv)
	ctx := testCtx(t)
	l, err := c.Mutex("slow-release").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	slow := h.on("slow-release", "release", 1, false)
	waiter, ev := waitingClient(t, srv)
	got := make(chan error, 1)
	go func() {
		o, err := waiter.Mutex("slow-release").Lock(ctx)
		if err == nil {
			if l.Context().Err() == nil {
				err = fmt.Errorf("the waiter acquired (token %d) while the released lease's context was live", o.Token())
			}
			o.Unlock(ctx)
		}
		got <- err
	}()
	ev.await(distlock.EventWaiting, 1)
	unlocked := make(chan error, 1)
	go func() { unlocked <- l.Unlock(ctx) }()
	await(t, slow.matched, "the release")
	if err := <-got; err != nil {
		t.Error(err)
	}
	slow.free()
	if err := <-unlocked; err != nil {
		t.Errorf("Unlock: %v", err)
	}
}

// Item 2, Close: the same for the leases Close releases.
func TestCloseCancelsBeforeRelease(t *testing.T) {
	srv := redistest.Start(t)
	c, h := interceptedClient(t, srv)
	ctx := testCtx(t)
	l, err := c.Mutex("slow-close").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	slow := h.on("slow-close", "release", 1, false)
	waiter, ev := waitingClient(t, srv)
	got := make(chan error, 1)
	go func() {
		o, err := waiter.Mutex("slow-close").Lock(ctx)
		if err == nil {
			if l.Context().Err() == nil {
				err = fmt.Errorf("the waiter acquired (token %d) while the closed client's lease context was live", o.Token())
			}
			o.Unlock(ctx)
		}
		got <- err
	}()
	ev.await(distlock.EventWaiting, 1)
	closed := make(chan error, 1)
	go func() { closed <- c.Close() }()
	await(t, slow.matched, "Close's release")
	if err := <-got; err != nil {
		t.Error(err)
	}
	slow.free()
	if err := <-closed; err != nil {
		t.Errorf("Close: %v", err)
	}
	if cause := context.Cause(l.Context()); !errors.Is(cause, distlock.ErrClosed) {
		t.Errorf("lease context cause after Close = %v, want ErrClosed", cause)
	}
}

// waitingClient returns a Client and the events it reports.
func waitingClient(t *testing.T, srv *redistest.Server) (*distlock.Client, *events) {
	ev := newEvents()
	c, _ := newClient(t, srv, distlock.WithEventHandler(ev.handle))
	return c, ev
}

// Item 6: an acquire whose reply was lost, and that reaches Redis only after
// the clean-up ran, takes nothing: the clean-up makes late requests of an
// abandoned attempt harmless.
func TestAbandonedAcquireLandingLateTakesNothing(t *testing.T) {
	srv := redistest.Start(t)
	c, h := interceptedClient(t, srv)
	other, rdb := newClient(t, srv)
	ctx := testCtx(t)
	lost := h.on("late", "acquire", 1, true)
	cleaned := h.on("late", "release,abandon", 1, false)
	cleaned.free() // let clean-ups through at once; matched tells they ran

	_, err := c.Mutex("late").TryLock(ctx)
	if !errors.Is(err, distlock.ErrBackend) {
		t.Fatalf("TryLock with its reply lost: %v, want ErrBackend", err)
	}
	await(t, cleaned.matched, "the clean-up")
	lost.free()
	await(t, lost.landed, "the late acquire to land")
	if n := rdb.Exists(ctx, redisstore.DefaultPrefix+"{late}").Val(); n != 0 {
		t.Errorf("an acquire that landed after its attempt was given up holds the lock (key exists, TTL %v; keys %v; owner %v)",
			rdb.PTTL(ctx, redisstore.DefaultPrefix+"{late}").Val(), rdb.Keys(ctx, "*late*").Val(), rdb.HGetAll(ctx, redisstore.DefaultPrefix+"{late}").Val())
	}
	if o, err := other.Mutex("late").TryLock(ctx); err != nil {
		t.Errorf("the lock is not free: %v", err)
	} else {
		o.Unlock(ctx)
	}
}

// Item 7: Close racing an acquisition whose reply is on its way waits for
// it and releases what it took; a nil Close leaves no lock behind. The
// reply comes back when Close returns, or half a second after Close has
// released its other lock if Close is (rightly) still waiting for it.
func TestCloseWaitsForAcquisitionOnItsWay(t *testing.T) {
	rounds, nilCloses := 0, 0 // rounds run, and those in which the check below checked something
	defer func() {
		if rounds == 10 && nilCloses == 0 && !t.Failed() {
			t.Error("Close never returned nil in 10 rounds: the test checked nothing")
		}
	}()
	for _, cancellable := range []bool{false, true} {
		for i := 0; i < 5; i++ {
			t.Run(fmt.Sprintf("cancellable=%v/%d", cancellable, i), func(t *testing.T) {
				srv := redistest.Start(t)
				c, h := interceptedClient(t, srv)
				_, rdb := newClient(t, srv)
				ctx := testCtx(t)
				// A held lock, so that Close has a release to send; the
				// acquisition's reply comes back once Close is releasing.
				if _, err := c.Mutex("marker").Lock(ctx); err != nil {
					t.Fatal(err)
				}
				markerReleased := h.on("marker", "release", 1, false)
				markerReleased.free()
				slow := h.on("inflight", "acquire", 1, false)
				lctx := context.Background()
				if cancellable {
					lctx = ctx
				}
				locked := make(chan error, 1)
				go func() {
					l, err := c.Mutex("inflight").Lock(lctx)
					if err == nil {
						err = fmt.Errorf("Lock succeeded during Close (token %d)", l.Token())
					}
					locked <- err
				}()
				await(t, slow.matched, "the acquisition to run")
				closed := make(chan error, 1)
				go func() { closed <- c.Close() }()
				await(t, markerReleased.matched, "Close to release the marker")
				var err error
				select {
				case err = <-closed:
					slow.free()
				case <-time.After(500 * time.Millisecond):
					slow.free()
					err = <-closed
				}
				if lerr := <-locked; !errors.Is(lerr, distlock.ErrClosed) {
					t.Errorf("Lock during Close: %v, want ErrClosed", lerr)
				}
				rounds++
				if err == nil {
					nilCloses++
				}
				if n := rdb.Exists(ctx, redisstore.DefaultPrefix+"{inflight}").Val(); err == nil && n != 0 {
					t.Errorf("Close returned nil and left the lock its in-flight acquisition took")
				}
			})
		}
	}
}

// Item 8: a re-entry that reaches Redis after the last hold was released
// is not a loss: the released lease's cause is the release, Unlock returns
// nil, and the re-entry fails with ErrNotHeld or ErrNotAcquired.
func TestReentryRacingUnlockIsNotALoss(t *testing.T) {
	srv := redistest.Start(t)
	c, _ := newClient(t, srv)
	other, _ := newClient(t, srv)
	ctx := testCtx(t)
	m := c.Mutex("reenter-race")
	for round := 0; round < 30; round++ {
		l, err := m.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make(chan error, 50)
		for i := 0; i < 50; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				inner, err := m.Lock(l.Context())
				if err != nil {
					if errors.Is(err, distlock.ErrLockLost) || !(errors.Is(err, distlock.ErrNotHeld) || errors.Is(err, distlock.ErrNotAcquired)) {
						errs <- fmt.Errorf("re-entry racing Unlock: %v, want ErrNotHeld or ErrNotAcquired", err)
					}
					return
				}
				if err := inner.Unlock(ctx); err != nil {
					errs <- fmt.Errorf("Unlock of a re-entry: %v", err)
				}
			}()
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatalf("round %d: Unlock: %v", round, err)
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("round %d: %v", round, err)
		}
		if cause := context.Cause(l.Context()); errors.Is(cause, distlock.ErrLockLost) {
			t.Fatalf("round %d: a lease whose Unlock returned nil ended as lost: %v", round, cause)
		}
		o, err := other.Mutex("reenter-race").TryLock(ctx)
		if err != nil {
			t.Fatalf("round %d: the lock is not free after every hold was released: %v", round, err)
		}
		o.Unlock(ctx)
	}
}

// Item 9: two holds of one owner unlocked at the same time both succeed,
// in either order, and the lock is then free.
func TestConcurrentUnlockOfTwoHolds(t *testing.T) {
	srv := redistest.Start(t)
	c, _ := newClient(t, srv)
	other, _ := newClient(t, srv)
	ctx := testCtx(t)
	for round := 0; round < 200; round++ {
		outer, err := c.Mutex("two-holds").Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		inner, err := c.Mutex("two-holds").Lock(outer.Context())
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i, l := range []*distlock.Lease{outer, inner} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = l.Unlock(ctx)
			}()
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("round %d: Unlock of hold %d: %v", round, i+1, err)
			}
		}
		o, err := other.Mutex("two-holds").TryLock(ctx)
		if err != nil {
			t.Fatalf("round %d: the lock is not free: %v", round, err)
		}
		o.Unlock(ctx)
	}
}

// Item 10: the nil *Lease of a failed TryLock is safe to use.
func TestNilLease(t *testing.T) {
	var l *distlock.Lease
	ctx := context.Background()
	if err := l.Unlock(ctx); !errors.Is(err, distlock.ErrNotHeld) {
		t.Errorf("nil Lease Unlock = %v, want ErrNotHeld", err)
	}
	if err := l.Extend(ctx, time.Second); !errors.Is(err, distlock.ErrNotHeld) {
		t.Errorf("nil Lease Extend = %v, want ErrNotHeld", err)
	}
	if l.Token() != 0 || l.Name() != "" {
		t.Errorf("nil Lease Token %d Name %q", l.Token(), l.Name())
	}
	if lc := l.Context(); lc.Err() == nil || !errors.Is(context.Cause(lc), distlock.ErrNotHeld) {
		t.Errorf("nil Lease Context: err %v cause %v, want ended with ErrNotHeld", lc.Err(), context.Cause(lc))
	}
	if s := l.String(); s == "" {
		t.Error("nil Lease String is empty")
	}
}
