package rueidisstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/redisstore"
	"github.com/distlock/distlock/redistest"
	"github.com/distlock/distlock/rueidisstore"
	"github.com/redis/rueidis"
)

// waitingClient returns a Client on a rueidis store of addr, closed when
// t ends, and the names of the locks it reports waiting for (EventWaiting:
// its acquisition returned, and it waits for a notice).
func waitingClient(t *testing.T, addr string, opts ...redisstore.Option) (*distlock.Client, <-chan string) {
	t.Helper()
	waiting := make(chan string, 100)
	c := distlock.New(rueidisstore.New(newClient(t, rueidis.ClientOption{InitAddress: []string{addr}}), opts...),
		distlock.WithLogger(nil),
		distlock.WithEventHandler(func(ev distlock.Event) {
			if ev.Kind == distlock.EventWaiting {
				select {
				case waiting <- ev.Name:
				default: // a handler must not block
				}
			}
		}))
	closeAtEnd(t, c)
	return c, waiting
}

// closeAtEnd closes c when the test ends: Close must succeed.
func closeAtEnd(t *testing.T, c *distlock.Client) {
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
}

func awaitWaiting(t *testing.T, ctx context.Context, waiting <-chan string) {
	t.Helper()
	select {
	case <-waiting:
	case <-ctx.Done():
		t.Fatal("the waiter never reported waiting")
	}
}

// lockAsync calls l.Lock in a goroutine, and Unlock once it holds it;
// it returns once the client reports waiting (on waiting), and the
// channel that the outcome comes on.
func lockAsync(t *testing.T, ctx context.Context, l distlock.Locker, waiting <-chan string) <-chan error {
	t.Helper()
	got := make(chan error, 1)
	go func() {
		lease, err := l.Lock(ctx)
		if err == nil {
			err = lease.Unlock(ctx)
		}
		got <- err
	}()
	select {
	case <-waiting:
	case err := <-got:
		t.Fatalf("Lock returned before it waited: %v", err)
	case <-ctx.Done():
		t.Fatal("the waiter never reported waiting")
	}
	return got
}

// lockOf returns c's lock name: a Mutex for kind "mutex", a FairMutex
// for "fair", both with the lease holdLong.
func lockOf(c *distlock.Client, kind, name string) distlock.Locker {
	if kind == "fair" {
		return c.FairMutex(name, distlock.WithTTL(holdLong))
	}
	return c.Mutex(name, distlock.WithTTL(holdLong))
}

// holdLong is the lease of a holder that a waiter must not outwait: a
// waiter polls once the lease it last saw could have ended, so one that
// gets the lock well before it was woken by a notice.
const holdLong = time.Minute

