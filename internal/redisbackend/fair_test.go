package redisbackend

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/distlock/distlock/redistest"
	"github.com/distlock/distlock/store"
	"github.com/redis/go-redis/v9"
)

// fairPair returns two backends on one server, as two processes: each has
// a grant channel of its own.
func fairPair(t *testing.T) (*Backend, *Backend) {
	srv := redistest.Start(t)
	var bs [2]*Backend
	for i := range bs {
		bs[i] = New(GoRedis(srv.Client(t)), Config{Keys: Keys{Prefix: "t:"}, FenceRetention: time.Minute, Host: "h", PID: 7 + i})
		t.Cleanup(func() { bs[i].Close() })
	}
	return bs[0], bs[1]
}

// place is the request of a fair waiter.
func place(name, owner string) store.Request {
	return store.Request{Name: name, Kind: store.Fair, Owner: owner, Hold: 1, Lease: time.Minute, Queue: 5 * time.Second, Seq: 1}
}

// grants watches the grants b's process gets on name.
func grants(t *testing.T, b *Backend, name string) <-chan store.Notice {
	t.Helper()
	ch := make(chan store.Notice, 16)
	stop, err := b.Watch(t.Context(), name, store.Fair, func(n store.Notice) { ch <- n })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return ch
}

func nextNotice(t *testing.T, ch <-chan store.Notice) store.Notice {
	t.Helper()
	select {
	case n := <-ch:
		return n
	case <-time.After(10 * time.Second):
		t.Fatal("no notice within 10s")
	}
	return store.Notice{}
}

func noNotice(t *testing.T, ch <-chan store.Notice) {
	t.Helper()
	select {
	case n := <-ch:
		t.Fatalf("unexpected notice %+v", n)
	default:
	}
}

func mustAcquire(t *testing.T, b *Backend, r store.Request) store.Grant {
	t.Helper()
	g, err := b.Acquire(t.Context(), r)
	if err != nil {
		t.Fatalf("Acquire %s: %v", r.Owner, err)
	}
	return g
}

