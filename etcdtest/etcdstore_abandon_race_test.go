package etcdtest_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock/etcdstore"
	"github.com/distlock/distlock/etcdtest"
	"github.com/distlock/distlock/store"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
)

// TestEtcdAbandonOvertakenByItsAcquisition: an Abandon of an owner is sent
// before the owner's acquisition has bound its key (the Client abandons an
// attempt whose caller gave up the moment it started it, while the
// attempt's request is still about to be made), and the acquisition's put
// reaches etcd first: the lock is free and the owner not marked yet, so it
// takes the lock. The Abandon, landing next, marks the owner for the first
// time, and must delete that key: it removes every hold of the owner
// (store.Store), and nothing else will (the owner's Client never uses its
// grant, and a later Abandon finds the mark and deletes nothing). The key
// must not stay until its lease runs out, and the next owner of the store
// must find the lock free.
func TestEtcdAbandonOvertakenByItsAcquisition(t *testing.T) {
	c := etcdtest.Start(t, 1)
	const name = "overtaken"
	var (
		mu          sync.Mutex
		heldOne     bool
		abandonHeld = make(chan struct{}, 1)
		holdAbandon = make(chan struct{}) // closed: the held Abandon goes on
	)
	cli := dialWith(t, c.Endpoints(), grpc.WithChainUnaryInterceptor(
		func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			if txn, ok := req.(*pb.TxnRequest); ok && isAbandonTxn(txn) {
				mu.Lock()
				first := !heldOne
				heldOne = true
				mu.Unlock()
				if first { // the first Abandon only: held on its way
					abandonHeld <- struct{}{}
					<-holdAbandon
				}
			}
			return invoker(ctx, method, req, reply, cc, opts...)
		}))
	s := etcdstore.New(cli)
	t.Cleanup(func() { _ = s.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	r := store.Request{Name: name, Kind: store.Plain, Owner: "owner-of-the-given-up-attempt", Hold: 1, Lease: 10 * time.Second}
	abandoned := make(chan error, 1)
	go func() {
		ab := r
		ab.Hold, ab.Lease = 0, store.AbandonFor(r.Lease)
		_, err := s.Abandon(ctx, ab)
		abandoned <- err
	}()
	<-abandonHeld // sent, with the key it deletes chosen: not landed yet

	// The acquisition, started after the Abandon, lands before it.
	g, err := s.Acquire(ctx, r)
	if err != nil || !g.Acquired {
		t.Fatalf("the acquisition, landing first: %+v, %v; want the lock (free, owner not marked yet)", g, err)
	}
	close(holdAbandon)
	if err := <-abandoned; err != nil {
		t.Fatalf("Abandon: %v", err)
	}

	dir := etcdstore.DefaultPrefix + "lock/{" + name + "}/"
	resp, err := cli.Get(ctx, dir, clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range resp.Kvs {
		t.Errorf("after the owner's abandonment was confirmed, its key is left: %s (created at %d, token %d; on lease %x): %s",
			kv.Key, kv.CreateRevision, g.Token, kv.Lease, kv.Value)
	}

	// The owner takes nothing any more.
	if g, err := s.Acquire(ctx, r); err != nil || g.Acquired || g.Queued {
		t.Errorf("an acquisition of the abandoned owner: %+v, %v; want nothing taken", g, err)
	}
	// The next owner of the store finds the lock free.
	next := r
	next.Owner = "next-owner"
	g2, err := s.Acquire(ctx, next)
	if err != nil || !g2.Acquired {
		t.Fatalf("the next owner: %+v, %v; want the lock", g2, err)
	}
	if rel, err := s.Release(ctx, next); err != nil || rel != store.Freed {
		t.Errorf("the next owner's release: %v, %v", rel, err)
	}
}

// isAbandonTxn reports whether txn is an Abandon of etcdstore: a put of an
// abandonment mark.
func isAbandonTxn(txn *pb.TxnRequest) bool {
	for _, op := range append(txn.Success, txn.Failure...) {
		if put := op.GetRequestPut(); put != nil && strings.HasPrefix(string(put.Key), etcdstore.DefaultPrefix+"mark/") {
			return true
		}
	}
	return false
}
