//go:build linux

package safety

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/redisstore"
	"github.com/distlock/distlock/redistest"
)

// The monitor's reconstruction of fair locks, on a real redis-server: the
// tenure a release grants to the next in line belongs to the grantee, the
// DEL of that release to the releasing owner.

// startMonitor follows srv's MONITOR feed until the test ends.
func startMonitor(t *testing.T, srv *redistest.Server, keepRaw bool) *monitor {
	t.Helper()
	m := newMonitor(srv.Addr(), "distlock:")
	m.keepRaw = keepRaw
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	done := make(chan struct{})
	go func() { defer close(done); m.run(ctx, ready) }()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case <-ready:
	case <-time.After(10 * time.Second):
		t.Fatal("MONITOR did not start")
	}
	return m
}

// waitQueued starts a fair Lock of name on c in the background and returns
// once it waits in the queue.
func waitQueued(t *testing.T, c *distlock.Client, ev *eventWaiter, name string, opts ...distlock.MutexOption) <-chan *distlock.Lease {
	t.Helper()
	out := make(chan *distlock.Lease, 1)
	errc := make(chan error, 1)
	go func() {
		l, err := c.FairMutex(name, opts...).Lock(testCtx(t))
		if err != nil {
			errc <- err
			return
		}
		out <- l
	}()
	select {
	case <-ev.ch[distlock.EventWaiting]:
	case err := <-errc:
		t.Fatalf("waiter: %v", err)
	case <-testCtx(t).Done():
		t.Fatal("the waiter did not queue")
	}
	return out
}