// A rueidis client and a go-redis client share locks: same keys, scripts
// and notices. Each waits for the other's lock and is woken by its
// release (the holder's lease is a minute; the waits are bounded by 10 s).
func TestSharesLocksWithGoRedis(t *testing.T) {
	srv := redistest.Start(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	rc, rWaiting := waitingClient(t, srv.Addr())
	gc := distlock.New(redisstore.New(srv.Client(t)), distlock.WithLogger(nil))
	closeAtEnd(t, gc)

	for _, kind := range []string{"mutex", "fair"} {
		name := "shared-" + kind
		held, err := lockOf(gc, kind, name).Lock(ctx)
		if err != nil {
			t.Fatalf("%s: go-redis Lock: %v", kind, err)
		}
		got := make(chan *distlock.Lease, 1)
		go func() {
			l, err := lockOf(rc, kind, name).Lock(ctx)
			if err != nil {
				t.Errorf("%s: rueidis Lock: %v", kind, err)
			}
			got <- l
		}()
		awaitWaiting(t, ctx, rWaiting)
		if err := held.Unlock(ctx); err != nil {
			t.Fatalf("%s: Unlock: %v", kind, err)
		}
		l := <-got
		if l == nil {
			t.FailNow()
		}
		if l.Token() <= held.Token() {
			t.Errorf("%s: token %d after %d", kind, l.Token(), held.Token())
		}
		info, err := gc.FairMutex(name).Inspect(ctx) // Inspect reads any kind of mutex
		if err != nil || !info.Locked || info.Token != l.Token() {
			t.Errorf("%s: go-redis sees %+v, %v; want the rueidis holder, token %d", kind, info, err, l.Token())
		}
		if err := l.Unlock(ctx); err != nil {
			t.Errorf("%s: rueidis Unlock: %v", kind, err)
		}
	}
}

// A waiter whose pub/sub connection is killed (CLIENT KILL TYPE pubsub)
// connects again and subscribes again, and the lost notices are made up
// for: it gets the lock released meanwhile without outwaiting the
// holder's lease. For a plain mutex (the release channel) and a fair one
// (the grants of the waiter's process).
func TestWaiterSurvivesAKilledSubscription(t *testing.T) {
	srv := redistest.Start(t)
	admin := srv.Client(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	waiter, waiting := waitingClient(t, srv.Addr())
	holder := distlock.New(redisstore.New(srv.Client(t)), distlock.WithLogger(nil))
	closeAtEnd(t, holder)

	for _, kind := range []string{"mutex", "fair"} {
		name := "killed-" + kind
		held, err := lockOf(holder, kind, name).Lock(ctx)
		if err != nil {
			t.Fatalf("%s: Lock: %v", kind, err)
		}
		got := lockAsync(t, ctx, lockOf(waiter, kind, name), waiting)
		n, err := admin.ClientKillByFilter(ctx, "TYPE", "pubsub").Result()
		if err != nil || n == 0 {
			t.Fatalf("%s: CLIENT KILL TYPE pubsub: %d, %v", kind, n, err)
		}
		if err := held.Unlock(ctx); err != nil {
			t.Fatalf("%s: Unlock: %v", kind, err)
		}
		if err := <-got; err != nil {
			t.Fatalf("%s: the waiter: %v", kind, err)
		}
	}
}

// A client whose server goes down while it waits: its waiter may fail
// with ErrBackend; once the server is back (empty: the lock went with it),
// the client takes the lock. rueidis does not look at an idle connection
// before it writes on it (go-redis's pool does), and finds it closed by a
// PING after a second of silence: a lock call that goes on a connection
// the server's end closed before that fails (EOF: sent, its outcome
// unknown) with ErrBackend. The client tries again; each of its
// connections fails once at most. (TestPubSubAcrossAnOutage checks
// that its pub/sub connection tries again at a bounded rate meanwhile.)
func TestWaiterAcrossAnOutage(t *testing.T) {
	srv := redistest.Start(t)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	waiter, waiting := waitingClient(t, srv.Addr())
	holder := distlock.New(redisstore.New(srv.Client(t)), distlock.WithLogger(nil))
	closeAtEnd(t, holder)
	if _, err := holder.Mutex("outage", distlock.WithTTL(holdLong)).Lock(ctx); err != nil {
		t.Fatal(err)
	}
	got := lockAsync(t, ctx, waiter.Mutex("outage"), waiting)
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // the outage
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil && !errors.Is(err, distlock.ErrBackend) {
		t.Fatalf("the waiter: %v, want the lock or ErrBackend", err)
	}
	const tries = 16 // above the connections a rueidis client keeps to a server here
	for try := 1; ; try++ {
		l, err := waiter.Mutex("outage").Lock(ctx)
		if err == nil {
			if err := l.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			break
		}
		if !errors.Is(err, distlock.ErrBackend) || try == tries {
			t.Fatalf("Lock after the outage, try %d: %v, want the lock or ErrBackend", try, err)
		}
		t.Logf("Lock after the outage, try %d: %v", try, err)
	}
}

// WithReplicaAck on rueidis: WAIT runs after the script on its
// connection. With the one replica there is, locks are taken; asking for
// two, every acquisition fails with ErrNotReplicated and leaves nothing
// behind.
func TestReplicaAck(t *testing.T) {
	g := redistest.StartSentinel(t, 1)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	newStore := func(replicas int) *distlock.Client {
		client := newClient(t, rueidis.ClientOption{InitAddress: g.SentinelAddrs(),
			Sentinel: rueidis.SentinelOption{MasterSet: g.MasterName()}})
		c := distlock.New(rueidisstore.New(client, redisstore.WithReplicaAck(replicas, 100*time.Millisecond)),
			distlock.WithLogger(nil))
		closeAtEnd(t, c)
		return c
	}
	one, two := newStore(1), newStore(2)
	for _, name := range []string{"acked", "acked-fair"} {
		var l distlock.Locker = one.Mutex(name, distlock.WithTTL(2*time.Second))
		if name == "acked-fair" {
			l = one.FairMutex(name, distlock.WithTTL(2*time.Second))
		}
		lease, err := l.Lock(ctx)
		if err != nil {
			t.Fatalf("%s: Lock, one replica asked: %v", name, err)
		}
		if err := lease.Unlock(ctx); err != nil {
			t.Fatalf("%s: Unlock: %v", name, err)
		}
	}
	refusedUnacked(t, ctx, one, two)
}

// refusedUnacked checks that an acquisition of two, a client asking two
// replicas of a master that has one, fails with ErrNotReplicated and
// leaves no holder, as one, which asks for one, sees.
func refusedUnacked(t *testing.T, ctx context.Context, one, two *distlock.Client) {
	t.Helper()
	_, err := two.Mutex("unacked", distlock.WithTTL(2*time.Second)).Lock(ctx)
	if !errors.Is(err, distlock.ErrNotReplicated) {
		t.Fatalf("Lock, two replicas asked of one: %v, want ErrNotReplicated", err)
	}
	if info, err := one.Mutex("unacked").Inspect(ctx); err != nil || info.Locked {
		t.Fatalf("after the refused acquisition: %+v, %v; want no holder", info, err)
	}
}

// Invalid stores fail every operation with a typed error, and panic on
// nothing: a nil client, a bad option, a Redlock of too few or the same
// masters, or with replica acknowledgement.
func TestInvalid(t *testing.T) {
	srv := redistest.Start(t)
	client := func() rueidis.Client { return newClient(t, rueidis.ClientOption{InitAddress: []string{srv.Addr()}}) }
	for _, tc := range []struct {
		name  string
		store func() *distlock.Client
		want  error
	}{
		{"nil client", func() *distlock.Client { return distlock.New(rueidisstore.New(nil)) }, distlock.ErrInvalidOption},
		{"bad prefix", func() *distlock.Client {
			return distlock.New(rueidisstore.New(newClient(t, rueidis.ClientOption{InitAddress: []string{srv.Addr()}}),
				redisstore.WithPrefix("a{b")))
		}, distlock.ErrInvalidOption},
		{"redlock of 2", func() *distlock.Client {
			return distlock.New(rueidisstore.NewRedlock([]rueidis.Client{client(), client()}))
		}, distlock.ErrInvalidOption},
		{"redlock with a master twice", func() *distlock.Client {
			return distlock.New(rueidisstore.NewRedlock([]rueidis.Client{client(), client(), client()}))
		}, distlock.ErrInvalidOption},
		{"redlock with a nil client", func() *distlock.Client {
			return distlock.New(rueidisstore.NewRedlock([]rueidis.Client{client(), nil, client()}))
		}, distlock.ErrInvalidOption},
		{"redlock with replica acknowledgement", func() *distlock.Client {
			return distlock.New(rueidisstore.NewRedlock([]rueidis.Client{client(), client(), client()},
				redisstore.WithReplicaAck(1, time.Second)))
		}, distlock.ErrInvalidOption},
	} {
		c := tc.store()
		if err := c.Err(); !errors.Is(err, tc.want) {
			t.Errorf("%s: Err() = %v, want %v", tc.name, err, tc.want)
		}
		if _, err := c.Mutex("m").Lock(t.Context()); !errors.Is(err, tc.want) {
			t.Errorf("%s: Lock: %v, want %v", tc.name, err, tc.want)
		}
		_ = c.Close()
	}
}