func holder(t *testing.T, b *Backend, name string) string {
	t.Helper()
	st, err := b.Inspect(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	return st.Holder().Owner
}

// Waiters from two processes are granted the lock in arrival order, each
// by the release of the one before, and only the grantee's process hears
// of it; at the end no queue key is left.
func TestFairGrantsInArrivalOrder(t *testing.T) {
	b1, b2 := fairPair(t)
	ctx := t.Context()
	g1, g2 := grants(t, b1, "f"), grants(t, b2, "f")
	if g := mustAcquire(t, b1, place("f", "a")); !g.Acquired || g.Seq != 1 || g.Lease != time.Minute {
		t.Fatalf("first acquisition of a free fair lock = %+v", g)
	}
	order := []struct {
		owner string
		b     *Backend
	}{{"b", b2}, {"c", b1}, {"d", b2}}
	for i, w := range order {
		g := mustAcquire(t, w.b, place("f", w.owner))
		if !g.Queued || g.Acquired {
			t.Fatalf("waiter %s = %+v, want queued", w.owner, g)
		}
		if first := i == 0; first != (g.TTL > 0) {
			t.Fatalf("waiter %s: TTL %v; only the first in line learns the holder's lease", w.owner, g.TTL)
		}
	}
	if st, _ := b1.Inspect(ctx, "f"); st.Queued != 3 || st.Kind != store.Fair {
		t.Fatalf("state with 3 waiters: %+v", st)
	}
	prev, last := "a", uint64(0)
	for _, w := range order {
		if res, err := b1.Release(ctx, place("f", prev)); err != nil || res != store.Freed {
			t.Fatalf("release by %s = %v, %v", prev, res, err)
		}
		mine, other := g1, g2
		if w.b == b2 {
			mine, other = g2, g1
		}
		n := nextNotice(t, mine)
		if n.Grantee != store.GranteeID(w.owner) || n.Seq != 1 || n.Lease != 5*time.Second || n.Token <= last {
			t.Fatalf("grant to %s: %+v (previous token %d)", w.owner, n, last)
		}
		noNotice(t, other)
		if got := holder(t, b1, "f"); got != w.owner {
			t.Fatalf("holder after the grant to %s: %q", w.owner, got)
		}
		if ttl := rdbOf(b1).PTTL(ctx, b1.cfg.Keys.Lock("f")).Val(); ttl <= 0 || ttl > 5*time.Second {
			t.Fatalf("granted lease %v, want at most the queue timeout", ttl)
		}
		prev, last = w.owner, n.Token
	}
	if res, err := b1.Release(ctx, place("f", prev)); err != nil || res != store.Freed {
		t.Fatalf("last release = %v, %v", res, err)
	}
	noNotice(t, g1)
	noNotice(t, g2)
	keys := rdbOf(b1).Keys(ctx, "t:{f}*").Val()
	if len(keys) != 1 || keys[0] != b1.cfg.Keys.Fence("f") {
		t.Fatalf("keys left: %v, want only the fencing counter", keys)
	}
}

// Kinds never mix: the second kind is refused with ErrWrongKind and the
// lock in use is left as it was, whether it is held or only has waiters.
func TestKindsDoNotMix(t *testing.T) {
	b, _ := fairPair(t)
	ctx := t.Context()
	plain := store.Request{Name: "p", Owner: "a", Hold: 1, Lease: time.Minute}
	mustAcquire(t, b, plain)
	if _, err := b.Acquire(ctx, place("p", "b")); !errors.Is(err, store.ErrWrongKind) || errors.Is(err, store.ErrBackend) {
		t.Fatalf("fair acquire of a plain-held lock = %v, want ErrWrongKind", err)
	}
	if got := holder(t, b, "p"); got != "a" {
		t.Fatalf("holder after the refused fair acquire: %q", got)
	}

	mustAcquire(t, b, place("f", "a"))
	mustAcquire(t, b, place("f", "b"))
	other := store.Request{Name: "f", Owner: "c", Hold: 1, Lease: time.Minute}
	if _, err := b.Acquire(ctx, other); !errors.Is(err, store.ErrWrongKind) {
		t.Fatalf("plain acquire of a fair-held lock = %v, want ErrWrongKind", err)
	}
	// The holder's lease ran out; the waiter is still queued.
	rdbOf(b).Del(ctx, b.cfg.Keys.Lock("f"))
	if _, err := b.Acquire(ctx, other); !errors.Is(err, store.ErrWrongKind) {
		t.Fatalf("plain acquire of a fair lock with a queue = %v, want ErrWrongKind", err)
	}
	if st, _ := b.Inspect(ctx, "f"); st.Queued != 1 {
		t.Fatalf("the queue after the refused plain acquire: %+v", st)
	}
}

// A repeated enqueue keeps its place; a TryLock never queues and never
// jumps the queue; the abandonment mark refuses a late enqueue.
func TestFairEnqueueIdempotentAndTryLock(t *testing.T) {
	b, _ := fairPair(t)
	ctx := t.Context()
	mustAcquire(t, b, place("f", "a"))
	mustAcquire(t, b, place("f", "b"))
	mustAcquire(t, b, place("f", "c"))
	if g := mustAcquire(t, b, place("f", "b")); !g.Queued || g.TTL <= 0 {
		t.Fatalf("repeated enqueue of the first waiter = %+v, want queued, first in line", g)
	}
	if st, _ := b.Inspect(ctx, "f"); st.Queued != 2 {
		t.Fatalf("queue after a repeated enqueue: %d places, want 2", st.Queued)
	}
	try := place("f", "t")
	try.Queue = 0
	if g := mustAcquire(t, b, try); g.Acquired || g.Queued {
		t.Fatalf("TryLock of a held lock = %+v", g)
	}
	// The lock is free but others wait: TryLock still fails, and the first
	// waiter gets the lock there and then.
	grant := grants(t, b, "f")
	rdbOf(b).Del(ctx, b.cfg.Keys.Lock("f"))
	if g := mustAcquire(t, b, try); g.Acquired || g.Queued {
		t.Fatalf("TryLock of a free lock with waiters = %+v", g)
	}
	if n := nextNotice(t, grant); n.Grantee != store.GranteeID("b") {
		t.Fatalf("grant %+v, want to b", n)
	}
	if st, _ := b.Inspect(ctx, "f"); st.Queued != 1 || st.Holder().Owner != "b" {
		t.Fatalf("state after TryLock: %+v", st)
	}

	// c gives up: its place goes, and a late copy of its enqueue is refused.
	abandon := place("f", "c")
	abandon.Lease = time.Minute
	if _, err := b.Abandon(ctx, abandon); err != nil {
		t.Fatal(err)
	}
	if g := mustAcquire(t, b, place("f", "c")); g.Acquired || g.Queued || g.TTL != -1 {
		t.Fatalf("late enqueue of an abandoned owner = %+v, want refused", g)
	}
	if st, _ := b.Inspect(ctx, "f"); st.Queued != 0 {
		t.Fatalf("queue after abandonment: %d places", st.Queued)
	}
}

// Refreshes keep a place, a stale one changes nothing, a place that
// expired is gone for good, and the first in line takes a lock whose
// holder's lease ran out.
func TestFairRefresh(t *testing.T) {
	b, _ := fairPair(t)
	ctx := t.Context()
	k := b.cfg.Keys
	mustAcquire(t, b, place("f", "a"))
	mustAcquire(t, b, place("f", "b"))
	mustAcquire(t, b, place("f", "c"))
	deadline := func(owner string) float64 { return rdbOf(b).ZScore(ctx, k.QueueDeadlines("f"), owner).Val() }
	before := deadline("b")

	refresh := func(owner string, seq uint64) (store.Grant, error) {
		r := place("f", owner)
		r.Seq = seq
		var g store.Grant
		var err error
		n := 0
		b.Renew(ctx, []store.Request{r}, func(_ int, gr store.Grant, e error) { g, err = gr, e; n++ })
		if n != 1 {
			t.Fatalf("%d reports for one refresh", n)
		}
		return g, err
	}
	time.Sleep(5 * time.Millisecond) // the server clock must move for the deadline to
	if g, err := refresh("b", 3); err != nil || !g.Queued || g.TTL <= 0 {
		t.Fatalf("refresh of the first waiter = %+v, %v", g, err)
	}
	moved := deadline("b")
	if moved <= before {
		t.Fatalf("deadline %v -> %v: not pushed back", before, moved)
	}
	if g, err := refresh("b", 2); err != nil || !g.Queued {
		t.Fatalf("stale refresh = %+v, %v", g, err)
	}
	if got := deadline("b"); got != moved {
		t.Fatalf("a stale refresh moved the deadline %v -> %v", moved, got)
	}
	if g, err := refresh("c", 2); err != nil || !g.Queued || g.TTL != -1 {
		t.Fatalf("refresh of the second waiter = %+v, %v", g, err)
	}
	for _, key := range []string{k.Queue("f"), k.QueueDeadlines("f"), k.QueueInfo("f")} {
		if ttl := rdbOf(b).PTTL(ctx, key).Val(); ttl < 4*time.Second || ttl > 5*time.Second {
			t.Fatalf("%s TTL %v, want the latest place's deadline", key, ttl)
		}
	}

	// b's place expires (its waiter paused past the queue timeout).
	rdbOf(b).ZAdd(ctx, k.QueueDeadlines("f"), redisZ(time.Now().Add(-time.Second), "b"))
	if _, err := refresh("b", 4); !errors.Is(err, store.ErrNotHeld) {
		t.Fatalf("refresh of an expired place = %v, want ErrNotHeld", err)
	}
	// a's lease runs out without a release: c, now first, takes the lock
	// at its refresh, with the refresh's number as gseq.
	rdbOf(b).Del(ctx, k.Lock("f"))
	g, err := refresh("c", 3)
	if err != nil || !g.Acquired || g.Seq != 3 || g.Lease != 5*time.Second {
		t.Fatalf("refresh of the first waiter of a free lock = %+v, %v", g, err)
	}
	if g2, err := refresh("c", 4); err != nil || !g2.Acquired || g2.Token != g.Token || g2.Seq != 3 {
		t.Fatalf("refresh after the grant = %+v, %v; want the same grant", g2, err)
	}
	if n := rdbOf(b).Exists(ctx, k.Queue("f"), k.QueueDeadlines("f"), k.QueueInfo("f")).Val(); n != 0 {
		t.Fatalf("%d queue keys left with no waiter", n)
	}
	// The grantee renews its lease to the full length, continuing the
	// numbering from gseq.
	r := place("f", "c")
	r.Queue, r.Seq = 0, 4
	if errs := renew(t, b, []store.Request{r}); errs[0] != nil {
		t.Fatalf("renewal after the grant: %v", errs[0])
	}
	if ttl := rdbOf(b).PTTL(ctx, k.Lock("f")).Val(); ttl <= 5*time.Second {
		t.Fatalf("lease after the renewal %v, want the full minute", ttl)
	}
}

// A waiter whose place expired is skipped by the release; an owner
// abandoned after its grant hands the lock on to the next in line.
func TestFairSkipsDeadWaiters(t *testing.T) {
	b, _ := fairPair(t)
	ctx := t.Context()
	grant := grants(t, b, "f")
	for _, o := range []string{"a", "b", "c", "d"} {
		mustAcquire(t, b, place("f", o))
	}
	rdbOf(b).ZAdd(ctx, b.cfg.Keys.QueueDeadlines("f"), redisZ(time.Now().Add(-time.Second), "b"))
	if res, err := b.Release(ctx, place("f", "a")); err != nil || res != store.Freed {
		t.Fatal(res, err)
	}
	if n := nextNotice(t, grant); n.Grantee != store.GranteeID("c") {
		t.Fatalf("grant %+v, want c (b's place expired)", n)
	}
	// c gave up just as it was granted: abandoning it frees the lock for d.
	if freed, err := b.Abandon(ctx, store.Request{Name: "f", Kind: store.Fair, Owner: "c", Lease: time.Minute}); err != nil || !freed {
		t.Fatalf("abandon of the grantee = %v, %v", freed, err)
	}
	if n := nextNotice(t, grant); n.Grantee != store.GranteeID("d") {
		t.Fatalf("grant %+v, want d", n)
	}
	if got := holder(t, b, "f"); got != "d" {
		t.Fatalf("holder %q, want d", got)
	}
}

// Re-entry into a fair lock adds holds; the last release grants it on.
func TestFairReentry(t *testing.T) {
	b, _ := fairPair(t)
	ctx := t.Context()
	grant := grants(t, b, "f")
	first := mustAcquire(t, b, place("f", "a"))
	again := place("f", "a")
	again.Hold, again.Reenter = 2, true
	if g := mustAcquire(t, b, again); !g.Acquired || g.Holds != 2 || g.Token != first.Token {
		t.Fatalf("re-entry = %+v", g)
	}
	mustAcquire(t, b, place("f", "b"))
	if res, _ := b.Release(ctx, again); res != store.Remaining {
		t.Fatalf("release of the inner hold = %v", res)
	}
	noNotice(t, grant)
	if res, _ := b.Release(ctx, place("f", "a")); res != store.Freed {
		t.Fatalf("release of the last hold = %v", res)
	}
	if n := nextNotice(t, grant); n.Grantee != store.GranteeID("b") || n.Token <= first.Token {
		t.Fatalf("grant %+v", n)
	}
}

// ForceUnlock of a fair lock grants it to the first waiter.
func TestFairForceUnlock(t *testing.T) {
	b, _ := fairPair(t)
	grant := grants(t, b, "f")
	mustAcquire(t, b, place("f", "a"))
	mustAcquire(t, b, place("f", "b"))
	if ok, err := b.ForceUnlock(t.Context(), "f"); err != nil || !ok {
		t.Fatal(ok, err)
	}
	if n := nextNotice(t, grant); n.Grantee != store.GranteeID("b") {
		t.Fatalf("grant %+v", n)
	}
}

// Purging thousands of expired places at once works (unpack has limits).
func TestFairPurgeMany(t *testing.T) {
	b, _ := fairPair(t)
	ctx := t.Context()
	k := b.cfg.Keys
	mustAcquire(t, b, place("f", "holder"))
	const n = 5000
	pipe := rdbOf(b).Pipeline()
	past := time.Now().Add(-time.Second)
	for i := 0; i < n; i++ {
		o := "w" + strconv.Itoa(i)
		pipe.ZAdd(ctx, k.Queue("f"), redisZ(past.Add(time.Duration(i)), o))
		pipe.ZAdd(ctx, k.QueueDeadlines("f"), redisZ(past, o))
		pipe.HSet(ctx, k.QueueInfo("f"), o, "1 60000 5000 c 1 h")
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	if g := mustAcquire(t, b, place("f", "late")); !g.Queued || g.TTL <= 0 {
		t.Fatalf("enqueue behind %d expired places = %+v, want first in line", n, g)
	}
	if c := rdbOf(b).HLen(ctx, k.QueueInfo("f")).Val(); c != 1 {
		t.Fatalf("%d places left after the purge, want 1", c)
	}
}

// redisZ is a sorted set member whose score is a time in ms.
func redisZ(at time.Time, member string) redis.Z {
	return redis.Z{Score: float64(at.UnixMilli()), Member: member}
}

// A granted lock expires when the grantee's place would have: a grantee
// that died just before its grant stalls the queue no longer than its
// place would. The grant still reports min(lease, queue timeout), measured
// from the grantee's last applied request.
func TestFairGrantExpiresWithPlace(t *testing.T) {
	b, _ := fairPair(t)
	ctx := t.Context()
	grant := grants(t, b, "f")
	mustAcquire(t, b, place("f", "a"))
	mustAcquire(t, b, place("f", "b"))
	// b's place was last refreshed long ago: 800 ms of it are left.
	rdbOf(b).ZAdd(ctx, b.cfg.Keys.QueueDeadlines("f"), redisZ(time.Now().Add(800*time.Millisecond), "b"))
	if res, err := b.Release(ctx, place("f", "a")); err != nil || res != store.Freed {
		t.Fatal(res, err)
	}
	n := nextNotice(t, grant)
	if n.Grantee != store.GranteeID("b") || n.Lease != 5*time.Second || n.Seq != 1 {
		t.Fatalf("grant %+v", n)
	}
	if ttl := rdbOf(b).PTTL(ctx, b.cfg.Keys.Lock("f")).Val(); ttl <= 0 || ttl > 800*time.Millisecond {
		t.Fatalf("granted lock's TTL %v, want what was left of the place (800ms at most)", ttl)
	}
}
