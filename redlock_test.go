package distlock_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/redisstore"
	"github.com/distlock/distlock/redistest"
	"github.com/distlock/distlock/store"
	"github.com/redis/go-redis/v9"
)

// quorum is n independent redis-server processes, a go-redis client on
// each (for looking at what they hold), and a Redlock Client on all of
// them.
type quorum struct {
	servers []*redistest.Server
	rdbs    []*redis.Client
	c       *distlock.Client
}

func startQuorum(t *testing.T, n int, opts ...distlock.Option) *quorum {
	t.Helper()
	q := &quorum{}
	for range n {
		srv := redistest.Start(t)
		q.servers = append(q.servers, srv)
		q.rdbs = append(q.rdbs, srv.Client(t))
	}
	q.c = q.client(t, opts...)
	return q
}

// client returns another Redlock Client on q's servers, with go-redis
// clients of its own, closed when the test ends.
func (q *quorum) client(t *testing.T, opts ...distlock.Option) *distlock.Client {
	t.Helper()
	var rdbs []redis.UniversalClient
	for _, srv := range q.servers {
		rdbs = append(rdbs, srv.Client(t))
	}
	c := distlock.New(redisstore.NewRedlock(rdbs), append([]distlock.Option{distlock.WithLogger(nil)}, opts...)...)
	t.Cleanup(func() { c.Close() })
	return c
}

// dump logs every key of every server, with its remaining lease.
func (q *quorum) dump(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	for i, rdb := range q.rdbs {
		keys, err := rdb.Keys(ctx, "*").Result()
		if err != nil {
			t.Logf("master %d: %v", i, err)
			continue
		}
		for _, k := range keys {
			t.Logf("master %d: %s pttl %v %v", i, k, rdb.PTTL(ctx, k).Val(), rdb.HGetAll(ctx, k).Val())
		}
	}
}

// tokens returns, per server, the token of the lock's holder there: 0 when
// it is free there, -1 when the server does not answer.
func (q *quorum) tokens(t *testing.T, name string) []int64 {
	t.Helper()
	out := make([]int64, len(q.rdbs))
	for i, rdb := range q.rdbs {
		v, err := rdb.HGet(t.Context(), redisstore.DefaultPrefix+"{"+name+"}", "token").Int64()
		switch {
		case errors.Is(err, redis.Nil):
		case err != nil:
			out[i] = -1
		default:
			out[i] = v
		}
	}
	return out
}

// awaitTokens waits until every master holds the lock with token want (0:
// until it is free on every master). A request goes to every master at
// once but counts once a quorum answered, so the others may apply it a
// little later.
func (q *quorum) awaitTokens(t *testing.T, name string, want uint64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		tokens := q.tokens(t, name)
		if !slices.ContainsFunc(tokens, func(tok int64) bool { return tok != int64(want) }) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("lock %q: tokens per master %v, want %d on all", name, tokens, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestRedlockRefusesBadQuorums(t *testing.T) {
	// Clients of addresses nobody listens on: NewRedlock contacts nothing.
	dummy := func(port string) *redis.Client {
		c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + port})
		t.Cleanup(func() { c.Close() })
		return c
	}
	a, b, c, d := dummy("1"), dummy("2"), dummy("3"), dummy("4")
	for _, tc := range []struct {
		name string
		rdbs []redis.UniversalClient
		want string
	}{
		{"none", nil, "at least 3"},
		{"one", []redis.UniversalClient{a}, "at least 3"},
		{"two", []redis.UniversalClient{a, b}, "at least 3"},
		{"four", []redis.UniversalClient{a, b, c, d}, "odd number"},
		{"nil", []redis.UniversalClient{a, nil, c}, "nil client"},
		{"same client", []redis.UniversalClient{a, b, a}, "masters 0 and 2 are the same"},
		{"same address", []redis.UniversalClient{a, b, dummy("1")}, "masters 0 and 2 are the same (127.0.0.1:1)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rl := distlock.New(redisstore.NewRedlock(tc.rdbs), distlock.WithLogger(nil))
			defer rl.Close()
			if err := rl.Err(); !errors.Is(err, distlock.ErrInvalidOption) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Err() = %v, want ErrInvalidOption saying %q", err, tc.want)
			}
			if _, err := rl.Mutex("x").TryLock(t.Context()); !errors.Is(err, distlock.ErrInvalidOption) {
				t.Fatalf("TryLock = %v, want ErrInvalidOption", err)
			}
		})
	}
	rl := distlock.New(redisstore.NewRedlock([]redis.UniversalClient{a, b, c}, redisstore.WithReplicaAck(1, 100*time.Millisecond)), distlock.WithLogger(nil))
	defer rl.Close()
	if err := rl.Err(); !errors.Is(err, distlock.ErrInvalidOption) {
		t.Fatalf("WithReplicaAck over Redlock: %v, want ErrInvalidOption", err)
	}
}

