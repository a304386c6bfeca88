//go:build linux

package safety

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/redisstore"
	"github.com/distlock/distlock/redistest"
)

// The monitor's reconstruction of the shared kinds and of elections, on a
// real redis-server, with names and a prefix that hold spaces and other
// characters the API accepts: each holder of a read-write lock or a
// semaphore is an admission, taken by its own acquisition or granted
// inside another owner's release, with its process's pid; a waiter's
// place carries its pid; an election's tenure is a queued mutex's.
func TestMonitorFollowsSharedKinds(t *testing.T) {
	const prefix = "mon itor 'p':"
	srv := redistest.Start(t)
	m := newMonitor(srv.Addr(), prefix)
	m.shared = map[string]bool{"rw [0] ä 1": true, "sem *?% 2": true}
	ctx := testCtx(t)
	mctx, cancel := context.WithCancel(context.Background())
	ready, done := make(chan struct{}), make(chan struct{})
	go func() { defer close(done); m.run(mctx, ready) }()
	t.Cleanup(func() { cancel(); <-done })
	<-ready
	holder := distlock.New(redisstore.New(srv.Client(t), redisstore.WithPrefix(prefix)), distlock.WithLogger(nil))
	defer holder.Close()
	ev := newEventWaiter()
	waiter := distlock.New(redisstore.New(srv.Client(t), redisstore.WithPrefix(prefix)), distlock.WithLogger(nil), distlock.WithEventHandler(ev.handle))
	defer waiter.Close()
	opts := []distlock.MutexOption{distlock.WithTTL(time.Minute)}

	kinds := []struct {
		name       string
		shared     bool
		hold, wait func(c *distlock.Client) (*distlock.Lease, error)
	}{
		{"rw [0] ä 1", true,
			func(c *distlock.Client) (*distlock.Lease, error) { return c.RWMutex("rw [0] ä 1", opts...).Lock(ctx) },
			func(c *distlock.Client) (*distlock.Lease, error) { return c.RWMutex("rw [0] ä 1", opts...).RLock(ctx) }},
		{"sem *?% 2", true,
			func(c *distlock.Client) (*distlock.Lease, error) {
				return c.Semaphore("sem *?% 2", 1, opts...).Acquire(ctx, 1)
			},
			func(c *distlock.Client) (*distlock.Lease, error) {
				return c.Semaphore("sem *?% 2", 1, opts...).Acquire(ctx, 1)
			}},
		{`elect "q" \ 3`, false,
			func(c *distlock.Client) (*distlock.Lease, error) {
				return c.Election(`elect "q" \ 3`, opts...).Campaign(ctx, "a")
			},
			func(c *distlock.Client) (*distlock.Lease, error) {
				return c.Election(`elect "q" \ 3`, opts...).Campaign(ctx, "b")
			}},
	}
	for _, k := range kinds {
		first, err := k.hold(holder)
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan *distlock.Lease, 1)
		go func() {
			l, err := k.wait(waiter)
			if err != nil {
				t.Error(err)
			}
			got <- l
		}()
		select {
		case <-ev.ch[distlock.EventWaiting]:
		case <-ctx.Done():
			t.Fatalf("%s: the waiter did not queue", k.name)
		}
		if err := first.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		second := <-got
		if second == nil {
			t.FailNow()
		}
		if err := second.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if !k.shared {
			key := prefix + "{" + k.name + "}"
			if err := m.await(ctx, func() bool { t, ok := m.tenures[tenureKey{key, second.Token()}]; return ok && t.DelAt != 0 }); err != nil {
				t.Fatalf("%s: the feed never showed the second release: %v", k.name, err)
			}
			t1, _ := m.lookup(key, first.Token())
			t2, _ := m.lookup(key, second.Token())
			if t1.Kind != "elect" || !t1.Fair || t1.Granted || !t2.Granted || t2.By != "release" || t2.PID != os.Getpid() {
				t.Errorf("%s: tenures %+v and %+v; want a leader taken by its own request, then one granted by the release, pid %d", k.name, t1, t2, os.Getpid())
			}
		} else {
			if err := m.await(ctx, func() bool {
				for _, a := range m.admitted {
					if a.Token == second.Token() && a.Dropped != 0 {
						return true
					}
				}
				return false
			}); err != nil {
				t.Fatalf("%s: the feed never showed the second release: %v", k.name, err)
			}
			var as []admission
			for _, a := range (monitors{m}).admissions() {
				if a.Name == k.name {
					as = append(as, a)
				}
			}
			if len(as) != 2 || as[0].Token != first.Token() || as[0].Granted || as[1].Token != second.Token() || !as[1].Granted ||
				as[1].By != "release" || as[1].PID != os.Getpid() || as[0].PID != os.Getpid() || as[1].Ends <= as[1].Start || as[1].Dropped < as[1].Start || as[0].end() > as[1].Start {
				t.Errorf("%s: admissions %+v; want the first holder's own, ended before the waiter's, granted by the release, pid %d", k.name, as, os.Getpid())
			}
		}
		places, _, srvc := monitors{m}.fair()
		var ps []place
		for _, p := range places {
			if p.Name == k.name {
				ps = append(ps, p)
			}
		}
		if len(ps) != 1 || ps[0].PID != os.Getpid() || ps[0].How != "granted" || ps[0].Token != second.Token() {
			t.Errorf("%s: places %+v; want the waiter's, pid %d, granted token %d", k.name, ps, os.Getpid(), second.Token())
		}
		if srvc.Overlaps+srvc.StaleDels != 0 {
			t.Errorf("%s: server checks %+v", k.name, srvc)
		}
	}
}

// placePID reads the pid of a place's record whatever the lock key holds,
// and nothing from a record of another lock.
func TestPlacePID(t *testing.T) {
	lock := `distlock chaos:{sem 0 [0] ä}`
	for _, c := range []struct {
		v   string
		pid int
		ok  bool
	}{
		{"s 2 1 1000 2000 " + lock + ":grant:0a1b 4242 host name with spaces", 4242, true},
		{"f 1 3 1000 500 " + lock + ":grant:ff 7 h", 7, true},
		{"f 1 3 1000 500 distlock:{other}:grant:ff 7 h", 0, false},
		{"f 1 3 1000 500 " + lock + ":grant:ff x h", 0, false},
		{"garbage", 0, false},
	} {
		pid, ok := placePID(lock, c.v)
		if pid != c.pid || ok != c.ok {
			t.Errorf("placePID(%q) = %d, %v; want %d, %v", c.v, pid, ok, c.pid, c.ok)
		}
	}
}
