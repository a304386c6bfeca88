package distlock_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/redistest"
)

// events collects a client's events for a test.
type events struct {
	mu   sync.Mutex
	cond *sync.Cond
	seen map[distlock.EventKind]int
}

func newEvents() *events {
	e := &events{seen: map[distlock.EventKind]int{}}
	e.cond = sync.NewCond(&e.mu)
	return e
}

func (e *events) handle(ev distlock.Event) {
	e.mu.Lock()
	e.seen[ev.Kind]++
	e.cond.Broadcast()
	e.mu.Unlock()
}

// await blocks until n events of kind have been seen.
func (e *events) await(kind distlock.EventKind, n int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for e.seen[kind] < n {
		e.cond.Wait()
	}
}

func (e *events) count(kind distlock.EventKind) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.seen[kind]
}

// The watchdog keeps a lock for more than three leases.
func TestWatchdogKeepsLock(t *testing.T) {
	srv := redistest.Start(t)
	ev := newEvents()
	c, rdb := newClient(t, srv, distlock.WithEventHandler(ev.handle))
	other, _ := newClient(t, srv)
	ctx := testCtx(t)
	const lease = 300 * time.Millisecond
	l, err := c.Mutex("dog", distlock.WithTTL(lease)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Hold it, renewal after renewal, until three leases have passed.
	start := time.Now()
	for n := 1; time.Since(start) <= 3*lease; n++ {
		ev.await(distlock.EventRenewed, n)
	}
	if l.Context().Err() != nil {
		t.Fatalf("lease context ended: %v", context.Cause(l.Context()))
	}
	if _, err := other.Mutex("dog").TryLock(ctx); !errors.Is(err, distlock.ErrNotAcquired) {
		t.Fatalf("TryLock by another client after 3 leases: %v, want ErrNotAcquired", err)
	}
	if ttl := rdb.PTTL(ctx, "distlock:{dog}").Val(); ttl <= 0 || ttl > lease {
		t.Fatalf("PTTL %v, want within (0, %v]", ttl, lease)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if ev.count(distlock.EventLost) != 0 {
		t.Fatal("a Lost event while the lock was renewed")
	}
}

// The lease context is cancelled, with ErrLockLost, when the key is deleted
// or taken over behind the holder's back.
func TestLeaseContextCancelledOnTakeover(t *testing.T) {
	for _, how := range []string{"deleted", "overwritten"} {
		t.Run(how, func(t *testing.T) {
			srv := redistest.Start(t)
			ev := newEvents()
			c, rdb := newClient(t, srv, distlock.WithEventHandler(ev.handle))
			ctx := testCtx(t)
			l, err := c.Mutex("tamper", distlock.WithTTL(300*time.Millisecond)).Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if how == "deleted" {
				err = rdb.Del(ctx, "distlock:{tamper}").Err()
			} else {
				err = rdb.HSet(ctx, "distlock:{tamper}", "owner", "someone-else").Err()
			}
			if err != nil {
				t.Fatal(err)
			}
			<-l.Context().Done()
			if cause := context.Cause(l.Context()); !errors.Is(cause, distlock.ErrLockLost) {
				t.Fatalf("cause = %v, want ErrLockLost", cause)
			}
			if err := l.Unlock(ctx); !errors.Is(err, distlock.ErrLockLost) {
				t.Fatalf("Unlock = %v, want ErrLockLost", err)
			}
			if err := l.Extend(ctx, time.Second); !errors.Is(err, distlock.ErrNotHeld) {
				t.Fatalf("Extend after Unlock = %v, want ErrNotHeld", err)
			}
			if how == "overwritten" {
				if owner := rdb.HGet(ctx, "distlock:{tamper}", "owner").Val(); owner != "someone-else" {
					t.Fatalf("the loser touched the new owner's lock: owner %q", owner)
				}
			}
			// The renewer emits Lost just after it cancels the lease
			// context, from its own goroutine: under CPU starvation the
			// event can come after Unlock has returned.
			ev.await(distlock.EventLost, 1)
			if n := ev.count(distlock.EventLost); n != 1 {
				t.Fatalf("%d Lost events, want 1", n)
			}
		})
	}
}

// When Redis is frozen for longer than the lease, the holder's lease
// context is cancelled before anyone else can acquire the lock: the
// cancellation is recorded before the other client's acquisition returns.
func TestLeaseContextCancelledBeforeExpiryWhenRedisPauses(t *testing.T) {
	srv := redistest.Start(t)
	c, _ := newClient(t, srv)
	other, _ := newClient(t, srv)
	ctx := testCtx(t)
	l, err := c.Mutex("frozen", distlock.WithTTL(500*time.Millisecond)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var order []string
	record := func(s string) { mu.Lock(); order = append(order, s); mu.Unlock() }
	stop := context.AfterFunc(l.Context(), func() { record("holder cancelled") })
	defer stop()

	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	// The other client's attempt is queued at the frozen server.
	got := make(chan error, 1)
	go func() {
		l2, err := other.Mutex("frozen").Lock(ctx)
		if err == nil {
			record("other acquired")
			err = l2.Unlock(ctx)
		}
		got <- err
	}()
	<-l.Context().Done() // by the local deadline, with Redis still frozen
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(order) != 2 || order[0] != "holder cancelled" {
		t.Fatalf("order of events: %v", order)
	}
	if cause := context.Cause(l.Context()); !errors.Is(cause, distlock.ErrLockLost) {
		t.Fatalf("cause = %v, want ErrLockLost", cause)
	}
}

// A fixed lease is not renewed: its context, whose Deadline is the
// lease's local deadline, ends with ErrLeaseExpired (which wraps
// ErrLockLost) before the lock expires, reported as EventExpired and
// logged at Debug, not as a loss; Unlock then says it expired; and then
// someone else gets the lock.
func TestFixedLease(t *testing.T) {
	srv := redistest.Start(t)
	ev := newEvents()
	logs := &levelCounter{}
	c, _ := newClient(t, srv, distlock.WithEventHandler(ev.handle), distlock.WithLogger(slog.New(logs)))
	other, _ := newClient(t, srv)
	ctx := testCtx(t)
	l, err := c.Mutex("fixed", distlock.WithFixedLease(200*time.Millisecond)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	deadline, ok := l.Context().Deadline()
	if until := l.ValidUntil(); !ok || !deadline.Equal(until) || until.IsZero() {
		t.Fatalf("a fixed lease's context: Deadline() = %v, %v; ValidUntil() = %v", deadline, ok, until)
	}
	<-l.Context().Done()
	cause := context.Cause(l.Context())
	if !errors.Is(cause, distlock.ErrLeaseExpired) || !errors.Is(cause, distlock.ErrLockLost) {
		t.Fatalf("cause = %v, want ErrLeaseExpired (wrapping ErrLockLost)", cause)
	}
	if err := l.Unlock(ctx); !errors.Is(err, distlock.ErrLeaseExpired) {
		t.Fatalf("Unlock after the lease expired = %v, want ErrLeaseExpired", err)
	}
	if until := l.ValidUntil(); !until.IsZero() {
		t.Fatalf("ValidUntil after the lease expired = %v, want the zero time", until)
	}
	l2, err := other.Mutex("fixed").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := l2.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	ev.await(distlock.EventExpired, 1)
	if n := ev.count(distlock.EventLost); n != 0 {
		t.Fatalf("the expiry of a fixed lease was reported as %d losses", n)
	}
	if n := ev.count(distlock.EventRenewed); n != 0 {
		t.Fatalf("a fixed lease was renewed %d times", n)
	}
	if n := logs.count(slog.LevelWarn); n != 0 {
		t.Fatalf("the expiry of a fixed lease logged %d warnings", n)
	}
}

// ValidUntil follows a lease: a renewed lease's moves forward with each
// renewal, and has no context Deadline; Extend moves a fixed lease's and
// its context's Deadline; a lease that was unlocked has none; a MultiMutex
// lease's is its earliest member's.
func TestValidUntil(t *testing.T) {
	srv := redistest.Start(t)
	ev := newEvents()
	c, _ := newClient(t, srv, distlock.WithEventHandler(ev.handle))
	ctx := testCtx(t)
	l, err := c.Mutex("valid", distlock.WithTTL(300*time.Millisecond)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := l.Context().Deadline(); ok {
		t.Fatal("a renewed lease's context has a Deadline")
	}
	first := l.ValidUntil()
	if first.IsZero() {
		t.Fatal("ValidUntil of a held lease is the zero time")
	}
	ev.await(distlock.EventRenewed, 1)
	if later := l.ValidUntil(); !later.After(first) {
		t.Fatalf("ValidUntil after a renewal = %v, not after %v", later, first)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if until := l.ValidUntil(); !until.IsZero() {
		t.Fatalf("ValidUntil after Unlock = %v, want the zero time", until)
	}

	f, err := c.Mutex("valid-fixed", distlock.WithFixedLease(time.Second)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	before, _ := f.Context().Deadline()
	if err := f.Extend(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	after, ok := f.Context().Deadline()
	if !ok || !after.After(before) || !after.Equal(f.ValidUntil()) {
		t.Fatalf("after Extend: Deadline() = %v, %v (before: %v); ValidUntil() = %v", after, ok, before, f.ValidUntil())
	}
	if err := f.Unlock(ctx); err != nil {
		t.Fatal(err)
	}

	short, err := c.Mutex("valid-short", distlock.WithFixedLease(time.Second)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m, err := c.MultiMutex([]string{"valid-a", "valid-b"}, distlock.WithFixedLease(time.Minute)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Extend(ctx, time.Hour); err != nil {
		t.Fatal(err)
	}
	md, ok := m.Context().Deadline()
	if !ok || !md.Equal(m.ValidUntil()) || !md.After(short.ValidUntil()) {
		t.Fatalf("a multi-lock's Deadline() = %v, %v; ValidUntil() = %v", md, ok, m.ValidUntil())
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := short.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	var none *distlock.Lease
	if !none.ValidUntil().IsZero() {
		t.Fatal("a nil lease has a ValidUntil")
	}
}

// levelCounter is a slog.Handler that counts records by level.
type levelCounter struct {
	mu sync.Mutex
	n  map[slog.Level]int
}

func (h *levelCounter) Enabled(context.Context, slog.Level) bool { return true }
func (h *levelCounter) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *levelCounter) WithGroup(string) slog.Handler            { return h }
func (h *levelCounter) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n == nil {
		h.n = map[slog.Level]int{}
	}
	h.n[r.Level]++
	return nil
}

func (h *levelCounter) count(l slog.Level) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n[l]
}

// Extend lengthens a fixed lease on the server and locally.
func TestExtend(t *testing.T) {
	srv := redistest.Start(t)
	c, rdb := newClient(t, srv)
	ctx := testCtx(t)
	l, err := c.Mutex("ext", distlock.WithFixedLease(time.Second)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Extend(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	if ttl := rdb.PTTL(ctx, "distlock:{ext}").Val(); ttl <= time.Second {
		t.Fatalf("PTTL after Extend = %v, want about a minute", ttl)
	}
	if err := l.Extend(ctx, time.Millisecond); !errors.Is(err, distlock.ErrInvalidOption) {
		t.Fatalf("Extend(1ms) = %v, want ErrInvalidOption", err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// Many held locks are renewed in batches: per renewal tick, one script call
// per 256 locks in one pipeline, not one call per lock.
func TestRenewalsAreBatched(t *testing.T) {
	srv := redistest.Start(t)
	ev := newEvents()
	c, rdb := newClient(t, srv, distlock.WithEventHandler(ev.handle))
	ctx := testCtx(t)
	const n = 600
	var leases []*distlock.Lease
	for i := 0; i < n; i++ {
		l, err := c.Mutex("batch-"+itoa(i), distlock.WithTTL(600*time.Millisecond)).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		leases = append(leases, l)
	}
	rdb.ConfigResetStat(ctx)
	ev.await(distlock.EventRenewed, 4*n) // every lock renewed several times
	calls := scriptCalls(t, rdb)
	renewals := ev.count(distlock.EventRenewed)
	// Each call covers up to 256 locks; allow for calls cut short by ticks
	// that only some locks had reached.
	if perCall := float64(renewals) / float64(calls); perCall < 50 {
		t.Fatalf("%d renewals in %d script calls (%.1f per call): not batched", renewals, calls, perCall)
	}
	for _, l := range leases {
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// SCRIPT FLUSH on the server is invisible: every script is loaded again.
func TestScriptFlushIsInvisible(t *testing.T) {
	srv := redistest.Start(t)
	ev := newEvents()
	c, rdb := newClient(t, srv, distlock.WithEventHandler(ev.handle))
	ctx := testCtx(t)
	m := c.Mutex("flush", distlock.WithTTL(300*time.Millisecond))
	l, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rdb.ScriptFlush(ctx)
	renewed := ev.count(distlock.EventRenewed)
	ev.await(distlock.EventRenewed, renewed+2) // the batched renew path
	rdb.ScriptFlush(ctx)
	if _, err := m.Inspect(ctx); err != nil {
		t.Fatal(err)
	}
	rdb.ScriptFlush(ctx)
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	rdb.ScriptFlush(ctx)
	if l, err = m.TryLock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if n := ev.count(distlock.EventRenewFailed) + ev.count(distlock.EventLost); n != 0 {
		t.Fatalf("%d failures after SCRIPT FLUSH", n)
	}
}

type leaseValueKey struct{}

// A lease's context carries the values of the context the lock was
// acquired with (a request id, a trace span), not its deadline.
func TestLeaseContextCarriesValues(t *testing.T) {
	srv := redistest.Start(t)
	c, _ := newClient(t, srv)
	ctx, cancel := context.WithCancel(context.WithValue(testCtx(t), leaseValueKey{}, "req-42"))
	for _, m := range []interface {
		Lock(context.Context) (*distlock.Lease, error)
	}{c.Mutex("values"), c.FairMutex("fair-values"), c.RWMutex("rw-values")} {
		l, err := m.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got := l.Context().Value(leaseValueKey{}); got != "req-42" {
			t.Errorf("lease context value = %v, want req-42", got)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	l, err := c.Mutex("values").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	if l.Context().Err() != nil {
		t.Error("the lease context ended with the acquisition's context")
	}
	l.Unlock(context.Background())
}

// eventTrace records every event with the time it came, for a test to
// print when it fails.
type eventTrace struct {
	mu    sync.Mutex
	start time.Time
	lines []string
}

func (tr *eventTrace) handle(ev distlock.Event) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.start.IsZero() {
		tr.start = time.Now()
	}
	tr.lines = append(tr.lines, fmt.Sprintf("%8v %v %s token %d wait %v err %v",
		time.Since(tr.start).Round(time.Millisecond), ev.Kind, ev.Name, ev.Token, ev.Wait, ev.Err))
}

func (tr *eventTrace) String() string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return strings.Join(tr.lines, "\n")
}
