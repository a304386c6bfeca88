package distlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/redistest"
	"github.com/redis/go-redis/v9"
)

// Bad input gets a typed error, never a panic, and touches nothing.
func TestBadInput(t *testing.T) {
	srv := redistest.Start(t)
	c, rdb := newClient(t, srv)
	ctx := testCtx(t)
	for _, tc := range []struct {
		name string
		m    *distlock.Mutex
		want error
	}{
		{"empty name", c.Mutex(""), distlock.ErrInvalidName},
		{"brace", c.Mutex("a{b}"), distlock.ErrInvalidName},
		{"closing brace", c.Mutex("}x"), distlock.ErrInvalidName},
		{"control character", c.Mutex("a\nb"), distlock.ErrInvalidName},
		{"not UTF-8", c.Mutex("a\xffb"), distlock.ErrInvalidName},
		{"too long", c.Mutex(strings.Repeat("x", distlock.MaxNameLen+1)), distlock.ErrInvalidName},
		{"zero TTL", c.Mutex("a", distlock.WithTTL(0)), distlock.ErrInvalidOption},
		{"negative TTL", c.Mutex("a", distlock.WithTTL(-time.Second)), distlock.ErrInvalidOption},
		{"tiny TTL", c.Mutex("a", distlock.WithTTL(time.Millisecond)), distlock.ErrInvalidOption},
		{"huge TTL", c.Mutex("a", distlock.WithTTL(100*365*24*time.Hour)), distlock.ErrInvalidOption},
		{"huge fixed lease", c.Mutex("a", distlock.WithFixedLease(time.Duration(1<<62))), distlock.ErrInvalidOption},
		{"bad TTL, then good", c.Mutex("a", distlock.WithTTL(0), distlock.WithTTL(time.Second)), distlock.ErrInvalidOption},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := tc.m.Lock(ctx); !errors.Is(err, tc.want) {
				t.Errorf("Lock: %v, want %v", err, tc.want)
			}
			if _, err := tc.m.TryLock(ctx); !errors.Is(err, tc.want) {
				t.Errorf("TryLock: %v, want %v", err, tc.want)
			}
			if _, err := tc.m.Inspect(ctx); !errors.Is(err, tc.want) {
				t.Errorf("Inspect: %v, want %v", err, tc.want)
			}
			if _, err := tc.m.ForceUnlock(ctx); !errors.Is(err, tc.want) {
				t.Errorf("ForceUnlock: %v, want %v", err, tc.want)
			}
		})
	}
	if n := rdb.DBSize(ctx).Val(); n != 0 {
		t.Fatalf("bad input wrote %d keys", n)
	}
}

func TestBadClientOptions(t *testing.T) {
	srv := redistest.Start(t)
	ctx := testCtx(t)
	for _, opt := range []distlock.Option{
		distlock.WithPrefix("a{b"),
		distlock.WithPrefix("x\x00"),
		distlock.WithFenceRetention(0),
		distlock.WithFenceRetention(time.Millisecond),
		distlock.WithReplicaAck(0, time.Second),
		distlock.WithReplicaAck(1, 0),
		distlock.WithReplicaAck(1, time.Minute),
	} {
		c, _ := newClient(t, srv, opt)
		if _, err := c.Mutex("fine").Lock(ctx); !errors.Is(err, distlock.ErrInvalidOption) {
			t.Errorf("Lock with a bad client option: %v, want ErrInvalidOption", err)
		}
		if _, err := c.List(ctx, "*"); !errors.Is(err, distlock.ErrInvalidOption) {
			t.Errorf("List with a bad client option: %v, want ErrInvalidOption", err)
		}
	}
}

