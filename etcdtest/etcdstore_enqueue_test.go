package etcdtest_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/distlock/etcdstore"
	"github.com/distlock/distlock/etcdtest"
	"github.com/distlock/distlock/store"
	clientv3 "go.etcd.io/etcd/client/v3"
)

const lease, queue = 10 * time.Second, 5 * time.Second

// req is a request of owner for the lock name of kind, queueing for q.
func req(name, owner string, kind store.Kind, q time.Duration) store.Request {
	return store.Request{Name: name, Kind: kind, Owner: owner, Hold: 1, Seq: 1, Lease: lease, Queue: q}
}

// countingStore returns a store on a 1-member cluster, its client, and the
// counts of the KV requests it sends and of the reads among them.
func countingStore(t *testing.T) (*clientv3.Client, *etcdstore.Store, *atomic.Int64, *atomic.Int64) {
	c := etcdtest.Start(t, 1)
	reqs, ranges := new(atomic.Int64), new(atomic.Int64)
	cli := countingClient(t, reqs, ranges, c.Endpoints()...)
	s := etcdstore.New(cli)
	t.Cleanup(func() { _ = s.Close() })
	return cli, s, reqs, ranges
}

// TestEtcdQueuedAcquisitionPutsItsPlaceAtOnce: an acquisition that may
// queue (store.Request.Queue > 0: the Client found the lock taken) puts
// its place in one transaction, not after a first one that finds the lock
// taken again; and every case that put refuses still gets what it would
// without it: the lock of another kind, an abandoned owner, an earlier copy
// of the same request, and a lock freed meanwhile (held at once, on the
// place's lease).
func TestEtcdQueuedAcquisitionPutsItsPlaceAtOnce(t *testing.T) {
	cli, s, reqs, ranges := countingStore(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	keys := func(name string) int {
		t.Helper()
		resp, err := cli.Get(ctx, etcdstore.DefaultPrefix+"lock/{"+name+"}/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		return int(resp.Count)
	}

	// Held: the waiter's place, in one transaction.
	if g, err := s.Acquire(ctx, req("held", "holder", store.Fair, 0)); err != nil || !g.Acquired {
		t.Fatalf("the holder: %+v, %v", g, err)
	}
	r0, g0 := reqs.Load(), ranges.Load()
	w := req("held", "waiter", store.Fair, queue)
	if g, err := s.Acquire(ctx, w); err != nil || !g.Queued {
		t.Fatalf("the waiter: %+v, %v; want a place", g, err)
	}
	if n, rs := reqs.Load()-r0, ranges.Load()-g0; n != 1 || rs != 0 {
		t.Errorf("the waiter's place took %d requests (%d reads), want 1 transaction", n, rs)
	}
	// A copy of the waiter's request finds its place: no second key.
	if g, err := s.Acquire(ctx, w); err != nil || !g.Queued || g.Acquired {
		t.Errorf("a copy of the waiter's request: %+v, %v; want its place", g, err)
	}
	if n := keys("held"); n != 2 {
		t.Errorf("%d keys for the holder and the waiter, want 2", n)
	}

	// Another kind: refused, nothing put.
	if g, err := s.Acquire(ctx, req("held", "writer", store.Write, queue)); !errors.Is(err, store.ErrWrongKind) || g.Acquired || g.Queued {
		t.Errorf("a writer on a fair mutex: %+v, %v; want ErrWrongKind", g, err)
	}
	if n := keys("held"); n != 2 {
		t.Errorf("%d keys after a refused writer, want 2", n)
	}

	// An abandoned owner: nothing taken, nothing put.
	ab := req("held", "abandoned", store.Fair, 0)
	ab.Hold, ab.Lease = 0, store.AbandonFor(lease)
	if _, err := s.Abandon(ctx, ab); err != nil {
		t.Fatal(err)
	}
	if g, err := s.Acquire(ctx, req("held", "abandoned", store.Fair, queue)); err != nil || g.Acquired || g.Queued {
		t.Errorf("an abandoned owner: %+v, %v; want nothing", g, err)
	}
	if n := keys("held"); n != 2 {
		t.Errorf("%d keys after an abandoned owner's acquisition, want 2", n)
	}

	// Free (released meanwhile): held at once, for the place's lease at
	// most (the Client renews it to the hold's at once).
	g, err := s.Acquire(ctx, req("free", "taker", store.Fair, queue))
	if err != nil || !g.Acquired || g.Token == 0 || g.Lease != queue {
		t.Fatalf("a free lock: %+v, %v; want it held, lease %v", g, err, queue)
	}
	if rel, err := s.Release(ctx, req("free", "taker", store.Fair, queue)); err != nil || rel != store.Freed {
		t.Errorf("its release: %v, %v", rel, err)
	}
}

// watchGrants returns the notices of s's owners on the fair mutex name,
// watched until the test ends.
func watchGrants(ctx context.Context, t *testing.T, s *etcdstore.Store, name string) <-chan store.Notice {
	t.Helper()
	grants := make(chan store.Notice, 4)
	stop, err := s.Watch(ctx, name, store.Fair, func(n store.Notice) { grants <- n })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return grants
}

// mustHold takes the lock of r on s at once.
func mustHold(ctx context.Context, t *testing.T, s *etcdstore.Store, r store.Request) {
	t.Helper()
	if g, err := s.Acquire(ctx, r); err != nil || !g.Acquired {
		t.Fatalf("%s: %+v, %v", r.Owner, g, err)
	}
}

// awaitGrant waits for a notice on grants, which must be owner's grant.
func awaitGrant(ctx context.Context, t *testing.T, grants <-chan store.Notice, owner string) {
	t.Helper()
	select {
	case n := <-grants:
		if n.Gone || n.Grantee != store.GranteeID(owner) {
			t.Fatalf("notice %+v, want the grant of %s", n, owner)
		}
	case <-ctx.Done():
		t.Fatal("no grant")
	}
}

// TestEtcdGrantedPlaceReleasesInOneRequest: a waiter granted the lock by
// the holder's release (its grant read from the queue) releases it with one
// delete of its key, not by reading its key first: a short hold of a fair
// mutex under contention costs a request less.
func TestEtcdGrantedPlaceReleasesInOneRequest(t *testing.T) {
	cli, s, reqs, ranges := countingStore(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const name = "handed"
	grants := watchGrants(ctx, t, s, name)
	holder, waiter := req(name, "holder", store.Fair, 0), req(name, "waiter", store.Fair, queue)
	mustHold(ctx, t, s, holder)
	if g, err := s.Acquire(ctx, waiter); err != nil || !g.Queued {
		t.Fatalf("the waiter: %+v, %v; want a place", g, err)
	}
	if rel, err := s.Release(ctx, holder); err != nil || rel != store.Freed {
		t.Fatalf("the holder's release: %v, %v", rel, err)
	}
	awaitGrant(ctx, t, grants, waiter.Owner)
	r0, g0 := reqs.Load(), ranges.Load()
	waiter.Hold = 0 // every hold: as a Client releases its last lease
	if rel, err := s.Release(ctx, waiter); err != nil || rel != store.Freed {
		t.Fatalf("the waiter's release: %v, %v", rel, err)
	}
	if n, rs := reqs.Load()-r0, ranges.Load()-g0; n != 1 || rs != 0 {
		t.Errorf("the granted waiter's release sent %d requests (%d reads), want 1 delete", n, rs)
	}
	resp, err := cli.Get(ctx, etcdstore.DefaultPrefix+"lock/{"+name+"}/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || resp.Count != 0 {
		t.Errorf("keys left: %v, %v", resp, err)
	}
}
