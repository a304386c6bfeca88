package etcdtest_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock/etcdstore"
	"github.com/distlock/distlock/etcdtest"
	"github.com/distlock/distlock/store"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
)

// watchLog records the keys of the watches a client creates. It can make
// the watch that receives an event look cancelled (as a member lost
// would) instead of delivering it, and run a hook before the next watch
// creation is sent.
type watchLog struct {
	mu           sync.Mutex
	created      []string                 // the key of each watch creation sent
	sent         chan struct{}            // a receive per creation
	drop         func(*mvccpb.Event) bool // the event whose response is dropped, once
	dropped      chan struct{}            // closed once it was
	beforeCreate func()                   // run once, before the next creation is sent
}

func newWatchLog() *watchLog {
	return &watchLog{sent: make(chan struct{}, 64), dropped: make(chan struct{})}
}

func (l *watchLog) interceptor(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	cs, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil || method != "/etcdserverpb.Watch/Watch" {
		return cs, err
	}
	return loggedStream{cs, l}, nil
}

// keys returns the keys of the watches created so far.
func (l *watchLog) keys() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.created)
}

// dropDeleteOf makes the next response that delivers the delete of key
// a cancellation of its watch, without the event.
func (l *watchLog) dropDeleteOf(key string) {
	l.dropWhere(func(ev *mvccpb.Event) bool { return ev.Type == mvccpb.DELETE && string(ev.Kv.Key) == key })
}

// dropWhere makes the next response with an event that match matches a
// cancellation of its watch, without its events.
func (l *watchLog) dropWhere(match func(*mvccpb.Event) bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.drop = match
}

// before runs hook before the next watch creation is sent.
func (l *watchLog) before(hook func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.beforeCreate = hook
}

// await waits until a watch of key has been created.
func (l *watchLog) await(ctx context.Context, t *testing.T, key string) {
	t.Helper()
	for !slices.Contains(l.keys(), key) {
		select {
		case <-l.sent:
		case <-ctx.Done():
			t.Fatalf("no watch of %s; watched %q", key, l.keys())
		}
	}
}

type loggedStream struct {
	grpc.ClientStream
	l *watchLog
}

func (s loggedStream) SendMsg(m any) error {
	if r, ok := m.(*pb.WatchRequest); ok && r.GetCreateRequest() != nil {
		s.l.mu.Lock()
		s.l.created = append(s.l.created, string(r.GetCreateRequest().Key))
		hook := s.l.beforeCreate
		s.l.beforeCreate = nil
		s.l.mu.Unlock()
		if hook != nil {
			hook()
		}
		select {
		case s.l.sent <- struct{}{}:
		default:
		}
	}
	return s.ClientStream.SendMsg(m)
}

func (s loggedStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	r, ok := m.(*pb.WatchResponse)
	if err != nil || !ok {
		return err
	}
	s.l.mu.Lock()
	defer s.l.mu.Unlock()
	for _, ev := range r.Events {
		if s.l.drop != nil && s.l.drop(ev) {
			r.Events, r.Canceled, r.CancelReason = nil, true, "etcdtest: an event was dropped"
			s.l.drop = nil
			close(s.l.dropped)
			break
		}
	}
	return err
}

// A queuedWaiter is a fair mutex's waiter queued behind a holder of
// another store, both with 10-minute leases: nothing but a delete of a key
// changes the queue within a test. Its store's watches go through log.
type queuedWaiter struct {
	c                 *etcdtest.Cluster
	log               *watchLog
	holderKey, ownKey string
	owner             string
	notices           <-chan store.Notice // its store's notices of the lock
}

