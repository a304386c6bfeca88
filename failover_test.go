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
)

// Tests of the mutex across Sentinel failovers (issue 14). The group's
// sentinels use short timeouts (see redistest.StartSentinel): a planned
// failover takes about a second, an automatic one after the master is
// killed one to three seconds.

// failoverClient returns a distlock Client over a new go-redis failover
// client of g; events, if not nil, receives every event of the Client.
func failoverClient(t *testing.T, g *redistest.Sentinel, events func(distlock.Event)) *distlock.Client {
	t.Helper()
	opts := []distlock.Option{distlock.WithLogger(nil)}
	if events != nil {
		opts = append(opts, distlock.WithEventHandler(events))
	}
	c := distlock.New(redisstore.New(g.FailoverClient(t)), opts...)
	t.Cleanup(func() { c.Close() })
	return c
}

// fencedRegister is a resource that checks fencing tokens: it accepts a
// write only if its token is at least the highest token it has seen.
type fencedRegister struct {
	mu      sync.Mutex
	highest uint64
	value   string
}

var errStaleToken = errors.New("stale fencing token")

func (r *fencedRegister) write(token uint64, value string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if token < r.highest {
		return fmt.Errorf("%w: %d < %d", errStaleToken, token, r.highest)
	}
	r.highest, r.value = token, value
	return nil
}