// WithReplicaAck is refused where it cannot hold: a lease shorter than six
// WAIT timeouts, and a queued kind whose queue timeout is shorter than
// three (a grant's first lease, the shorter of the two, must outlast its
// confirmation); a refused lock is never taken. Otherwise every kind takes
// it, on a Cluster client too. (Redlock refuses it: TestRedlockRefusesBadQuorums.)
func TestReplicaAckRefused(t *testing.T) {
	srv := redistest.Start(t)
	ctx := testCtx(t)
	c, _ := newClient(t, srv, distlock.WithReplicaAck(1, time.Second))
	short := distlock.WithQueueTimeout(2 * time.Second)
	for what, err := range map[string]error{
		"short lease":           c.Mutex("a", distlock.WithTTL(5*time.Second)).Err(),
		"FairMutex short queue": c.FairMutex("a", short).Err(),
		"RWMutex short queue":   c.RWMutex("a", short).Err(),
		"Semaphore short queue": c.Semaphore("a", 2, short).Err(),
		"Election short queue":  c.Election("a", short).Err(),
	} {
		if !errors.Is(err, distlock.ErrInvalidOption) {
			t.Errorf("%s with replica acknowledgement: %v, want ErrInvalidOption", what, err)
		}
	}
	if _, err := c.FairMutex("a", short).TryLock(ctx); !errors.Is(err, distlock.ErrInvalidOption) {
		t.Errorf("FairMutex TryLock with a short queue timeout: %v, want ErrInvalidOption", err)
	}
	for what, err := range map[string]error{
		"Mutex with a lease of six timeouts": c.Mutex("a", distlock.WithTTL(6*time.Second)).Err(),
		"Mutex with a short queue timeout":   c.Mutex("a", short).Err(), // it has no queue
		"MultiMutex":                         c.MultiMutex([]string{"a", "b"}).Err(),
		"FairMutex":                          c.FairMutex("a").Err(),
		"RWMutex":                            c.RWMutex("a").Err(),
		"Semaphore":                          c.Semaphore("a", 2).Err(),
		"Election":                           c.Election("a", distlock.WithQueueTimeout(3*time.Second)).Err(),
	} {
		if err != nil {
			t.Errorf("%s with replica acknowledgement: %v", what, err)
		}
	}
	cl := distlock.New(redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{srv.Addr()}}), distlock.WithReplicaAck(1, time.Second))
	defer cl.Close()
	if err := cl.Err(); err != nil {
		t.Errorf("a Cluster client with replica acknowledgement: %v", err)
	}
	if n := srv.Client(t).Exists(ctx, "distlock:{a}").Val(); n != 0 {
		t.Errorf("a refused lock was taken")
	}
}

// A context that has already ended gets an error wrapping both
// ErrNotAcquired and the context's error, without a round trip.
func TestEndedContext(t *testing.T) {
	srv := redistest.Start(t)
	c, rdb := newClient(t, srv)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rdb.ConfigResetStat(t.Context())
	for _, lock := range []func(context.Context) (*distlock.Lease, error){c.Mutex("x").Lock, c.Mutex("x").TryLock} {
		if _, err := lock(ctx); !errors.Is(err, distlock.ErrNotAcquired) || !errors.Is(err, context.Canceled) {
			t.Fatalf("Lock with a cancelled context: %v", err)
		}
	}
	dctx, dcancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer dcancel()
	if _, err := c.Mutex("x").Lock(dctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock past its deadline: %v", err)
	}
	if scripts := scriptCalls(t, rdb); scripts != 0 {
		t.Fatalf("%d scripts ran for ended contexts", scripts)
	}
}

// A Redis that is down gives ErrBackend, distinguishable from contention.
func TestRedisDown(t *testing.T) {
	srv := redistest.Start(t)
	opt := srv.Options()
	opt.MaxRetries = -1
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	c := distlock.New(rdb, distlock.WithLogger(nil))
	defer c.Close()
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	for _, lock := range []func(context.Context) (*distlock.Lease, error){c.Mutex("x").Lock, c.Mutex("x").TryLock} {
		_, err := lock(ctx)
		if !errors.Is(err, distlock.ErrBackend) || errors.Is(err, distlock.ErrNotAcquired) {
			t.Fatalf("Lock with Redis down: %v, want ErrBackend only", err)
		}
	}
	if _, err := c.Mutex("x").Inspect(ctx); !errors.Is(err, distlock.ErrBackend) {
		t.Fatalf("Inspect with Redis down: %v", err)
	}
}

