package distlock_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/redisstore"
	"github.com/distlock/distlock/redistest"
	"github.com/redis/go-redis/v9"
)

// A waiter in another process is woken by the release itself: with a 30 s
// lease left, its 10 s deadline would pass long before a poll, and the
// hand-over costs a handful of Redis commands.
func TestWaiterWokenByRelease(t *testing.T) {
	srv := redistest.Start(t)
	c, rdb := newClient(t, srv)
	ctx := testCtx(t)
	warm, err := c.Mutex("handover").Lock(ctx) // load the scripts
	if err != nil {
		t.Fatal(err)
	}
	if err := warm.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	l, err := c.Mutex("handover").Lock(ctx) // 30 s lease
	if err != nil {
		t.Fatal(err)
	}
	rdb.ConfigResetStat(ctx)
	w := startHelper(t, "wait", srv.URL(), "handover", "10s")
	w.expect(t, "waiting") // subscribed, and its first attempt failed
	// The waiter tries once more once it watches (a release between its
	// first attempt and its watch would go unnoticed otherwise): the count
	// starts after that attempt too.
	waitFor(t, func() bool {
		calls := commandCalls(t, rdb)
		return calls["evalsha"]+calls["eval"] >= 2
	})
	info, err := c.Mutex("handover").Inspect(ctx)
	if err != nil || info.Waiters != 1 {
		t.Fatalf("Inspect while waiting: %+v, %v; want 1 waiter", info, err)
	}
	rdb.ConfigResetStat(ctx)
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	f := w.expect(t, "acquired")
	if err := w.wait(t); err != nil {
		t.Fatalf("waiter: %v", err)
	}
	if tok, _ := strconv.ParseUint(f[1], 10, 64); tok <= l.Token() {
		t.Fatalf("waiter token %d not above %d", tok, l.Token())
	}
	// The release (1 script), the waiter's one acquire attempt after its
	// wake-up and its release (2 scripts): nothing polled.
	calls := commandCalls(t, rdb)
	if scripts := calls["evalsha"] + calls["eval"]; scripts != 3 {
		t.Fatalf("%d script calls for a hand-over (%v), want 3", scripts, calls)
	}
}

// A waiter whose notification never comes (the holder died, and expiry
// publishes nothing) still gets the lock once the lease runs out: it never
// sleeps longer than the holder's remaining lease.
func TestWaiterWithoutNotification(t *testing.T) {
	srv := redistest.Start(t)
	c, _ := newClient(t, srv)
	other, _ := newClient(t, srv)
	ctx := testCtx(t)
	l, err := c.Mutex("silent", distlock.WithFixedLease(400*time.Millisecond)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ctx10, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	l2, err := other.Mutex("silent").Lock(ctx10)
	if err != nil {
		t.Fatal(err)
	}
	if l2.Token() <= l.Token() {
		t.Fatalf("token %d not above %d", l2.Token(), l.Token())
	}
	if err := l2.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// A holder process killed with SIGKILL leaves its lock until the lease
// ends; then a waiter gets it.
func TestHolderKilled(t *testing.T) {
	srv := redistest.Start(t)
	c, _ := newClient(t, srv)
	ctx := testCtx(t)
	h := startHelper(t, "hold", srv.URL(), "killed", "1s")
	f := h.expect(t, "locked")
	info, err := c.Mutex("killed").Inspect(ctx)
	if err != nil || !info.Locked || info.Holder.PID != h.cmd.Process.Pid {
		t.Fatalf("Inspect: %+v, %v; want held by pid %d", info, err, h.cmd.Process.Pid)
	}
	if err := h.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	h.wait(t)
	l, err := c.Mutex("killed").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if tok, _ := strconv.ParseUint(f[1], 10, 64); l.Token() <= tok {
		t.Fatalf("token %d not above the dead holder's %d", l.Token(), tok)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// Cancelling a Lock whose request has reached Redis, but whose reply has
// not come back, leaves no lock behind.
func TestCancelMidAcquireLeavesNoOrphan(t *testing.T) {
	srv := redistest.Start(t)
	_, rdb := newClient(t, srv)
	crdb := srv.Client(t)
	c := distlock.New(redisstore.New(crdb), distlock.WithLogger(nil))
	ctx := testCtx(t)
	// Warm up: server check done, scripts loaded, a connection open.
	l, err := c.Mutex("warm").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	sent := make(chan struct{})
	crdb.AddHook(onScript(sent))

	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	lctx, cancel := context.WithCancel(ctx)
	got := make(chan error, 1)
	go func() {
		_, err := c.Mutex("orphan", distlock.WithTTL(time.Minute)).Lock(lctx)
		got <- err
	}()
	<-sent // the acquire script is on its way to the frozen server
	cancel()
	if err := <-got; !errors.Is(err, context.Canceled) || !errors.Is(err, distlock.ErrNotAcquired) {
		t.Fatalf("Lock after cancel = %v, want ErrNotAcquired and context.Canceled", err)
	}
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	// The request now runs and takes the lock; Close waits for the
	// background clean-up, which must have released it.
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if n := rdb.Exists(ctx, "distlock:{orphan}:fence").Val(); n != 1 {
		t.Fatal("the acquire never ran on the server, so this test proved nothing")
	}
	if n := rdb.Exists(ctx, "distlock:{orphan}").Val(); n != 0 {
		t.Fatal("an orphan lock was left behind")
	}
}

// onScript is a go-redis hook that closes sent when the first script call
// is about to be written.
func onScript(sent chan struct{}) redis.Hook { return &scriptHook{sent: sent} }

type scriptHook struct {
	once sync.Once
	sent chan struct{}
}

func (h *scriptHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *scriptHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *scriptHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if name := cmd.Name(); name == "evalsha" || name == "eval" {
			h.once.Do(func() { close(h.sent) })
		}
		return next(ctx, cmd)
	}
}

// Waiters of one process are served in arrival order, and a goroutine that
// unlocks and locks again lines up behind them instead of barging in.
func TestLocalWaitersFirstComeFirstServed(t *testing.T) {
	srv := redistest.Start(t)
	waiting := make(chan struct{}, 8)
	c, _ := newClient(t, srv, distlock.WithEventHandler(func(ev distlock.Event) {
		if ev.Kind == distlock.EventWaiting {
			waiting <- struct{}{}
		}
	}))
	ctx := testCtx(t)
	m := c.Mutex("queue")
	l, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	order := make(chan string, 3)
	errs := make(chan error, 3)
	lockThenUnlock := func(who string) {
		l, err := m.Lock(ctx)
		if err != nil {
			errs <- err
			return
		}
		order <- who
		errs <- l.Unlock(ctx)
	}
	for _, who := range []string{"first", "second"} {
		go lockThenUnlock(who)
		<-waiting // lined up before the next one starts
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	go lockThenUnlock("holder again")
	for range 3 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	close(order)
	var got []string
	for who := range order {
		got = append(got, who)
	}
	if want := []string{"first", "second", "holder again"}; !slices.Equal(got, want) {
		t.Fatalf("acquisition order %q, want %q", got, want)
	}
}
