package etcdtest_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/etcdtest"
	clientv3 "go.etcd.io/etcd/client/v3"
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
	lc, other := lockClient(t, cli), lockClient(t, c.Client(t))
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
