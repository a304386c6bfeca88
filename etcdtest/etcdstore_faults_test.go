package etcdtest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/etcdstore"
	"github.com/distlock/distlock/etcdtest"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// lockClient returns a distlock Client on etcd through cli. Its Close is
// left to the test (a client cut off may not close cleanly).
func lockClient(t *testing.T, cli *clientv3.Client) *distlock.Client {
	t.Helper()
	c := distlock.New(etcdstore.New(cli), distlock.WithLogger(nil))
	if err := c.Err(); err != nil {
		t.Fatal(err)
	}
	return c
}

// waitingClient is lockClient with a channel that gets the name of each
// lock a queued kind's Lock waits for, once its acquisition has returned
// queued (EventWaiting). A place is visible to others before that: a test
// that cancels the waiter or cuts its connections once it sees the place
// acts while the acquisition's reply may still be on its way.
func waitingClient(t *testing.T, cli *clientv3.Client) (*distlock.Client, <-chan string) {
	t.Helper()
	waiting := make(chan string, 1000)
	c := distlock.New(etcdstore.New(cli), distlock.WithLogger(nil),
		distlock.WithEventHandler(func(ev distlock.Event) {
			if ev.Kind != distlock.EventWaiting {
				return
			}
			select {
			case waiting <- ev.Name:
			default: // a handler must not block
				t.Error("too many waits not taken from the channel")
			}
		}))
	if err := c.Err(); err != nil {
		t.Fatal(err)
	}
	return c, waiting
}

// awaitWaiting waits for the next name on waiting (see waitingClient).
func awaitWaiting(t *testing.T, ctx context.Context, waiting <-chan string) {
	t.Helper()
	select {
	case <-waiting:
	case <-ctx.Done():
		t.Fatal("the waiter never reported waiting")
	}
}

// closeAtEnd closes cs when the test ends: each Close must succeed.
func closeAtEnd(t *testing.T, cs ...*distlock.Client) {
	t.Cleanup(func() {
		for _, c := range cs {
			if err := c.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		}
	})
}

