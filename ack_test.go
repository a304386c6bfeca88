package distlock_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/redisstore"
	"github.com/distlock/distlock/redistest"
	"github.com/redis/go-redis/v9"
)

// Tests of replica acknowledgement (WithReplicaAck, issue 14's point 5)
// for the queued kinds and Once on a Sentinel group; the Cluster's are in
// cluster_ack_test.go.

// ackTimeout is the WAIT timeout of the tests' clients with replica
// acknowledgement.
const ackTimeout = 300 * time.Millisecond

// eventLog keeps a Client's events, for tests that await them.
type eventLog struct {
	mu      sync.Mutex
	all     []distlock.Event
	changed chan struct{}
}

func newEventLog() *eventLog { return &eventLog{changed: make(chan struct{}, 1)} }

func (l *eventLog) handle(ev distlock.Event) {
	l.mu.Lock()
	l.all = append(l.all, ev)
	l.mu.Unlock()
	select {
	case l.changed <- struct{}{}:
	default:
	}
}

// mark is where the events that come from now on start.
func (l *eventLog) mark() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.all)
}

// since returns the events of kind for name from mark on.
func (l *eventLog) since(mark int, kind distlock.EventKind, name string) []distlock.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []distlock.Event
	for _, ev := range l.all[mark:] {
		if ev.Kind == kind && ev.Name == name {
			out = append(out, ev)
		}
	}
	return out
}

// await waits until n events of kind for name have come since mark, and
// returns them; it fails t if ctx ends first.
func (l *eventLog) await(ctx context.Context, t *testing.T, mark int, kind distlock.EventKind, name string, n int) []distlock.Event {
	t.Helper()
	for {
		if evs := l.since(mark, kind, name); len(evs) >= n {
			return evs
		}
		select {
		case <-l.changed:
		case <-ctx.Done():
			t.Fatalf("%s: fewer than %d %v events: %v", name, n, kind, l.since(mark, kind, name))
		}
	}
}

// ackKind is one of the queued kinds, for the tests of replica
// acknowledgement: how a client waits for it, and what holds it.
type ackKind struct {
	kind string
	// lock waits for the lock as the kind under test; exclusive waits for
	// it as a kind that lock excludes and that excludes it (the holders
	// and waiters around the one under test).
	lock, exclusive func(ctx context.Context, c *distlock.Client, name string) (*distlock.Lease, error)
	// state reads the tokens of its holders and the number of its waiters.
	state func(ctx context.Context, c *distlock.Client, name string) (tokens []uint64, waiters int, err error)
}

func fairLock(ctx context.Context, c *distlock.Client, name string) (*distlock.Lease, error) {
	return c.FairMutex(name).Lock(ctx)
}

func campaign(ctx context.Context, c *distlock.Client, name string) (*distlock.Lease, error) {
	return c.Election(name).Campaign(ctx, "candidate")
}

func writeLock(ctx context.Context, c *distlock.Client, name string) (*distlock.Lease, error) {
	return c.RWMutex(name).Lock(ctx)
}

func readLock(ctx context.Context, c *distlock.Client, name string) (*distlock.Lease, error) {
	return c.RWMutex(name).RLock(ctx)
}

func permit(ctx context.Context, c *distlock.Client, name string) (*distlock.Lease, error) {
	return c.Semaphore(name, 1).Acquire(ctx, 1)
}

// fairState reads a fair mutex or an election.
func fairState(ctx context.Context, c *distlock.Client, name string) ([]uint64, int, error) {
	info, err := c.FairMutex(name).Inspect(ctx)
	if err != nil || !info.Locked {
		return nil, info.Queued, err
	}
	return []uint64{info.Token}, info.Queued, nil
}

func rwState(ctx context.Context, c *distlock.Client, name string) ([]uint64, int, error) {
	info, err := c.RWMutex(name).Inspect(ctx)
	var tokens []uint64
	if info.Writer != nil {
		tokens = append(tokens, info.Writer.Token)
	}
	for _, r := range info.Readers {
		tokens = append(tokens, r.Token)
	}
	return tokens, info.QueuedReaders + info.QueuedWriters, err
}

func semState(ctx context.Context, c *distlock.Client, name string) ([]uint64, int, error) {
	info, err := c.Semaphore(name, 1).Inspect(ctx)
	var tokens []uint64
	for _, h := range info.Holders {
		tokens = append(tokens, h.Token)
	}
	return tokens, info.Queued, err
}

var ackKinds = []ackKind{
	{"fair", fairLock, fairLock, fairState},
	{"election", campaign, campaign, fairState},
	{"read", readLock, writeLock, rwState},
	{"write", writeLock, writeLock, rwState},
	{"semaphore", permit, permit, semState},
}

