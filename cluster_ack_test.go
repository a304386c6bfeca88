package distlock_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/redisbackend"
	"github.com/distlock/distlock/redisstore"
	"github.com/distlock/distlock/redistest"
)

// Tests of replica acknowledgement (WithReplicaAck) on a Redis Cluster:
// WAIT runs on the connection of the script, at the master of its slot,
// and counts that master's replicas. A replica is cut off by pausing it
// (SIGSTOP): it then acknowledges nothing.

// nameWith returns the first lock name prefix-i whose slot master serves.
func nameWith(ctx context.Context, t *testing.T, cl *redistest.Cluster, master *redistest.Server, prefix string) string {
	t.Helper()
	for i := 0; i < 1000; i++ {
		name := fmt.Sprint(prefix, "-", i)
		m, err := cl.SlotMaster(ctx, redisbackend.Slot(name))
		if err != nil {
			t.Fatal(err)
		}
		if m == master {
			return name
		}
	}
	t.Fatalf("no name %s-i on %s", prefix, master.Addr())
	return ""
}

// onReplica fails t unless the replica of the master of name's slot has
// the lock hash of name.
func onReplica(ctx context.Context, t *testing.T, cl *redistest.Cluster, name string) {
	t.Helper()
	r, err := cl.SlotReplica(ctx, redisbackend.Slot(name))
	if err != nil {
		t.Fatal(err)
	}
	conn := r.Client(t).Conn() // a cluster replica serves reads after READONLY
	defer conn.Close()
	if err := conn.ReadOnly(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := conn.Exists(ctx, lockKey(name)).Result(); n != 1 || err != nil {
		t.Fatalf("%s: the replica %s does not have the lock taken with acknowledgement (%v)", name, r.Addr(), err)
	}
}

// TestClusterReplicaAck: on a Cluster of two masters with a replica each,
// locks of every kind are taken with acknowledgement (by their own script,
// or granted by another client's release) and their slot's replica has
// them; renewals keep locks held on both masters across several leases.
// When the replica of one master stops acknowledging (paused), the lock
// held there is lost with ErrLockLost while the other master's lock is
// still renewed, and acquisitions there fail with ErrNotReplicated and
// leave nothing (a client without acknowledgement gets the lock), while
// acquisitions on the other master go on.
func TestClusterReplicaAck(t *testing.T) {
	cl := redistest.StartCluster(t, 2, redistest.WithReplicas(1))
	ctx := testCtx(t) // after the cluster started: that takes seconds on a loaded machine
	m0, m1 := cl.Servers[0], cl.Servers[1]
	ca, la := ackClient(t, cl.Client(t))
	cb := distlock.New(redisstore.New(cl.Client(t)), distlock.WithLogger(nil))
	defer cb.Close()
	const ttl = 6 * ackTimeout // renewed every 300 to 600 ms
	opts := []distlock.MutexOption{distlock.WithTTL(ttl)}

	a := nameWith(ctx, t, cl, m0, "held")
	b := nameWith(ctx, t, cl, m1, "held")
	la0, err := ca.Mutex(a, opts...).Lock(ctx)
	if err != nil {
		t.Fatalf("Mutex with acknowledgement: %v", err)
	}
	lb1, err := ca.FairMutex(b, opts...).Lock(ctx)
	if err != nil {
		t.Fatalf("FairMutex with acknowledgement: %v", err)
	}
	onReplica(ctx, t, cl, a)
	onReplica(ctx, t, cl, b)
	for kind, lock := range map[string]func(name string) (*distlock.Lease, error){
		"multi": func(name string) (*distlock.Lease, error) {
			return ca.MultiMutex([]string{name, nameWith(ctx, t, cl, m1, name)}).Lock(ctx)
		},
		"read":      func(name string) (*distlock.Lease, error) { return ca.RWMutex(name).RLock(ctx) },
		"semaphore": func(name string) (*distlock.Lease, error) { return ca.Semaphore(name, 2).Acquire(ctx, 1) },
		"election":  func(name string) (*distlock.Lease, error) { return ca.Election(name).Campaign(ctx, "v") },
	} {
		name := nameWith(ctx, t, cl, m0, kind)
		l, err := lock(name)
		if err != nil {
			t.Fatalf("%s with acknowledgement: %v", kind, err)
		}
		onReplica(ctx, t, cl, name)
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// A fair mutex granted to the client by another's release.
	f := nameWith(ctx, t, cl, m1, "granted")
	hb, err := cb.FairMutex(f).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := lockAsync(ctx, t, la, f, fairLock, ca)
	if err := hb.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.err != nil {
		t.Fatalf("FairMutex granted by a release, with acknowledgement: %v", r.err)
	}
	onReplica(ctx, t, cl, f)
	if err := r.l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}

	// Renewed on both masters, each acknowledged by its replica, for more
	// than a lease.
	mark := la.mark()
	la.await(ctx, t, mark, distlock.EventRenewed, a, 6)
	la.await(ctx, t, mark, distlock.EventRenewed, b, 6)
	for _, l := range []*distlock.Lease{la0, lb1} {
		if err := l.Context().Err(); err != nil {
			t.Fatalf("%s: lease ended: %v", l.Name(), context.Cause(l.Context()))
		}
	}
	if failed := append(la.since(0, distlock.EventRenewFailed, a), la.since(0, distlock.EventRenewFailed, b)...); len(failed) != 0 {
		t.Errorf("failed renewals with the replicas in sync: %v", failed)
	}

	// m0's replica stops acknowledging. (A paused node holds up the
	// cluster's helpers that ask every node: names are chosen before.)
	cut := append([]ackKind{plainKind}, ackKinds...)
	var onM0, onM1 []string
	for _, k := range cut {
		onM0 = append(onM0, nameWith(ctx, t, cl, m0, "cut-"+k.kind))
		onM1 = append(onM1, nameWith(ctx, t, cl, m1, "cut-"+k.kind))
	}
	r0, err := cl.SlotReplica(ctx, redisbackend.Slot(a))
	if err != nil {
		t.Fatal(err)
	}
	if err := r0.Pause(); err != nil {
		t.Fatal(err)
	}
	defer r0.Resume()
	lost := la.await(ctx, t, mark, distlock.EventLost, a, 1)
	if !errors.Is(lost[0].Err, distlock.ErrLockLost) || !errors.Is(context.Cause(la0.Context()), distlock.ErrLockLost) {
		t.Fatalf("%s: lost with %v (lease context: %v), want ErrLockLost", a, lost[0].Err, context.Cause(la0.Context()))
	}
	if failed := la.since(mark, distlock.EventRenewFailed, a); len(failed) == 0 || !errors.Is(failed[0].Err, distlock.ErrNotReplicated) {
		t.Fatalf("%s: failed renewals %v, want ErrNotReplicated", a, failed)
	}
	after := la.mark()
	la.await(ctx, t, after, distlock.EventRenewed, b, 2)
	if err := lb1.Context().Err(); err != nil {
		t.Fatalf("%s, on the other master: lease ended: %v", b, context.Cause(lb1.Context()))
	}

	for i, k := range cut {
		kind, name := k.kind, onM0[i]
		if _, err := k.lock(ctx, ca, name); !errors.Is(err, distlock.ErrNotReplicated) {
			t.Fatalf("%s on the master whose replica is paused: %v, want ErrNotReplicated", kind, err)
		}
		l, err := k.lock(ctx, cb, name) // once the refused one is rolled back
		if err != nil {
			t.Fatal(err)
		}
		k.expectHolders(ctx, t, cb, name, l.Token())
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		k.expectHolders(ctx, t, cb, name)

		if l, err = k.lock(ctx, ca, onM1[i]); err != nil {
			t.Fatalf("%s on the other master: %v", kind, err)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := lb1.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// sameSlot returns a lock name other than name in name's slot.
func sameSlot(t *testing.T, name string) string {
	slot := redisbackend.Slot(name)
	for i := 0; i < 1<<20; i++ {
		if other := fmt.Sprint("slot-", i); other != name && redisbackend.Slot(other) == slot {
			return other
		}
	}
	t.Fatalf("no other name in slot %d", slot)
	return ""
}

// TestClusterReplicaAckMigration: with replica acknowledgement, a lock
// held while its slot moves to another master (half way: its keys moved,
// the source answers ASK; then to the end: MOVED) keeps being renewed,
// each renewal following the redirection to the node that has the lock
// and acknowledged by that node's replica. A new lock in the slot cannot
// be taken half way (TRYAGAIN: ErrNotAcquired, never a success without
// acknowledgement), and is taken, acknowledged, once the slot has moved.
func TestClusterReplicaAckMigration(t *testing.T) {
	cl := redistest.StartCluster(t, 2, redistest.WithReplicas(1))
	ctx := testCtx(t) // after the cluster started: that takes seconds on a loaded machine
	const name = "ack-migrated"
	slot, _, to := migration(ctx, t, cl, name)
	ca, la := ackClient(t, cl.Client(t))
	const ttl = 6 * ackTimeout
	held, err := ca.Mutex(name, distlock.WithTTL(ttl)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	la.await(ctx, t, la.mark(), distlock.EventRenewed, name, 1)

	m, err := cl.StartMigration(ctx, slot, to)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.MoveKeys(ctx); err != nil {
		t.Fatal(err)
	}
	la.await(ctx, t, la.mark(), distlock.EventRenewed, name, 2)
	// A new lock's keys are on neither node: the source answers ASK, the
	// target TRYAGAIN (a script of several keys, not all there), as
	// without acknowledgement (TestClusterLockDuringMigration).
	fresh := sameSlot(t, name)
	if _, err := ca.Mutex(fresh).TryLock(ctx); !errors.Is(err, distlock.ErrNotAcquired) || errors.Is(err, distlock.ErrBackend) {
		t.Fatalf("TryLock of a new lock in the half-migrated slot: %v, want ErrNotAcquired", err)
	}

	if err := m.Finish(ctx); err != nil {
		t.Fatal(err)
	}
	la.await(ctx, t, la.mark(), distlock.EventRenewed, name, 2)
	l, err := ca.Mutex(fresh).Lock(ctx)
	if err != nil {
		t.Fatalf("a new lock in the migrated slot: %v", err)
	}
	onReplica(ctx, t, cl, fresh)
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	info, err := ca.Mutex(name).Inspect(ctx)
	if err != nil || !info.Locked || info.Token != held.Token() {
		t.Fatalf("after the migration: Inspect %+v, %v; want held with token %d", info, err, held.Token())
	}
	if lost := la.since(0, distlock.EventLost, name); len(lost) != 0 || held.Context().Err() != nil {
		t.Fatalf("lost during the migration: %v, %v", lost, context.Cause(held.Context()))
	}
	t.Logf("failed renewals during the migration: %v", la.since(0, distlock.EventRenewFailed, name))
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}
