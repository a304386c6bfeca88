package distlock_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/redisstore"
	"github.com/distlock/distlock/redistest"
	"github.com/redis/go-redis/v9"
)

// enterPermits records, in Redis, that a holder is inside with n permits
// and returns the permits inside, its own included. Each entry expires
// half a second after it was made, by the server's clock: the holders of
// these tests stay inside a few milliseconds, with a lease of a second, so
// a holder killed inside drops out of the count before the semaphore can
// give its permits to anyone else (then the count may miss an overlap,
// never invent one). Overlaps (more than KEYS[2]'s capacity) are counted
// in KEYS[3].
var enterPermits = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('ZADD', KEYS[1], now + 500, ARGV[1])
local sum = 0
for _, m in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  sum = sum + tonumber(string.match(m, ':(%d+)$'))
end
if sum > tonumber(ARGV[2]) then redis.call('INCR', KEYS[2]) end
return sum`)

// semWorkers is the body of a "sem-workers" helper process: goroutines
// take 1 or 2 permits of the semaphore name (capacity permits, lease 1 s)
// over and over, enter the count, stay a few milliseconds, leave and
// release, until stdin closes. It prints "acquired" after its first
// acquisition, then "done N MOST" (acquisitions, most permits seen inside).
func semWorkers(ctx context.Context, rdb *redis.Client, name string, permits, goroutines int) int {
	c := distlock.New(redisstore.New(rdb), distlock.WithLogger(nil))
	defer c.Close()
	s := c.Semaphore(name, permits, distlock.WithTTL(time.Second))
	var stop atomic.Bool
	go func() {
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
		}
		stop.Store(true)
	}()
	var once sync.Once
	var count, most atomic.Int64
	var failed atomic.Bool
	var wg sync.WaitGroup
	for g := 0; g < goroutines; g++ {
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				n := 1 + rand.IntN(2)
				l, err := s.Acquire(ctx, n)
				if err != nil {
					fmt.Fprintln(os.Stderr, err)
					failed.Store(true)
					return
				}
				once.Do(func() { fmt.Println("acquired") })
				member := fmt.Sprintf("%d:%d:%d:%d", os.Getpid(), g, i, n)
				inside, err := enterPermits.Run(ctx, rdb, []string{"inside:" + name, "overlaps:" + name}, member, permits).Int64()
				if err == nil {
					for m := most.Load(); inside > m && !most.CompareAndSwap(m, inside); m = most.Load() {
					}
					time.Sleep(time.Duration(1+rand.IntN(3)) * time.Millisecond)
					err = rdb.ZRem(ctx, "inside:"+name, member).Err()
				}
				if err == nil {
					err = l.Unlock(ctx)
				}
				if err != nil {
					fmt.Fprintln(os.Stderr, err)
					failed.Store(true)
					return
				}
				count.Add(1)
			}
		})
	}
	wg.Wait()
	fmt.Println("done", count.Load(), most.Load())
	if failed.Load() {
		return 1
	}
	return 0
}

// Four processes of four goroutines take 1 or 2 of 3 permits over and over
// while two of them are killed (SIGKILL), holding permits or not: the
// permits inside, counted across processes, never exceed 3; the killed
// processes' permits come back after their lease; and when everyone is
// done, nothing is left in Redis but the fencing counter and the capacity.
func TestSemaphoreAcrossProcesses(t *testing.T) {
	srv := redistest.Start(t)
	c, rdb := newClient(t, srv)
	ctx := testCtx(t)
	var workers []*helper
	for p := 0; p < 4; p++ {
		h := startHelper(t, "sem-workers", srv.URL(), "api", "3", "4")
		h.expect(t, "acquired")
		workers = append(workers, h)
	}
	s := c.Semaphore("api", 3)
	for _, h := range workers[:2] {
		time.Sleep(50 * time.Millisecond) // let the workers take and return permits a while
		h.signal(t, syscall.SIGKILL)
	}
	// The survivors get every permit again once the killed ones' leases end.
	l, err := s.Acquire(ctx, 3)
	if err != nil {
		t.Fatalf("all 3 permits after the kills: %v", err)
	}
	if info, _ := s.Inspect(ctx); info.InUse != 3 || len(info.Holders) != 1 {
		t.Fatalf("Inspect while holding all permits: %+v", info)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	acquisitions, most := 0, 0
	for _, h := range workers[2:] {
		h.stdin.Close()
		f := h.expect(t, "done")
		var n, m int
		fmt.Sscan(f[1], &n)
		fmt.Sscan(f[2], &m)
		acquisitions += n
		most = max(most, m)
		if err := h.wait(t); err != nil {
			t.Fatalf("worker: %v", err)
		}
	}
	if n, _ := rdb.Get(ctx, "overlaps:api").Int(); n != 0 {
		t.Fatalf("%d times more than 3 permits were in use", n)
	}
	if most < 2 {
		t.Fatalf("at most %d permits in use at once: the workers did not share", most)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { info, _ := s.Inspect(context.Background()); return info.InUse == 0 && info.Queued == 0 })
	onlyExpiringKeys(t, rdb)
	t.Logf("%d acquisitions by the survivors, up to %d permits in use at once", acquisitions, most)
}

// A waiter for all 3 permits gets them while goroutines keep taking and
// returning 1 permit: no one that asked after it passes it; ten times.
func TestSemaphoreLargeRequestNotStarved(t *testing.T) {
	srv := redistest.Start(t)
	queuedAt := atomic.Int64{}
	c, _ := newClient(t, srv, distlock.WithEventHandler(func(e distlock.Event) {
		if e.Kind == distlock.EventWaiting {
			queuedAt.Store(time.Now().UnixNano())
		}
	}))
	small, _ := newClient(t, srv)
	ctx := testCtx(t)
	s := small.Semaphore("big", 3)
	var stop atomic.Bool
	var mu sync.Mutex
	type taken struct{ asked, got int64 }
	var smalls []taken
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Go(func() {
			for !stop.Load() {
				asked := time.Now().UnixNano()
				l, err := s.Acquire(ctx, 1)
				if err != nil {
					t.Error(err)
					return
				}
				got := time.Now().UnixNano()
				time.Sleep(time.Duration(1+rand.IntN(2)) * time.Millisecond)
				l.Unlock(ctx)
				mu.Lock()
				smalls = append(smalls, taken{asked, got})
				mu.Unlock()
			}
		})
	}
	waitFor(t, func() bool { info, _ := s.Inspect(ctx); return info.InUse > 0 })
	var bigs []taken
	for i := 0; i < 10; i++ {
		queuedAt.Store(0)
		l, err := c.Semaphore("big", 3).Acquire(ctx, 3)
		if err != nil {
			t.Fatal(err)
		}
		got := time.Now().UnixNano()
		l.Unlock(ctx)
		if q := queuedAt.Load(); q != 0 {
			bigs = append(bigs, taken{q, got})
		}
	}
	stop.Store(true)
	wg.Wait()
	if len(bigs) == 0 {
		t.Fatal("the large request never waited: the small ones did not keep permits busy")
	}
	behind := 0
	for _, sm := range smalls {
		for _, big := range bigs {
			if sm.asked <= big.asked {
				continue
			}
			if sm.asked < big.got {
				behind++
			}
			if sm.got < big.got {
				t.Errorf("a small request asked for at %d, after the large one queued at %d, got its permit at %d, before the large one at %d", sm.asked, big.asked, sm.got, big.got)
			}
		}
	}
	if behind == 0 {
		t.Fatal("no small request was asked for while the large one waited")
	}
	t.Logf("%d large requests waited; %d small ones asked meanwhile waited behind them", len(bigs), behind)
}

// SetPermits grows and shrinks the capacity while permits are held:
// growing lets a waiter in at once, shrinking revokes nothing, and Inspect
// says so. The capacity in Redis is in force over a client's own number,
// and the difference is reported once.
func TestSemaphoreSetPermits(t *testing.T) {
	srv := redistest.Start(t)
	c, _ := newClient(t, srv)
	var mismatches atomic.Int32
	other, _ := newClient(t, srv, distlock.WithEventHandler(func(e distlock.Event) {
		if e.Kind == distlock.EventMismatch && e.Err != nil {
			mismatches.Add(1)
		}
	}))
	ctx := testCtx(t)
	s := c.Semaphore("cap", 2)
	a, err := s.Acquire(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *distlock.Lease, 1)
	go func() {
		l, err := other.Semaphore("cap", 5).Acquire(ctx, 1) // believes in 5 permits
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	waitFor(t, func() bool { info, _ := s.Inspect(ctx); return info.Queued == 1 })
	if err := s.SetPermits(ctx, 3); err != nil {
		t.Fatal(err)
	}
	b := <-got
	if info, err := s.Inspect(ctx); err != nil || info.Capacity != 3 || info.InUse != 3 || len(info.Holders) != 2 || info.Kind != distlock.KindSemaphore {
		t.Fatalf("after growing: %+v, %v", info, err)
	}
	if err := s.SetPermits(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if a.Context().Err() != nil || b.Context().Err() != nil {
		t.Fatal("shrinking revoked permits")
	}
	if info, _ := s.Inspect(ctx); info.Capacity != 1 || info.InUse != 3 {
		t.Fatalf("after shrinking: %+v", info)
	}
	if _, err := s.TryAcquire(ctx, 1); !errors.Is(err, distlock.ErrNotAcquired) {
		t.Fatalf("TryAcquire over a shrunk capacity: %v", err)
	}
	if _, err := other.Semaphore("cap", 5).Acquire(ctx, 2); !errors.Is(err, distlock.ErrInvalidOption) {
		t.Fatalf("2 permits of a capacity of 1 in Redis: %v, want ErrInvalidOption", err)
	}
	// Releasing one permit of three leaves two in use, still above the
	// capacity of 1: nobody is admitted until enough are released.
	if err := b.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if l, err := s.TryAcquire(ctx, 1); !errors.Is(err, distlock.ErrNotAcquired) {
		t.Fatalf("TryAcquire with 2 permits in use of a capacity of 1: %v, %v; want ErrNotAcquired", l, err)
	}
	if err := a.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if l, err := s.TryAcquire(ctx, 1); err != nil {
		t.Fatalf("TryAcquire once every permit is back: %v", err)
	} else {
		l.Unlock(ctx)
	}
	if n := mismatches.Load(); n != 1 {
		t.Fatalf("%d mismatch events, want 1 (reported once per change)", n)
	}
}

// A waiter that asks for more permits than a shrunk capacity is told so
// (ErrInvalidOption) instead of waiting forever, and blocks no one behind
// it meanwhile.
func TestSemaphoreShrinkBelowWaiter(t *testing.T) {
	srv := redistest.Start(t)
	c, _ := newClient(t, srv)
	ctx := testCtx(t)
	s := c.Semaphore("shrink", 3, distlock.WithQueueTimeout(600*time.Millisecond))
	a, err := s.Acquire(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	big := make(chan error, 1)
	go func() {
		l, err := s.Acquire(ctx, 3)
		if l != nil {
			l.Unlock(ctx)
		}
		big <- err
	}()
	waitFor(t, func() bool { info, _ := s.Inspect(ctx); return info.Queued == 1 })
	small := make(chan error, 1)
	go func() {
		l, err := s.Acquire(ctx, 1)
		if l != nil {
			l.Unlock(ctx)
		}
		small <- err
	}()
	waitFor(t, func() bool { info, _ := s.Inspect(ctx); return info.Queued == 2 })
	if err := s.SetPermits(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if err := <-small; err != nil {
		t.Fatalf("the waiter behind: %v, want served (1 + 1 of 2)", err)
	}
	if err := <-big; !errors.Is(err, distlock.ErrInvalidOption) {
		t.Fatalf("3 permits of a capacity shrunk to 2: %v, want ErrInvalidOption", err)
	}
	if err := a.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if info, err := s.Inspect(ctx); err != nil || info.InUse != 0 || info.Queued != 0 {
		t.Fatalf("left behind: %+v, %v", info, err)
	}
}

// Waiters whose contexts end at random moments while permits change hands:
// no permit is lost or left held, and nothing is left in Redis.
func TestSemaphoreCancellation(t *testing.T) {
	srv := redistest.Start(t)
	c1, rdb := newClient(t, srv)
	c2, _ := newClient(t, srv)
	ctx := testCtx(t)
	var acquired, cancelled atomic.Int32
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		c := c1
		if g%2 == 1 {
			c = c2
		}
		wg.Go(func() {
			s := c.Semaphore("cancel", 3, distlock.WithTTL(5*time.Second), distlock.WithQueueTimeout(time.Second))
			for i := 0; i < 30; i++ {
				n := 1 + rand.IntN(3)
				wctx, cancel := context.WithTimeout(ctx, patience())
				l, err := s.Acquire(wctx, n)
				cancel()
				if err != nil {
					if !errors.Is(err, context.DeadlineExceeded) {
						t.Errorf("Acquire: %v", err)
						return
					}
					cancelled.Add(1)
					continue
				}
				acquired.Add(1)
				time.Sleep(time.Duration(rand.IntN(500)) * time.Microsecond)
				if err := l.Unlock(ctx); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if acquired.Load() == 0 || cancelled.Load() == 0 {
		t.Fatalf("%d acquired, %d cancelled: the test must do both", acquired.Load(), cancelled.Load())
	}
	s := c1.Semaphore("cancel", 3)
	if info, err := s.Inspect(ctx); err != nil || info.InUse != 0 || len(info.Holders) != 0 {
		t.Fatalf("after all unlocks: %+v, %v", info, err)
	}
	l, err := s.TryAcquire(ctx, 3)
	if err != nil {
		t.Fatalf("all permits once everyone is done: %v", err)
	}
	l.Unlock(ctx)
	if err := c1.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c2.Close(); err != nil {
		t.Fatal(err)
	}
	onlyExpiringKeys(t, rdb)
	t.Logf("%d acquired, %d cancelled", acquired.Load(), cancelled.Load())
}

// Bad input fails at once, without waiting; a semaphore is not re-entrant,
// and a self-deadlock is refused at once.
func TestSemaphoreMisuse(t *testing.T) {
	srv := redistest.Start(t)
	c, _ := newClient(t, srv)
	ctx := testCtx(t)
	for what, err := range map[string]error{
		"0 permits":      c.Semaphore("bad", 0).Err(),
		"too many":       c.Semaphore("bad", distlock.MaxPermits+1).Err(),
		"empty name":     c.Semaphore("", 1).Err(),
		"acquire 0":      func() error { _, err := c.Semaphore("bad", 2).Acquire(ctx, 0); return err }(),
		"acquire 3 of 2": func() error { _, err := c.Semaphore("bad", 2).TryAcquire(ctx, 3); return err }(),
		"set 0":          c.Semaphore("bad", 2).SetPermits(ctx, 0),
	} {
		if err == nil || !(errors.Is(err, distlock.ErrInvalidOption) || errors.Is(err, distlock.ErrInvalidName)) {
			t.Errorf("%s: %v, want ErrInvalidOption or ErrInvalidName", what, err)
		}
	}
	s := c.Semaphore("nested", 3)
	a, err := s.Acquire(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Acquire(a.Context(), 1) // a new acquisition: 2 + 1 fit in 3
	if err != nil || b.Token() <= a.Token() {
		t.Fatalf("a second acquisition with the first's context: %v, %v", b, err)
	}
	if _, err := s.Acquire(b.Context(), 1); !errors.Is(err, distlock.ErrDeadlock) {
		t.Fatalf("3 + 1 permits in one context: %v, want ErrDeadlock", err)
	}
	if _, err := c.Mutex("nested").Lock(a.Context()); !errors.Is(err, distlock.ErrWrongKind) {
		t.Fatalf("a mutex with a semaphore's lease: %v, want ErrWrongKind", err)
	}
	b.Unlock(ctx)
	a.Unlock(ctx)
	if err := a.Unlock(ctx); !errors.Is(err, distlock.ErrNotHeld) {
		t.Fatalf("second Unlock: %v", err)
	}
}
