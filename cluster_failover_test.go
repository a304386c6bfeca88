package distlock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/redisbackend"
	"github.com/distlock/distlock/redisstore"
	"github.com/distlock/distlock/redistest"
)

// Tests of the mutex across Redis Cluster slot migrations and failovers
// (issue 14, point 2). The clusters with replicas use a node timeout of
// 1 s: an automatic failover after a master is killed takes two to three
// seconds.

// clusterEvents counts a Client's events per lock name.
type clusterEvents struct {
	mu      sync.Mutex
	renewed map[string]int
	failed  int
	lost    int
	log     []string
	t0      time.Time
	changed chan struct{}
}

func newClusterEvents() *clusterEvents {
	return &clusterEvents{renewed: map[string]int{}, t0: time.Now(), changed: make(chan struct{}, 1)}
}

func (e *clusterEvents) handle(ev distlock.Event) {
	e.mu.Lock()
	switch ev.Kind {
	case distlock.EventRenewed:
		e.renewed[ev.Name]++
	case distlock.EventRenewFailed:
		e.failed++
	case distlock.EventLost:
		e.lost++
	}
	if ev.Kind != distlock.EventRenewed {
		s := fmt.Sprintf("%v %s %s", time.Since(e.t0).Round(time.Millisecond), ev.Name, ev.Kind)
		if ev.Err != nil {
			s += ": " + ev.Err.Error()
		}
		e.log = append(e.log, s)
	}
	e.mu.Unlock()
	select {
	case e.changed <- struct{}{}:
	default:
	}
}

// counts returns the renewals seen so far of each of names.
func (e *clusterEvents) counts(names ...string) map[string]int {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := map[string]int{}
	for _, n := range names {
		out[n] = e.renewed[n]
	}
	return out
}

// awaitRenewals waits until each name of since has been renewed n more
// times than since says, failing t if the lease of any of leases ends or
// ctx does first.
func (e *clusterEvents) awaitRenewals(ctx context.Context, t *testing.T, since map[string]int, n int, leases ...*distlock.Lease) {
	t.Helper()
	for {
		done := true
		for name, c := range e.counts(keys(since)...) {
			if c < since[name]+n {
				done = false
			}
		}
		if done {
			return
		}
		for _, l := range leases {
			if err := l.Context().Err(); err != nil {
				t.Fatalf("the lease of %s ended: %v; events %q", l.Name(), context.Cause(l.Context()), e.events())
			}
		}
		select {
		case <-e.changed:
		case <-ctx.Done():
			t.Fatalf("fewer than %d renewals of each of %v since %v: %v", n, keys(since), since, e.counts(keys(since)...))
		}
	}
}

func (e *clusterEvents) events() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.log...)
}

func keys(m map[string]int) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// lockKey is the Redis key of a mutex of the default prefix.
func lockKey(name string) string { return redisstore.DefaultPrefix + "{" + name + "}" }

// nameOn returns a lock name, not skip, whose slot is served by master.
func nameOn(ctx context.Context, t *testing.T, cl *redistest.Cluster, master *redistest.Server, skip string) string {
	t.Helper()
	for i := 0; i < 1000; i++ {
		name := fmt.Sprint("other-", i)
		m, err := cl.SlotMaster(ctx, redisbackend.Slot(name))
		if err != nil {
			t.Fatal(err)
		}
		if m == master && name != skip && redisbackend.Slot(name) != redisbackend.Slot(skip) {
			return name
		}
	}
	t.Fatalf("no name on %s", master.Addr())
	return ""
}

// migration returns the slot of name, its master, and another master to
// migrate it to.
func migration(ctx context.Context, t *testing.T, cl *redistest.Cluster, name string) (slot int, from, to *redistest.Server) {
	t.Helper()
	slot = redisbackend.Slot(name)
	from, err := cl.SlotMaster(ctx, slot)
	if err != nil {
		t.Fatal(err)
	}
	to = cl.Servers[0]
	if to == from {
		to = cl.Servers[1]
	}
	return slot, from, to
}

