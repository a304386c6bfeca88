package etcdtest_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/distlock/distlock/etcdstore"
	"github.com/distlock/distlock/etcdtest"
	"github.com/distlock/distlock/store"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/grpc"
)

// TestEtcdLeaderWatchBreakLosesNoLeader: an election's observer whose
// watch breaks (an event dropped, the watch cancelled: as when its member
// loses the leader) reads the leader again once the watch is made again,
// not before: here the leader changes after the break and before the new
// watch starts (between the two, the store pauses), so an observer that
// read at the break would keep the old leader, told of no change, until
// some later one. Both leaders' leases are 10 minutes: nothing else
// changes the election within the test.
func TestEtcdLeaderWatchBreakLosesNoLeader(t *testing.T) {
	c := etcdtest.Start(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	log := newWatchLog()
	obs := etcdstore.New(dialWith(t, c.Endpoints(), grpc.WithChainStreamInterceptor(log.interceptor)))
	ls := etcdstore.New(dialWith(t, c.Endpoints()))
	t.Cleanup(func() { _, _ = obs.Close(), ls.Close() })

	const name = "leader-watch-break"
	first, next := req(name, "first-leader", store.Election, 0), req(name, "next-leader", store.Election, 10*time.Minute)
	first.Lease, next.Lease = 10*time.Minute, 10*time.Minute
	mustHold(ctx, t, ls, first)
	announced := make(chan store.Announcement, 16)
	stop, err := obs.WatchLeader(ctx, name, func(a store.Announcement, lost bool) {
		if !lost {
			announced <- a
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()

	// The next leader's place is the change whose event is dropped; the
	// first leader resigns just before the watch is made again.
	resigned := make(chan error, 1)
	log.dropWhere(func(ev *mvccpb.Event) bool { return ev.Type == mvccpb.PUT })
	log.before(func() {
		r := first
		r.Hold = 0
		rel, err := ls.Release(ctx, r)
		if err == nil && rel != store.Freed {
			err = fmt.Errorf("released: %v, want freed", rel)
		}
		resigned <- err
	})
	if g, err := ls.Acquire(ctx, next); err != nil || !g.Queued {
		t.Fatalf("the next leader: %+v, %v; want a place", g, err)
	}
	awaitNoErr(ctx, t, resigned, "the first leader's resignation (before the observer's watch is made again)")
	for {
		select {
		case a := <-announced:
			if a.ID == store.OwnerID(next.Owner) {
				return
			}
		case <-ctx.Done():
			t.Fatal("the observer was not told of the next leader")
		}
	}
}

// TestEtcdMutexWatchBreakLosesNoRelease: a Mutex waiter (the library's
// defaults) whose watch of the lock breaks (an event dropped, the watch
// cancelled) while the holder releases before the watch is made again
// still takes the lock at once: it is woken once the watch is made again,
// not at the break (where a try would find the lock still held, and the
// release, before the new watch starts, would never be told: the waiter
// would try again only as the holder's 30-second lease ran out).
func TestEtcdMutexWatchBreakLosesNoRelease(t *testing.T) {
	c := etcdtest.Start(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	log := newWatchLog()
	raw := dialWith(t, c.Endpoints())
	holder := lockClient(t, dialWith(t, c.Endpoints()))
	waiter, waiting := waitingClient(t, dialWith(t, c.Endpoints(), grpc.WithChainStreamInterceptor(log.interceptor)))
	closeAtEnd(t, holder, waiter)

	const name = "mutex-watch-break"
	held, err := holder.Mutex(name).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		l, err := waiter.Mutex(name).Lock(ctx)
		if err == nil {
			err = l.Unlock(ctx)
		}
		got <- err
	}()
	awaitWaiting(t, ctx, waiting)

	// A key of no one's, put and deleted in the lock's directory: its
	// delete is the event dropped. The holder releases just before the
	// waiter's watch is made again.
	other := etcdstore.DefaultPrefix + "lock/{" + name + "}/m/zz-no-ones"
	released := make(chan error, 1)
	log.dropWhere(func(ev *mvccpb.Event) bool { return ev.Type == mvccpb.DELETE && string(ev.Kv.Key) == other })
	log.before(func() { released <- held.Unlock(ctx) })
	if _, err := raw.Put(ctx, other, "x"); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Delete(ctx, other); err != nil {
		t.Fatal(err)
	}
	awaitNoErr(ctx, t, released, "the holder's Unlock (before the waiter's watch is made again)")
	awaitNoErr(ctx, t, got, "the waiter's Lock after the release")
}

// awaitNoErr waits for a nil error on ch, what's outcome.
func awaitNoErr(ctx context.Context, t *testing.T, ch <-chan error, what string) {
	t.Helper()
	select {
	case err := <-ch:
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	case <-ctx.Done():
		t.Fatalf("%s: none before the deadline", what)
	}
}
