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

// On Redis Cluster: locks spread over the nodes, waiters are woken by
// sharded pub/sub, renewals are batched per slot (a CROSSSLOT batch would
// fail them), and List scans every master.
func TestCluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	ev := newEvents()
	c := distlock.New(redisstore.New(cl.Client(t)), distlock.WithLogger(nil), distlock.WithEventHandler(ev.handle))
	defer c.Close()
	other := distlock.New(redisstore.New(cl.Client(t)), distlock.WithLogger(nil))
	defer other.Close()
	ctx := testCtx(t)

	const n = 60
	var leases []*distlock.Lease
	for i := 0; i < n; i++ {
		l, err := c.Mutex(fmt.Sprint("c", i), distlock.WithTTL(300*time.Millisecond)).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		leases = append(leases, l)
	}
	ev.await(distlock.EventRenewed, 3*n)
	if f := ev.count(distlock.EventRenewFailed) + ev.count(distlock.EventLost); f != 0 {
		t.Fatalf("%d renewal failures or losses on the cluster", f)
	}
	names, err := other.List(ctx, "c*")
	if err != nil || len(names) != n {
		t.Fatalf("List found %d of %d locks: %v", len(names), n, err)
	}

	// A waiter in another client is woken by the release (the lease is 30 s:
	// without the notification it would sleep past its 10 s deadline).
	hold, err := c.Mutex("handover").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	woken := make(chan struct{})
	w := distlock.New(redisstore.New(cl.Client(t)), distlock.WithLogger(nil), distlock.WithEventHandler(func(e distlock.Event) {
		if e.Kind == distlock.EventWaiting {
			close(woken)
		}
	}))
	defer w.Close()
	go func() {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		l, err := w.Mutex("handover").Lock(wctx)
		if err == nil {
			err = l.Unlock(ctx)
		}
		waited <- err
	}()
	<-woken
	info, err := c.Mutex("handover").Inspect(ctx)
	if err != nil || info.Waiters != 1 {
		t.Fatalf("Inspect: %+v, %v; want 1 waiter", info, err)
	}
	if err := hold.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-waited; err != nil {
		t.Fatalf("waiter: %v", err)
	}
	for _, l := range leases {
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// Item 3 of the hardening issue: on a Cluster, a master that stops
// answering (SIGSTOP, for longer than the lease but shorter than the
// cluster's node timeout) costs only the locks it serves. Renewals go to
// each master in a pipeline of its own and each lock's outcome counts on
// its own: the locks on the healthy masters keep their leases and their
// keys, the paused master's locks are lost (their contexts end).
func TestClusterPausedMasterCostsOnlyItsLocks(t *testing.T) {
	// A node timeout well beyond the pause: the cluster must not declare
	// the paused master failed (then every master refuses writes).
	cl := redistest.StartCluster(t, 3, redistest.WithArgs("--cluster-node-timeout", "30000"))
	cc := cl.Client(t)
	c := distlock.New(redisstore.New(cc), distlock.WithLogger(nil))
	defer c.Close()
	ctx := testCtx(t)

	const lease = time.Second
	paused := cl.Servers[1]
	type held struct {
		l      *distlock.Lease
		paused bool
	}
	var locks []held
	for i := 0; i < 30; i++ {
		name := fmt.Sprint("p", i)
		node, err := cc.MasterForKey(ctx, redisstore.DefaultPrefix+"{"+name+"}")
		if err != nil {
			t.Fatal(err)
		}
		l, err := c.Mutex(name, distlock.WithTTL(lease)).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		locks = append(locks, held{l, node.Options().Addr == paused.Addr()})
	}
	var onPaused int
	for _, h := range locks {
		if h.paused {
			onPaused++
		}
	}
	if onPaused == 0 || onPaused == len(locks) {
		t.Fatalf("%d of %d locks on the paused master: the names do not spread", onPaused, len(locks))
	}

	if err := paused.Pause(); err != nil {
		t.Fatal(err)
	}
	for _, h := range locks { // every lock of the paused master ends
		if h.paused {
			select {
			case <-h.l.Context().Done():
			case <-time.After(3 * lease):
				t.Fatalf("the lease of %s on the paused master did not end", h.l.Name())
			}
		}
	}
	// Two more leases of renewals on the healthy masters while it stays
	// paused.
	ended := make(chan *distlock.Lease, len(locks))
	for _, h := range locks {
		if !h.paused {
			stop := context.AfterFunc(h.l.Context(), func() { ended <- h.l })
			defer stop()
		}
	}
	select {
	case l := <-ended:
		t.Errorf("the lease of %s on a healthy master ended: %v", l.Name(), context.Cause(l.Context()))
	case <-time.After(2 * lease):
	}
	if err := paused.Resume(); err != nil {
		t.Fatal(err)
	}
	for _, h := range locks {
		live := h.l.Context().Err() == nil
		if live == h.paused {
			t.Errorf("%s (on the paused master: %v): lease context live %v", h.l.Name(), h.paused, live)
		}
		if !h.paused {
			if n := cc.Exists(ctx, redisstore.DefaultPrefix+"{"+h.l.Name()+"}").Val(); n != 1 {
				t.Errorf("the key of %s on a healthy master is gone", h.l.Name())
			}
			if err := h.l.Unlock(ctx); err != nil {
				t.Errorf("Unlock %s: %v", h.l.Name(), err)
			}
		}
	}
}

// The fair mutex on Redis Cluster: for names spread over the masters, two
// waiters in two clients keep their places through refreshes batched per
// slot (the queue timeout is short, so places would expire without them),
// and are granted the lock in order by the releases, over sharded pub/sub.
func TestClusterFair(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	cc := cl.Client(t)
	holder := distlock.New(redisstore.New(cc), distlock.WithLogger(nil))
	defer holder.Close()
	ctx := testCtx(t)
	const names = 9
	opts := []distlock.MutexOption{distlock.WithQueueTimeout(600 * time.Millisecond)}
	var held []*distlock.Lease
	for i := 0; i < names; i++ {
		l, err := holder.FairMutex(fmt.Sprint("f", i), opts...).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, l)
	}
	order := make(chan string, 2*names)
	var unlocked sync.WaitGroup // the waiters' Unlocks end before their clients close
	var waiters []*distlock.Client
	for w := 0; w < 2; w++ {
		queued := make(chan struct{}, names)
		c := distlock.New(redisstore.New(cl.Client(t)), distlock.WithLogger(nil), distlock.WithEventHandler(func(e distlock.Event) {
			if e.Kind == distlock.EventWaiting {
				queued <- struct{}{}
			}
		}))
		defer c.Close()
		waiters = append(waiters, c)
		for i := 0; i < names; i++ {
			unlocked.Add(1)
			go func() {
				defer unlocked.Done()
				name := fmt.Sprint("f", i)
				l, err := c.FairMutex(name, opts...).Lock(ctx)
				if err != nil {
					t.Error(err)
					order <- ""
					return
				}
				order <- fmt.Sprint(name, " ", w)
				if err := l.Unlock(ctx); err != nil {
					t.Error(err)
				}
			}()
		}
		for i := 0; i < names; i++ {
			<-queued // every place of this client is made before the next client's
		}
	}
	queue := func(i int) []string {
		return cc.ZRange(ctx, redisstore.DefaultPrefix+"{"+fmt.Sprint("f", i)+"}:q", 0, -1).Val()
	}
	var before [names][]string
	for i := range names {
		before[i] = queue(i)
	}
	time.Sleep(2 * time.Second) // more than three queue timeouts: only refreshes keep the places
	for i := range names {
		if after := queue(i); fmt.Sprint(after) != fmt.Sprint(before[i]) || len(after) != 2 {
			t.Fatalf("queue of f%d changed from %v to %v: places expired", i, before[i], after)
		}
	}
	for _, l := range held {
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	next := map[string]int{}
	for range 2 * names {
		got := <-order
		var name string
		var w int
		if _, err := fmt.Sscan(got, &name, &w); err != nil {
			t.Fatalf("waiter failed: %q", got)
		}
		if w != next[name] {
			t.Fatalf("%s granted to waiter %d before waiter %d", name, w, next[name])
		}
		next[name]++
	}
	unlocked.Wait()
}

// A multi-lock on a Cluster whose members live in several slots: taken
// slot by slot, and when a later member is refused, the members taken
// before it are released at once (nothing is held while waiting); it gets
// the set once the refusing member is free.
func TestClusterMultiMutex(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	cc := cl.Client(t)
	// The clean-up of the members a refused attempt took is slow (a slow
	// network): TryLock must return only once they are free all the same.
	h := newInterceptor(t)
	cc.AddHook(h)
	c := distlock.New(redisstore.New(cc), distlock.WithLogger(nil))
	defer c.Close()
	warm(t, c)
	h.load(t, cc)
	other := distlock.New(redisstore.New(cl.Client(t)), distlock.WithLogger(nil))
	defer other.Close()
	ctx := testCtx(t)
	names := []string{"m1", "m2", "m3", "m4"}
	slots := map[int]bool{}
	for _, n := range names {
		slots[redisSlot(t, cc, n)] = true
	}
	if len(slots) < 2 {
		t.Fatalf("the members share one slot: %v", slots)
	}
	held, err := other.Mutex("m4").Lock(ctx) // the last in canonical order
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names[:3] {
		h.slow(n, "abandon", 1, 300*time.Millisecond)
	}
	if _, err := c.MultiMutex(names).TryLock(ctx); !errors.Is(err, distlock.ErrNotAcquired) {
		t.Fatalf("TryLock with a member held: %v", err)
	}
	for _, n := range names[:3] {
		if info, err := other.Mutex(n).Inspect(ctx); err != nil || info.Locked {
			t.Fatalf("member %s after the refused TryLock returned: %+v, %v: want free", n, info, err)
		}
	}
	got := make(chan error, 1)
	go func() {
		l, err := c.MultiMutex(names).Lock(ctx)
		if err == nil {
			if len(l.Tokens()) != 4 {
				err = fmt.Errorf("tokens %v", l.Tokens())
			} else {
				err = l.Unlock(ctx)
			}
		}
		got <- err
	}()
	waitFor(t, func() bool { info, _ := other.Mutex("m4").Inspect(ctx); return info.Waiters == 1 })
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
}

// redisSlot is the Cluster slot of a lock's keys, as the server says.
func redisSlot(t *testing.T, cc *redis.ClusterClient, name string) int {
	t.Helper()
	slot, err := cc.ClusterKeySlot(t.Context(), redisstore.DefaultPrefix+"{"+name+"}").Result()
	if err != nil {
		t.Fatal(err)
	}
	return int(slot)
}