func TestRedlockUnsupportedKinds(t *testing.T) {
	q := startQuorum(t, 3)
	ctx := testCtx(t)
	for what, try := range map[string]func() error{
		"FairMutex": func() error { _, err := q.c.FairMutex("k").TryLock(ctx); return err },
		"RWMutex":   func() error { _, err := q.c.RWMutex("k").RLock(ctx); return err },
		"Semaphore": func() error { _, err := q.c.Semaphore("k", 2).TryAcquire(ctx, 1); return err },
		"Election":  func() error { _, err := q.c.Election("k").Campaign(ctx, "v"); return err },
		"Once": func() error {
			_, err := q.c.Once(ctx, "k", time.Minute, func(context.Context, uint64) error { return nil })
			return err
		},
	} {
		if err := try(); !errors.Is(err, distlock.ErrUnsupported) {
			t.Errorf("%s over Redlock: %v, want ErrUnsupported", what, err)
		}
	}
	for i, rdb := range q.rdbs {
		if keys := rdb.Keys(ctx, "*").Val(); len(keys) > 0 {
			t.Errorf("master %d: an unsupported request left %v", i, keys)
		}
	}
}

func TestRedlockLockUnlock(t *testing.T) {
	q := startQuorum(t, 3)
	ctx := testCtx(t)
	other := q.client(t)
	l, err := q.c.Mutex("job").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	q.awaitTokens(t, "job", l.Token())
	if _, err := other.Mutex("job").TryLock(ctx); !errors.Is(err, distlock.ErrNotAcquired) {
		t.Fatalf("TryLock of a held lock: %v", err)
	}

	info, err := other.Mutex("job").Inspect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !info.Locked || info.Token != l.Token() || info.Holds != 1 || info.TTL <= 0 || info.Kind != distlock.KindMutex {
		t.Errorf("Inspect = %+v, want held with token %d", info, l.Token())
	}
	if names, err := other.List(ctx, "*"); err != nil || len(names) != 1 || names[0] != "job" {
		t.Errorf("List = %v, %v", names, err)
	}

	// Extend returns once a quorum of masters set the lease.
	if err := l.Extend(ctx, time.Hour); err != nil {
		t.Fatal(err)
	}
	extended := 0
	for _, rdb := range q.rdbs {
		if rdb.PTTL(ctx, redisstore.DefaultPrefix+"{job}").Val() > 50*time.Minute {
			extended++
		}
	}
	if extended < 2 {
		t.Errorf("Extend(1h) returned with the lease set on %d of 3 masters", extended)
	}

	// Re-entry: a hold on every master; the lock stays until the last.
	inner, err := q.c.Mutex("job").Lock(l.Context())
	if err != nil {
		t.Fatal(err)
	}
	if info, _ := other.Mutex("job").Inspect(ctx); info.Holds != 2 {
		t.Errorf("after re-entry: %d holds, want 2", info.Holds)
	}
	if err := inner.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := inner.Unlock(ctx); !errors.Is(err, distlock.ErrNotHeld) {
		t.Errorf("second Unlock of the same lease: %v, want ErrNotHeld", err)
	}
	if _, err := other.Mutex("job").TryLock(ctx); !errors.Is(err, distlock.ErrNotAcquired) {
		t.Fatalf("TryLock while the outer hold remains: %v", err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	q.awaitTokens(t, "job", 0)

	l2, err := other.Mutex("job").TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if l2.Token() <= l.Token() {
		t.Errorf("second token %d not above the first %d", l2.Token(), l.Token())
	}
	q.awaitTokens(t, "job", l2.Token())
	if ok, err := q.c.Mutex("job").ForceUnlock(ctx); !ok || err != nil {
		t.Fatalf("ForceUnlock = %v, %v", ok, err)
	}
	q.awaitTokens(t, "job", 0)
	if err := l2.Unlock(ctx); !errors.Is(err, distlock.ErrLockLost) {
		t.Errorf("Unlock after ForceUnlock: %v, want ErrLockLost", err)
	}
}

func TestRedlockMultiMutex(t *testing.T) {
	q := startQuorum(t, 3)
	ctx := testCtx(t)
	l, err := q.c.MultiMutex([]string{"a", "b", "c"}).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for name, tok := range l.Tokens() {
		q.awaitTokens(t, name, tok)
	}
	if _, err := q.client(t).Mutex("b").TryLock(ctx); !errors.Is(err, distlock.ErrNotAcquired) {
		t.Errorf("TryLock of a member: %v", err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "b", "c"} {
		q.awaitTokens(t, name, 0)
	}
}

// TestRedlockPushHandover: a waiter is woken by the holder's release, not
// by the end of the 30 s lease, even with a master down.
func TestRedlockPushHandover(t *testing.T) {
	q := startQuorum(t, 3)
	if err := q.servers[2].Kill(); err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	ev := newEvents()
	waiter := q.client(t, distlock.WithEventHandler(ev.handle))
	l, err := q.c.Mutex("h").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second) // a third of the lease
		defer cancel()
		l2, err := waiter.Mutex("h").Lock(wctx)
		if err == nil {
			err = l2.Unlock(ctx)
		}
		got <- err
	}()
	waited := make(chan struct{})
	go func() {
		ev.await(distlock.EventWaiting, 1)
		close(waited)
	}()
	select {
	case <-waited:
	case err := <-got:
		t.Fatalf("waiter: Lock returned before waiting: %v", err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("waiter: %v (not woken by the release)", err)
	}
}

// TestRedlockMinorityDown: with 2 of 5 masters killed, locking, renewing
// and handing over work; with 3 killed, Lock fails at once with
// ErrBackend and leaves nothing on the masters that are up.
func TestRedlockMinorityDown(t *testing.T) {
	ev := newEvents()
	q := startQuorum(t, 5, distlock.WithEventHandler(ev.handle))
	ctx := testCtx(t)
	// A first request to a master connects and checks its version first,
	// all within the node timeout (a tenth of the lease): warm the
	// client's connections up, so that on a loaded machine the masters
	// that are up answer in time.
	if warm, err := q.c.Mutex("warm-up").Lock(ctx); err != nil {
		t.Fatal(err)
	} else if err := warm.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{1, 3} {
		if err := q.servers[i].Kill(); err != nil {
			t.Fatal(err)
		}
	}
	m := q.c.Mutex("m", distlock.WithTTL(time.Second))
	l, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ev.await(distlock.EventRenewed, 3)
	if err := l.Context().Err(); err != nil {
		t.Fatalf("lease context ended: %v", context.Cause(l.Context()))
	}
	if _, err := q.client(t).Mutex("m").TryLock(ctx); !errors.Is(err, distlock.ErrNotAcquired) || errors.Is(err, distlock.ErrBackend) {
		t.Fatalf("TryLock of the held lock: %v, want ErrNotAcquired", err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}

	if err := q.servers[4].Kill(); err != nil {
		t.Fatal(err)
	}
	c := q.client(t)
	if _, err := c.Mutex("m").Lock(ctx); !errors.Is(err, distlock.ErrBackend) || !strings.Contains(err.Error(), "3 of 5 masters failed") {
		t.Fatalf("Lock with 3 of 5 masters down: %v, want ErrBackend", err)
	}
	// Close waits for the clean-up of the failed attempt: the masters that
	// took the lock release it, and those that are down count as done.
	if err := c.Close(); err != nil {
		t.Errorf("Close after the failed attempt: %v", err)
	}
	for _, i := range []int{0, 2} {
		if n := q.rdbs[i].Exists(ctx, redisstore.DefaultPrefix+"{m}").Val(); n != 0 {
			t.Errorf("master %d: the failed attempt left the lock there", i)
		}
	}
}

// TestRedlockPausedMaster: a master frozen for longer than the lease
// changes nothing while a quorum is up; a holder that loses its quorum
// (two of three frozen) has its lease context cancelled, and nobody else
// gets the lock meanwhile.
func TestRedlockPausedMaster(t *testing.T) {
	ev := newEvents()
	q := startQuorum(t, 3, distlock.WithEventHandler(ev.handle))
	ctx := testCtx(t)
	var trace eventTrace
	other := q.client(t, distlock.WithEventHandler(trace.handle))
	const ttl = time.Second
	l, err := q.c.Mutex("p", distlock.WithTTL(ttl)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.servers[0].Pause(); err != nil {
		t.Fatal(err)
	}
	// Renewals come every TTL/6 to TTL/3: ten of them outlast the lease.
	for i := range 10 {
		ev.await(distlock.EventRenewed, i+1)
		if _, err := other.Mutex("p").TryLock(ctx); !errors.Is(err, distlock.ErrNotAcquired) {
			t.Fatalf("TryLock while held, one master frozen: %v", err)
		}
	}
	if err := l.Context().Err(); err != nil {
		t.Fatalf("lease context ended with one master frozen: %v", context.Cause(l.Context()))
	}
	if err := q.servers[0].Resume(); err != nil {
		t.Fatal(err)
	}

	for _, i := range []int{1, 2} {
		if err := q.servers[i].Pause(); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-l.Context().Done():
	case <-time.After(10 * ttl):
		t.Fatal("lease context not cancelled after losing the quorum")
	}
	if cause := context.Cause(l.Context()); !errors.Is(cause, distlock.ErrLockLost) {
		t.Errorf("cause %v, want ErrLockLost", cause)
	}
	// A frozen master counts as failed after the node timeout (a tenth of
	// the lease), even though go-redis would wait for its read timeout.
	if _, err := other.Mutex("p", distlock.WithTTL(ttl)).TryLock(ctx); !errors.Is(err, distlock.ErrBackend) ||
		!strings.Contains(err.Error(), "no reply within 100ms") {
		t.Fatalf("TryLock while two of three masters are frozen: %v, want ErrBackend after the 100ms node timeout", err)
	}
	for _, i := range []int{1, 2} {
		if err := q.servers[i].Resume(); err != nil {
			t.Fatal(err)
		}
	}
	l2, err := other.Mutex("p").Lock(ctx)
	if err != nil {
		t.Logf("the other client's events:\n%s", trace.String())
		q.dump(t)
		t.Fatal(err)
	}
	if l2.Token() <= l.Token() {
		t.Errorf("token after the loss %d, not above %d", l2.Token(), l.Token())
	}
	if err := l2.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestRedlockRestartedMaster: a master restarted empty while a lock is
// held. With three masters the holder keeps its quorum and the lock stays
// exclusive. With five, a holder that took a bare quorum (two masters
// were down) shares the lock with a second holder once one of its three
// restarts empty, as the Redis documentation describes without delayed
// restarts: only the fencing token tells them apart.
func TestRedlockRestartedMaster(t *testing.T) {
	t.Run("keeps its quorum", func(t *testing.T) {
		ev := newEvents()
		q := startQuorum(t, 3, distlock.WithEventHandler(ev.handle))
		ctx := testCtx(t)
		// A lease long enough that a loaded machine renews it in time.
		l, err := q.c.Mutex("r", distlock.WithTTL(3*time.Second)).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := q.servers[0].Restart(); err != nil {
			t.Fatal(err)
		}
		if _, err := q.client(t).Mutex("r").TryLock(ctx); !errors.Is(err, distlock.ErrNotAcquired) {
			t.Fatalf("TryLock with one of three masters restarted empty: %v", err)
		}
		ev.await(distlock.EventRenewed, 3)
		if err := l.Context().Err(); err != nil {
			t.Fatalf("lease context ended: %v", context.Cause(l.Context()))
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("two holders", func(t *testing.T) {
		q := startQuorum(t, 5)
		ctx := testCtx(t)
		for _, i := range []int{3, 4} {
			if err := q.servers[i].Kill(); err != nil {
				t.Fatal(err)
			}
		}
		// A fixed lease: nothing renews, so nothing notices the loss. The
		// holder's go-redis clients dial once and do not retry: its
		// requests to the masters that are down fail for good, instead of
		// landing when they come back (go-redis dials 5 times, 100 ms
		// apart, by default: a late request of the holder's own
		// acquisition, which would give it those masters too).
		var rdbs []redis.UniversalClient
		for _, srv := range q.servers {
			opt := srv.Options()
			opt.MaxRetries, opt.DialerRetries = -1, 1
			rdb := redis.NewClient(opt)
			t.Cleanup(func() { rdb.Close() })
			rdbs = append(rdbs, rdb)
		}
		holder := distlock.New(redisstore.NewRedlock(rdbs), distlock.WithLogger(nil))
		t.Cleanup(func() { holder.Close() })
		a, err := holder.Mutex("r", distlock.WithFixedLease(20*time.Second)).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, i := range []int{3, 4, 2} {
			if err := q.servers[i].Restart(); err != nil {
				t.Fatal(err)
			}
		}
		b, err := q.client(t).Mutex("r").TryLock(ctx)
		if err != nil {
			t.Fatalf("second holder: %v (the documented outcome is that it gets the lock)", err)
		}
		defer b.Unlock(ctx)
		if a.Context().Err() != nil || b.Context().Err() != nil {
			t.Fatal("want both lease contexts live")
		}
		tokens := q.tokens(t, "r")
		t.Logf("two holders: tokens per master %v, a=%d b=%d", tokens, a.Token(), b.Token())
		// A fenced resource: it keeps the highest token it has seen.
		res := &fencedResource{}
		if !res.write(b.Token()) {
			t.Fatal("the resource refused the newer holder")
		}
		if res.write(a.Token()) {
			t.Fatalf("the resource accepted the older holder's write (token %d after %d)", a.Token(), b.Token())
		}
	})
}

// A fencedResource accepts a write only with a token at least as high as
// every token it has seen.
type fencedResource struct {
	mu  sync.Mutex
	max uint64
}

func (r *fencedResource) write(token uint64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if token < r.max {
		return false
	}
	r.max = token
	return true
}

// TestRedlockTokensAboveCounters: a proposal below the counters of a
// quorum of masters (a client whose clock is behind) is made again above
// them.
func TestRedlockTokensAboveCounters(t *testing.T) {
	q := startQuorum(t, 3)
	ctx := testCtx(t)
	ahead := uint64(time.Now().Add(time.Hour).UnixMicro())
	for _, i := range []int{0, 1} {
		if err := q.rdbs[i].Set(ctx, redisstore.DefaultPrefix+"{t}:fence", ahead, time.Hour).Err(); err != nil {
			t.Fatal(err)
		}
	}
	l, err := q.c.Mutex("t").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if l.Token() <= ahead {
		t.Fatalf("token %d not above the counters %d", l.Token(), ahead)
	}
	q.awaitTokens(t, "t", l.Token())
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestRedlockTokensIncrease: holders of one name, from two clients, get
// increasing tokens, including after a holder's fixed lease ran out.
func TestRedlockTokensIncrease(t *testing.T) {
	q := startQuorum(t, 3)
	ctx := testCtx(t)
	clients := []*distlock.Client{q.c, q.client(t)}
	var last uint64
	for i := range 20 {
		l, err := clients[i%2].Mutex("inc").Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if l.Token() <= last {
			t.Fatalf("acquisition %d: token %d not above %d", i, l.Token(), last)
		}
		last = l.Token()
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	a, err := q.c.Mutex("inc", distlock.WithFixedLease(200*time.Millisecond)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	<-a.Context().Done()
	b, err := clients[1].Mutex("inc").Lock(ctx) // waits for the lease to end on the masters
	if err != nil {
		t.Fatal(err)
	}
	if b.Token() <= a.Token() {
		t.Fatalf("token after an expiry %d, not above %d", b.Token(), a.Token())
	}
	if err := b.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestRedlockLateFreesWakeOwnWatchers: no master tells a client of its own
// releases (the Client hands them over to its waiters itself, once the
// call returns), so a release or an abandonment that frees the lock on a
// master after a quorum decided its outcome must tell this process's
// watchers: a waiter here that found that master taken, and so no
// quorum, would otherwise sleep until the lease it saw there ran out (a
// conformance run's waiter did, for its whole 10 s). A master is frozen
// while a release, then an abandonment, is decided by the other two: no
// notice may come before it answers, one must come after.
func TestRedlockLateFreesWakeOwnWatchers(t *testing.T) {
	q := startQuorum(t, 3)
	var rdbs []redis.UniversalClient
	for _, srv := range q.servers {
		rdbs = append(rdbs, srv.Client(t))
	}
	st := redisstore.NewRedlock(rdbs)
	t.Cleanup(func() { st.Close() })
	ctx := testCtx(t)
	wakes := make(chan store.Notice, 16)
	stop, err := st.Watch(ctx, "late", store.Plain, func(n store.Notice) { wakes <- n })
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	frozen := q.servers[2]
	const lease = time.Minute // a master has a tenth of it, at most 10 s, to answer
	for i, undo := range []string{"release", "abandon"} {
		r := store.Request{Name: "late", Kind: store.Plain, Owner: fmt.Sprintf("owner-%d", i), Hold: 1, Lease: lease}
		g, err := st.Acquire(ctx, r)
		if err != nil || !g.Acquired {
			t.Fatalf("%s: Acquire: %+v, %v", undo, g, err)
		}
		q.awaitTokens(t, "late", g.Token) // held on every master
		if err := frozen.Pause(); err != nil {
			t.Fatal(err)
		}
		switch undo {
		case "release":
			if res, err := st.Release(ctx, r); err != nil || res != store.Freed {
				t.Fatalf("Release with one master frozen: %v, %v, want Freed", res, err)
			}
		case "abandon":
			if freed, err := st.Abandon(ctx, r); err != nil || !freed {
				t.Fatalf("Abandon with one master frozen: %v, %v, want freed", freed, err)
			}
		}
		select {
		case n := <-wakes:
			t.Fatalf("%s: notice %+v before the frozen master answered: the quorum's own frees are the Client's to hand over", undo, n)
		default:
		}
		if err := frozen.Resume(); err != nil {
			t.Fatal(err)
		}
		select {
		case <-wakes:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: the frozen master freed the lock when it woke, and this process's watch heard nothing", undo)
		}
		q.awaitTokens(t, "late", 0)
	}
}
