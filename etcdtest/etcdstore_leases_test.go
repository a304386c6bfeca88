package etcdtest_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/etcdtest"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
)

// leaseCountingClient returns a client of endpoints that counts the
// leases it asks etcd to grant and the keep-alive streams it opens (one
// per keep-alive round: clientv3's KeepAliveOnce).
func leaseCountingClient(t *testing.T, grants, keepAlives *atomic.Int64, endpoints ...string) *clientv3.Client {
	t.Helper()
	return dialWith(t, endpoints,
		grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			if strings.HasSuffix(method, "/LeaseGrant") {
				grants.Add(1)
			}
			return invoker(ctx, method, req, reply, cc, opts...)
		}),
		grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			if strings.HasSuffix(method, "/LeaseKeepAlive") {
				keepAlives.Add(1)
			}
			return streamer(ctx, desc, cc, method, opts...)
		}))
}

// TestEtcdOneLeaseForManyLocks: a Client holding a thousand locks, renewed
// through three leases' worth of time, has one etcd lease for all of them,
// granted once, and opens a keep-alive per renewal round, not per lock; its
// Close revokes the lease (nothing of the store is left on etcd).
func TestEtcdOneLeaseForManyLocks(t *testing.T) {
	const locks = 1000
	const ttl = 3 * time.Second
	c := etcdtest.Start(t, 1)
	var grants, keepAlives atomic.Int64
	cli := leaseCountingClient(t, &grants, &keepAlives, c.Endpoints()...)
	lc := lockClient(t, cli)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ls := make([]*distlock.Lease, locks)
	for i := range ls {
		l, err := lc.Mutex(fmt.Sprintf("many-%d", i), distlock.WithTTL(ttl)).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ls[i] = l
	}
	beforeRenewals := keepAlives.Load()
	// Three leases' worth of renewals: every lock renewed at least 6 times.
	admin := c.Client(t)
	deadline := time.Now().Add(3 * ttl)
	for time.Now().Before(deadline) {
		select {
		case <-ls[0].Context().Done():
			t.Fatalf("a lock was lost: %v", context.Cause(ls[0].Context()))
		case <-time.After(100 * time.Millisecond):
		}
	}
	for i, l := range ls {
		if l.Context().Err() != nil {
			t.Fatalf("lock %d lost: %v", i, context.Cause(l.Context()))
		}
	}
	leases, err := admin.Leases(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(leases.Leases) != 1 || grants.Load() != 1 {
		t.Errorf("%d leases on etcd, %d granted, for %d locks; want 1", len(leases.Leases), grants.Load(), locks)
	}
	rounds := keepAlives.Load() - beforeRenewals
	t.Logf("%d keep-alive rounds for %d locks renewed over %v", rounds, locks, 3*ttl)
	if rounds >= locks {
		t.Errorf("%d keep-alive rounds for %d locks over %v: one per lock or more", rounds, locks, 3*ttl)
	}
	if err := lc.Close(); err != nil {
		t.Fatal(err)
	}
	leases, err = admin.Leases(ctx)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := admin.Get(ctx, "distlock/lock/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	if len(leases.Leases) != 0 || resp.Count != 0 {
		t.Errorf("after Close: %d leases, %d lock keys", len(leases.Leases), resp.Count)
	}
}

// TestEtcdFixedLeaseEndsBesideRenewedLocks: a fixed lease held by a Client
// that renews another lock on the same etcd lease ends as its own lease
// says: its context ends with ErrLeaseExpired, and another client then
// takes the lock, while the holder's Client lives and keeps the shared
// etcd lease alive (the sweeper deletes the key).
func TestEtcdFixedLeaseEndsBesideRenewedLocks(t *testing.T) {
	c := etcdtest.Start(t, 1)
	a, b := lockClient(t, c.Client(t)), lockClient(t, c.Client(t))
	closeAtEnd(t, a, b)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	renewed, err := a.Mutex("renewed", distlock.WithTTL(3*time.Second)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	fixed, err := a.Mutex("fixed", distlock.WithFixedLease(3*time.Second)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	l, err := b.Mutex("fixed").Lock(ctx)
	if err != nil {
		t.Fatalf("the fixed lease's lock never went: %v", err)
	}
	if cause := context.Cause(fixed.Context()); !errors.Is(cause, distlock.ErrLeaseExpired) {
		t.Errorf("the fixed lease's context: %v, want ErrLeaseExpired before the other client held", cause)
	}
	if renewed.Context().Err() != nil {
		t.Errorf("the renewed lock: %v", context.Cause(renewed.Context()))
	}
	if l.Token() <= fixed.Token() {
		t.Errorf("token %d after %d", l.Token(), fixed.Token())
	}
	for _, l := range []*distlock.Lease{l, renewed} {
		if err := l.Unlock(ctx); err != nil {
			t.Error(err)
		}
	}
}

// TestEtcdGrantMovesOntoAStaleLease: a waiter granted a fair mutex moves
// its key from the store's lease of places onto its lease of holds. Here
// that lease was last kept alive long ago (by an earlier hold, released at
// once) and runs out soon: the move keeps it alive first, so the new
// holder's key outlives the lease's old expiry and the lock stays held for
// its lease. Without that keep-alive the key went with the old lease (a
// chaos run lost a lock so: its key deleted 245 ms after the grant of a 2 s
// lease). The new hold's lease is fixed, so that no renewal keeps the
// etcd lease alive meanwhile: only the move can.
func TestEtcdGrantMovesOntoAStaleLease(t *testing.T) {
	c := etcdtest.Start(t, 1)
	holder, waiter := lockClient(t, c.Client(t)), lockClient(t, c.Client(t))
	closeAtEnd(t, holder, waiter)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// The etcd lease of 12 s holds has a TTL of 13 s: granted now, it runs
	// out 13 s from now unless kept alive.
	const lease = 12 * time.Second
	start := time.Now()
	first, err := waiter.Mutex("stale-lease-first", distlock.WithTTL(lease)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	held, err := holder.FairMutex("stale-lease").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *distlock.Lease, 1)
	go func() {
		l, err := waiter.FairMutex("stale-lease", distlock.WithFixedLease(lease)).Lock(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	waitQueued(t, ctx, fairQueued(holder.FairMutex("stale-lease")), 1)
	// The grant comes 6 s after the etcd lease's last keep-alive: more
	// than the second a keep-alive is trusted for.
	time.Sleep(time.Until(start.Add(6 * time.Second)))
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	l := <-got
	if l == nil {
		return
	}
	defer l.Unlock(ctx)
	// 2 s past the etcd lease's old expiry, 3 s at least before the fixed
	// lease ends.
	time.Sleep(time.Until(start.Add(15 * time.Second)))
	info, err := holder.FairMutex("stale-lease").Inspect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !info.Locked || info.Token != l.Token() || l.Context().Err() != nil {
		t.Errorf("past the old expiry of the etcd lease the key was moved onto: %+v (want held with token %d), the holder's context: %v",
			info, l.Token(), context.Cause(l.Context()))
	}
}
