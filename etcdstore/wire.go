package etcdstore

import (
	"context"
	"fmt"
	"math"
	"reflect"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
)

// The two requests of an uncontended pair, the transaction that takes a
// free lock and the delete that frees it, are built as etcd's protocol
// messages rather than through clientv3's Txn and Op builders, which
// clone every compare by reflection and make an Op of every operation:
// that took a third of the library's own CPU per pair, above gRPC
// (bench's BenchmarkEtcdClientCPU). The other requests, rarer, use the
// builders.
//
// When the client's KV is etcd's own (the one clientv3.New makes), these
// messages go out on its gRPC stub, which has the client's retries and
// credentials, with clientv3's default call options: wait for a ready
// connection, no reply size limit (a client configured with other limits
// does not pass them on to these two requests, which are small). When it
// is another (a namespace.KV, a wrapper), they go through it as ops, so
// that whatever it does to every request, such as prefixing keys, it does
// to these too.

// A wire sends requests built as protocol messages.
type wire struct {
	cli    *clientv3.Client
	remote pb.KVClient // the stub under the client's own KV
}

// etcdKV is the type of the KV of a client made by clientv3.New, and
// etcdRemote the type of the stub under it (the one a KV made by
// clientv3.NewKVFromKVClient has is another's).
var (
	etcdKV     = reflect.TypeOf(clientv3.NewKV(&clientv3.Client{}))
	etcdRemote = reflect.TypeOf(clientv3.RetryKVClient(&clientv3.Client{}))
	remoteAt   = remoteField()
)

// remoteField is the index of the stub's field in etcdKV's struct, nil
// if clientv3 has none of that name and type.
func remoteField() []int {
	f, ok := etcdKV.Elem().FieldByName("remote")
	if !ok || f.Type.Kind() != reflect.Interface || !etcdRemote.Implements(f.Type) {
		return nil
	}
	return f.Index
}

// isEtcdKV reports whether kv is a KV as clientv3.New makes it: etcd's,
// on a retrying stub. Anything else, or a clientv3 whose KV is not as
// this expects, is not.
func isEtcdKV(kv clientv3.KV) bool {
	v := reflect.ValueOf(kv)
	if !v.IsValid() || v.Type() != etcdKV || v.IsNil() || remoteAt == nil {
		return false
	}
	r := v.Elem().FieldByIndex(remoteAt)
	return !r.IsNil() && r.Elem().Type() == etcdRemote
}

// wireCallOpts are clientv3's default call options.
var wireCallOpts = []grpc.CallOption{
	grpc.WaitForReady(true),
	grpc.MaxCallSendMsgSize(2 << 20),
	grpc.MaxCallRecvMsgSize(math.MaxInt32),
}

func newWire(cli *clientv3.Client) wire {
	w := wire{cli: cli}
	if cli != nil && cli.ActiveConnection() != nil {
		w.remote = clientv3.RetryKVClient(cli)
	}
	return w
}

// direct reports whether requests go out on the stub: the client's KV is
// still its own (it is read at every request, as the client's methods do).
func (w wire) direct() bool {
	return w.remote != nil && isEtcdKV(w.cli.KV)
}

// txn sends r.
func (w wire) txn(ctx context.Context, r *pb.TxnRequest) (*clientv3.TxnResponse, error) {
	if !w.direct() {
		cmps := make([]clientv3.Cmp, len(r.Compare))
		for i, c := range r.Compare {
			cmps[i] = clientv3.FromCompare(c)
		}
		then, err := opsOf(r.Success)
		if err != nil {
			return nil, err
		}
		els, err := opsOf(r.Failure)
		if err != nil {
			return nil, err
		}
		return w.cli.Txn(ctx).If(cmps...).Then(then...).Else(els...).Commit()
	}
	resp, err := w.remote.Txn(ctx, r, wireCallOpts...)
	if err != nil {
		return nil, clientv3.ContextError(ctx, err)
	}
	return (*clientv3.TxnResponse)(resp), nil
}

// delete deletes key.
func (w wire) delete(ctx context.Context, key string) (*clientv3.DeleteResponse, error) {
	if !w.direct() {
		return w.cli.Delete(ctx, key)
	}
	resp, err := w.remote.DeleteRange(ctx, &pb.DeleteRangeRequest{Key: []byte(key)}, wireCallOpts...)
	if err != nil {
		return nil, clientv3.ContextError(ctx, err)
	}
	return (*clientv3.DeleteResponse)(resp), nil
}

// opsOf returns the ops of rs, of the kinds and fields this store builds.
func opsOf(rs []*pb.RequestOp) ([]clientv3.Op, error) {
	ops := make([]clientv3.Op, len(rs))
	for i, r := range rs {
		switch r := r.Request.(type) {
		case *pb.RequestOp_RequestRange:
			g := r.RequestRange
			var opts []clientv3.OpOption
			if len(g.RangeEnd) > 0 {
				opts = append(opts, clientv3.WithRange(string(g.RangeEnd)))
			}
			if g.SortOrder != pb.RangeRequest_NONE {
				opts = append(opts, clientv3.WithSort(clientv3.SortTarget(g.SortTarget), clientv3.SortOrder(g.SortOrder)))
			}
			if g.CountOnly {
				opts = append(opts, clientv3.WithCountOnly())
			}
			ops[i] = clientv3.OpGet(string(g.Key), opts...)
		case *pb.RequestOp_RequestPut:
			p := r.RequestPut
			ops[i] = clientv3.OpPut(string(p.Key), string(p.Value), clientv3.WithLease(clientv3.LeaseID(p.Lease)))
		default:
			return nil, fmt.Errorf("etcdstore: no op for a request of %T", r)
		}
	}
	return ops, nil
}

// createdEquals is a compare of the create revision of key (of every key
// in [key, end) if end is set) with rev.
func createdEquals(key, end []byte, rev int64) *pb.Compare {
	return &pb.Compare{Result: pb.Compare_EQUAL, Target: pb.Compare_CREATE, Key: key, RangeEnd: end,
		TargetUnion: &pb.Compare_CreateRevision{CreateRevision: rev}}
}

// carve appends to b with add, and returns b and what add appended, as a
// slice that a later append cannot overwrite.
func carve(b []byte, add func([]byte) []byte) ([]byte, []byte) {
	n := len(b)
	b = add(b)
	return b, b[n:len(b):len(b)]
}

// prefixEnd turns b[from:], a key, into the end of the range of the keys
// it prefixes (clientv3.GetPrefixRangeEnd), and returns b.
func prefixEnd(b []byte, from int) []byte {
	for i := len(b) - 1; i >= from; i-- {
		if b[i] < 0xff {
			b[i]++
			return b[:i+1]
		}
	}
	return append(b[:from], 0) // every byte 0xff: every key from the prefix on
}

// queueRange is rangeOp's message: the keys in [dir, end) by create
// revision, oldest first.
func queueRange(dir, end []byte) *pb.RequestOp {
	return &pb.RequestOp{Request: &pb.RequestOp_RequestRange{RequestRange: &pb.RangeRequest{Key: dir, RangeEnd: end,
		SortOrder: pb.RangeRequest_ASCEND, SortTarget: pb.RangeRequest_CREATE}}}
}