// ackKindOf returns the ackKind of kind.
func ackKindOf(kind string) ackKind {
	for _, k := range ackKinds {
		if k.kind == kind {
			return k
		}
	}
	panic("no ackKind " + kind)
}

// plainKind is the plain mutex as an ackKind.
var plainKind = ackKind{kind: "mutex",
	lock: func(ctx context.Context, c *distlock.Client, name string) (*distlock.Lease, error) {
		return c.Mutex(name).Lock(ctx)
	},
	state: func(ctx context.Context, c *distlock.Client, name string) ([]uint64, int, error) {
		info, err := c.Mutex(name).Inspect(ctx)
		if !info.Locked {
			return nil, 0, err
		}
		return []uint64{info.Token}, 0, err
	}}

// expectHolders fails t unless the lock is held by exactly the owners of
// tokens and nobody waits for it.
func (k ackKind) expectHolders(ctx context.Context, t *testing.T, c *distlock.Client, name string, tokens ...uint64) {
	t.Helper()
	got, waiters, err := k.state(ctx, c, name)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, tokens) || waiters != 0 {
		t.Fatalf("%s %s: holders' tokens %v and %d waiters, want %v and none", k.kind, name, got, waiters, tokens)
	}
}

// A lockResult is the outcome of a Lock in the background.
type lockResult struct {
	l   *distlock.Lease
	err error
}

// lockAsync runs lock in the background and waits until the client's log
// shows it waiting.
func lockAsync(ctx context.Context, t *testing.T, log *eventLog, name string,
	lock func(ctx context.Context, c *distlock.Client, name string) (*distlock.Lease, error), c *distlock.Client) <-chan lockResult {
	t.Helper()
	mark := log.mark()
	got := make(chan lockResult, 1)
	go func() {
		l, err := lock(ctx, c, name)
		got <- lockResult{l, err}
	}()
	log.await(ctx, t, mark, distlock.EventWaiting, name, 1)
	return got
}

// ackClient returns a Client on rdb with replica acknowledgement by one
// replica, and its event log.
func ackClient(t *testing.T, rdb redis.UniversalClient) (*distlock.Client, *eventLog) {
	log := newEventLog()
	c := distlock.New(redisstore.New(rdb, redisstore.WithReplicaAck(1, ackTimeout)), distlock.WithLogger(nil), distlock.WithEventHandler(log.handle))
	t.Cleanup(func() { c.Close() })
	return c, log
}

