package safety

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/redisstore"
	"github.com/distlock/distlock/redistest"
	"github.com/redis/go-redis/v9"
)

// These extend the root package's errors_test.go: misuse gets a typed
// error and leaves every lock as it was.

func newLocks(t *testing.T, srv *redistest.Server, opts ...distlock.Option) (*distlock.Client, *redis.Client) {
	t.Helper()
	rdb := srv.Client(t)
	c := distlock.New(redisstore.New(rdb), append([]distlock.Option{distlock.WithLogger(nil)}, opts...)...)
	t.Cleanup(func() { c.Close() })
	return c, rdb
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// Many goroutines unlock the same lease at once: exactly one succeeds, the
// others get ErrNotHeld, and a successor's lock is never touched.
func TestConcurrentDoubleUnlock(t *testing.T) {
	srv := redistest.Start(t)
	a, rdb := newLocks(t, srv)
	b, _ := newLocks(t, srv)
	ctx := testCtx(t)
	for round := 0; round < 20; round++ {
		l, err := a.Mutex("twice").Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make([]error, 16)
		for i := range errs {
			wg.Add(1)
			go func() { defer wg.Done(); errs[i] = l.Unlock(ctx) }()
		}
		wg.Wait()
		ok := 0
		for _, err := range errs {
			switch {
			case err == nil:
				ok++
			case !errors.Is(err, distlock.ErrNotHeld):
				t.Fatalf("concurrent Unlock: %v, want nil or ErrNotHeld", err)
			}
		}
		if ok != 1 {
			t.Fatalf("%d Unlocks succeeded, want 1", ok)
		}
		next, err := b.Mutex("twice").TryLock(ctx)
		if err != nil {
			t.Fatalf("successor: %v", err)
		}
		if err := l.Unlock(ctx); !errors.Is(err, distlock.ErrNotHeld) {
			t.Fatalf("late Unlock: %v", err)
		}
		if info, _ := b.Mutex("twice").Inspect(ctx); !info.Locked || info.Token != next.Token() {
			t.Fatalf("a stale Unlock touched the successor: %+v", info)
		}
		if err := next.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := rdb.Exists(ctx, "distlock:{twice}").Val(); n != 0 {
		t.Fatal("lock left behind")
	}
}

// A lease of a closed client: its context ends with ErrClosed; Extend and
// Unlock return typed errors and never touch the lock that someone else
// took since.
func TestLeaseAfterClose(t *testing.T) {
	srv := redistest.Start(t)
	a := distlock.New(redisstore.New(srv.Client(t)), distlock.WithLogger(nil))
	b, _ := newLocks(t, srv)
	ctx := testCtx(t)
	l, err := a.Mutex("closing").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if cause := context.Cause(l.Context()); !errors.Is(cause, distlock.ErrClosed) {
		t.Fatalf("lease context cause %v, want ErrClosed", cause)
	}
	next, err := b.Mutex("closing").TryLock(ctx)
	if err != nil {
		t.Fatalf("Close did not free the lock: %v", err)
	}
	if err := l.Extend(ctx, time.Minute); !errors.Is(err, distlock.ErrClosed) {
		t.Fatalf("Extend after Close: %v, want ErrClosed", err)
	}
	if err := l.Unlock(ctx); !errors.Is(err, distlock.ErrClosed) {
		t.Fatalf("Unlock after Close: %v, want ErrClosed", err)
	}
	if err := l.Unlock(ctx); !errors.Is(err, distlock.ErrNotHeld) {
		t.Fatalf("second Unlock after Close: %v, want ErrNotHeld", err)
	}
	if _, err := a.Mutex("closing").Lock(l.Context()); !errors.Is(err, distlock.ErrClosed) {
		t.Fatalf("re-entry after Close: %v, want ErrClosed", err)
	}
	info, err := b.Mutex("closing").Inspect(ctx)
	if err != nil || !info.Locked || info.Token != next.Token() || info.TTL <= 0 {
		t.Fatalf("successor's lock after the closed client's calls: %+v, %v", info, err)
	}
	if err := next.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// Extend with an absurd TTL is refused with ErrInvalidOption and changes
// nothing; the lease stays held and renewed.
func TestExtendAbsurd(t *testing.T) {
	srv := redistest.Start(t)
	c, rdb := newLocks(t, srv)
	ctx := testCtx(t)
	l, err := c.Mutex("extend", distlock.WithTTL(time.Minute)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []time.Duration{0, -1, -time.Hour, distlock.MinTTL - 1, distlock.MaxTTL + 1, 1<<63 - 1, -1 << 63} {
		if err := l.Extend(ctx, d); !errors.Is(err, distlock.ErrInvalidOption) {
			t.Fatalf("Extend(%v) = %v, want ErrInvalidOption", d, err)
		}
		if pttl := rdb.PTTL(ctx, "distlock:{extend}").Val(); pttl <= 50*time.Second || pttl > time.Minute {
			t.Fatalf("after a refused Extend(%v): PTTL %v", d, pttl)
		}
	}
	if l.Context().Err() != nil {
		t.Fatalf("a refused Extend ended the lease: %v", context.Cause(l.Context()))
	}
	if err := l.Extend(ctx, distlock.MaxTTL); err != nil {
		t.Fatal(err)
	}
	if pttl := rdb.PTTL(ctx, "distlock:{extend}").Val(); pttl <= distlock.MaxTTL-time.Minute {
		t.Fatalf("Extend(MaxTTL): PTTL %v", pttl)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.Extend(ctx, time.Second); !errors.Is(err, distlock.ErrNotHeld) {
		t.Fatalf("Extend after Unlock: %v, want ErrNotHeld", err)
	}
}

// Closing the go-redis client under a distlock Client: every call gets
// ErrBackend (or, for a held lease, ErrLockLost once renewals fail), and
// the lease context tells the holder.
func TestClosedRedisClient(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redis.NewClient(srv.Options())
	c := distlock.New(redisstore.New(rdb), distlock.WithLogger(nil))
	defer c.Close()
	ctx := testCtx(t)
	l, err := c.Mutex("rdb-closed", distlock.WithTTL(300*time.Millisecond)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rdb.Close()
	<-l.Context().Done()
	if cause := context.Cause(l.Context()); !errors.Is(cause, distlock.ErrLockLost) {
		t.Fatalf("lease context cause %v, want ErrLockLost", cause)
	}
	if err := l.Unlock(ctx); !errors.Is(err, distlock.ErrLockLost) {
		t.Fatalf("Unlock: %v, want ErrLockLost", err)
	}
	if _, err := c.Mutex("rdb-closed").TryLock(ctx); !errors.Is(err, distlock.ErrBackend) || errors.Is(err, distlock.ErrNotAcquired) {
		t.Fatalf("TryLock on a closed go-redis client: %v, want ErrBackend only", err)
	}
	if _, err := c.Mutex("rdb-closed").Inspect(ctx); !errors.Is(err, distlock.ErrBackend) {
		t.Fatalf("Inspect: %v, want ErrBackend", err)
	}
	if _, err := c.List(ctx, "*"); !errors.Is(err, distlock.ErrBackend) {
		t.Fatalf("List: %v, want ErrBackend", err)
	}
}

// An unreachable Redis whose dial times out (a dropped SYN, here
// dial_timeout=1ns) is ErrBackend, although net's dial timeout error matches
// context.DeadlineExceeded: the caller's context never ended. Found by this
// suite (bug 3).
func TestDialTimeoutIsErrBackend(t *testing.T) {
	srv := redistest.Start(t)
	opt, err := redis.ParseURL("redis://" + srv.Addr() + "/0?dial_timeout=1ns&max_retries=-1")
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	c := distlock.New(redisstore.New(rdb), distlock.WithLogger(nil))
	defer c.Close()
	ctx := context.Background() // no deadline: the caller's context does not end
	if _, err := c.Mutex("x").TryLock(ctx); !errors.Is(err, distlock.ErrBackend) {
		t.Errorf("TryLock with Redis unreachable (dial timeout): %v; want ErrBackend", err)
	}
	if _, err := c.Mutex("x").Inspect(ctx); !errors.Is(err, distlock.ErrBackend) {
		t.Errorf("Inspect with Redis unreachable (dial timeout): %v; want ErrBackend", err)
	}
	if _, err := c.List(ctx, "*"); !errors.Is(err, distlock.ErrBackend) {
		t.Errorf("List with Redis unreachable (dial timeout): %v; want ErrBackend", err)
	}
}

// New(nil) gives a Client whose operations return ErrInvalidOption, not a
// panic. Found by this suite (bug 6).
func TestNewNilIsInvalidOption(t *testing.T) {
	c := distlock.New(redisstore.New(nil), distlock.WithLogger(nil))
	defer func() {
		if p := recover(); p != nil {
			t.Errorf("TryLock on New(nil) panicked: %v; want an error wrapping ErrInvalidOption", p)
		}
	}()
	_, err := c.Mutex("x").TryLock(context.Background())
	if !errors.Is(err, distlock.ErrInvalidOption) {
		t.Errorf("TryLock on New(nil): %v; want ErrInvalidOption", err)
	}
}

// Client.Close returns within its five seconds even when a request that a
// cancelled Lock left behind never gets an answer: a go-redis client without
// read timeout (ReadTimeout -1, as used with ContextTimeoutEnabled) and a
// frozen Redis. The test gives Close 15 s, then resumes Redis so that it
// ends. Found by this suite (bug 4).
func TestCloseBoundedOnFrozenRedis(t *testing.T) {
	srv := redistest.Start(t)
	opt := srv.Options()
	opt.ReadTimeout = -1
	opt.ContextTimeoutEnabled = true
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	c := distlock.New(redisstore.New(rdb), distlock.WithLogger(nil))
	ctx := context.Background()
	if _, err := c.Mutex("warm").Inspect(ctx); err != nil { // connect and check the server first
		t.Fatal(err)
	}
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	lctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	_, err := c.Mutex("x").Lock(lctx)
	cancel()
	if !errors.Is(err, distlock.ErrNotAcquired) {
		t.Errorf("Lock on a frozen Redis: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Close() }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		t.Errorf("Client.Close still blocked after 15 s on a frozen Redis")
		if err := srv.Resume(); err != nil {
			t.Fatal(err)
		}
		<-done
	}
}