func TestMonitorAttributesFairHandOver(t *testing.T) {
	srv := redistest.Start(t)
	m := startMonitor(t, srv, true)
	ctx := testCtx(t)
	holder := distlock.New(redisstore.New(srv.Client(t)), distlock.WithLogger(nil))
	defer holder.Close()
	ev := newEventWaiter()
	waiter := distlock.New(redisstore.New(srv.Client(t)), distlock.WithLogger(nil), distlock.WithEventHandler(ev.handle))
	defer waiter.Close()

	a, err := holder.FairMutex("mon", distlock.WithTTL(time.Minute)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := waitQueued(t, waiter, ev, "mon", distlock.WithTTL(time.Minute))
	if err := a.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	b := <-got
	if err := b.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	const key = "distlock:{mon}"
	if err := m.await(ctx, func() bool {
		t, ok := m.tenures[tenureKey{key, b.Token()}]
		return ok && t.DelAt != 0
	}); err != nil {
		t.Fatalf("the feed never showed the second release: %v", err)
	}

	ta, _ := m.lookup(key, a.Token())
	tb, _ := m.lookup(key, b.Token())
	if ta.Owner == "" || tb.Owner == "" || ta.Owner == tb.Owner {
		t.Fatalf("owners of the two tenures: %q and %q", placeID(ta.Owner), placeID(tb.Owner))
	}
	if ta.By != "fair_acquire" || ta.Granted || !ta.Fair {
		t.Errorf("first tenure: by %q, granted %v, fair %v; want taken by its own fair_acquire", ta.By, ta.Granted, ta.Fair)
	}
	if ta.DelBy != "release" || ta.DelOwner != ta.Owner || ta.DelHold == "" {
		t.Errorf("first tenure deleted by %q of owner %s (hold %q); want the release of its owner %s", ta.DelBy, placeID(ta.DelOwner), ta.DelHold, placeID(ta.Owner))
	}
	if tb.By != "release" || !tb.Granted || !tb.Fair || tb.Start < ta.DelAt {
		t.Errorf("second tenure: by %q, granted %v, fair %v, start %d (first deleted at %d); want a grant inside the first owner's release, after its DEL",
			tb.By, tb.Granted, tb.Fair, tb.Start, ta.DelAt)
	}
	if tb.ExpMs <= 0 {
		t.Errorf("second tenure has no lease: %+v", tb)
	}
	if tb.DelBy != "release" || tb.DelOwner != tb.Owner {
		t.Errorf("second tenure deleted by %q of owner %s; want its own release", tb.DelBy, placeID(tb.DelOwner))
	}
	places, grants, srvc := monitors{m}.fair()
	if len(places) != 1 || places[0].Owner != tb.Owner || places[0].How != "granted" || places[0].Token != b.Token() || places[0].By != "release" {
		t.Errorf("places: %+v; want the waiter's, granted token %d by the release", places, b.Token())
	}
	if len(grants) != 2 || grants[0].Place || grants[0].By != "fair_acquire" || !grants[1].Place || grants[1].By != "release" ||
		grants[1].Token != b.Token() || len(grants[0].Ahead)+len(grants[1].Ahead) != 0 {
		t.Errorf("grants: %+v", grants)
	}
	if srvc.Overlaps != 0 || srvc.StaleDels != 0 || srvc.Tenures != 2 {
		t.Errorf("server checks: %+v", srvc)
	}

	// The same feed with a stranger's tenure written before the release:
	// the release's DEL is then someone else's lock, and the grant writes
	// a tenure while the stranger's lease runs. Both are flagged, so the
	// checks can fail.
	// The lines of the first release: the script call before the first
	// DEL of the lock, and its commands.
	m.mu.Lock()
	raw := append([]string(nil), m.raw...)
	m.mu.Unlock()
	var release []string
	for d, line := range raw {
		if !strings.Contains(line, ` lua] "DEL" "distlock:{mon}"`) {
			continue
		}
		top := d
		for top > 0 && strings.Contains(raw[top], " lua] ") {
			top--
		}
		for _, l := range raw[top:] {
			if len(release) > 0 && !strings.Contains(l, " lua] ") {
				break
			}
			release = append(release, l)
		}
		break
	}
	if len(release) == 0 {
		t.Fatalf("no release script with a DEL in the feed:\n%s", strings.Join(raw, "\n"))
	}
	ts := strings.Fields(release[0])[0]
	m2 := newMonitor(srv.Addr(), "distlock:")
	var top topCommand
	for _, l := range append([]string{
		ts + ` [0 127.0.0.1:1] "test"`,
		ts + ` [0 lua] "HSET" "distlock:{mon}" "owner" "stranger" "token" "1" "kind" "fair"`,
		ts + ` [0 lua] "PEXPIRE" "distlock:{mon}" "60000"`,
		ts + ` [0 127.0.0.1:1] "test"`,
		ts + ` [0 lua] "HSET" "distlock:{mon}" "owner" "intruder" "token" "2" "kind" "fair"`,
	}, release...) {
		m2.handle(l, &top)
	}
	_, _, s2 := monitors{m2}.fair()
	if s2.StaleDels != 1 || s2.Overlaps != 1 {
		t.Errorf("replayed feed: %d stale deletions, %d overlaps; want 1 and 1 (%v)", s2.StaleDels, s2.Overlaps, s2.Detail)
	}
}

// A holder whose lease runs out without a release (its process cannot
// reach Redis: its abandon is held back until the end): the first waiter
// takes the lock with its own refresh. The monitor sees no DEL, a tenure
// of the waiter by refresh.lua (not a grant by someone else), and no
// overlap.
func TestMonitorFairTakeAfterExpiry(t *testing.T) {
	srv := redistest.Start(t)
	m := startMonitor(t, srv, false)
	ctx := testCtx(t)
	gate := &scriptGate{script: "abandon", open: make(chan struct{})}
	rdb := srv.Client(t)
	rdb.AddHook(gate)
	holder := distlock.New(redisstore.New(rdb), distlock.WithLogger(nil))
	defer holder.Close()
	defer gate.release()
	ev := newEventWaiter()
	waiter := distlock.New(redisstore.New(srv.Client(t)), distlock.WithLogger(nil), distlock.WithEventHandler(ev.handle))
	defer waiter.Close()

	a, err := holder.FairMutex("exp", distlock.WithFixedLease(300*time.Millisecond)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := waitQueued(t, waiter, ev, "exp", distlock.WithTTL(time.Minute))
	b := <-got
	gate.release()
	if err := a.Unlock(ctx); !errors.Is(err, distlock.ErrLockLost) && !errors.Is(err, distlock.ErrNotHeld) {
		t.Errorf("unlock of the expired lease: %v", err)
	}
	if err := b.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	const key = "distlock:{exp}"
	if err := m.await(ctx, func() bool {
		t, ok := m.tenures[tenureKey{key, b.Token()}]
		return ok && t.DelAt != 0
	}); err != nil {
		t.Fatal(err)
	}
	ta, _ := m.lookup(key, a.Token())
	tb, _ := m.lookup(key, b.Token())
	if ta.DelAt != 0 {
		t.Errorf("the expired tenure was deleted by %q", ta.DelBy)
	}
	if tb.By != "refresh" || tb.Granted || tb.Start < ta.end() {
		t.Errorf("waiter's tenure: by %q, granted %v, start %d, holder's lease ended at %d; want taken by its own refresh after the lease", tb.By, tb.Granted, tb.Start, ta.end())
	}
	_, _, s := monitors{m}.fair()
	if s.Overlaps != 0 || s.StaleDels != 0 {
		t.Errorf("server checks: %+v", s)
	}
}
