package etcdtest_test

import (
	"context"
	"fmt"
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
// sent the delete's event has applied it. Before the release it reads the
// queue again only if the store changed between its place's put and its
// watches, and then as of the revision they start after, serializably
// too. A store that read the queue linearizably at any point, or whose
// serializable read the member refused (and that then read again through
// the leader), or that read more than once after the release, fails.
func TestEtcdGrantReadAtTheReleaseRevision(t *testing.T) {
	c := etcdtest.Start(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	leader, follower := leaderAndFollower(ctx, t, c)
	log := &rangeLog{sent: make(chan struct{}, 16)}
	probe := dialWith(t, []string{leader.Endpoint()})
	hs := etcdstore.New(dialWith(t, []string{leader.Endpoint()}))
	ws := etcdstore.New(dialWith(t, []string{follower.Endpoint()}, grpc.WithChainUnaryInterceptor(log.interceptor)))
	t.Cleanup(func() { _, _ = hs.Close(), ws.Close() })

	const name = "read-at-release"
	grants := watchGrants(ctx, t, ws, name)
	holder, waiter := req(name, "holder", store.Fair, 0), req(name, "waiter", store.Fair, time.Minute)
	mustHold(ctx, t, hs, holder)
	if g, err := ws.Acquire(ctx, waiter); err != nil || !g.Queued {
		t.Fatalf("the waiter: %+v, %v; want a place", g, err)
	}
	resp, err := probe.Get(ctx, "any")
	if err != nil {
		t.Fatal(err)
	}
	before := resp.Header.Revision // the release comes after it
	holder.Hold = 0
	if rel, err := hs.Release(ctx, holder); err != nil || rel != store.Freed {
		t.Fatalf("the holder's release: %v, %v", rel, err)
	}
	awaitGrant(ctx, t, grants, waiter.Owner)
	reads := log.since(0)
	var after []loggedRange
	for _, r := range reads {
		if !r.serializable || r.at == 0 {
			t.Errorf("a read of the waiter not served by its member as of a revision: %+v", r)
		}
		if r.at > before {
			after = append(after, r)
		}
	}
	if len(after) != 1 {
		t.Errorf("the waiter's reads: %+v; want one serializable read as of a revision after %d (the release's)", reads, before)
	}
}

// beforeWatch runs hook, once armed, before the first watch creation a
// client sends from then on.
type beforeWatch struct {
	mu   sync.Mutex
	hook func()
}

func (b *beforeWatch) arm(hook func()) { b.mu.Lock(); b.hook = hook; b.mu.Unlock() }

func (b *beforeWatch) interceptor(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	cs, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil || method != "/etcdserverpb.Watch/Watch" {
		return cs, err
	}
	return hookedStream{cs, b}, nil
}

type hookedStream struct {
	grpc.ClientStream
	b *beforeWatch
}

func (h hookedStream) SendMsg(m any) error {
	if r, ok := m.(*pb.WatchRequest); ok && r.GetCreateRequest() != nil {
		h.b.mu.Lock()
		hook := h.b.hook
		h.b.hook = nil
		h.b.mu.Unlock()
		if hook != nil {
			hook()
		}
	}
	return h.ClientStream.SendMsg(m)
}

// TestEtcdReleaseBetweenPlaceAndWatch: a lock released after a waiter put
// its place but before its watches exist is seen: the watches start after
// the release, so the waiter reads its queue again as of the revision
// they start after, and holds the lock. A waiter that trusted the read
// its place's put made would wait for a delete that came before its watch.
func TestEtcdReleaseBetweenPlaceAndWatch(t *testing.T) {
	c := etcdtest.Start(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	hook := &beforeWatch{}
	log := &rangeLog{sent: make(chan struct{}, 16)}
	hs := etcdstore.New(dialWith(t, c.Endpoints()))
	ws := etcdstore.New(dialWith(t, c.Endpoints(), grpc.WithChainStreamInterceptor(hook.interceptor),
		grpc.WithChainUnaryInterceptor(log.interceptor)))
	t.Cleanup(func() { _, _ = hs.Close(), ws.Close() })

	const name = "release-before-watch"
	grants := watchGrants(ctx, t, ws, name)
	holder, waiter := req(name, "holder", store.Fair, 0), req(name, "waiter", store.Fair, time.Minute)
	mustHold(ctx, t, hs, holder)
	released := make(chan error, 1)
	hook.arm(func() {
		h := holder
		h.Hold = 0
		rel, err := hs.Release(ctx, h)
		if err == nil && rel != store.Freed {
			err = fmt.Errorf("release: %v", rel)
		}
		released <- err
	})
	if g, err := ws.Acquire(ctx, waiter); err != nil || !g.Queued {
		t.Fatalf("the waiter: %+v, %v; want a place", g, err)
	}
	select {
	case err := <-released:
		if err != nil {
			t.Fatal(err)
		}
	case <-ctx.Done():
		t.Fatal("the waiter made no watch")
	}
	awaitGrant(ctx, t, grants, waiter.Owner)
	if reads := log.since(0); len(reads) != 1 || !reads[0].serializable || reads[0].at == 0 {
		t.Errorf("the waiter's reads: %+v; want one, serializable, as of the revision its watches start after", reads)
	}
}

// TestEtcdUnreadableKeyHidesNoHolder: a key in a fair mutex's directory
// that is no one's (unreadable: not written by a store) and comes just
// before a new place does not hide the holder before it: the place reads
// every key up to its own and waits. A store that trusted the last two
// keys it reads in its put's transaction would hold the lock beside the
// holder.
func TestEtcdUnreadableKeyHidesNoHolder(t *testing.T) {
	c := etcdtest.Start(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	raw := dialWith(t, c.Endpoints())
	s := etcdstore.New(dialWith(t, c.Endpoints()))
	t.Cleanup(func() { _ = s.Close() })
	const name = "unreadable"
	holder, waiter := req(name, "holder", store.Fair, 0), req(name, "waiter", store.Fair, time.Minute)
	mustHold(ctx, t, s, holder)
	if _, err := raw.Put(ctx, etcdstore.DefaultPrefix+"lock/{"+name+"}/f/zz-not-a-store", "not a holding"); err != nil {
		t.Fatal(err)
	}
	g, err := s.Acquire(ctx, waiter)
	if err != nil || g.Acquired || !g.Queued {
		t.Fatalf("the waiter: %+v, %v; want a place behind the holder", g, err)
	}
}