// A closed client refuses work with ErrClosed, and Close released its locks
// and ended its waiters.
func TestClosedClient(t *testing.T) {
	srv := redistest.Start(t)
	c := distlock.New(srv.Client(t), distlock.WithLogger(nil))
	other, rdb := newClient(t, srv)
	ctx := testCtx(t)
	l, err := c.Mutex("closing").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	held, err := other.Mutex("held").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Unlock(ctx)
	waiting := make(chan error, 1)
	ev := make(chan struct{})
	w := distlock.New(srv.Client(t), distlock.WithLogger(nil), distlock.WithEventHandler(func(e distlock.Event) {
		if e.Kind == distlock.EventWaiting {
			close(ev)
		}
	}))
	go func() {
		_, err := w.Mutex("held").Lock(ctx)
		waiting <- err
	}()
	<-ev
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-waiting; !errors.Is(err, distlock.ErrClosed) {
		t.Fatalf("waiter after Close: %v, want ErrClosed", err)
	}

	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if cause := context.Cause(l.Context()); !errors.Is(cause, distlock.ErrClosed) {
		t.Fatalf("lease context after Close: %v, want ErrClosed", cause)
	}
	if rdb.Exists(ctx, "distlock:{closing}").Val() != 0 {
		t.Fatal("Close left its lock behind")
	}
	if _, err := c.Mutex("closing").Lock(ctx); !errors.Is(err, distlock.ErrClosed) {
		t.Fatalf("Lock after Close: %v, want ErrClosed", err)
	}
	if err := l.Unlock(ctx); err == nil {
		t.Fatal("Unlock after Close succeeded")
	}
	if _, err := c.Mutex("held").Inspect(ctx); !errors.Is(err, distlock.ErrClosed) {
		t.Errorf("Inspect after Close: %v, want ErrClosed", err)
	}
	if _, err := c.Mutex("held").ForceUnlock(ctx); !errors.Is(err, distlock.ErrClosed) {
		t.Errorf("ForceUnlock after Close: %v, want ErrClosed", err)
	}
	if _, err := c.List(ctx, "*"); !errors.Is(err, distlock.ErrClosed) {
		t.Errorf("List after Close: %v, want ErrClosed", err)
	}
	if ok, _ := other.Mutex("held").Inspect(ctx); !ok.Locked {
		t.Error("the refused ForceUnlock touched the lock")
	}
}

// Err reports invalid input without contacting Redis.
func TestErrWithoutRedis(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // nothing listens there
	defer rdb.Close()
	c := distlock.New(rdb, distlock.WithLogger(nil))
	defer c.Close()
	if err := c.Err(); err != nil {
		t.Fatalf("Client.Err = %v", err)
	}
	if err := c.Mutex("fine").Err(); err != nil {
		t.Fatalf("Mutex.Err = %v", err)
	}
	if err := c.Mutex("").Err(); !errors.Is(err, distlock.ErrInvalidName) {
		t.Fatalf("Err of an empty name = %v", err)
	}
	bad := distlock.New(rdb, distlock.WithPrefix("{"), distlock.WithLogger(nil))
	defer bad.Close()
	if err := bad.Err(); !errors.Is(err, distlock.ErrInvalidOption) || errors.Is(err, distlock.ErrInvalidName) {
		t.Fatalf("Client.Err of a bad prefix = %v, want ErrInvalidOption only", err)
	}
	if err := bad.Mutex("fine").Err(); !errors.Is(err, distlock.ErrInvalidOption) {
		t.Fatalf("Mutex.Err under a bad prefix = %v", err)
	}
}
