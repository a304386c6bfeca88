package etcdstore

import (
	"context"
	"testing"
	"time"

	"github.com/distlock/distlock/store"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/namespace"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// writeKV records transactions and deletes, and answers them with
// nothing.
type writeKV struct {
	pb.KVClient // any other request panics: the test sends none
	txns        []*pb.TxnRequest
	deletes     []*pb.DeleteRangeRequest
}

func (kv *writeKV) Txn(_ context.Context, in *pb.TxnRequest, _ ...grpc.CallOption) (*pb.TxnResponse, error) {
	kv.txns = append(kv.txns, in)
	return &pb.TxnResponse{Header: &pb.ResponseHeader{}}, nil
}

func (kv *writeKV) DeleteRange(_ context.Context, in *pb.DeleteRangeRequest, _ ...grpc.CallOption) (*pb.DeleteRangeResponse, error) {
	kv.deletes = append(kv.deletes, in)
	return &pb.DeleteRangeResponse{Header: &pb.ResponseHeader{}}, nil
}

// TestWireMessages: the uncontended pair's requests, built as protocol
// messages, are the ones clientv3's builders make of the same compares
// and ops (as the store built them before: a change of a field in one
// but not the other fails), and a client whose KV is not etcd's own gets
// them through that KV, unchanged.
func TestWireMessages(t *testing.T) {
	ctx := context.Background()
	cli := clientv3.NewCtxClient(ctx)
	kv := &writeKV{}
	cli.KV = clientv3.NewKVFromKVClient(kv, cli)
	s := New(cli)
	if s.wire.direct() {
		t.Fatal("a client whose KV is a test's sends on etcd's own stub")
	}
	for _, kind := range []store.Kind{store.Plain, store.Read, store.Semaphore} {
		r := store.Request{Kind: kind, Name: "x", Owner: "o", Lease: 10 * time.Second, Seq: 1, Permits: 1, Capacity: 2}
		a := acquisition{s: s, r: r, dir: s.lockDir(r.Name), key: s.bindKey(r.Name, r.Kind, r.Owner),
			mark: s.markKey(r.Owner, r.Name), h: s.newHolding(r)}
		const lease = 7
		want := a.freeTxn(lease)
		cmps := []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(a.dir).WithPrefix(), "=", 0),
			clientv3.Compare(clientv3.CreateRevision(a.mark), "=", 0)}
		failure := []clientv3.Op{rangeOp(a.dir), clientv3.OpGet(a.mark, clientv3.WithCountOnly())}
		if kind == store.Plain {
			// Nobody waits in its line (line.go).
			cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(s.lineDir(r.Name)).WithPrefix(), "=", 0))
			failure = append(failure, clientv3.OpGet(s.lineDir(r.Name), clientv3.WithPrefix(), clientv3.WithCountOnly()))
		}
		if _, err := cli.Txn(ctx).
			If(cmps...).
			Then(clientv3.OpPut(a.key, a.h.encode(), clientv3.WithLease(lease))).
			Else(failure...).
			Commit(); err != nil {
			t.Fatal(err)
		}
		if _, err := s.wire.txn(ctx, want); err != nil {
			t.Fatal(err)
		}
		built, sent := kv.txns[len(kv.txns)-2], kv.txns[len(kv.txns)-1]
		if !proto.Equal(built, want) {
			t.Errorf("%v: the free lock's transaction\n%v\nwhere the builders make\n%v", kind, want, built)
		}
		if !proto.Equal(sent, want) {
			t.Errorf("%v: through the client's KV, the free lock's transaction became\n%v\nwant\n%v", kind, sent, want)
		}
	}
	if _, err := s.wire.delete(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Delete(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if len(kv.deletes) != 2 || !proto.Equal(kv.deletes[0], kv.deletes[1]) || string(kv.deletes[0].Key) != "k" {
		t.Errorf("deletes %v, want the client's own delete of k", kv.deletes)
	}
}

// TestWireDirectOnlyOnEtcdsKV: requests go out on the client's own stub
// while its KV is the one clientv3.New made, and through the KV while it
// is another: a namespace, whose prefix they must get, or etcd's KV on a
// stub of its own (clientv3.NewKVFromKVClient), which they must reach.
func TestWireDirectOnlyOnEtcdsKV(t *testing.T) {
	// Nothing listens there: clientv3.New does not wait for a connection.
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	s := New(cli)
	if !s.wire.direct() {
		t.Error("a client of clientv3.New: not sent on its stub")
	}
	own := cli.KV
	cli.KV = namespace.NewKV(own, "tenant/")
	if s.wire.direct() {
		t.Error("a namespaced client: sent on its stub, without the namespace's prefix")
	}
	cli.KV = clientv3.NewKVFromKVClient(&writeKV{}, cli)
	if s.wire.direct() {
		t.Error("a client whose KV is etcd's on another stub: sent on the client's stub instead")
	}
	cli.KV = own
	if !s.wire.direct() {
		t.Error("a client given its own KV back: not sent on its stub")
	}
}
