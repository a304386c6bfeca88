package distlock_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
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

// A request of fairRounds: when its Lock was called, when it learned that
// it was queued (or acquired, if it was not queued), when it acquired and
// when it released, on the machine's wall clock, and its token.
type fairRound struct {
	proc                int
	send, ack, acq, rel int64
	token               uint64
}

// fairRounds is the body of a "fair-rounds" helper process: one goroutine
// takes the fair mutex name rounds times, increments counter with a
// non-atomic read-modify-write under it and keeps it a millisecond (so
// that the others queue), and prints each request as
// "round SEND ACK ACQ REL TOKEN" (UnixNano times).
func fairRounds(ctx context.Context, rdb *redis.Client, name, counter string, rounds int) int {
	var queued atomic.Int64 // when the current Lock call was queued
	c := distlock.New(redisstore.New(rdb), distlock.WithLogger(nil), distlock.WithEventHandler(func(e distlock.Event) {
		if e.Kind == distlock.EventWaiting {
			queued.Store(time.Now().UnixNano())
		}
	}))
	defer c.Close()
	m := c.FairMutex(name, distlock.WithTTL(5*time.Second))
	for i := 0; i < rounds; i++ {
		queued.Store(0)
		send := time.Now().UnixNano()
		l, err := m.Lock(ctx)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		acq := time.Now().UnixNano()
		ack := queued.Load()
		if ack == 0 {
			ack = acq
		}
		n, err := rdb.Get(ctx, counter).Int()
		if err != nil && err != redis.Nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if err := rdb.Set(ctx, counter, n+1, 0).Err(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		time.Sleep(time.Millisecond)
		rel := time.Now().UnixNano()
		if err := l.Unlock(ctx); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Printf("round %d %d %d %d %d\n", send, ack, acq, rel, l.Token())
	}
	return 0
}

// fairHold is the body of a "fair-hold" helper process: it waits for the
// fair mutex name (the client prints "waiting" when it is queued), prints
// "acquired TOKEN", and then obeys commands on stdin:
//
//	check   waits (10 s at most) for the lease context to end and prints
//	        "cancelled LOST" (LOST: whether the cause is ErrLockLost) or
//	        "live"
//	state   prints the same at once
//	unlock  unlocks and prints "unlocked ERR"
func fairHold(ctx context.Context, c *distlock.Client, name string, ttl, queue time.Duration, say func(string, ...any)) int {
	l, err := c.FairMutex(name, distlock.WithTTL(ttl), distlock.WithQueueTimeout(queue)).Lock(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	say("acquired %d", l.Token())
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		switch cmd := sc.Text(); cmd {
		case "check", "state":
			if cmd == "check" {
				select {
				case <-l.Context().Done():
				case <-time.After(10 * time.Second):
				}
			}
			if l.Context().Err() != nil {
				say("cancelled %v", errors.Is(context.Cause(l.Context()), distlock.ErrLockLost))
			} else {
				say("live")
			}
		case "unlock":
			say("unlocked %v", l.Unlock(ctx))
		}
	}
	return 0
}

// Waiters in three processes are served in the order their requests
// reached Redis: whenever one request's enqueue was acknowledged before
// another request was sent, it acquires first. (A plain mutex fails this:
// a process that unlocks and locks again at once overtakes the others.)
// Mutual exclusion holds across the processes meanwhile.
func TestFairFIFOAcrossProcesses(t *testing.T) {
	srv := redistest.Start(t)
	_, rdb := newClient(t, srv)
	const procs, rounds = 3, 40
	var hs []*helper
	for p := 0; p < procs; p++ {
		hs = append(hs, startHelper(t, "fair-rounds", srv.URL(), "fifo", "counter", fmt.Sprint(rounds)))
	}
	var all []fairRound
	for p, h := range hs {
		for i := 0; i < rounds; i++ {
			f := h.expect(t, "round")
			r := fairRound{proc: p}
			if _, err := fmt.Sscan(strings.Join(f[1:], " "), &r.send, &r.ack, &r.acq, &r.rel, &r.token); err != nil {
				t.Fatalf("helper %d: %q: %v", p, f, err)
			}
			all = append(all, r)
		}
		if err := h.wait(t); err != nil {
			t.Fatalf("helper %d: %v", p, err)
		}
	}
	if got, err := rdb.Get(testCtx(t), "counter").Int(); err != nil || got != procs*rounds {
		t.Fatalf("counter = %d, %v; want %d: two holders overlapped", got, err, procs*rounds)
	}
	ordered, queuedPairs := 0, 0
	for _, a := range all {
		for _, b := range all {
			if a.proc == b.proc || a.ack >= b.send {
				continue
			}
			ordered++
			if a.acq > b.send {
				queuedPairs++ // b was sent while a waited: the queue decided
			}
			if a.acq >= b.acq || a.token >= b.token {
				t.Errorf("process %d's request (acknowledged %d) acquired at %d with token %d, after process %d's request sent later (%d), acquired at %d with token %d",
					a.proc, a.ack, a.acq, a.token, b.proc, b.send, b.acq, b.token)
			}
		}
	}
	if queuedPairs < rounds {
		t.Fatalf("only %d pairs of requests (of %d ordered) overlapped in the queue: the test did not make waiters queue", queuedPairs, ordered)
	}
	t.Logf("%d ordered pairs across processes, %d of them queued behind each other", ordered, queuedPairs)
}

// fairWaiter starts a "fair-hold" helper waiting for name and returns it
// once it is queued.
func fairWaiter(t *testing.T, srv *redistest.Server, name, ttl, queue string) *helper {
	t.Helper()
	h := startHelper(t, "fair-hold", srv.URL(), name, ttl, queue)
	h.expect(t, "waiting")
	return h
}

// queued waits until Inspect shows n places in name's queue (bounded:
// nothing else signals a place that a paused or dead process lost).
func queued(t *testing.T, m *distlock.Mutex, n int) {
	t.Helper()
	for i := 0; ; i++ {
		info, err := m.Inspect(testCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		if info.Queued == n {
			return
		}
		if i == 1000 {
			t.Fatalf("queue has %d places, want %d", info.Queued, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A waiter process killed while queued is skipped: the next waiter gets
// the lock once the dead one's place expires (the queue timeout), without
// anyone's intervention.
func TestFairKilledWaiterSkipped(t *testing.T) {
	srv := redistest.Start(t)
	c, _ := newClient(t, srv)
	ctx := testCtx(t)
	m := c.FairMutex("skip")
	l, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dead := fairWaiter(t, srv, "skip", "30s", "1s")
	next := fairWaiter(t, srv, "skip", "30s", "1s")
	dead.signal(t, syscall.SIGKILL)
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	f := next.expect(t, "acquired")
	var tok uint64
	fmt.Sscan(f[1], &tok)
	if tok <= l.Token() {
		t.Fatalf("next waiter's token %d, not above the holder's %d", tok, l.Token())
	}
	info, err := m.Inspect(ctx)
	if err != nil || info.Holder.PID != next.cmd.Process.Pid || info.Queued != 0 {
		t.Fatalf("Inspect %+v, %v: want held by pid %d, queue empty", info, err, next.cmd.Process.Pid)
	}
}

// The head waiter is paused (SIGSTOP) when the lock is released: it is
// granted the lock, cannot confirm it, and the lock goes to the next
// waiter within the queue timeout. Resumed, it does not believe it holds
// anything: it queues again and acquires only after the next waiter
// released, with a greater token.
func TestFairPausedHeadSkipped(t *testing.T) {
	srv := redistest.Start(t)
	c, _ := newClient(t, srv)
	ctx := testCtx(t)
	m := c.FairMutex("pause")
	l, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	head := fairWaiter(t, srv, "pause", "30s", "1s")
	next := fairWaiter(t, srv, "pause", "30s", "1s")
	head.signal(t, syscall.SIGSTOP)
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	var nextTok, headTok uint64
	fmt.Sscan(next.expect(t, "acquired")[1], &nextTok)
	head.signal(t, syscall.SIGCONT)
	queued(t, m, 1) // the head found out and queued again, behind the holder
	select {
	case line := <-head.lines:
		t.Fatalf("resumed head waiter printed %q while the next waiter holds the lock", line)
	default:
	}
	next.send(t, "unlock")
	if f := next.expect(t, "unlocked"); f[1] != "<nil>" {
		t.Fatalf("next waiter's unlock: %v", f)
	}
	fmt.Sscan(head.expect(t, "acquired")[1], &headTok)
	if headTok <= nextTok {
		t.Fatalf("resumed head's token %d, not above the next waiter's %d", headTok, nextTok)
	}
	head.send(t, "state")
	if f := head.expect(t, "live"); len(f) != 1 {
		t.Fatalf("head's lease after its own grant: %v", f)
	}
}

// A holder paused past its lease loses the lock to the first waiter; when
// it resumes, its lease context is cancelled with ErrLockLost.
func TestFairPausedHolderLosesLease(t *testing.T) {
	srv := redistest.Start(t)
	c, _ := newClient(t, srv)
	ctx := testCtx(t)
	m := c.FairMutex("paused-holder", distlock.WithTTL(time.Second))
	holder := startHelper(t, "fair-hold", srv.URL(), "paused-holder", "1s", "1s")
	var holderTok uint64
	fmt.Sscan(holder.expect(t, "acquired")[1], &holderTok)
	holder.signal(t, syscall.SIGSTOP)
	l, err := m.Lock(ctx) // queued, then granted when the lease runs out
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock(ctx)
	if l.Token() <= holderTok {
		t.Fatalf("token %d, not above the paused holder's %d", l.Token(), holderTok)
	}
	holder.signal(t, syscall.SIGCONT)
	holder.send(t, "check")
	if f := holder.expect(t, "cancelled"); f[1] != "true" {
		t.Fatalf("resumed holder's lease context: %v, want cancelled with ErrLockLost", f)
	}
}

// A holder killed without releasing: the first waiter gets the lock when
// the holder's lease runs out, not a further lease or queue timeout later.
func TestFairKilledHolder(t *testing.T) {
	srv := redistest.Start(t)
	c, _ := newClient(t, srv)
	ctx := testCtx(t)
	holder := startHelper(t, "fair-hold", srv.URL(), "killed-holder", "2s", "5s")
	var holderTok uint64
	fmt.Sscan(holder.expect(t, "acquired")[1], &holderTok)
	holder.signal(t, syscall.SIGKILL)
	l, err := c.FairMutex("killed-holder").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if l.Token() <= holderTok {
		t.Fatalf("token %d, not above the killed holder's %d", l.Token(), holderTok)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// patience is how long a waiter of the cancellation tests waits: every
// other one as long as it takes, the others 0 to 5 ms, so that some give
// up at random moments of a hand-over, whatever the machine's speed.
func patience() time.Duration {
	if rand.IntN(2) == 0 {
		return 20 * time.Second
	}
	return time.Duration(rand.IntN(5000)) * time.Microsecond
}

// Waiters whose contexts end at random moments, while the lock is handed
// over among them: never two holders, every request either acquires or
// gives up cleanly, and at the end nothing is left in Redis but the
// fencing counter and abandonment marks (which expire).
func TestFairCancellationRacingGrants(t *testing.T) {
	srv := redistest.Start(t)
	c1, rdb := newClient(t, srv)
	c2, _ := newClient(t, srv)
	ctx := testCtx(t)
	const goroutines, rounds = 6, 40
	var inside atomic.Int32
	var overlaps, acquired, cancelled atomic.Int32
	var wg sync.WaitGroup
	for g := 0; g < goroutines; g++ {
		c := c1
		if g%2 == 1 {
			c = c2
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := c.FairMutex("cancel", distlock.WithTTL(5*time.Second), distlock.WithQueueTimeout(time.Second))
			for i := 0; i < rounds; i++ {
				wctx, cancel := context.WithTimeout(ctx, patience())
				l, err := m.Lock(wctx)
				cancel()
				if err != nil {
					if !errors.Is(err, distlock.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
						t.Errorf("Lock: %v", err)
						return
					}
					cancelled.Add(1)
					continue
				}
				acquired.Add(1)
				if inside.Add(1) != 1 {
					overlaps.Add(1)
				}
				time.Sleep(time.Duration(rand.IntN(500)) * time.Microsecond)
				inside.Add(-1)
				if err := l.Unlock(ctx); err != nil {
					t.Errorf("Unlock: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if overlaps.Load() != 0 {
		t.Fatalf("%d overlapping holds", overlaps.Load())
	}
	if acquired.Load() == 0 || cancelled.Load() == 0 {
		t.Fatalf("%d acquired, %d cancelled: the test must do both", acquired.Load(), cancelled.Load())
	}
	t.Logf("%d acquired, %d cancelled", acquired.Load(), cancelled.Load())
	// Clean-ups run in the background; Close waits for them.
	if err := c1.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c2.Close(); err != nil {
		t.Fatal(err)
	}
	onlyExpiringKeys(t, rdb)
}

// A name is used by one kind at a time: the second kind gets ErrWrongKind,
// and the lock in use goes on as if nothing happened.
func TestFairAndPlainDoNotMix(t *testing.T) {
	srv := redistest.Start(t)
	c, _ := newClient(t, srv)
	other, _ := newClient(t, srv)
	ctx := testCtx(t)
	fair, plain := c.FairMutex("mixed"), other.Mutex("mixed")
	l, err := fair.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for what, try := range map[string]func() error{
		"Lock":    func() error { _, err := plain.Lock(ctx); return err },
		"TryLock": func() error { _, err := plain.TryLock(ctx); return err },
		// The lease context holds the name as a fair mutex: re-entering it
		// as a plain one is the same mistake.
		"re-entry": func() error { _, err := c.Mutex("mixed").Lock(l.Context()); return err },
	} {
		if err := try(); !errors.Is(err, distlock.ErrWrongKind) || !errors.Is(err, distlock.ErrNotAcquired) || errors.Is(err, distlock.ErrBackend) {
			t.Errorf("plain %s of a fair-held name: %v, want ErrWrongKind (not ErrBackend)", what, err)
		}
	}
	if info, err := fair.Inspect(ctx); err != nil || !info.Locked || info.Kind != distlock.KindFairMutex || info.Token != l.Token() {
		t.Fatalf("fair lock after the refused plain ones: %+v, %v", info, err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	p, err := plain.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for what, try := range map[string]func() error{
		"Lock":    func() error { _, err := fair.Lock(ctx); return err },
		"TryLock": func() error { _, err := fair.TryLock(ctx); return err },
	} {
		if err := try(); !errors.Is(err, distlock.ErrWrongKind) || errors.Is(err, distlock.ErrBackend) {
			t.Errorf("fair %s of a plain-held name: %v, want ErrWrongKind (not ErrBackend)", what, err)
		}
	}
	if err := p.Unlock(ctx); err != nil {
		t.Fatalf("plain Unlock after the refused fair Lock: %v", err)
	}
}

// Re-entry, Extend and Inspect behave on a fair mutex as on a plain one;
// Inspect also counts the queue.
func TestFairReentryExtendInspect(t *testing.T) {
	srv := redistest.Start(t)
	c, _ := newClient(t, srv)
	waiter, _ := newClient(t, srv)
	ctx := testCtx(t)
	m := c.FairMutex("re", distlock.WithTTL(2*time.Second))
	l, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	in, err := m.Lock(l.Context())
	if err != nil || in.Token() != l.Token() {
		t.Fatalf("re-entry: %v, %v", in, err)
	}
	if err := l.Extend(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	got := make(chan *distlock.Lease, 1)
	go func() {
		w, err := waiter.FairMutex("re").Lock(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- w
	}()
	queued(t, m, 1)
	info, err := m.Inspect(ctx)
	if err != nil || info.Kind != distlock.KindFairMutex || info.Holds != 2 || info.Queued != 1 || info.TTL < 50*time.Second {
		t.Fatalf("Inspect = %+v, %v", info, err)
	}
	if _, err := m.TryLock(ctx); !errors.Is(err, distlock.ErrNotAcquired) {
		t.Fatalf("TryLock while held and waited for: %v", err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-got:
		t.Fatal("the waiter acquired while a re-entered lease was held")
	default:
	}
	if err := in.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	w := <-got
	if w.Token() <= l.Token() {
		t.Fatalf("waiter's token %d, not above %d", w.Token(), l.Token())
	}
	if err := w.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := m.TryLock(ctx); err != nil {
		t.Fatalf("TryLock of a free fair mutex: %v", err)
	}
}
