package bench_test

import (
	"context"
	"net"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/etcdstore"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/test/bufconn"
)

// BenchmarkEtcdClientCPU measures what an uncontended acquire and release
// costs the client itself: each library runs on an etcd client whose
// Lease and Watch APIs answer every request at once, in memory, and whose
// KV API does too, in one of two ways:
//
//   - kv=memory: the client's KV is instantKV below: no server, no
//     network, no marshalling. It isolates the library's own CPU above
//     gRPC. etcdstore sends its requests through such a KV as clientv3's
//     ops, since it is not etcd's own (wire.go).
//   - kv=grpc: the client's KV is etcd's own, as clientv3.New makes it,
//     on gRPC to a KV server in this process that answers as instantKV
//     does, over an in-memory connection: the figure includes gRPC's work at both ends, the
//     same for both libraries but for the size of their messages, and
//     etcdstore sends its uncontended pair as protocol messages, as it
//     does for a user.
//
// It checks nothing of etcd's behaviour, which the etcdtest suites do on
// real members; it isolates the share of etcdbench's (a) that is the
// client's CPU, without the noise of a round trip:
//
//	GOMAXPROCS=1 go test -run '^$' -bench EtcdClientCPU -benchmem -count 5
//
// The requests are those of a free lock: a transaction and a delete for
// each library. The context has a deadline, as in etcdbench's (a).
func BenchmarkEtcdClientCPU(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	const key = "bench/clientcpu"
	for _, kv := range []struct {
		name   string
		client func(b *testing.B) *clientv3.Client
	}{{"memory", func(*testing.B) *clientv3.Client { return instantClient() }}, {"grpc", grpcClient}} {
		b.Run("kv="+kv.name+"/lib=concurrency", func(b *testing.B) {
			s, err := concurrency.NewSession(kv.client(b))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			b.ReportAllocs()
			defer reportCPU(b)()
			for b.Loop() {
				m := concurrency.NewMutex(s, key)
				if err := m.Lock(ctx); err != nil {
					b.Fatal(err)
				}
				if err := m.Unlock(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
		for _, fair := range []bool{false, true} {
			name := "lib=distlock"
			if fair {
				name = "lib=distlock-fair"
			}
			b.Run("kv="+kv.name+"/"+name, func(b *testing.B) {
				c := distlock.New(etcdstore.New(kv.client(b)), distlock.WithLogger(nil))
				defer c.Close()
				m := c.Mutex(key)
				if fair {
					m = c.FairMutex(key)
				}
				b.ReportAllocs()
				defer reportCPU(b)()
				for b.Loop() {
					l, err := m.Lock(ctx)
					if err != nil {
						b.Fatal(err)
					}
					if err := l.Unlock(ctx); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// reportCPU reports, once the returned function is called, the CPU time
// of this process (user and system, every thread) per iteration, as
// cpu-µs/op: with kv=grpc, an iteration also waits on loopback sockets.
func reportCPU(b *testing.B) func() {
	start := processCPU(b)
	return func() {
		b.ReportMetric(float64((processCPU(b)-start).Microseconds())/float64(b.N), "cpu-µs/op")
	}
}

func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// grpcClient is an etcd client made by clientv3.New, whose KV is etcd's
// own, on gRPC to a KV server in this process that answers as instantKV
// does, over an in-memory connection (bufconn: no socket, no system
// call); its Lease and Watch APIs are instantClient's.
func grpcClient(b *testing.B) *clientv3.Client {
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer()
	pb.RegisterKVServer(srv, instantKVServer{})
	go func() { _ = srv.Serve(lis) }()
	b.Cleanup(srv.Stop)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"127.0.0.1:1"}, Logger: zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			return lis.DialContext(ctx)
		})}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cli.Close() })
	cli.Lease = instantLease{}
	cli.Watcher = instantWatcher{}
	return cli
}

// instantKVServer serves instantKV's answers.
type instantKVServer struct{ pb.UnimplementedKVServer }

func (instantKVServer) Txn(ctx context.Context, in *pb.TxnRequest) (*pb.TxnResponse, error) {
	return instantKV{}.Txn(ctx, in)
}

func (instantKVServer) DeleteRange(ctx context.Context, in *pb.DeleteRangeRequest) (*pb.DeleteRangeResponse, error) {
	return instantKV{}.DeleteRange(ctx, in)
}

func (instantKVServer) Range(ctx context.Context, in *pb.RangeRequest) (*pb.RangeResponse, error) {
	return instantKV{}.Range(ctx, in)
}

// instantClient is an etcd client whose KV, Lease and Watch APIs answer
// at once, in memory: every transaction succeeds, every delete deletes a
// key, every lease is granted and kept alive, every watch is created.
func instantClient() *clientv3.Client {
	cli := clientv3.NewCtxClient(context.Background())
	cli.KV = clientv3.NewKVFromKVClient(instantKV{}, cli)
	cli.Lease = instantLease{}
	cli.Watcher = instantWatcher{}
	return cli
}

var instantRev atomic.Int64

func instantHeader() *pb.ResponseHeader { return &pb.ResponseHeader{Revision: instantRev.Add(1)} }

// instantKV is a pb.KVClient that answers in memory.
type instantKV struct{}

func (instantKV) Range(context.Context, *pb.RangeRequest, ...grpc.CallOption) (*pb.RangeResponse, error) {
	return &pb.RangeResponse{Header: instantHeader()}, nil
}

func (instantKV) RangeStream(context.Context, *pb.RangeRequest, ...grpc.CallOption) (grpc.ServerStreamingClient[pb.RangeStreamResponse], error) {
	return nil, errInstant
}

func (instantKV) Put(context.Context, *pb.PutRequest, ...grpc.CallOption) (*pb.PutResponse, error) {
	return &pb.PutResponse{Header: instantHeader()}, nil
}

func (instantKV) DeleteRange(context.Context, *pb.DeleteRangeRequest, ...grpc.CallOption) (*pb.DeleteRangeResponse, error) {
	return &pb.DeleteRangeResponse{Header: instantHeader(), Deleted: 1}, nil
}

// Txn succeeds, with an empty reply to each operation of the success branch.
func (instantKV) Txn(_ context.Context, in *pb.TxnRequest, _ ...grpc.CallOption) (*pb.TxnResponse, error) {
	r := &pb.TxnResponse{Header: instantHeader(), Succeeded: true}
	for _, op := range in.Success {
		var resp pb.ResponseOp
		switch op.Request.(type) {
		case *pb.RequestOp_RequestPut:
			resp.Response = &pb.ResponseOp_ResponsePut{ResponsePut: &pb.PutResponse{}}
		case *pb.RequestOp_RequestRange:
			resp.Response = &pb.ResponseOp_ResponseRange{ResponseRange: &pb.RangeResponse{}}
		case *pb.RequestOp_RequestDeleteRange:
			resp.Response = &pb.ResponseOp_ResponseDeleteRange{ResponseDeleteRange: &pb.DeleteRangeResponse{}}
		default:
			return nil, errInstant
		}
		r.Responses = append(r.Responses, &resp)
	}
	return r, nil
}

func (instantKV) Compact(context.Context, *pb.CompactionRequest, ...grpc.CallOption) (*pb.CompactionResponse, error) {
	return nil, errInstant
}

// errInstant answers what the benchmark never asks.
var errInstant = grpc.ErrClientConnClosing

// instantLease grants and keeps alive every lease at once.
type instantLease struct{}

func (instantLease) Grant(_ context.Context, ttl int64) (*clientv3.LeaseGrantResponse, error) {
	return &clientv3.LeaseGrantResponse{ResponseHeader: instantHeader(), ID: 1, TTL: ttl}, nil
}

func (instantLease) Revoke(context.Context, clientv3.LeaseID) (*clientv3.LeaseRevokeResponse, error) {
	return &clientv3.LeaseRevokeResponse{Header: instantHeader()}, nil
}

func (instantLease) TimeToLive(_ context.Context, id clientv3.LeaseID, _ ...clientv3.LeaseOption) (*clientv3.LeaseTimeToLiveResponse, error) {
	return &clientv3.LeaseTimeToLiveResponse{ResponseHeader: instantHeader(), ID: id, TTL: 60}, nil
}

func (instantLease) Leases(context.Context) (*clientv3.LeaseLeasesResponse, error) {
	return &clientv3.LeaseLeasesResponse{}, nil
}

// KeepAlive returns a channel that stays quiet until ctx ends: the lease
// lives.
func (instantLease) KeepAlive(ctx context.Context, _ clientv3.LeaseID) (<-chan *clientv3.LeaseKeepAliveResponse, error) {
	ch := make(chan *clientv3.LeaseKeepAliveResponse)
	context.AfterFunc(ctx, func() { close(ch) })
	return ch, nil
}

func (instantLease) KeepAliveOnce(_ context.Context, id clientv3.LeaseID) (*clientv3.LeaseKeepAliveResponse, error) {
	return &clientv3.LeaseKeepAliveResponse{ResponseHeader: instantHeader(), ID: id, TTL: 60}, nil
}

func (instantLease) Close() error { return nil }

// instantWatcher creates every watch at once; no event ever comes. Its
// created notice has a header, as clientv3's always do.
type instantWatcher struct{}

func (instantWatcher) Watch(ctx context.Context, _ string, _ ...clientv3.OpOption) clientv3.WatchChan {
	ch := make(chan clientv3.WatchResponse, 1)
	ch <- clientv3.WatchResponse{Header: &pb.ResponseHeader{Revision: 1}, Created: true}
	context.AfterFunc(ctx, func() { close(ch) })
	return ch
}

func (instantWatcher) RequestProgress(context.Context) error { return nil }
func (instantWatcher) Close() error                          { return nil }
