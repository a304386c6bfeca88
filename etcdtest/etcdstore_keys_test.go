package etcdtest_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/etcdstore"
	"github.com/distlock/distlock/etcdtest"
	"github.com/distlock/distlock/store"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// keyNames returns, by lock directory, the key names ever made under
// prefix: etcd keeps them all in its index until a compaction (there is
// none in these tests), and a range over a lock's directory visits each.
func keyNames(t *testing.T, ctx context.Context, cli *clientv3.Client, prefix string) map[string]map[string]bool {
	t.Helper()
	now, err := cli.Get(ctx, "\x00")
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]map[string]bool{}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for resp := range cli.Watch(wctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(1)) {
		if err := resp.Err(); err != nil {
			t.Fatal(err)
		}
		for _, ev := range resp.Events {
			k := string(ev.Kv.Key)
			dir := k[:strings.LastIndexByte(k, '/')+1]
			if names[dir] == nil {
				names[dir] = map[string]bool{}
			}
			names[dir][k] = true
		}
		if resp.Header.Revision >= now.Header.Revision && (len(resp.Events) == 0 || resp.Events[len(resp.Events)-1].Kv.ModRevision >= now.Header.Revision) {
			break
		}
	}
	return names
}

// TestEtcdKeyNamesComeBack: the keys a Client makes for its acquisitions
// of a lock take the same few names again and again (as many as its
// owners that contend for the lock at once), however often the lock is
// taken: with a name per acquisition, etcd's index would keep one more per
// acquisition until a compaction, and every acquisition's range over the
// lock would visit them all. A hundred Lock/Unlock pairs, a hundred
// failed TryLocks, queued waiters of a fair mutex, and waiters whose
// contexts end (their owners abandoned).
func TestEtcdKeyNamesComeBack(t *testing.T) {
	c := etcdtest.Start(t, 1)
	cli := c.Client(t)
	lc, waiting := waitingClient(t, cli)
	other := lockClient(t, c.Client(t))
	closeAtEnd(t, lc, other)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	for range 100 {
		l, err := lc.Mutex("pairs").Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}

	held, err := other.Mutex("tries").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for range 100 {
		if _, err := lc.Mutex("tries").TryLock(ctx); !errors.Is(err, distlock.ErrNotAcquired) {
			t.Fatalf("TryLock of a held lock: %v", err)
		}
	}
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}

	const waiters = 4
	var wg sync.WaitGroup
	for range waiters {
		wg.Go(func() {
			for range 25 {
				l, err := lc.FairMutex("fair").Lock(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				if err := l.Unlock(ctx); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	for len(waiting) > 0 {
		<-waiting // the fair waiters'
	}

	held, err = other.FairMutex("given-up").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		wctx, stop := context.WithCancel(ctx)
		got := make(chan error, 1)
		go func() {
			_, err := lc.FairMutex("given-up").Lock(wctx)
			got <- err
		}()
		waitQueued(t, ctx, fairQueued(other.FairMutex("given-up")), 1)
		awaitWaiting(t, ctx, waiting) // its acquisition has returned
		stop()
		if err := <-got; !errors.Is(err, distlock.ErrNotAcquired) {
			t.Fatalf("a waiter whose context ended: %v", err)
		}
	}
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}

	names := keyNames(t, ctx, cli, "distlock/lock/")
	for _, tc := range []struct {
		dir  string
		most int
	}{
		{"distlock/lock/{pairs}/m/", 1},
		{"distlock/lock/{tries}/m/", 2},      // the holder's, and the tries' (which make none)
		{"distlock/lock/{fair}/f/", waiters}, // one per waiter at once
		{"distlock/lock/{given-up}/f/", 2},   // the holder's, and the waiters' one after another
	} {
		if n := len(names[tc.dir]); n == 0 || n > tc.most {
			t.Errorf("%s: %d key names made, want 1 to %d: %v", tc.dir, n, tc.most, names[tc.dir])
		}
	}
}

// TestEtcdLateAbandonSparesTheNameNextOwner: a waiter gives up (its
// context ends), and its Client abandons it: one transaction marks the
// owner and deletes its key. The next waiter of the same Client takes the
// same key name. Then the abandonment's transaction arrives again, as a
// late copy would (the very request the store sent, replayed): the owner
// is marked already, so it deletes nothing, and the next waiter keeps its
// place and gets the lock.
func TestEtcdLateAbandonSparesTheNameNextOwner(t *testing.T) {
	c := etcdtest.Start(t, 1)
	var mu sync.Mutex
	var abandons []*pb.TxnRequest
	cli := dialWith(t, c.Endpoints(), grpc.WithChainUnaryInterceptor(
		func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			if txn, ok := req.(*pb.TxnRequest); ok && strings.HasSuffix(method, "/Txn") {
				for _, op := range append(txn.Success, txn.Failure...) {
					if put := op.GetRequestPut(); put != nil && strings.HasPrefix(string(put.Key), "distlock/mark/") {
						mu.Lock()
						abandons = append(abandons, proto.Clone(txn).(*pb.TxnRequest))
						mu.Unlock()
						break
					}
				}
			}
			return invoker(ctx, method, req, reply, cc, opts...)
		}))
	lc, waiting := waitingClient(t, cli)
	other := lockClient(t, c.Client(t))
	closeAtEnd(t, lc, other)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const name = "late-abandon"
	dir := "distlock/lock/{" + name + "}/f/"
	held, err := other.FairMutex(name).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The waiter's place: the key after the holder's.
	placeKey := func() string {
		t.Helper()
		resp, err := cli.Get(ctx, dir, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
		if err != nil || len(resp.Kvs) != 2 {
			t.Fatalf("the lock's keys: %v %v", resp, err)
		}
		return string(resp.Kvs[1].Key)
	}
	wctx, giveUp := context.WithCancel(ctx)
	gaveUp := make(chan error, 1)
	go func() {
		_, err := lc.FairMutex(name).Lock(wctx)
		gaveUp <- err
	}()
	waitQueued(t, ctx, fairQueued(other.FairMutex(name)), 1)
	awaitWaiting(t, ctx, waiting) // its acquisition has returned
	first := placeKey()
	giveUp()
	if err := <-gaveUp; !errors.Is(err, distlock.ErrNotAcquired) {
		t.Fatalf("the waiter that gave up: %v", err)
	}
	mu.Lock()
	late := slices.Clone(abandons)
	mu.Unlock()
	if len(late) == 0 {
		t.Fatal("no abandonment was sent")
	}

	got := make(chan error, 1)
	go func() {
		l, err := lc.FairMutex(name).Lock(ctx)
		if err == nil {
			err = l.Unlock(ctx)
		}
		got <- err
	}()
	waitQueued(t, ctx, fairQueued(other.FairMutex(name)), 1)
	if next := placeKey(); next != first {
		t.Fatalf("the next waiter's key is %s, not the name given up (%s): nothing to test", next, first)
	}
	kv := pb.NewKVClient(cli.ActiveConnection())
	for _, txn := range late {
		if _, err := kv.Txn(ctx, txn); err != nil {
			t.Fatal(err)
		}
	}
	if resp, err := cli.Get(ctx, first); err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("after the late abandonment, the next waiter's key: %v %v", resp, err)
	}
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Errorf("the next waiter: %v", err)
	}
}