// queueWaiter starts a queuedWaiter on the lock name of a new cluster,
// and waits until it watches the holder's key.
func queueWaiter(ctx context.Context, t *testing.T, name string) queuedWaiter {
	t.Helper()
	q := queuedWaiter{c: etcdtest.Start(t, 1), log: newWatchLog()}
	ws := etcdstore.New(dialWith(t, q.c.Endpoints(), grpc.WithChainStreamInterceptor(q.log.interceptor)))
	hs := etcdstore.New(dialWith(t, q.c.Endpoints()))
	t.Cleanup(func() { _, _ = ws.Close(), hs.Close() })
	q.notices = watchGrants(ctx, t, ws, name)
	holder, waiter := req(name, "holder", store.Fair, 0), req(name, "waiter", store.Fair, 10*time.Minute)
	holder.Lease, waiter.Lease = 10*time.Minute, 10*time.Minute
	q.owner = waiter.Owner
	mustHold(ctx, t, hs, holder)
	if g, err := ws.Acquire(ctx, waiter); err != nil || !g.Queued {
		t.Fatalf("the waiter: %+v, %v; want a place", g, err)
	}
	resp, err := dialWith(t, q.c.Endpoints()).Get(ctx, etcdstore.DefaultPrefix+"lock/{"+name+"}/", clientv3.WithPrefix(),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	if err != nil || len(resp.Kvs) != 2 {
		t.Fatalf("the lock's keys: %v, %v; want the holder's and the waiter's", resp, err)
	}
	q.holderKey, q.ownKey = string(resp.Kvs[0].Key), string(resp.Kvs[1].Key)
	q.log.await(ctx, t, q.holderKey)
	return q
}

// deleteOwnKey deletes the waiter's key, as an operator or an expiry would.
func (q queuedWaiter) deleteOwnKey(ctx context.Context, t *testing.T) {
	t.Helper()
	if _, err := dialWith(t, q.c.Endpoints()).Delete(ctx, q.ownKey); err != nil {
		t.Fatal(err)
	}
}

// awaitGone waits for the notice that the place of owner is gone.
func awaitGone(ctx context.Context, t *testing.T, notices <-chan store.Notice, owner string) {
	t.Helper()
	select {
	case n := <-notices:
		if !n.Gone || n.Grantee != store.GranteeID(owner) {
			t.Fatalf("notice %+v, want that the place of %s is gone", n, owner)
		}
	case <-ctx.Done():
		t.Fatal("the waiter was not told that its key is gone")
	}
}

// TestEtcdWaiterWatchesOneKey: a fair mutex's waiter watches the key
// before it, and nothing else of its own: the deletes of its own key come
// through the one watch of the store's keys on the lock that its Watch
// made. Its key's delete still reaches it at once (the place's lease and
// queue timeout are 10 minutes: no refresh would find it in the test's
// time). A store whose waiters watched their own keys each fails the
// first check; one that watched none, the second.
func TestEtcdWaiterWatchesOneKey(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	q := queueWaiter(ctx, t, "watches-one-key")
	shared := q.ownKey[:strings.LastIndexByte(q.ownKey, '.')+1] // …/f/<store id>.<slot>
	if got, want := q.log.keys(), []string{shared, q.holderKey}; !slices.Equal(got, want) {
		t.Errorf("watches created: %q, want %q (the store's keys on the lock, then the holder's)", got, want)
	}
	q.deleteOwnKey(ctx, t)
	awaitGone(ctx, t, q.notices, q.owner)
}

// TestEtcdSharedWatchBreakLosesNoKey: the shared watch of the store's keys
// on a lock breaks just as it would deliver the delete of a waiter's key
// (the event is lost, the watch cancelled: as when its member loses the
// leader). It is made again, from after the delete, and the waiter, told
// that it broke, reads its queue again and learns that its key is gone. A
// store that only made the shared watch again would leave the waiter
// waiting for ever (its place's lease is 10 minutes).
func TestEtcdSharedWatchBreakLosesNoKey(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	q := queueWaiter(ctx, t, "shared-watch-break")
	if slices.Contains(q.log.keys(), q.ownKey) {
		t.Fatalf("the waiter watches its own key (%q): the check needs it to count on the shared watch", q.log.keys())
	}
	q.log.dropDeleteOf(q.ownKey)
	q.deleteOwnKey(ctx, t)
	select {
	case <-q.log.dropped:
	case <-ctx.Done():
		t.Fatal("the delete never reached the client")
	}
	awaitGone(ctx, t, q.notices, q.owner)
}