// TestClusterMigratedLock is issue 14's point 2, resharding: a lock held
// by the watchdog while its slot moves to another master (first half way,
// keys moved and the slot still migrating, so that requests for it get ASK;
// then to the end, so that they get MOVED) stays held with its token and
// keeps being renewed; a second lock of the same client, on another slot
// of the same source master, keeps being renewed too (its renewals now go
// to another node than the first's); and a waiter in another client,
// blocked in Lock on the migrated name, acquires once the holder unlocks.
func TestClusterMigratedLock(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	ctx := testCtx(t) // after the cluster started: that takes seconds on a loaded machine
	const name = "migrated"
	const ttl = 2 * time.Second // the watchdog renews several times a second
	slot, from, to := migration(ctx, t, cl, name)
	other := nameOn(ctx, t, cl, from, name)

	ev := newClusterEvents()
	ca := distlock.New(redisstore.New(cl.Client(t)), distlock.WithLogger(nil), distlock.WithEventHandler(ev.handle))
	defer ca.Close()
	a, err := ca.Mutex(name, distlock.WithTTL(ttl)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b, err := ca.Mutex(other, distlock.WithTTL(ttl)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}

	waiting := make(chan struct{})
	cw := distlock.New(redisstore.New(cl.Client(t)), distlock.WithLogger(nil), distlock.WithEventHandler(func(e distlock.Event) {
		if e.Kind == distlock.EventWaiting {
			close(waiting)
		}
	}))
	defer cw.Close()
	type result struct {
		l   *distlock.Lease
		err error
		at  time.Time
	}
	got := make(chan result, 1)
	go func() {
		l, err := cw.Mutex(name, distlock.WithTTL(ttl)).Lock(ctx)
		got <- result{l, err, time.Now()}
	}()
	select {
	case <-waiting:
	case r := <-got:
		t.Fatalf("waiter: Lock returned while the lock is held: %v, %v", r.l, r.err)
	}
	info, err := cw.Mutex(name).Inspect(ctx)
	if err != nil || info.Waiters != 1 {
		t.Fatalf("before the migration: Inspect %+v, %v; want 1 waiter", info, err)
	}
	ev.awaitRenewals(ctx, t, ev.counts(name, other), 1, a, b)

	// Half way: the keys are on the target, the source answers ASK.
	m, err := cl.StartMigration(ctx, slot, to)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.MoveKeys(ctx); err != nil {
		t.Fatal(err)
	}
	if n := to.Client(t).ClusterCountKeysInSlot(ctx, slot).Val(); n == 0 {
		t.Fatalf("target: no key of the slot after MoveKeys")
	}
	if n, err := from.Client(t).ClusterCountKeysInSlot(ctx, slot).Result(); n != 0 || err != nil {
		t.Fatalf("source: %d keys of the slot after MoveKeys (%v)", n, err)
	}
	ev.awaitRenewals(ctx, t, ev.counts(name, other), 2, a, b)

	// To the end: the target serves the slot, the source answers MOVED.
	if err := m.Finish(ctx); err != nil {
		t.Fatal(err)
	}
	ev.awaitRenewals(ctx, t, ev.counts(name, other), 2, a, b)
	if owner, err := cl.SlotMaster(ctx, slot); err != nil || owner != to {
		t.Fatalf("slot %d served by %v (%v), want %s", slot, owner, err, to.Addr())
	}
	if tok, err := to.Client(t).HGetAll(ctx, lockKey(name)).Result(); err != nil || len(tok) == 0 {
		t.Fatalf("target: lock hash %v, %v", tok, err)
	}
	info, err = cw.Mutex(name).Inspect(ctx)
	if err != nil || !info.Locked || info.Token != a.Token() {
		t.Fatalf("after the migration: Inspect %+v, %v; want held with token %d", info, err, a.Token())
	}
	t.Logf("after the migration: held with token %d, %v of lease left, %d subscribed waiters on the new master", info.Token, info.TTL, info.Waiters)
	if ev.lost != 0 {
		t.Fatalf("locks lost: %q", ev.events())
	}
	t.Logf("holder's events other than renewals: %q", ev.events())

	left := info.TTL
	unlocked := time.Now()
	if err := a.Unlock(ctx); err != nil {
		t.Fatalf("Unlock after the migration: %v", err)
	}
	select {
	case r := <-got:
		if r.err != nil {
			t.Fatalf("waiter: %v", r.err)
		}
		// With no subscription on the new master (see
		// TestClusterMigratedSubscription), the waiter is not notified: it
		// tries again when the holder's lease it last saw runs out, so it
		// acquires at most one lease after the unlock.
		wait := r.at.Sub(unlocked)
		how := "by a release notification"
		if info.Waiters == 0 {
			how = "by the lease-bounded fallback (no subscription on the new master)"
		}
		t.Logf("waiter acquired %v after the unlock (holder's lease had %v left): woken %s; tokens: holder %d, waiter %d",
			wait.Round(time.Millisecond), left.Round(time.Millisecond), how, a.Token(), r.l.Token())
		if r.l.Token() <= a.Token() {
			t.Errorf("waiter's token %d is not above the holder's %d", r.l.Token(), a.Token())
		}
		if err := r.l.Unlock(ctx); err != nil {
			t.Error(err)
		}
	case <-time.After(ttl + 2*time.Second):
		t.Fatalf("waiter did not acquire within %v of the unlock", ttl+2*time.Second)
	}
	if err := b.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestClusterMigratedSubscription: a waiter's sharded subscription to the
// release channel of a lock whose slot moves to another master follows
// the slot (issue 14, point 2, "sharded pub/sub follows the slot"): when
// the source master gives the slot up, Redis ends the subscriptions to the
// slot's shard channels (it sends SUNSUBSCRIBE), and the notifier
// subscribes them again on the slot's new master, so the release there
// wakes the waiter long before the 30 s lease would.
func TestClusterMigratedSubscription(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	ctx := testCtx(t) // after the cluster started: that takes seconds on a loaded machine
	const name = "migrated-sub"
	slot, _, to := migration(ctx, t, cl, name)
	ca := distlock.New(redisstore.New(cl.Client(t)), distlock.WithLogger(nil))
	defer ca.Close()
	a, err := ca.Mutex(name).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waiting := make(chan struct{})
	cw := distlock.New(redisstore.New(cl.Client(t)), distlock.WithLogger(nil), distlock.WithEventHandler(func(e distlock.Event) {
		if e.Kind == distlock.EventWaiting {
			close(waiting)
		}
	}))
	defer cw.Close()
	got := make(chan error, 1)
	go func() {
		l, err := cw.Mutex(name).Lock(ctx)
		if err == nil {
			err = l.Unlock(ctx)
		}
		got <- err
	}()
	<-waiting
	if err := cl.MigrateSlot(ctx, slot, to); err != nil {
		t.Fatal(err)
	}
	// Re-subscribing takes a moment and nothing signals it: poll, bounded.
	waitFor(t, func() bool {
		info, err := ca.Mutex(name).Inspect(ctx)
		return err == nil && info.Waiters == 1
	})
	// The default 30 s lease: only a notification wakes the waiter in time.
	if err := a.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter was not woken by the release")
	}
}

// heldAcrossFailover locks name with the TTL ttl on a cluster of three
// masters with a replica each, waits until the lock key reached the
// replica (WAIT), runs failover (which returns the slot's new master), and
// reports what became of the lock: "kept" once the holder renewed it twice
// after the failover with the same token on the new master, or "lost" when
// its lease context ended with ErrLockLost. Another client then locks a
// name of the same slot (the same name if the lock was lost).
func heldAcrossFailover(t *testing.T, name string, ttl time.Duration, failover func(ctx context.Context, cl *redistest.Cluster, master *redistest.Server) *redistest.Server) string {
	cl := redistest.StartCluster(t, 3, redistest.WithReplicas(1), redistest.WithArgs("--cluster-node-timeout", "1000"))
	ctx := testCtx(t) // after the cluster started: that takes seconds on a loaded machine
	slot := redisbackend.Slot(name)
	master, err := cl.SlotMaster(ctx, slot)
	if err != nil {
		t.Fatal(err)
	}
	replica, err := cl.SlotReplica(ctx, slot)
	if err != nil {
		t.Fatal(err)
	}
	ev := newClusterEvents()
	ca := distlock.New(redisstore.New(cl.Client(t)), distlock.WithLogger(nil), distlock.WithEventHandler(ev.handle))
	defer ca.Close()
	a, err := ca.Mutex(name, distlock.WithTTL(ttl)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := master.Client(t).Wait(ctx, 1, 5000).Result(); err != nil || n != 1 {
		t.Fatalf("WAIT 1 on the master: %d, %v", n, err)
	}
	start := time.Now()
	promoted := failover(ctx, cl, master)
	t.Logf("failover: %s replaced %s after %v", promoted.Addr(), master.Addr(), time.Since(start).Round(time.Millisecond))
	if promoted != replica {
		t.Fatalf("slot %d went to %s, want the replica %s", slot, promoted.Addr(), replica.Addr())
	}

	outcome := ""
	since := ev.counts(name)[name]
	for outcome == "" {
		select {
		case <-ev.changed:
			if ev.counts(name)[name] >= since+2 {
				outcome = "kept"
			}
		case <-a.Context().Done():
			if cause := context.Cause(a.Context()); !errors.Is(cause, distlock.ErrLockLost) {
				t.Fatalf("the lease ended with %v, want ErrLockLost", cause)
			}
			outcome = "lost"
		case <-ctx.Done():
			t.Fatalf("the holder neither renewed twice nor lost the lock after the failover; events %q", ev.events())
		}
	}
	t.Logf("outcome: %s (token %d) %v after the failover; holder's events other than renewals: %q",
		outcome, a.Token(), time.Since(start).Round(time.Millisecond), ev.events())

	cb := distlock.New(redisstore.New(cl.Client(t)), distlock.WithLogger(nil))
	defer cb.Close()
	switch outcome {
	case "kept":
		if err := a.Context().Err(); err != nil {
			t.Fatalf("the lease ended after renewing: %v", context.Cause(a.Context()))
		}
		info, err := cb.Mutex(name).Inspect(ctx)
		if err != nil || !info.Locked || info.Token != a.Token() {
			t.Fatalf("Inspect after the failover: %+v, %v; want held with token %d", info, err, a.Token())
		}
		if _, err := cb.Mutex(name).TryLock(ctx); !errors.Is(err, distlock.ErrNotAcquired) {
			t.Fatalf("another client: TryLock of the held name: %v, want ErrNotAcquired", err)
		}
		// Another name of the same slot.
		other := ""
		for i := 0; other == ""; i++ {
			if n := fmt.Sprint(name, "-", i); redisbackend.Slot(n) == slot {
				other = n
			}
		}
		l, err := cb.Mutex(other).TryLock(ctx)
		if err != nil {
			t.Fatalf("another client: TryLock %s (slot %d) after the failover: %v", other, slot, err)
		}
		t.Logf("another client locked %s in slot %d: token %d", other, slot, l.Token())
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := a.Unlock(ctx); err != nil {
			t.Fatalf("Unlock after the failover: %v", err)
		}
	case "lost":
		// The key may still be there (the holder stopped renewing it, its
		// lease runs out on the server): Lock, not TryLock.
		info, err := cb.Mutex(name).Inspect(ctx)
		t.Logf("after the loss, on the new master: locked %v, token %d, %v left (%v)", info.Locked, info.Token, info.TTL, err)
		l, err := cb.Mutex(name).Lock(ctx)
		if err != nil {
			t.Fatalf("another client: Lock %s after the loss: %v", name, err)
		}
		t.Logf("another client locked %s: token %d", name, l.Token())
		if l.Token() <= a.Token() {
			t.Errorf("the new token %d is not above the lost one %d", l.Token(), a.Token())
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return outcome
}

// TestClusterKilledMaster is issue 14's point 2, failover: the master of a
// held lock's slot is killed (its replica had acknowledged the lock) and
// the replica is promoted automatically, after 2 to 3 s. The holder keeps
// the lock, renewing it on the promoted replica: a renewal that cannot
// reach the dead master gives up after a second and has go-redis reload
// its slot map, so a retry after the promotion finds the new master.
func TestClusterKilledMaster(t *testing.T) {
	// A TTL that leaves time for the failover and a few retries after it.
	outcome := heldAcrossFailover(t, "cluster-killed", 8*time.Second, func(ctx context.Context, cl *redistest.Cluster, master *redistest.Server) *redistest.Server {
		slot := redisbackend.Slot("cluster-killed")
		if err := master.Kill(); err != nil {
			t.Fatal(err)
		}
		m, err := cl.AwaitSlotMaster(ctx, slot, master)
		if err != nil {
			t.Fatal(err)
		}
		return m
	})
	if outcome != "kept" {
		t.Fatalf("the lock was %s across the failover to a replica that had it", outcome)
	}
}

// TestClusterPlannedFailover: a held lock across CLUSTER FAILOVER (the
// replica in sync takes over, the old master becomes its replica) survives:
// the holder keeps renewing it on the new master.
func TestClusterPlannedFailover(t *testing.T) {
	outcome := heldAcrossFailover(t, "cluster-planned", 3*time.Second, func(ctx context.Context, cl *redistest.Cluster, master *redistest.Server) *redistest.Server {
		m, err := cl.FailoverReplica(ctx, master)
		if err != nil {
			t.Fatal(err)
		}
		return m
	})
	if outcome != "kept" {
		t.Fatalf("the lock was %s across a planned failover", outcome)
	}
}

// While a slot is half migrated, a lock whose keys are split between the
// two nodes cannot be taken (Redis answers TRYAGAIN to the multi-key
// script, having run nothing): TryLock reports ErrNotAcquired, not a
// backend failure, and a Lock waits and takes the lock once the migration
// is finished.
func TestClusterLockDuringMigration(t *testing.T) {
	cl := redistest.StartCluster(t, 2)
	ctx := testCtx(t) // after the cluster started: that takes seconds on a loaded machine
	const name = "half-migrated"
	slot, _, to := migration(ctx, t, cl, name)
	c := distlock.New(redisstore.New(cl.Client(t)), distlock.WithLogger(nil))
	defer c.Close()
	// The fencing counter exists, the lock does not: once the counter has
	// moved to the target, the lock script's keys are split.
	l, err := c.Mutex(name).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	m, err := cl.StartMigration(ctx, slot, to)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.MoveKeys(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Mutex(name).TryLock(ctx); !errors.Is(err, distlock.ErrNotAcquired) || errors.Is(err, distlock.ErrBackend) {
		t.Fatalf("TryLock on a half-migrated slot: %v, want ErrNotAcquired", err)
	}
	got := make(chan error, 1)
	var held *distlock.Lease
	go func() {
		var err error
		held, err = c.Mutex(name).Lock(ctx)
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("Lock returned while the slot was half migrated: %v", err)
	case <-time.After(200 * time.Millisecond): // a few retries (not a synchronisation: either outcome of the race is checked)
	}
	if err := m.Finish(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("Lock after the migration: %v", err)
	}
	if held.Token() <= l.Token() {
		t.Fatalf("token %d after the migration is not above %d", held.Token(), l.Token())
	}
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}