// TestEtcdUnconfirmedAbandonKeepsTheName: a TryLock gives up while its
// acquisition is on its way (held up in the client), and every Abandon of
// its owner fails, unconfirmed: one may still land. The acquisition then
// comes back refused (the lock is held), so the owner took nothing; but
// its key name must not go to the next owner of the Client while an
// Abandon that would mark the owner first (and delete that name's key) is
// on its way. The next owner takes another name, and the abandonment,
// delivered late, leaves its key alone.
func TestEtcdUnconfirmedAbandonKeepsTheName(t *testing.T) {
	c := etcdtest.Start(t, 1)
	const name = "unconfirmed"
	var mu sync.Mutex
	var (
		holdAcquire  = make(chan struct{}) // closed: the held acquisition goes on
		acquireHeld  = make(chan struct{}, 1)
		acquireDone  = make(chan error, 1) // the held acquisition's outcome
		failAbandons = true
		abandons     []*pb.TxnRequest
		heldOne      bool
	)
	cli := dialWith(t, c.Endpoints(), grpc.WithChainUnaryInterceptor(
		func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			txn, ok := req.(*pb.TxnRequest)
			if !ok {
				return invoker(ctx, method, req, reply, cc, opts...)
			}
			for _, op := range append(txn.Success, txn.Failure...) {
				put := op.GetRequestPut()
				switch {
				case put != nil && strings.HasPrefix(string(put.Key), "distlock/mark/"):
					mu.Lock()
					fail := failAbandons
					if fail {
						abandons = append(abandons, proto.Clone(txn).(*pb.TxnRequest))
					}
					mu.Unlock()
					if fail {
						return errors.New("test: abandonment lost on its way")
					}
					return invoker(ctx, method, req, reply, cc, opts...)
				case put != nil && strings.HasPrefix(string(put.Key), "distlock/lock/{"+name+"}/"):
					mu.Lock()
					first := !heldOne
					heldOne = true
					mu.Unlock()
					if first { // the first acquisition only
						acquireHeld <- struct{}{}
						<-holdAcquire
						err := invoker(ctx, method, req, reply, cc, opts...)
						if err == nil && reply.(*pb.TxnResponse).Succeeded {
							err = errors.New("the held acquisition took the lock")
						}
						acquireDone <- err
						return err
					}
					return invoker(ctx, method, req, reply, cc, opts...)
				}
			}
			return invoker(ctx, method, req, reply, cc, opts...)
		}))
	lc, other := lockClient(t, cli), lockClient(t, c.Client(t))
	closeAtEnd(t, lc, other)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	held, err := other.Mutex(name).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tctx, tcancel := context.WithCancel(ctx)
	tried := make(chan error, 1)
	go func() {
		_, err := lc.Mutex(name).TryLock(tctx)
		tried <- err
	}()
	<-acquireHeld
	tcancel() // the TryLock gives up; its owner is abandoned, unconfirmed
	if err := <-tried; !errors.Is(err, distlock.ErrNotAcquired) {
		t.Fatalf("TryLock given up: %v", err)
	}
	close(holdAcquire) // the acquisition arrives, and is refused: the lock is held
	if err := <-acquireDone; err != nil {
		t.Fatalf("the held acquisition: %v", err)
	}
	mu.Lock()
	n := len(abandons)
	mu.Unlock()
	if n == 0 {
		t.Fatal("no abandonment was sent")
	}
	first, err := cli.Get(ctx, "distlock/lock/{"+name+"}/m/", clientv3.WithPrefix())
	if err != nil || len(first.Kvs) != 1 {
		t.Fatalf("the lock's keys: %v %v", first, err)
	}
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	next, err := lc.Mutex(name).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The held abandonments land now, through another connection (the
	// Client's own still fail theirs).
	mu.Lock()
	late := slices.Clone(abandons)
	mu.Unlock()
	kv := pb.NewKVClient(c.Client(t).ActiveConnection())
	for _, txn := range late[:1] {
		if _, err := kv.Txn(ctx, txn); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := cli.Get(ctx, "distlock/lock/{"+name+"}/m/", clientv3.WithPrefix())
	if err != nil || len(resp.Kvs) != 1 || int64(next.Token()) != resp.Kvs[0].CreateRevision {
		t.Fatalf("after the late abandonment, the lock's keys: %v %v; want the next owner's (token %d)", resp, err, next.Token())
	}
	mu.Lock()
	failAbandons = false
	mu.Unlock()
	if err := next.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestEtcdUnconfirmedReleaseKeepsTheName: a release's delete of its
// owner's key compares nothing, so a copy of it that lands late would
// delete whatever key has that name then. Here the delete fails on its way
// (its outcome unknown: it may land later), the owner is abandoned, and
// the next owner of the same store on the lock takes it: with another key
// name, which the delete, delivered late, leaves alone.
func TestEtcdUnconfirmedReleaseKeepsTheName(t *testing.T) {
	c := etcdtest.Start(t, 1)
	const name = "unconfirmed-release"
	var mu sync.Mutex
	var lost []*pb.DeleteRangeRequest
	fail := true
	cli := dialWith(t, c.Endpoints(), grpc.WithChainUnaryInterceptor(
		func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			if del, ok := req.(*pb.DeleteRangeRequest); ok && strings.HasPrefix(string(del.Key), "distlock/lock/{"+name+"}/") {
				mu.Lock()
				defer mu.Unlock()
				if fail {
					fail = false
					lost = append(lost, proto.Clone(del).(*pb.DeleteRangeRequest))
					return errors.New("test: release lost on its way")
				}
			}
			return invoker(ctx, method, req, reply, cc, opts...)
		}))
	s := etcdstore.New(cli)
	t.Cleanup(func() { _ = s.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	keyOf := func() (string, int64) {
		t.Helper()
		resp, err := cli.Get(ctx, "distlock/lock/{"+name+"}/", clientv3.WithPrefix())
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("the lock's keys: %v, %v; want one", resp, err)
		}
		return string(resp.Kvs[0].Key), resp.Kvs[0].CreateRevision
	}

	first := req(name, "first", store.Plain, 0)
	if g, err := s.Acquire(ctx, first); err != nil || !g.Acquired {
		t.Fatalf("the first owner: %+v, %v", g, err)
	}
	firstKey, _ := keyOf()
	first.Hold = 0 // every hold: as a Client releases its last lease
	if _, err := s.Release(ctx, first); !errors.Is(err, store.ErrBackend) {
		t.Fatalf("a release whose delete was lost: %v, want ErrBackend", err)
	}
	if len(lost) != 1 {
		t.Fatalf("%d deletes held back, want 1", len(lost))
	}
	// The Client's clean-up abandons an owner whose release failed.
	if _, err := s.Abandon(ctx, first); err != nil {
		t.Fatal(err)
	}
	next := req(name, "next", store.Plain, 0)
	g, err := s.Acquire(ctx, next)
	if err != nil || !g.Acquired {
		t.Fatalf("the next owner: %+v, %v", g, err)
	}
	nextKey, rev := keyOf()
	if nextKey == firstKey {
		t.Errorf("the next owner took the name %q of the owner whose release may still land", nextKey)
	}
	// The lost delete lands now, through another connection.
	if _, err := pb.NewKVClient(c.Client(t).ActiveConnection()).DeleteRange(ctx, lost[0]); err != nil {
		t.Fatal(err)
	}
	if k, r := keyOf(); k != nextKey || r != rev || uint64(r) != g.Token {
		t.Errorf("after the late delete: key %q (created at %d), want the next owner's %q (token %d)", k, r, nextKey, g.Token)
	}
	next.Hold = 0
	if rel, err := s.Release(ctx, next); err != nil || rel != store.Freed {
		t.Errorf("the next owner's release: %v, %v", rel, err)
	}
}