// twoHolders runs issue 14's scenario 4 on a group with one replica: the
// replica's replication is cut, client A locks name through the failover
// client (the master acknowledges it), the master is killed, the sentinels
// promote the replica, which never saw A's lock, and client B locks the
// same name. If warm, the name was locked and unlocked once before the
// cut, so that the fencing counter reached the replica. It returns both
// leases, A's first.
func twoHolders(t *testing.T, warm bool) (a, b *distlock.Lease) {
	ctx := testCtx(t)
	g := redistest.StartSentinel(t, 1)
	master, replica := g.Servers()[0], g.Servers()[1]
	const name = "failover-two-holders"

	ca := failoverClient(t, g, nil)
	if warm {
		l, err := ca.Mutex(name).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("before the cut: token %d", l.Token())
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := g.AwaitSync(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := g.CutReplication(ctx, replica); err != nil {
		t.Fatal(err)
	}

	// The default TTL: the watchdog's first renewal comes 5 s or more
	// after the acquisition, after the failover below.
	a, err := ca.Mutex(name).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	key := redisstore.DefaultPrefix + "{" + name + "}"
	if n := master.Client(t).Exists(ctx, key).Val(); n != 1 {
		t.Fatalf("master: EXISTS %s = %d, want 1", key, n)
	}
	if n := replica.Client(t).Exists(ctx, key).Val(); n != 0 {
		t.Fatalf("replica: EXISTS %s = %d, want 0 (replication cut)", key, n)
	}

	start := time.Now()
	if err := master.Kill(); err != nil {
		t.Fatal(err)
	}
	promoted, err := g.AwaitMaster(ctx, master.Addr())
	if err != nil {
		t.Fatal(err)
	}
	if promoted != replica {
		t.Fatalf("promoted %s, want the replica %s", promoted.Addr(), replica.Addr())
	}
	t.Logf("master killed, replica promoted after %v", time.Since(start))

	cb := failoverClient(t, g, nil)
	b, err = cb.Mutex(name).TryLock(ctx)
	if err != nil {
		t.Fatalf("B: TryLock after the failover: %v", err)
	}
	if err := a.Context().Err(); err != nil {
		t.Fatalf("A's lease ended (%v) before B locked: no two holders to show", context.Cause(a.Context()))
	}
	t.Logf("two holders: A with token %d, B with token %d", a.Token(), b.Token())
	return a, b
}

// TestFailoverTwoHolders demonstrates the failure the seeds name (issue 14,
// point 4): a lock acknowledged by a master that failed before the lock
// reached its replica is taken again after the replica's promotion, and a
// resource that checks fencing tokens refuses the older holder's write.
func TestFailoverTwoHolders(t *testing.T) {
	a, b := twoHolders(t, false)
	// The fencing counter did not reach the replica either: a new one
	// starts at the promoted server's clock in µs, above A's token, which
	// was minted from the old master's clock earlier (same machine here).
	if b.Token() <= a.Token() {
		t.Fatalf("B's token %d is not above A's %d", b.Token(), a.Token())
	}
	var r fencedRegister
	if err := r.write(b.Token(), "B"); err != nil {
		t.Fatalf("B's write refused: %v", err)
	}
	err := r.write(a.Token(), "A")
	if !errors.Is(err, errStaleToken) {
		t.Fatalf("A's stale write: got %v, want it refused", err)
	}
	if r.value != "B" {
		t.Errorf("register = %q, want B's write", r.value)
	}
	t.Logf("A's write refused: %v", err)
}

// TestFailoverTokensIncrease is issue 14's point 3: tokens keep increasing
// across a failover. The fencing counter reached the replica before
// replication was cut, so the promoted replica's counter lags the old
// master's (before tokens were kept at or above the server clock, B's token
// repeated A's). A token is never below the minting server's clock in µs,
// so B's is above A's as long as the replica's clock is not behind the
// master's by more than the failover took (here both run on one machine).
func TestFailoverTokensIncrease(t *testing.T) {
	a, b := twoHolders(t, true)
	if b.Token() <= a.Token() {
		t.Fatalf("B's token %d is not above A's %d: a token was issued twice", b.Token(), a.Token())
	}
}

// TestFailoverHeldLock is issue 14's point 1: a lock held across a planned
// failover (SENTINEL FAILOVER, replica in sync) either survives, its holder
// renewing it on the new master, or its holder's lease context is cancelled
// with ErrLockLost; and a waiter blocked in Lock during the failover
// acquires once the holder unlocks.
func TestFailoverHeldLock(t *testing.T) {
	ctx := testCtx(t)
	g := redistest.StartSentinel(t, 1)
	const name = "failover-held"
	// A short TTL so that the watchdog renews every 0.5 to 1 s and the
	// test sees several renewals within a few seconds.
	const ttl = 3 * time.Second

	var mu sync.Mutex
	var failedOver bool
	renewedAfter := make(chan struct{}, 100)
	var aEvents []string
	t0 := time.Now()
	ca := failoverClient(t, g, func(e distlock.Event) {
		mu.Lock()
		defer mu.Unlock()
		s := fmt.Sprintf("%v %s", time.Since(t0).Round(time.Millisecond), e.Kind)
		if e.Err != nil {
			s += ": " + e.Err.Error()
		}
		aEvents = append(aEvents, s)
		if e.Kind == distlock.EventRenewed && failedOver {
			renewedAfter <- struct{}{}
		}
	})
	waiting := make(chan struct{}, 1)
	cb := failoverClient(t, g, func(e distlock.Event) {
		if e.Kind == distlock.EventWaiting {
			select {
			case waiting <- struct{}{}:
			default:
			}
		}
	})

	a, err := ca.Mutex(name, distlock.WithTTL(ttl)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		l   *distlock.Lease
		err error
		at  time.Time
	}
	bDone := make(chan result, 1)
	go func() {
		l, err := cb.Mutex(name, distlock.WithTTL(ttl)).Lock(ctx)
		bDone <- result{l, err, time.Now()}
	}()
	select {
	case <-waiting:
	case r := <-bDone:
		t.Fatalf("B: Lock returned while A holds the lock: %v, %v", r.l, r.err)
	case <-ctx.Done():
		t.Fatal("B never waited")
	}

	if err := g.AwaitSync(ctx); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	newMaster, err := g.Failover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("SENTINEL FAILOVER: new master %s after %v", newMaster.Addr(), time.Since(start))
	mu.Lock()
	failedOver = true
	mu.Unlock()

	// Either A renews three times on the new master or it loses the lock.
	outcome := ""
	for n := 0; n < 3 && outcome == ""; {
		select {
		case <-renewedAfter:
			n++
			if n == 3 {
				outcome = "survived"
			}
		case <-a.Context().Done():
			if cause := context.Cause(a.Context()); !errors.Is(cause, distlock.ErrLockLost) {
				t.Fatalf("A's lease ended with %v, want ErrLockLost", cause)
			}
			outcome = "lost"
		case r := <-bDone:
			t.Fatalf("B: Lock returned while A holds the lock: %v, %v", r.l, r.err)
		case <-ctx.Done():
			t.Fatal("A neither renewed nor lost the lock after the failover")
		}
	}
	if outcome == "survived" {
		if err := a.Context().Err(); err != nil {
			t.Fatalf("A's lease ended after renewing: %v", context.Cause(a.Context()))
		}
		if n := newMaster.Client(t).Exists(ctx, redisstore.DefaultPrefix+"{"+name+"}").Val(); n != 1 {
			t.Errorf("new master: lock key absent while A renews it")
		}
		// B's release subscription moved to the new master (go-redis
		// reconnects the pub/sub connection through the sentinels), so
		// A's release there wakes B: push, not the fallback.
		channel := redisstore.DefaultPrefix + "{" + name + "}:released"
		nm := newMaster.Client(t)
		for nm.PubSubNumSub(ctx, channel).Val()[channel] < 1 {
			if ctx.Err() != nil {
				t.Fatal("B's subscription never reached the new master")
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	mu.Lock()
	t.Logf("outcome: %s; A's events: %q", outcome, aEvents)
	mu.Unlock()

	unlocked := time.Now()
	err = a.Unlock(ctx)
	switch outcome {
	case "survived":
		if err != nil {
			t.Fatalf("A: Unlock: %v", err)
		}
	case "lost":
		if !errors.Is(err, distlock.ErrLockLost) {
			t.Errorf("A: Unlock after loss: got %v, want ErrLockLost", err)
		}
	}
	select {
	case r := <-bDone:
		if r.err != nil {
			t.Fatalf("B: Lock: %v", r.err)
		}
		t.Logf("B acquired %v after A unlocked; tokens: A %d, B %d", r.at.Sub(unlocked).Round(time.Millisecond), a.Token(), r.l.Token())
		if r.l.Token() <= a.Token() {
			t.Errorf("B's token %d is not above A's %d", r.l.Token(), a.Token())
		}
		if err := r.l.Unlock(ctx); err != nil {
			t.Errorf("B: Unlock: %v", err)
		}
	case <-time.After(ttl + 2*time.Second):
		t.Fatalf("B did not acquire within %v of A's unlock", ttl+2*time.Second)
	}
}

// TestFailoverReplicaAck is issue 14's point 5: with WithReplicaAck, an
// acquisition that the replica does not acknowledge is refused with
// ErrNotReplicated and rolled back on the master; one that it does
// acknowledge survives the master's death and the replica's promotion, so
// the second holder of TestFailoverTwoHolders does not appear. With no
// replica left to acknowledge them, the holder's renewals are not
// confirmed, and its lease context ends with ErrLockLost.
func TestFailoverReplicaAck(t *testing.T) {
	ctx := testCtx(t)
	g := redistest.StartSentinel(t, 1)
	master, replica := g.Servers()[0], g.Servers()[1]
	const name = "failover-ack"
	key := redisstore.DefaultPrefix + "{" + name + "}"

	var mu sync.Mutex
	var renewErrs []error
	lost := make(chan error, 1)
	ca := distlock.New(redisstore.New(g.FailoverClient(t), redisstore.WithReplicaAck(1, 300*time.Millisecond)), distlock.WithLogger(nil), distlock.WithEventHandler(func(e distlock.Event) {
		switch e.Kind {
		case distlock.EventRenewFailed:
			mu.Lock()
			renewErrs = append(renewErrs, e.Err)
			mu.Unlock()
		case distlock.EventLost:
			lost <- e.Err
		}
	}))
	t.Cleanup(func() { ca.Close() })
	m := ca.Mutex(name, distlock.WithTTL(3*time.Second))

	// Replication cut: the master takes the lock, the replica never
	// acknowledges it.
	if err := g.CutReplication(ctx, replica); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Lock(ctx); !errors.Is(err, distlock.ErrNotReplicated) || !errors.Is(err, distlock.ErrBackend) {
		t.Fatalf("Lock without a replica to acknowledge it: %v, want ErrNotReplicated", err)
	}
	// The engine releases what the refused acquisition took (in the
	// background: poll, bounded).
	mc := master.Client(t)
	for i := 0; mc.Exists(ctx, key).Val() != 0; i++ {
		if i == 500 {
			t.Fatalf("the unacknowledged lock is still on the master")
		}
		time.Sleep(10 * time.Millisecond)
	}

	if err := g.RestoreReplication(ctx, replica); err != nil {
		t.Fatal(err)
	}
	if err := g.AwaitSync(ctx); err != nil {
		t.Fatal(err)
	}
	a, err := m.Lock(ctx)
	if err != nil {
		t.Fatalf("Lock with the replica in sync: %v", err)
	}
	if n := replica.Client(t).Exists(ctx, key).Val(); n != 1 {
		t.Fatalf("replica: EXISTS %s = %d after an acknowledged acquisition, want 1", key, n)
	}

	if err := master.Kill(); err != nil {
		t.Fatal(err)
	}
	if promoted, err := g.AwaitMaster(ctx, master.Addr()); err != nil || promoted != replica {
		t.Fatalf("promoted %v, %v; want the replica", promoted, err)
	}
	cb := failoverClient(t, g, nil)
	if _, err := cb.Mutex(name).TryLock(ctx); !errors.Is(err, distlock.ErrNotAcquired) || errors.Is(err, distlock.ErrBackend) {
		t.Fatalf("B: TryLock after the failover: %v, want ErrNotAcquired (A's acknowledged lock survived)", err)
	}
	// The promoted master has no replica: A's renewals are applied but
	// never acknowledged, so its lease ends.
	select {
	case err := <-lost:
		if !errors.Is(err, distlock.ErrLockLost) {
			t.Fatalf("A lost its lock with %v, want ErrLockLost", err)
		}
	case <-ctx.Done():
		t.Fatal("A's lease did not end without replica acknowledgement")
	}
	if cause := context.Cause(a.Context()); !errors.Is(cause, distlock.ErrLockLost) {
		t.Fatalf("A's lease context: %v, want ErrLockLost", cause)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(renewErrs) == 0 || !errors.Is(renewErrs[0], distlock.ErrNotReplicated) {
		t.Fatalf("A's failed renewals: %v, want ErrNotReplicated", renewErrs)
	}
	t.Logf("A: token %d; %d renewals not acknowledged before the lease ended", a.Token(), len(renewErrs))
}
