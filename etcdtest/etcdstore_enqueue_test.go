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
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
)

// TestEtcdQueuedAcquisitionPutsItsPlaceAtOnce: an acquisition that may
// queue (store.Request.Queue > 0: the Client found the lock taken) puts
// its place in one transaction, not after a first one that finds the lock
// taken again; and every case that put refuses still gets what it would
// without it: the lock of another kind, an abandoned owner, an earlier copy
// of the same request, and a lock freed meanwhile (held at once, on the
// place's lease).
func TestEtcdQueuedAcquisitionPutsItsPlaceAtOnce(t *testing.T) {
	c := etcdtest.Start(t, 1)
	var txns atomic.Int64
	cli := dialWith(t, c.Endpoints(), grpc.WithChainUnaryInterceptor(
		func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			if _, ok := req.(*pb.TxnRequest); ok {
				txns.Add(1)
			}
			return invoker(ctx, method, req, reply, cc, opts...)
		}))
	s := etcdstore.New(cli)
	t.Cleanup(func() { _ = s.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const lease, queue = 10 * time.Second, 5 * time.Second
	req := func(name, owner string, kind store.Kind, q time.Duration) store.Request {
		return store.Request{Name: name, Kind: kind, Owner: owner, Hold: 1, Seq: 1, Lease: lease, Queue: q}
	}
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
	before := txns.Load()
	w := req("held", "waiter", store.Fair, queue)
	if g, err := s.Acquire(ctx, w); err != nil || !g.Queued {
		t.Fatalf("the waiter: %+v, %v; want a place", g, err)
	}
	if n := txns.Load() - before; n != 1 {
		t.Errorf("the waiter's place took %d transactions, want 1", n)
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
