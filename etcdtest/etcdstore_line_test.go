package etcdtest_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/etcdstore"
	"github.com/distlock/distlock/etcdtest"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// lineDir is the prefix of the line keys of a plain mutex (etcdstore's
// line.go): one key per process that waits for it.
func lineDir(name string) string { return etcdstore.DefaultPrefix + "line/{" + name + "}/" }

// lineKeys returns the line keys of the plain mutex name and the revision
// read at.
func lineKeys(ctx context.Context, t *testing.T, cli *clientv3.Client, name string) ([]string, int64) {
	t.Helper()
	resp, err := cli.Get(ctx, lineDir(name), clientv3.WithPrefix(), clientv3.WithKeysOnly(),
		clientv3.WithSort(clientv3.SortByModRevision, clientv3.SortAscend))
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, kv := range resp.Kvs {
		keys = append(keys, string(kv.Key))
	}
	return keys, resp.Header.Revision
}

// onlyLineKey returns the one key in the line of the plain mutex name (one
// process waits for it), and a watch of the line from just after it was
// read.
func onlyLineKey(ctx context.Context, t *testing.T, raw *clientv3.Client, name string) (string, clientv3.WatchChan) {
	t.Helper()
	keys, rev := lineKeys(ctx, t, raw, name)
	if len(keys) != 1 {
		t.Fatalf("line keys while one process waits: %q", keys)
	}
	return keys[0], raw.Watch(ctx, lineDir(name), clientv3.WithPrefix(), clientv3.WithRev(rev+1))
}

// awaitEvent waits for an event of type typ on the key named key among
// those of w.
func awaitEvent(ctx context.Context, t *testing.T, w clientv3.WatchChan, typ mvccpb.Event_EventType, key string) {
	t.Helper()
	for {
		select {
		case resp, ok := <-w:
			if !ok || resp.Err() != nil {
				t.Fatalf("the test's watch ended: %v", resp.Err())
			}
			for _, ev := range resp.Events {
				if ev.Type == typ && string(ev.Kv.Key) == key {
					return
				}
			}
		case <-ctx.Done():
			t.Fatalf("no %v of %s", typ, key)
		}
	}
}

// lockThenUnlock locks m in a goroutine and unlocks it at once; the
// channel returned gets the first error, or nil.
func lockThenUnlock(ctx context.Context, m *distlock.Mutex) <-chan error {
	got := make(chan error, 1)
	go func() {
		l, err := m.Lock(ctx)
		if err == nil {
			err = l.Unlock(ctx)
		}
		got <- err
	}()
	return got
}

// stalledFront puts, by hand, the line key of a process at the front of
// the line of the plain mutex name that never tries, on a lease of ttl
// seconds that nobody keeps alive, and returns the lease.
func stalledFront(ctx context.Context, t *testing.T, raw *clientv3.Client, name string, ttl int64) clientv3.LeaseID {
	t.Helper()
	lease, err := raw.Grant(ctx, ttl)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Put(ctx, lineDir(name)+"stalled", "", clientv3.WithLease(lease.ID)); err != nil {
		t.Fatal(err)
	}
	return lease.ID
}

