package distlock_test

import (
	"context"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/redisstore"
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
	for _, opt := range []redisstore.Option{
		redisstore.WithPrefix("a{b"),
		redisstore.WithPrefix("x\x00"),
		redisstore.WithFenceRetention(0),
		redisstore.WithFenceRetention(time.Millisecond),
		redisstore.WithReplicaAck(0, time.Second),
		redisstore.WithReplicaAck(1, 0),
		redisstore.WithReplicaAck(1, time.Minute),
		redisstore.WithReplicaAck(1, redisstore.MaxReplicaTimeout+time.Millisecond),
	} {
		c, _ := newStoreClient(t, srv, opt)
		if _, err := c.Mutex("fine").Lock(ctx); !errors.Is(err, distlock.ErrInvalidOption) {
			t.Errorf("Lock with a bad store option: %v, want ErrInvalidOption", err)
		}
		if _, err := c.List(ctx, "*"); !errors.Is(err, distlock.ErrInvalidOption) {
			t.Errorf("List with a bad store option: %v, want ErrInvalidOption", err)
		}
	}
	// The longest acknowledgement timeout is accepted.
	if c, _ := newStoreClient(t, srv, redisstore.WithReplicaAck(1, redisstore.MaxReplicaTimeout)); c.Err() != nil {
		t.Errorf("WithReplicaAck(1, %v): %v", redisstore.MaxReplicaTimeout, c.Err())
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
	c, _ := newStoreClient(t, srv, redisstore.WithReplicaAck(1, time.Second))
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
	cl := distlock.New(redisstore.New(redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{srv.Addr()}}), redisstore.WithReplicaAck(1, time.Second)))
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
// Down is port 1, where nothing listens: the port of a server the test
// killed may be taken at once by another test's server.
func TestRedisDown(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialerRetries: 1})
	defer rdb.Close()
	c := distlock.New(redisstore.New(rdb), distlock.WithLogger(nil))
	defer c.Close()
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
	c := distlock.New(redisstore.New(srv.Client(t)), distlock.WithLogger(nil))
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
	w := distlock.New(redisstore.New(srv.Client(t)), distlock.WithLogger(nil), distlock.WithEventHandler(func(e distlock.Event) {
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
	c := distlock.New(redisstore.New(rdb), distlock.WithLogger(nil))
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
	bad := distlock.New(redisstore.New(rdb, redisstore.WithPrefix("{")), distlock.WithLogger(nil))
	defer bad.Close()
	if err := bad.Err(); !errors.Is(err, distlock.ErrInvalidOption) || errors.Is(err, distlock.ErrInvalidName) {
		t.Fatalf("Client.Err of a bad prefix = %v, want ErrInvalidOption only", err)
	}
	if err := bad.Mutex("fine").Err(); !errors.Is(err, distlock.ErrInvalidOption) {
		t.Fatalf("Mutex.Err under a bad prefix = %v", err)
	}
}

// The exported errors, by name: TestSentinelMessages checks that the list
// is complete.
var sentinels = map[string]error{
	"ErrNotAcquired":   distlock.ErrNotAcquired,
	"ErrWrongKind":     distlock.ErrWrongKind,
	"ErrDeadlock":      distlock.ErrDeadlock,
	"ErrNotHeld":       distlock.ErrNotHeld,
	"ErrLockLost":      distlock.ErrLockLost,
	"ErrLeaseExpired":  distlock.ErrLeaseExpired,
	"ErrClosed":        distlock.ErrClosed,
	"ErrBackend":       distlock.ErrBackend,
	"ErrNotReplicated": distlock.ErrNotReplicated,
	"ErrUnsupported":   distlock.ErrUnsupported,
	"ErrInvalidName":   distlock.ErrInvalidName,
	"ErrInvalidOption": distlock.ErrInvalidOption,
}

// The message of every exported error says what happened, and only that:
// lower case, no "distlock:" (the operation that returns it adds one), no
// trailing punctuation.
func TestSentinelMessages(t *testing.T) {
	files, err := parser.ParseDir(token.NewFileSet(), ".", func(fi fs.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go")
	}, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files["distlock"].Files {
		for _, decl := range f.Decls {
			gen, ok := decl.(*ast.GenDecl)
			if !ok || gen.Tok != token.VAR {
				continue
			}
			for _, spec := range gen.Specs {
				for _, id := range spec.(*ast.ValueSpec).Names {
					if _, listed := sentinels[id.Name]; id.IsExported() && strings.HasPrefix(id.Name, "Err") && !listed {
						t.Errorf("%s is not in the test's list of sentinels", id.Name)
					}
				}
			}
		}
	}
	for name, err := range sentinels {
		msg := err.Error()
		last, _ := utf8.DecodeLastRuneInString(msg)
		switch {
		case strings.Contains(msg, "distlock"):
			t.Errorf("%s = %q: names distlock", name, msg)
		case msg == "" || msg != strings.ToLower(msg[:1])+msg[1:]:
			t.Errorf("%s = %q: not lower case", name, msg)
		case !unicode.IsLetter(last) && !unicode.IsDigit(last):
			t.Errorf("%s = %q: ends with punctuation", name, msg)
		}
	}
}

// checkShape fails t unless err wraps want and reads
// `distlock: <op> "<name>": ...`, "distlock:" once. It logs the message.
func checkShape(t *testing.T, what string, err error, name string, want ...error) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: no error", what)
		return
	}
	msg := err.Error()
	t.Logf("%-28s %s", what+":", msg)
	shape := regexp.MustCompile(`^distlock: [a-z-]+ ` + regexp.QuoteMeta(strconv.Quote(name)) + `: \S`)
	if !shape.MatchString(msg) {
		t.Errorf("%s: %q does not read `distlock: <op> %q: ...`", what, msg, name)
	}
	if n := strings.Count(msg, "distlock:"); n != 1 {
		t.Errorf("%s: %q has \"distlock:\" %d times", what, msg, n)
	}
	var e *distlock.Error
	switch {
	case !errors.As(err, &e):
		t.Errorf("%s: %q is not a *distlock.Error", what, msg)
	case e.Name != name || e.Op == "" || !strings.HasPrefix(msg, "distlock: "+e.Op+" ") || e.Err == nil:
		t.Errorf("%s: *distlock.Error{Op: %q, Name: %q, Err: %v}, want the name %q and the op of %q", what, e.Op, e.Name, e.Err, name, msg)
	}
	for _, w := range want {
		if !errors.Is(err, w) {
			t.Errorf("%s: %q does not wrap %v", what, msg, w)
		}
	}
}

// Every public entry point returns errors of one shape: the operation and
// the lock's name after one "distlock:", and the sentinels still match.
func TestErrorShape(t *testing.T) {
	srv := redistest.Start(t)
	c, _ := newClient(t, srv)
	other, _ := newClient(t, srv)
	ctx := testCtx(t)

	held, err := other.Mutex("jobs").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Unlock(ctx)
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, err = c.Mutex("jobs").Lock(short)
	checkShape(t, "Lock, timed out", err, "jobs", distlock.ErrNotAcquired, context.DeadlineExceeded)
	_, err = c.Mutex("jobs").TryLock(ctx)
	checkShape(t, "TryLock", err, "jobs", distlock.ErrNotAcquired)
	_, err = c.FairMutex("jobs").TryLock(ctx)
	checkShape(t, "TryLock, wrong kind", err, "jobs", distlock.ErrWrongKind, distlock.ErrNotAcquired)
	_, err = c.MultiMutex([]string{"jobs", "mail"}).TryLock(ctx)
	checkShape(t, "MultiMutex.TryLock", err, "jobs+mail", distlock.ErrNotAcquired)

	rw := c.RWMutex("table")
	r, err := rw.RLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, err = rw.Lock(r.Context())
	checkShape(t, "RWMutex.Lock, deadlock", err, "table", distlock.ErrDeadlock, distlock.ErrNotAcquired)
	_, err = c.Mutex("table").TryLock(r.Context())
	checkShape(t, "re-entry, wrong kind", err, "table", distlock.ErrWrongKind)
	if err := r.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	checkShape(t, "Unlock twice", r.Unlock(ctx), "table", distlock.ErrNotHeld)
	checkShape(t, "Extend after Unlock", r.Extend(ctx, time.Minute), "table", distlock.ErrNotHeld)

	l, err := c.Mutex("lost").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	checkShape(t, "Extend, absurd TTL", l.Extend(ctx, 0), "lost", distlock.ErrInvalidOption)
	if _, err := other.Mutex("lost").ForceUnlock(ctx); err != nil {
		t.Fatal(err)
	}
	checkShape(t, "Unlock after a loss", l.Unlock(ctx), "lost", distlock.ErrLockLost)
	fixed, err := c.Mutex("brief", distlock.WithFixedLease(100*time.Millisecond)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	<-fixed.Context().Done()
	checkShape(t, "lease context's cause", context.Cause(fixed.Context()), "brief", distlock.ErrLeaseExpired, distlock.ErrLockLost)
	checkShape(t, "Extend, lease expired", fixed.Extend(ctx, time.Second), "brief", distlock.ErrLeaseExpired)

	sem := c.Semaphore("pool", 2)
	_, err = sem.Acquire(ctx, 3)
	checkShape(t, "Semaphore.Acquire, too many", err, "pool", distlock.ErrInvalidOption)
	checkShape(t, "SetPermits, zero", sem.SetPermits(ctx, 0), "pool", distlock.ErrInvalidOption)
	_, err = c.Election("boss").Leader(ctx)
	checkShape(t, "Election.Leader, nobody", err, "boss", distlock.ErrNotHeld)
	_, err = c.Once(ctx, "job", 0, func(context.Context, uint64) error { return nil })
	checkShape(t, "Once, no keep", err, "job", distlock.ErrInvalidOption)
	_, err = c.OncePer(ctx, "job{", time.Second, func(context.Context, uint64) error { return nil })
	checkShape(t, "OncePer, invalid name", err, "job{", distlock.ErrInvalidName)

	_, err = c.Mutex("a{b").Lock(ctx)
	checkShape(t, "Lock, invalid name", err, "a{b", distlock.ErrInvalidName)
	checkShape(t, "Mutex.Err, invalid name", c.Mutex("").Err(), "", distlock.ErrInvalidName)
	_, err = c.MultiMutex([]string{"a", "b}"}).Lock(ctx)
	checkShape(t, "MultiMutex, invalid name", err, "a+b}", distlock.ErrInvalidName)
	_, err = c.Mutex("a", distlock.WithTTL(100*365*24*time.Hour)).TryLock(ctx)
	checkShape(t, "TryLock, absurd TTL", err, "a", distlock.ErrInvalidOption)
	_, err = c.Mutex("a{b").ForceUnlock(ctx)
	checkShape(t, "ForceUnlock, invalid name", err, "a{b", distlock.ErrInvalidName)
	_, err = c.Mutex("a{b").Revoke(ctx)
	checkShape(t, "Revoke, invalid name", err, "a{b", distlock.ErrInvalidName)

	// Redis unreachable.
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialerRetries: 1}) // nothing listens there
	defer rdb.Close()
	down := distlock.New(redisstore.New(rdb), distlock.WithLogger(nil))
	defer down.Close()
	_, err = down.Mutex("jobs").Lock(ctx)
	checkShape(t, "Lock, Redis down", err, "jobs", distlock.ErrBackend)
	_, err = down.Mutex("jobs").Inspect(ctx)
	checkShape(t, "Inspect, Redis down", err, "jobs", distlock.ErrBackend)
	_, err = down.RWMutex("jobs").Inspect(ctx)
	checkShape(t, "RWMutex.Inspect, Redis down", err, "jobs", distlock.ErrBackend)
	_, err = down.List(ctx, "jobs*")
	checkShape(t, "List, Redis down", err, "jobs*", distlock.ErrBackend)
	_, err = down.Mutex("jobs").ForceUnlock(ctx)
	checkShape(t, "ForceUnlock, Redis down", err, "jobs", distlock.ErrBackend)
	_, err = down.RWMutex("jobs").Revoke(ctx)
	checkShape(t, "Revoke, Redis down", err, "jobs", distlock.ErrBackend)
	_, err = down.Once(ctx, "job", time.Hour, func(context.Context, uint64) error { return nil })
	checkShape(t, "Once, Redis down", err, "job", distlock.ErrBackend)
	// Close gives up on the clean-ups of the attempts above, which cannot
	// reach Redis (after five seconds): its error is about no lock.
	if err := down.Close(); err != nil {
		t.Logf("%-28s %s", "Close, Redis down:", err)
		if !strings.HasPrefix(err.Error(), "distlock: close: ") || strings.Count(err.Error(), "distlock:") != 1 ||
			!errors.Is(err, distlock.ErrBackend) {
			t.Errorf("Close with Redis down = %q, want `distlock: close: ...` wrapping ErrBackend", err)
		}
	}

	// A bad prefix: the Client's own error names no lock, the operations'
	// do.
	bad := distlock.New(redisstore.New(srv.Client(t), redisstore.WithPrefix("a{")), distlock.WithLogger(nil))
	defer bad.Close()
	if got, want := bad.Err().Error(), `distlock: invalid option: prefix "a{": contains a brace`; got != want {
		t.Errorf("Client.Err with a bad prefix = %q, want %q", got, want)
	}
	_, err = bad.Mutex("jobs").Lock(ctx)
	checkShape(t, "Lock, bad prefix", err, "jobs", distlock.ErrInvalidOption)
	_, err = bad.List(ctx, "")
	checkShape(t, "List, bad prefix", err, "*", distlock.ErrInvalidOption)

	closed := distlock.New(redisstore.New(srv.Client(t)), distlock.WithLogger(nil))
	if err := closed.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = closed.Semaphore("pool", 2).TryAcquire(ctx, 1)
	checkShape(t, "TryAcquire, closed", err, "pool", distlock.ErrClosed)

	var nothing *distlock.Lease
	if got, want := nothing.Unlock(ctx).Error(), "distlock: unlock: not held: nil lease (the lock was not acquired)"; got != want {
		t.Errorf("Unlock of a nil lease = %q, want %q", got, want)
	}
}
