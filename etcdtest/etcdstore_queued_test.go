package etcdtest_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/etcdtest"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
)

// countingClient returns a client of endpoints that counts in n the
// requests it sends to etcd's KV service (Range, Txn, Put, DeleteRange):
// what a store reads and writes; and in ranges its Ranges, once answered.
func countingClient(t *testing.T, n, ranges *atomic.Int64, endpoints ...string) *clientv3.Client {
	t.Helper()
	return dialWith(t, endpoints, grpc.WithChainUnaryInterceptor(
		func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			if strings.HasPrefix(method, "/etcdserverpb.KV/") {
				n.Add(1)
			}
			err := invoker(ctx, method, req, reply, cc, opts...)
			if method == "/etcdserverpb.KV/Range" {
				ranges.Add(1)
			}
			return err
		}))
}

// leaderAndFollower returns c's leader and one of its followers.
func leaderAndFollower(ctx context.Context, t *testing.T, c *etcdtest.Cluster) (leader, follower *etcdtest.Member) {
	t.Helper()
	leader, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range c.Members() {
		if m != leader {
			return leader, m
		}
	}
	t.Fatal("no follower")
	return nil, nil
}

// dialWith returns a client of endpoints with the dial options opts,
// closed when the test ends.
func dialWith(t *testing.T, endpoints []string, opts ...grpc.DialOption) *clientv3.Client {
	t.Helper()
	cfg := etcdtest.ClientConfig(endpoints...)
	cfg.DialOptions = append(cfg.DialOptions, opts...)
	cli, err := clientv3.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// TestEtcdWaitersFollowTheirPredecessor: four processes (clients) queue for
// a fair mutex; each hand-over wakes the next in line only. While the lock
// goes from the first to the second and from the second to the third, the
// fourth, which waits for the third's key, sends etcd no request at all (a
// store whose waiters watched the whole lock would read it again at each
// release), and the third none during the first hand-over. The queue
// timeout is long, so that no refresh of a place falls in between.
//
// The counts start once each waiter follows its place: a place's key is
// visible before its acquisition has returned, and the store reads the
// queue once (a Range, the first of its client) before it watches the
// key ahead.
func TestEtcdWaitersFollowTheirPredecessor(t *testing.T) {
	c := etcdtest.Start(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var reqs, ranges [4]atomic.Int64
	var cs [4]*distlock.Client
	for i := range cs {
		cs[i] = lockClient(t, countingClient(t, &reqs[i], &ranges[i], c.Endpoints()...))
	}
	closeAtEnd(t, cs[:]...)
	mutex := func(i int) *distlock.Mutex {
		return cs[i].FairMutex("herd", distlock.WithQueueTimeout(5*time.Minute))
	}
	first, err := mutex(0).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *distlock.Lease, 3)
	for i := 1; i < 4; i++ {
		go func() {
			l, err := mutex(i).Lock(ctx)
			if err != nil {
				t.Errorf("waiter %d: %v", i, err)
			}
			got <- l
		}()
		waitQueued(t, ctx, fairQueued(mutex(0)), i) // in this order
	}
	for i := 1; i < 4; i++ {
		for ranges[i].Load() == 0 {
			select {
			case <-ctx.Done():
				t.Fatalf("waiter %d never read its queue", i)
			case <-time.After(time.Millisecond):
			}
		}
	}
	before2, before3 := reqs[2].Load(), reqs[3].Load()
	if err := first.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	second := <-got
	if second == nil || reqs[2].Load() != before2 {
		t.Fatalf("first hand-over: the third waiter sent %d requests", reqs[2].Load()-before2)
	}
	if err := second.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	third := <-got
	if third == nil {
		t.FailNow()
	}
	if n := reqs[3].Load() - before3; n != 0 {
		t.Errorf("the fourth waiter sent %d requests during two hand-overs before it", n)
	}
	if third.Token() <= second.Token() {
		t.Errorf("tokens %d then %d", second.Token(), third.Token())
	}
	if err := third.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if l := <-got; l == nil || l.Unlock(ctx) != nil {
		t.Error("the fourth waiter did not get the lock")
	}
}

// waitQueued waits until queued, a lock's Inspect, says that n places
// are in its queue.
func waitQueued(t *testing.T, ctx context.Context, queued func(context.Context) (int, error), n int) {
	t.Helper()
	for {
		q, err := queued(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if q >= n {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%d places in the queue, want %d", q, n)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// fairQueued is the places in the queue of a fair mutex.
func fairQueued(m *distlock.Mutex) func(context.Context) (int, error) {
	return func(ctx context.Context) (int, error) {
		info, err := m.Inspect(ctx)
		return info.Queued, err
	}
}

// TestEtcdTokensAcrossLeaderChange: a token is the create revision of the
// holder's key, and the tokens of one lock increase across a leadership
// transfer and across the leader's crash.
func TestEtcdTokensAcrossLeaderChange(t *testing.T) {
	c := etcdtest.Start(t, 3)
	cli := c.Client(t)
	lc := lockClient(t, cli)
	closeAtEnd(t, lc)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var last uint64
	take := func(step string) {
		t.Helper()
		for _, m := range []*distlock.Mutex{lc.Mutex("tok"), lc.FairMutex("tok-fair")} {
			l, err := m.Lock(ctx)
			if err != nil {
				t.Fatalf("%s: %v", step, err)
			}
			resp, err := cli.Get(ctx, "distlock/lock/{"+m.Name()+"}/", clientv3.WithPrefix())
			if err != nil || len(resp.Kvs) != 1 || uint64(resp.Kvs[0].CreateRevision) != l.Token() {
				t.Errorf("%s: token %d, the key: %v %v", step, l.Token(), resp, err)
			}
			if l.Token() <= last {
				t.Errorf("%s: token %d, not above %d", step, l.Token(), last)
			}
			last = l.Token()
			if err := l.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	take("before")
	_, other := leaderAndFollower(ctx, t, c)
	if err := c.TransferLeader(ctx, other); err != nil {
		t.Fatal(err)
	}
	take("after a transfer")
	other.Kill()
	if _, err := c.Leader(ctx); err != nil {
		t.Fatal(err)
	}
	take("after the leader's crash")
}

// TestEtcdLateReleaseCannotTouchNewer: a holder's release is held up in the
// network (its member's proxy frozen) until its lease has run out and
// another client holds the lock; delivered then, it changes nothing: the
// new holder keeps the lock, and its key.
func TestEtcdLateReleaseCannotTouchNewer(t *testing.T) {
	c := etcdtest.Start(t, 3)
	ms := c.Members()
	proxy := ms[0].Proxy()
	a := lockClient(t, etcdtest.Dial(t, ms[0].ProxyEndpoint()))
	b := lockClient(t, ms[1].Client(t))
	t.Cleanup(func() {
		proxy.Resume()
		_ = a.Close()
		if err := b.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, kind := range []string{"mutex", "fair-mutex"} {
		mutex := func(c *distlock.Client) *distlock.Mutex {
			if kind == "mutex" {
				return c.Mutex("late-"+kind, distlock.WithTTL(3*time.Second))
			}
			return c.FairMutex("late-"+kind, distlock.WithTTL(3*time.Second))
		}
		l, err := mutex(a).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		proxy.Pause()
		uctx, ucancel := context.WithTimeout(ctx, 500*time.Millisecond)
		if err := l.Unlock(uctx); err == nil {
			t.Fatalf("%s: Unlock through a frozen proxy succeeded", kind)
		}
		ucancel()
		l2, err := mutex(b).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		proxy.Resume() // the late release, and a's clean-up, land now
		// Once a's requests are through (a's next request answers after
		// them, on the same connection), b still holds.
		if _, err := mutex(a).Inspect(ctx); err != nil {
			t.Fatal(err)
		}
		info, err := mutex(b).Inspect(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !info.Locked || info.Token != l2.Token() || l2.Context().Err() != nil {
			t.Errorf("%s: after the late release: %+v, the new holder's context %v", kind, info, l2.Context().Err())
		}
		if err := l2.Unlock(ctx); err != nil {
			t.Errorf("%s: the new holder's Unlock: %v", kind, err)
		}
	}
}

// TestEtcdWaiterSurvivesLostConnections: every connection of a waiting
// client is cut (the watch that follows its place ends with them); it
// watches again, and gets the lock when the holder releases it.
func TestEtcdWaiterSurvivesLostConnections(t *testing.T) {
	c := etcdtest.Start(t, 3)
	holder := lockClient(t, c.Client(t))
	// The cut must come once the waiter's acquisition has returned, queued
	// (a reply lost with its connection is an unknown outcome: Lock fails
	// with ErrBackend then, as it should).
	waiter, waiting := waitingClient(t, etcdtest.Dial(t, c.ProxyEndpoints()...))
	closeAtEnd(t, holder, waiter)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	fair := func(c *distlock.Client) *distlock.Mutex { return c.FairMutex("cut-fair") }
	rw := func(c *distlock.Client) *distlock.RWMutex { return c.RWMutex("cut-rw") }
	for _, kind := range []struct {
		name   string
		take   func(*distlock.Client) (*distlock.Lease, error)
		queued func(context.Context) (int, error)
	}{
		{"fair-mutex", func(c *distlock.Client) (*distlock.Lease, error) { return fair(c).Lock(ctx) }, fairQueued(fair(holder))},
		{"rwmutex", func(c *distlock.Client) (*distlock.Lease, error) { return rw(c).Lock(ctx) },
			func(ctx context.Context) (int, error) {
				info, err := rw(holder).Inspect(ctx)
				return info.QueuedReaders + info.QueuedWriters, err
			}},
	} {
		l, err := kind.take(holder)
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan error, 1)
		go func() {
			l, err := kind.take(waiter)
			if err == nil {
				err = l.Unlock(ctx)
			}
			got <- err
		}()
		waitQueued(t, ctx, kind.queued, 1)
		awaitWaiting(t, ctx, waiting)
		for _, m := range c.Members() {
			m.Proxy().Cut()
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-got; err != nil {
			t.Errorf("%s: the waiter: %v", kind.name, err)
		}
	}
}

// TestEtcdWaiterKeyVanished: the key of a waiting place is deleted behind
// the store's back (as an expiry or an operator would): the waiter does
// not wait on it forever, but takes a new place, at the back, and gets the
// lock when the holder releases it. It does so at once, told by the watch
// of its own key: with a lease and queue timeout of 10 minutes, its next
// refresh would come minutes after the test's deadline. With the defaults
// too.
func TestEtcdWaiterKeyVanished(t *testing.T) {
	c := etcdtest.Start(t, 1)
	for _, tc := range []struct {
		name string
		opts []distlock.MutexOption
	}{
		{"defaults", nil},
		{"no refresh before the deadline", []distlock.MutexOption{distlock.WithTTL(10 * time.Minute), distlock.WithQueueTimeout(10 * time.Minute)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cli := c.Client(t)
			holder, waiter := lockClient(t, cli), lockClient(t, c.Client(t))
			closeAtEnd(t, holder, waiter)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			name := "vanish-" + strconv.Itoa(len(tc.opts))
			m := func(c *distlock.Client) *distlock.Mutex { return c.FairMutex(name, tc.opts...) }
			l, err := m(holder).Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			got := make(chan error, 1)
			go func() {
				l, err := m(waiter).Lock(ctx)
				if err == nil {
					err = l.Unlock(ctx)
				}
				got <- err
			}()
			waitQueued(t, ctx, fairQueued(m(holder)), 1)
			dir := "distlock/lock/{" + name + "}/"
			resp, err := cli.Get(ctx, dir, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
			if err != nil || len(resp.Kvs) != 2 {
				t.Fatalf("the lock's keys: %v %v", resp, err)
			}
			place := resp.Kvs[1]
			// Watch for the new place from the delete on.
			del, err := cli.Delete(ctx, string(place.Key))
			if err != nil {
				t.Fatal(err)
			}
			wch := cli.Watch(ctx, dir, clientv3.WithPrefix(), clientv3.WithRev(del.Header.Revision+1), clientv3.WithFilterDelete())
			select {
			case resp := <-wch:
				if err := resp.Err(); err != nil || len(resp.Events) == 0 {
					t.Fatalf("watching for a new place: %v", err)
				}
				// A new owner's place: the key's name may be the old one's (a
				// store gives its slots' names again, see etcdstore's
				// slots.go), its owner may not.
				kv := resp.Events[0].Kv
				if kv.CreateRevision <= del.Header.Revision || ownerOf(t, kv.Value) == ownerOf(t, place.Value) {
					t.Fatalf("after the delete, %s was put (created at %d) by the deleted place's owner, not a new place", kv.Key, kv.CreateRevision)
				}
			case <-ctx.Done():
				t.Fatal("no new place after the waiter's key was deleted")
			}
			if err := l.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			if err := <-got; err != nil {
				t.Errorf("the waiter: %v", err)
			}
		})
	}
}

// TestEtcdObserveAcrossCompaction: an observer sees each leader of an
// election in turn, with rising terms, across a compaction of etcd's
// history between them.
func TestEtcdObserveAcrossCompaction(t *testing.T) {
	c := etcdtest.Start(t, 1)
	cli := c.Client(t)
	lc := lockClient(t, cli)
	closeAtEnd(t, lc)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	e := lc.Election("compact")
	obs := e.Observe(ctx)
	var last uint64
	for i, v := range []string{"a", "b", "c"} {
		l, err := e.Campaign(ctx, v)
		if err != nil {
			t.Fatal(err)
		}
		for {
			ld, ok := <-obs
			if !ok {
				t.Fatalf("Observe ended: %v", ctx.Err())
			}
			if ld.Value == v {
				if ld.Term != l.Token() || ld.Term <= last {
					t.Errorf("leader %q: term %d, token %d, previous term %d", v, ld.Term, l.Token(), last)
				}
				last = ld.Term
				break
			}
		}
		if err := e.Resign(ctx, l); err != nil {
			t.Fatal(err)
		}
		if i == 1 {
			resp, err := cli.Get(ctx, "x")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := cli.Compact(ctx, resp.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// ownerOf is the owner in the value of an owner's key.
func ownerOf(t *testing.T, value []byte) string {
	t.Helper()
	var v struct {
		Owner string `json:"owner"`
	}
	if err := json.Unmarshal(value, &v); err != nil || v.Owner == "" {
		t.Fatalf("the value %q of an owner's key: %v", value, err)
	}
	return v.Owner
}
