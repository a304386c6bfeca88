package distlock_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/redistest"
)

// On Redis Cluster: locks spread over the nodes, waiters are woken by
// sharded pub/sub, renewals are batched per slot (a CROSSSLOT batch would
// fail them), and List scans every master.
func TestCluster(t *testing.T) {
	cl := redistest.StartClusterT(t, 3)
	ev := newEvents()
	c := distlock.New(cl.Client(t), distlock.WithLogger(nil), distlock.WithEventHandler(ev.handle))
	defer c.Close()
	other := distlock.New(cl.Client(t), distlock.WithLogger(nil))
	defer other.Close()
	ctx := testCtx(t)

	const n = 60
	var leases []*distlock.Lease
	for i := 0; i < n; i++ {
		l, err := c.Mutex(fmt.Sprint("c", i), distlock.WithTTL(300*time.Millisecond)).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		leases = append(leases, l)
	}
	ev.await(distlock.EventRenewed, 3*n)
	if f := ev.count(distlock.EventRenewFailed) + ev.count(distlock.EventLost); f != 0 {
		t.Fatalf("%d renewal failures or losses on the cluster", f)
	}
	names, err := other.List(ctx, "c*")
	if err != nil || len(names) != n {
		t.Fatalf("List found %d of %d locks: %v", len(names), n, err)
	}

	// A waiter in another client is woken by the release (the lease is 30 s:
	// without the notification it would sleep past its 10 s deadline).
	hold, err := c.Mutex("handover").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	woken := make(chan struct{})
	w := distlock.New(cl.Client(t), distlock.WithLogger(nil), distlock.WithEventHandler(func(e distlock.Event) {
		if e.Kind == distlock.EventWaiting {
			close(woken)
		}
	}))
	defer w.Close()
	go func() {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		l, err := w.Mutex("handover").Lock(wctx)
		if err == nil {
			err = l.Unlock(ctx)
		}
		waited <- err
	}()
	<-woken
	info, err := c.Mutex("handover").Inspect(ctx)
	if err != nil || info.Waiters != 1 {
		t.Fatalf("Inspect: %+v, %v; want 1 waiter", info, err)
	}
	if err := hold.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-waited; err != nil {
		t.Fatalf("waiter: %v", err)
	}
	for _, l := range leases {
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
}