// TestEtcdMutexWaitersTakeTurnsAcrossProcesses: the Mutex's waiters of
// four processes (a Client and an etcd client each), which began to wait
// one after another, get the lock in that order. Without the line they
// would race at each release: one order in 24.
func TestEtcdMutexWaitersTakeTurnsAcrossProcesses(t *testing.T) {
	c := etcdtest.Start(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	holder := lockClient(t, c.Client(t))
	closeAtEnd(t, holder)
	l, err := holder.Mutex("turns").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const n = 4
	order := make(chan int, n)
	errs := make(chan error, n)
	for i := range n {
		w, waiting := waitingClient(t, c.Client(t))
		closeAtEnd(t, w)
		go func() {
			l, err := w.Mutex("turns").Lock(ctx)
			if err != nil {
				errs <- fmt.Errorf("waiter %d: %w", i, err)
				return
			}
			order <- i
			errs <- l.Unlock(ctx)
		}()
		awaitWaiting(t, ctx, waiting)
	}
	keys, _ := lineKeys(ctx, t, c.Client(t), "turns")
	if len(keys) != n {
		t.Errorf("%d line keys while %d processes wait: %q", len(keys), n, keys)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	close(order)
	i := 0
	for got := range order {
		if got != i {
			t.Errorf("acquisition %d went to the waiter that came %d-th", i, got)
		}
		i++
	}
}

// TestEtcdMutexLineHoldsBackNewcomers: while another process waits in the
// line, a free Mutex is not taken by a process that was not waiting
// (TryLock fails, Lock waits), and the newcomer is woken as soon as that
// line key goes, with no poll (its wait is bounded by the test's context,
// well under the holder's lease it would poll after).
func TestEtcdMutexLineHoldsBackNewcomers(t *testing.T) {
	c := etcdtest.Start(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	raw := c.Client(t)
	lease := stalledFront(ctx, t, raw, "newcomer", 60)
	w, waiting := waitingClient(t, c.Client(t))
	closeAtEnd(t, w)
	m := w.Mutex("newcomer")
	if _, err := m.TryLock(ctx); !errors.Is(err, distlock.ErrNotAcquired) {
		t.Fatalf("TryLock of a free Mutex with a process in its line: %v, want ErrNotAcquired", err)
	}
	got := lockThenUnlock(ctx, m)
	awaitWaiting(t, ctx, waiting)
	if info, err := m.Inspect(ctx); err != nil || info.Locked || info.Waiters != 2 {
		t.Fatalf("Inspect while the newcomer waits: %+v, %v; want the lock free, two processes waiting", info, err)
	}
	if _, err := raw.Revoke(ctx, lease); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("Lock once the line's front went: %v", err)
	}
}

// TestEtcdMutexLineKeyBounds: a process at the front of the line that
// stops (its key's lease is no longer kept alive) holds the others back
// until its lease expires, not longer: the waiter then takes the lock.
// And a waiter's own line key goes when it stops waiting.
func TestEtcdMutexLineKeyBounds(t *testing.T) {
	c := etcdtest.Start(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	raw := c.Client(t)
	stalledFront(ctx, t, raw, "bound", 2)
	w, waiting := waitingClient(t, c.Client(t))
	closeAtEnd(t, w)
	first := lockThenUnlock(ctx, w.Mutex("bound"))
	awaitWaiting(t, ctx, waiting)
	if err := <-first; err != nil {
		t.Fatalf("Lock behind a stalled front: %v", err)
	}

	// A waiter that gives up leaves no line key behind.
	holder := lockClient(t, c.Client(t))
	closeAtEnd(t, holder)
	l, err := holder.Mutex("bound").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	got := make(chan error, 1)
	go func() {
		_, err := w.Mutex("bound").Lock(wctx)
		got <- err
	}()
	awaitWaiting(t, ctx, waiting)
	key, watch := onlyLineKey(ctx, t, raw, "bound")
	wcancel()
	if err := <-got; !errors.Is(err, distlock.ErrNotAcquired) {
		t.Fatalf("Lock with its context cancelled: %v, want ErrNotAcquired", err)
	}
	awaitEvent(ctx, t, watch, mvccpb.DELETE, key)
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestEtcdMutexLineKeyPutBack: a waiter whose line key is deleted (an
// operator, or its lease expired while its process was paused) puts it
// back and still gets the lock when it is freed.
func TestEtcdMutexLineKeyPutBack(t *testing.T) {
	c := etcdtest.Start(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	raw := c.Client(t)
	holder := lockClient(t, c.Client(t))
	w, waiting := waitingClient(t, c.Client(t))
	closeAtEnd(t, holder, w)
	l, err := holder.Mutex("putback").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := lockThenUnlock(ctx, w.Mutex("putback"))
	awaitWaiting(t, ctx, waiting)
	key, watch := onlyLineKey(ctx, t, raw, "putback")
	if _, err := raw.Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	awaitEvent(ctx, t, watch, mvccpb.PUT, key)
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("Lock of the waiter whose line key was deleted: %v", err)
	}
}

// TestEtcdMultiMutexAmidFullLines: processes keep the lines of both
// members of a MultiMutex full (each takes its lock again as soon as it
// let it go), and the multi-lock still gets both, again and again: its
// members are taken when they are free, whoever waits in their lines.
// Made to wait its turn in each line, it waited out the test's deadline.
func TestEtcdMultiMutexAmidFullLines(t *testing.T) {
	c := etcdtest.Start(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	stop := make(chan struct{})
	started := make(chan struct{}, 4)
	errs := make(chan error, 8)
	for _, name := range []string{"a", "a", "b", "b"} {
		cl := lockClient(t, c.Client(t))
		closeAtEnd(t, cl)
		for g := range 2 {
			go func() {
				for i := 0; ; i++ {
					select {
					case <-stop:
						errs <- nil
						return
					default:
					}
					l, err := cl.Mutex(name).Lock(ctx)
					if err != nil {
						errs <- err
						return
					}
					time.Sleep(time.Millisecond) // the work done under the lock
					if err := l.Unlock(ctx); err != nil {
						errs <- err
						return
					}
					if g == 0 && i == 0 {
						started <- struct{}{}
					}
				}
			}()
		}
	}
	for range 4 {
		select {
		case <-started:
		case <-ctx.Done():
			t.Fatal("the single lockers never got going")
		}
	}
	mc := lockClient(t, c.Client(t))
	closeAtEnd(t, mc)
	m := mc.MultiMutex([]string{"a", "b"})
	for i := range 3 {
		mctx, mcancel := context.WithTimeout(ctx, 20*time.Second)
		l, err := m.Lock(mctx)
		mcancel()
		if err != nil {
			t.Fatalf("multi-lock %d amid full lines: %v", i, err)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	for range 8 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

// TestEtcdMutexFrontCutOff: the process at the front of a Mutex's line is
// cut off from etcd (its proxy holds every byte) as the lock is freed: the
// process behind it gets the lock once the front's line key has gone with
// its lease, which nothing else keeps alive; and the cut-off process,
// back in touch, puts its key back and gets the lock in its turn.
func TestEtcdMutexFrontCutOff(t *testing.T) {
	c := etcdtest.Start(t, 1)
	m := c.Members()[0]
	proxy := m.Proxy()
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	holder := lockClient(t, c.Client(t))
	front, frontWaiting := waitingClient(t, etcdtest.Dial(t, m.ProxyEndpoint()))
	behind, behindWaiting := waitingClient(t, c.Client(t))
	t.Cleanup(func() {
		proxy.Resume()
		for _, cl := range []*distlock.Client{holder, front, behind} {
			if err := cl.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		}
	})
	l, err := holder.Mutex("cut-front").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	frontGot := lockThenUnlock(ctx, front.Mutex("cut-front"))
	awaitWaiting(t, ctx, frontWaiting)
	behindGot := lockThenUnlock(ctx, behind.Mutex("cut-front"))
	awaitWaiting(t, ctx, behindWaiting)

	proxy.Pause()
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-behindGot; err != nil {
		t.Fatalf("Lock behind a cut-off front: %v", err)
	}
	proxy.Resume()
	if err := <-frontGot; err != nil {
		t.Fatalf("Lock of the cut-off front, back in touch: %v", err)
	}
}
