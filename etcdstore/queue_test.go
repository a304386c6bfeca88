package etcdstore

import (
	"context"
	"github.com/distlock/distlock/store"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
)

// rangeKV answers ranges from memory and records them: a serializable
// read at a revision gets atRev (or atRevErr), any other read now.
type rangeKV struct {
	pb.KVClient // any other request panics: the test sends none
	atRev, now  []*mvccpb.KeyValue
	atRevErr    error
	reads       []*pb.RangeRequest
}

func (kv *rangeKV) Range(_ context.Context, in *pb.RangeRequest, _ ...grpc.CallOption) (*pb.RangeResponse, error) {
	kv.reads = append(kv.reads, in)
	if in.Serializable && in.Revision > 0 {
		if kv.atRevErr != nil {
			return nil, kv.atRevErr
		}
		return &pb.RangeResponse{Header: &pb.ResponseHeader{Revision: 100}, Kvs: kv.atRev}, nil
	}
	return &pb.RangeResponse{Header: &pb.ResponseHeader{Revision: 200}, Kvs: kv.now}, nil
}

// TestQueueAfterAChange: after a change that a waiting place's watches
// reported, the queue is read as of the change's revision without a round
// through the leader (a serializable read at that revision), and the
// revision it reports is the change's, whatever the member's current one:
// the watches cover every change after it. A member that refuses the read
// (it has not applied the revision, or compacted it) leaves a linearizable
// read of the queue as it is now; so does a read that follows no change.
// Every read is of what can keep a fair mutex's place out: the last two
// keys made up to its own.
func TestQueueAfterAChange(t *testing.T) {
	ctx := context.Background()
	owner := func(s *Store, id string) *mvccpb.KeyValue {
		return &mvccpb.KeyValue{Key: []byte(s.lockDir("x") + "f/" + id), CreateRevision: 10,
			Value: []byte(holding{Owner: id, Holds: []uint64{1}}.encode())}
	}
	for _, tc := range []struct {
		name      string
		changed   int64
		atRevErr  error
		wantOwner string
		wantRev   int64
		wantReads int
	}{
		{name: "after a change", changed: 50, wantOwner: "then", wantRev: 50, wantReads: 1},
		{name: "a member behind", changed: 50, atRevErr: rpctypes.ErrGRPCFutureRev, wantOwner: "now", wantRev: 200, wantReads: 2},
		{name: "compacted", changed: 50, atRevErr: rpctypes.ErrGRPCCompacted, wantOwner: "now", wantRev: 200, wantReads: 2},
		{name: "no change", changed: 0, wantOwner: "now", wantRev: 200, wantReads: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cli := clientv3.NewCtxClient(ctx)
			s := New(cli)
			kv := &rangeKV{atRev: []*mvccpb.KeyValue{owner(s, "then")}, now: []*mvccpb.KeyValue{owner(s, "now")}, atRevErr: tc.atRevErr}
			cli.KV = clientv3.NewKVFromKVClient(kv, cli)
			cs, rev, err := s.queueAfter(ctx, "x", tc.changed, store.Fair, 10)
			if err != nil {
				t.Fatal(err)
			}
			if len(cs) != 1 || cs[0].Owner != tc.wantOwner || rev != tc.wantRev {
				t.Fatalf("read %d contenders (%+v) at revision %d, want %q at %d", len(cs), cs, rev, tc.wantOwner, tc.wantRev)
			}
			if len(kv.reads) != tc.wantReads {
				t.Fatalf("%d reads, want %d", len(kv.reads), tc.wantReads)
			}
			if first := kv.reads[0]; tc.changed > 0 && (!first.Serializable || first.Revision != tc.changed) {
				t.Errorf("the read after a change: serializable %v at revision %d, want a serializable read at %d", first.Serializable, first.Revision, tc.changed)
			}
			if last := kv.reads[len(kv.reads)-1]; tc.wantOwner == "now" && (last.Serializable || last.Revision != 0) {
				t.Errorf("the read of the queue now: serializable %v at revision %d, want a linearizable read of the latest", last.Serializable, last.Revision)
			}
			for _, r := range kv.reads {
				if r.SortTarget != pb.RangeRequest_CREATE || r.SortOrder != pb.RangeRequest_DESCEND || r.Limit != 2 || len(r.RangeEnd) == 0 {
					t.Errorf("a read not of the last two keys in create order over the lock's directory: %v", r)
				}
				if r.MaxCreateRevision != 10 {
					t.Errorf("a read of the keys made up to revision %d, want up to the place's own, 10", r.MaxCreateRevision)
				}
			}
		})
	}
}