// TestEtcdHolderCutOff: a holder whose member is frozen (its proxy holds
// every byte) cannot renew: its lease context ends, with ErrLockLost,
// before a client of another member takes the lock, which it does once
// the holder's etcd lease has run out, with a higher token.
func TestEtcdHolderCutOff(t *testing.T) {
	c := etcdtest.Start(t, 3)
	ms := c.Members()
	proxy := ms[0].Proxy()
	a := lockClient(t, etcdtest.Dial(t, ms[0].ProxyEndpoint()))
	b := lockClient(t, ms[1].Client(t))
	t.Cleanup(func() {
		proxy.Resume() // so that a's late requests end, and its Close with them
		_ = a.Close()
		if err := b.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := a.Mutex("cut", distlock.WithTTL(8*time.Second)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	proxy.Pause()
	l2, err := b.Mutex("cut").Lock(ctx)
	if err != nil {
		t.Fatalf("Lock from another member while the holder is cut off: %v", err)
	}
	if l.Context().Err() == nil {
		t.Error("a client of another member took the lock while the cut-off holder's lease context was live")
	}
	if cause := context.Cause(l.Context()); !errors.Is(cause, distlock.ErrLockLost) {
		t.Errorf("the cut-off holder's cause: %v, want ErrLockLost", cause)
	}
	if l2.Token() <= l.Token() {
		t.Errorf("token %d after the loss, not above %d", l2.Token(), l.Token())
	}
	if err := l2.Unlock(ctx); err != nil {
		t.Error(err)
	}
}

// TestEtcdLeaderKilledWhileHeld: the leader crashes while a lock is held;
// the others elect a new one, and the lock stays held by its holder (its
// lease context live, its renewals going on), refused to others, until it
// is unlocked.
func TestEtcdLeaderKilledWhileHeld(t *testing.T) {
	c := etcdtest.Start(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lead, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var others []string
	for _, m := range c.Members() {
		if m != lead {
			others = append(others, m.Endpoint())
		}
	}
	a := lockClient(t, etcdtest.Dial(t, c.Endpoints()...))
	b := lockClient(t, etcdtest.Dial(t, others...))
	closeAtEnd(t, a, b)
	l, err := a.Mutex("kept", distlock.WithTTL(6*time.Second)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	lead.Kill()
	if _, err := c.Leader(ctx); err != nil {
		t.Fatalf("no new leader: %v", err)
	}
	// Two leases' worth of renewals after the new leader.
	for end := time.Now().Add(12 * time.Second); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
		_, err := b.Mutex("kept").TryLock(ctx)
		switch {
		case errors.Is(err, distlock.ErrBackend):
			continue // a request that met the election
		case !errors.Is(err, distlock.ErrNotAcquired):
			t.Fatalf("TryLock while held, the old leader dead: %v, want ErrNotAcquired", err)
		}
		if err := l.Context().Err(); err != nil {
			t.Fatalf("the holder's lease ended after the leader was killed: %v", context.Cause(l.Context()))
		}
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	l2, err := b.Mutex("kept").TryLock(ctx)
	if err != nil {
		t.Fatalf("TryLock after Unlock: %v", err)
	}
	if l2.Token() <= l.Token() {
		t.Errorf("token %d, not above %d", l2.Token(), l.Token())
	}
	if err := l2.Unlock(ctx); err != nil {
		t.Error(err)
	}
}

// TestEtcdForceUnlockTellsTheHolder: a holder whose lock is deleted
// (ForceUnlock) or revoked from another process learns of it at once,
// through its store's watch of revocation notices, not at its next
// renewal (with a lease of a minute, 10 s away at the soonest).
func TestEtcdForceUnlockTellsTheHolder(t *testing.T) {
	c := etcdtest.Start(t, 1)
	a := lockClient(t, c.Client(t))
	b := lockClient(t, c.Client(t))
	closeAtEnd(t, a, b)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, how := range []string{"ForceUnlock", "Revoke"} {
		name := "told-" + how
		l, err := a.Mutex(name, distlock.WithTTL(time.Minute)).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if how == "ForceUnlock" {
			_, err = b.Mutex(name).ForceUnlock(ctx)
		} else {
			_, err = b.Mutex(name).Revoke(ctx)
		}
		if err != nil {
			t.Fatalf("%s: %v", how, err)
		}
		select {
		case <-l.Context().Done():
			if cause := context.Cause(l.Context()); !errors.Is(cause, distlock.ErrLockLost) {
				t.Errorf("%s: the holder's cause %v, want ErrLockLost", how, cause)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: the holder's lease context is live 5 s later: its process was not told", how)
		}
		if err := l.Unlock(ctx); err != nil && !errors.Is(err, distlock.ErrLockLost) {
			t.Errorf("%s: Unlock: %v", how, err)
		}
	}
}

// TestEtcdHolderPartitioned: the holder's member is cut off from the
// others (a partition: its client still reaches it). The holder cannot
// renew through a member without a quorum: its lease context ends, with
// ErrLockLost, before a client on the majority side takes the lock, once
// the lease has run out there.
func TestEtcdHolderPartitioned(t *testing.T) {
	c := etcdtest.Start(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The holder's member is a follower: the majority keeps its leader,
	// and serves the other client all along.
	lead, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var minority *etcdtest.Member
	var majority []string
	for _, m := range c.Members() {
		if m != lead && minority == nil {
			minority = m
		} else {
			majority = append(majority, m.Endpoint())
		}
	}
	a := lockClient(t, minority.Client(t))
	b := lockClient(t, etcdtest.Dial(t, majority...))
	t.Cleanup(func() {
		_ = c.Heal(minority)
		_ = a.Close() // its requests during the partition may fail
		if err := b.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	l, err := a.Mutex("partitioned", distlock.WithTTL(8*time.Second)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Isolate(minority); err != nil {
		t.Fatal(err)
	}
	l2, err := b.Mutex("partitioned").Lock(ctx)
	if err != nil {
		t.Fatalf("Lock on the majority side: %v", err)
	}
	if l.Context().Err() == nil {
		t.Error("the majority side took the lock while the partitioned holder's lease context was live")
	}
	if cause := context.Cause(l.Context()); !errors.Is(cause, distlock.ErrLockLost) {
		t.Errorf("the partitioned holder's cause: %v, want ErrLockLost", cause)
	}
	if l2.Token() <= l.Token() {
		t.Errorf("token %d after the partition, not above %d", l2.Token(), l.Token())
	}
	if err := l2.Unlock(ctx); err != nil {
		t.Error(err)
	}
}
