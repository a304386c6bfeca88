package etcdtest_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock/etcdstore"
	"github.com/distlock/distlock/etcdtest"
	"github.com/distlock/distlock/store"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
)

// rangeLog records the Range requests a client sends, with the revision of
// each reply's header.
type rangeLog struct {
	mu    sync.Mutex
	reads []loggedRange
	sent  chan struct{} // a receive per reply
}

type loggedRange struct {
	serializable bool
	at, header   int64 // the request's revision (0: the latest), the reply's
}

func (l *rangeLog) interceptor(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	err := invoker(ctx, method, req, reply, cc, opts...)
	if r, ok := req.(*pb.RangeRequest); ok && err == nil {
		l.mu.Lock()
		l.reads = append(l.reads, loggedRange{serializable: r.Serializable, at: r.Revision, header: reply.(*pb.RangeResponse).Header.Revision})
		l.mu.Unlock()
		select {
		case l.sent <- struct{}{}:
		default:
		}
	}
	return err
}

func (l *rangeLog) since(n int) []loggedRange {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]loggedRange(nil), l.reads[n:]...)
}

// TestEtcdGrantReadAtTheReleaseRevision: on 3 members, a fair mutex's
// waiter whose client talks to a follower learns of its grant by one read
// of the queue as of the release's revision, served by that follower
// without a round through the leader (serializable): the follower that
// sent the delete's event has applied it. A store that read the queue
// linearizably, or whose serializable read the member refused (and that
// then read again through the leader), fails.
func TestEtcdGrantReadAtTheReleaseRevision(t *testing.T) {
	c := etcdtest.Start(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	leader, follower := leaderAndFollower(ctx, t, c)
	log := &rangeLog{sent: make(chan struct{}, 16)}
	hs := etcdstore.New(dialWith(t, []string{leader.Endpoint()}))
	ws := etcdstore.New(dialWith(t, []string{follower.Endpoint()}, grpc.WithChainUnaryInterceptor(log.interceptor)))
	t.Cleanup(func() { _, _ = hs.Close(), ws.Close() })

	const name = "read-at-release"
	grants := make(chan store.Notice, 4)
	stop, err := ws.Watch(ctx, name, store.Fair, func(n store.Notice) { grants <- n })
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	holder, waiter := req(name, "holder", store.Fair, 0), req(name, "waiter", store.Fair, time.Minute)
	if g, err := hs.Acquire(ctx, holder); err != nil || !g.Acquired {
		t.Fatalf("the holder: %+v, %v", g, err)
	}
	if g, err := ws.Acquire(ctx, waiter); err != nil || !g.Queued {
		t.Fatalf("the waiter: %+v, %v; want a place", g, err)
	}
	// The waiter follows its place: it watches the holder's key, then reads
	// the queue once (linearizable: the watch follows that read).
	select {
	case <-log.sent:
	case <-ctx.Done():
		t.Fatal("the waiter never read its queue")
	}
	first := log.since(0)
	if len(first) != 1 || first[0].serializable {
		t.Fatalf("the waiter's reads before the release: %+v, want one linearizable read", first)
	}
	holder.Hold = 0
	if rel, err := hs.Release(ctx, holder); err != nil || rel != store.Freed {
		t.Fatalf("the holder's release: %v, %v", rel, err)
	}
	awaitGrant(ctx, t, grants, waiter.Owner)
	after := log.since(1)
	if len(after) != 1 || !after[0].serializable || after[0].at <= first[0].header {
		t.Errorf("the waiter's reads from the release to its grant: %+v; want one serializable read at the release's revision (after %d)", after, first[0].header)
	}
}