// TestAhead: a place of a lock that admits one key at a time reads the
// last two keys up to its own; of a read-write lock or a semaphore, every
// key up to its own, in queue order (a reader waits for the last writer
// before it, permits add up over the whole queue).
func TestAhead(t *testing.T) {
	ctx := context.Background()
	for kind, two := range map[store.Kind]bool{store.Plain: true, store.Fair: true, store.Election: true,
		store.Read: false, store.Write: false, store.Semaphore: false} {
		cli := clientv3.NewCtxClient(ctx)
		kv := &rangeKV{}
		cli.KV = clientv3.NewKVFromKVClient(kv, cli)
		if _, err := cli.Do(ctx, rangeOp("d/", ahead(kind, 7)...)); err != nil {
			t.Fatal(err)
		}
		r := kv.reads[0]
		order, limit := pb.RangeRequest_ASCEND, int64(0)
		if two {
			order, limit = pb.RangeRequest_DESCEND, 2
		}
		if r.MaxCreateRevision != 7 || r.SortTarget != pb.RangeRequest_CREATE || r.SortOrder != order || r.Limit != limit {
			t.Errorf("%v: read %v; want keys up to revision 7 by create revision, %v, limit %d", kind, r, order, limit)
		}
	}
}

// lastTwoKV answers a read of the last two keys with cut (and More), any
// other read with all.
type lastTwoKV struct {
	pb.KVClient
	cut, all []*mvccpb.KeyValue
	reads    []*pb.RangeRequest
}

func (kv *lastTwoKV) Range(_ context.Context, in *pb.RangeRequest, _ ...grpc.CallOption) (*pb.RangeResponse, error) {
	kv.reads = append(kv.reads, in)
	h := &pb.ResponseHeader{Revision: 100}
	if in.Limit > 0 {
		return &pb.RangeResponse{Header: h, Kvs: kv.cut, More: true}, nil
	}
	return &pb.RangeResponse{Header: h, Kvs: kv.all}, nil
}

// TestQueueAfterUnreadablePredecessor: a fair mutex's place reads the
// last two keys up to its own; when the one before it is unreadable (no
// one's, so left out), the keys before that one are read too: a holder
// hidden behind it still keeps the place out. A store that trusted the
// last two would admit the place beside the holder.
func TestQueueAfterUnreadablePredecessor(t *testing.T) {
	ctx := context.Background()
	cli := clientv3.NewCtxClient(ctx)
	s := New(cli)
	key := func(id string, rev int64, value string) *mvccpb.KeyValue {
		return &mvccpb.KeyValue{Key: []byte(s.lockDir("x") + "f/" + id), CreateRevision: rev, Value: []byte(value)}
	}
	own := func(id string, rev int64) *mvccpb.KeyValue {
		return key(id, rev, holding{Owner: id, Holds: []uint64{1}}.encode())
	}
	holder, garbage, place := own("holder", 5), key("garbage", 7, "not a holding"), own("place", 9)
	kv := &lastTwoKV{cut: []*mvccpb.KeyValue{place, garbage}, all: []*mvccpb.KeyValue{holder, garbage, place}}
	cli.KV = clientv3.NewKVFromKVClient(kv, cli)
	for _, changed := range []int64{0, 50} {
		kv.reads = nil
		cs, _, err := s.queueAfter(ctx, "x", changed, store.Fair, 9)
		if err != nil {
			t.Fatal(err)
		}
		i := find(cs, "place")
		if i < 0 || admitted(cs, i, 0) {
			t.Fatalf("after a change at %d: contenders %+v; want the place behind the holder", changed, cs)
		}
		if last := kv.reads[len(kv.reads)-1]; last.Limit != 0 || last.MaxCreateRevision != 9 {
			t.Errorf("the last read: %v; want every key up to the place's own", last)
		}
	}
}