// TestReplicaAckQueued: with WithReplicaAck(1, ...) on a master with one
// replica, each queued kind (fair mutex, election, both sides of a
// read-write lock, semaphore) is acquired, whether its script took it at
// once or another client's release granted it to the waiting client, and
// the replica has it when Lock returns. With the replica's replication
// cut, both acquisitions fail with ErrNotReplicated and leave nothing: a
// client without acknowledgement waiting for the lock gets it (a waiter
// behind the refused one, when the grant came from a release), and once it
// unlocks, nobody holds the lock or waits for it.
func TestReplicaAckQueued(t *testing.T) {
	ctx := testCtx(t)
	g := redistest.StartSentinel(t, 1)
	replica := g.Servers()[1]
	ca, la := ackClient(t, g.FailoverClient(t))
	lc := newEventLog()
	cb, cc := failoverClient(t, g, nil), failoverClient(t, g, lc.handle)
	rdb := replica.Client(t)

	for _, k := range ackKinds {
		name := "ack-" + k.kind
		// Taken at once.
		l, err := k.lock(ctx, ca, name)
		if err != nil {
			t.Fatalf("%s: Lock with the replica in sync: %v", k.kind, err)
		}
		if n := rdb.Exists(ctx, lockKey(name)).Val(); n != 1 {
			t.Fatalf("%s: the replica does not have the lock taken with acknowledgement", k.kind)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		// Granted by another client's release.
		hb, err := k.exclusive(ctx, cb, name)
		if err != nil {
			t.Fatal(err)
		}
		got := lockAsync(ctx, t, la, name, k.lock, ca)
		if err := hb.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		r := <-got
		if r.err != nil {
			t.Fatalf("%s: Lock granted by a release, with the replica in sync: %v", k.kind, r.err)
		}
		if n := rdb.Exists(ctx, lockKey(name)).Val(); n != 1 {
			t.Fatalf("%s: the replica does not have the lock granted with acknowledgement", k.kind)
		}
		k.expectHolders(ctx, t, cb, name, r.l.Token())
		if err := r.l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}

	if err := g.CutReplication(ctx, replica); err != nil {
		t.Fatal(err)
	}
	for _, k := range ackKinds {
		name := "ack-" + k.kind
		// Taken at once by the script: refused, and rolled back (in the
		// background: a waiting client without acknowledgement gets it).
		if _, err := k.lock(ctx, ca, name); !errors.Is(err, distlock.ErrNotReplicated) || !errors.Is(err, distlock.ErrBackend) {
			t.Fatalf("%s: Lock with replication cut: %v, want ErrNotReplicated", k.kind, err)
		}
		hb, err := k.exclusive(ctx, cb, name)
		if err != nil {
			t.Fatal(err)
		}
		k.expectHolders(ctx, t, cb, name, hb.Token())

		// Granted by another client's release while it waited: refused,
		// and the waiter behind it gets the lock.
		got := lockAsync(ctx, t, la, name, k.lock, ca)
		next := lockAsync(ctx, t, lc, name, k.exclusive, cc)
		if err := hb.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if r := <-got; !errors.Is(r.err, distlock.ErrNotReplicated) || r.l != nil {
			t.Fatalf("%s: Lock granted by a release with replication cut: %v, %v; want ErrNotReplicated", k.kind, r.l, r.err)
		}
		r := <-next
		if r.err != nil {
			t.Fatalf("%s: the waiter behind the refused grant: %v", k.kind, r.err)
		}
		k.expectHolders(ctx, t, cb, name, r.l.Token())
		if err := r.l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		k.expectHolders(ctx, t, cb, name)
	}
}

// TestReplicaAckQueuedRenewals: a queued kind held with replica
// acknowledgement whose renewals stop being acknowledged (the replica's
// replication is cut) loses its lease context with ErrLockLost at its
// local deadline, after renewals that failed with ErrNotReplicated.
func TestReplicaAckQueuedRenewals(t *testing.T) {
	ctx := testCtx(t)
	g := redistest.StartSentinel(t, 1)
	ca, la := ackClient(t, g.FailoverClient(t))
	const ttl = 6 * ackTimeout // renewed every 300 to 600 ms
	opts := []distlock.MutexOption{distlock.WithTTL(ttl)}
	leases := map[string]*distlock.Lease{}
	for name, lock := range map[string]func() (*distlock.Lease, error){
		"renew-fair":  func() (*distlock.Lease, error) { return ca.FairMutex("renew-fair", opts...).Lock(ctx) },
		"renew-read":  func() (*distlock.Lease, error) { return ca.RWMutex("renew-read", opts...).RLock(ctx) },
		"renew-write": func() (*distlock.Lease, error) { return ca.RWMutex("renew-write", opts...).Lock(ctx) },
		"renew-sem":   func() (*distlock.Lease, error) { return ca.Semaphore("renew-sem", 2, opts...).Acquire(ctx, 1) },
	} {
		l, err := lock()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		leases[name] = l
	}
	mark := la.mark()
	for name := range leases {
		la.await(ctx, t, mark, distlock.EventRenewed, name, 2)
	}
	if err := g.CutReplication(ctx, g.Servers()[1]); err != nil {
		t.Fatal(err)
	}
	for name, l := range leases {
		lost := la.await(ctx, t, mark, distlock.EventLost, name, 1)
		if !errors.Is(lost[0].Err, distlock.ErrLockLost) {
			t.Errorf("%s: lost with %v, want ErrLockLost", name, lost[0].Err)
		}
		if cause := context.Cause(l.Context()); !errors.Is(cause, distlock.ErrLockLost) {
			t.Errorf("%s: lease context ended with %v, want ErrLockLost", name, cause)
		}
		failed := la.since(mark, distlock.EventRenewFailed, name)
		if len(failed) == 0 || !errors.Is(failed[len(failed)-1].Err, distlock.ErrNotReplicated) {
			t.Errorf("%s: failed renewals %v, want ErrNotReplicated", name, failed)
		}
	}
}

// TestReplicaAckOnce: Once with replica acknowledgement records its run
// on the replica before it returns; a run whose record the replica does
// not acknowledge (replication cut while the job ran) is reported as run
// here, with an error wrapping ErrNotReplicated.
func TestReplicaAckOnce(t *testing.T) {
	ctx := testCtx(t)
	g := redistest.StartSentinel(t, 1)
	replica := g.Servers()[1]
	ca, _ := ackClient(t, g.FailoverClient(t))
	job := func(context.Context, uint64) error { return nil }
	run, err := ca.Once(ctx, "once-acked", time.Hour, job)
	if err != nil || run.State != distlock.RanHere {
		t.Fatalf("Once with the replica in sync: %+v, %v", run, err)
	}
	if n := replica.Client(t).Exists(ctx, lockKey("once-acked")+":done").Val(); n != 1 {
		t.Fatalf("the replica has no record of the acknowledged run")
	}
	run, err = ca.Once(ctx, "once-unacked", time.Hour, func(context.Context, uint64) error {
		return g.CutReplication(ctx, replica)
	})
	if !errors.Is(err, distlock.ErrNotReplicated) || run.State != distlock.RanHere {
		t.Fatalf("Once whose record is not acknowledged: %+v, %v; want RanHere and ErrNotReplicated", run, err)
	}
	t.Logf("Once whose record is not acknowledged: %v", err)
}

// A server with no replica acknowledges nothing: every kind is refused
// with ErrNotReplicated, and what the master took is released (in the
// background: a client without acknowledgement that waits for the lock
// gets it), leaving nothing behind.
func TestReplicaAckNoReplica(t *testing.T) {
	srv := redistest.Start(t)
	ctx := testCtx(t)
	c, rdb := newStoreClient(t, srv, redisstore.WithReplicaAck(1, ackTimeout))
	other, _ := newClient(t, srv)
	mutex := func(ctx context.Context, c *distlock.Client, name string) (*distlock.Lease, error) {
		return c.Mutex(name).Lock(ctx)
	}
	multi := func(ctx context.Context, c *distlock.Client, name string) (*distlock.Lease, error) {
		return c.MultiMutex([]string{name + "-1", name + "-2"}).Lock(ctx)
	}
	locks := map[string]func(ctx context.Context, c *distlock.Client, name string) (*distlock.Lease, error){
		"mutex": mutex, "multi": multi}
	for _, k := range ackKinds {
		locks[k.kind] = k.lock
	}
	for kind, lock := range locks {
		name := "solo-" + kind
		if _, err := lock(ctx, c, name); !errors.Is(err, distlock.ErrNotReplicated) {
			t.Errorf("%s with no replica: %v, want ErrNotReplicated", kind, err)
		}
		l, err := lock(ctx, other, name)
		if err != nil {
			t.Fatalf("%s: without acknowledgement, after the refused one: %v", kind, err)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Semaphore("solo-semaphore", 1).TryAcquire(ctx, 1); !errors.Is(err, distlock.ErrNotReplicated) {
		t.Errorf("TryAcquire with no replica: %v, want ErrNotReplicated", err)
	}
	l, err := other.Semaphore("solo-semaphore", 1).Acquire(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	run, err := c.Once(ctx, "solo-once", time.Hour, func(context.Context, uint64) error {
		t.Error("Once ran its job under a lock no replica acknowledged")
		return nil
	})
	if !errors.Is(err, distlock.ErrNotReplicated) || run.State == distlock.RanHere {
		t.Errorf("Once with no replica: %+v, %v; want ErrNotReplicated, not run", run, err)
	}
	onlyExpiringKeys(t, rdb)
}

// Extend under WithReplicaAck keeps the limit that a lock's TTL has: a
// lease shorter than six times the acknowledgement timeout is refused with
// ErrInvalidOption before anything is sent (the lease on the server and
// the one the watchdog renews keep their length), for a mutex and a
// multi-lock; a lease at the limit is set.
func TestReplicaAckExtendLimit(t *testing.T) {
	g := redistest.StartSentinel(t, 1)
	ctx := testCtx(t) // after the group started: that takes seconds on a loaded machine
	c, _ := ackClient(t, g.FailoverClient(t))
	master := g.Servers()[0].Client(t)
	const lease = 10 * time.Second
	for _, tc := range []struct {
		kind string
		lock func() (*distlock.Lease, error)
		key  string
	}{
		{"mutex", func() (*distlock.Lease, error) { return c.Mutex("extend", distlock.WithTTL(lease)).Lock(ctx) }, lockKey("extend")},
		{"multi", func() (*distlock.Lease, error) {
			return c.MultiMutex([]string{"extend-1", "extend-2"}, distlock.WithTTL(lease)).Lock(ctx)
		}, lockKey("extend-2")},
	} {
		l, err := tc.lock()
		if err != nil {
			t.Fatal(err)
		}
		short := 6*ackTimeout - time.Millisecond
		if err := l.Extend(ctx, short); !errors.Is(err, distlock.ErrInvalidOption) {
			t.Fatalf("%s: Extend(%v) with a %v acknowledgement timeout: %v, want ErrInvalidOption", tc.kind, short, ackTimeout, err)
		}
		if ttl := master.PTTL(ctx, tc.key).Val(); ttl <= 6*ackTimeout {
			t.Fatalf("%s: the refused Extend changed the lease on the server: PTTL %v", tc.kind, ttl)
		}
		if err := l.Extend(ctx, 6*ackTimeout); err != nil {
			t.Fatalf("%s: Extend(%v): %v", tc.kind, 6*ackTimeout, err)
		}
		if ttl := master.PTTL(ctx, tc.key).Val(); ttl > 6*ackTimeout {
			t.Fatalf("%s: after Extend(%v): PTTL %v", tc.kind, 6*ackTimeout, ttl)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
}
