package redisbackend

import (
	"errors"
	"testing"
	"time"

	"github.com/distlock/distlock/store"
)

// sem is the request of a new owner of n permits of the semaphore s, whose
// capacity the caller believes to be capacity.
func sem(owner string, n, capacity int) store.Request {
	return store.Request{Name: "s", Kind: store.Semaphore, Owner: owner, Hold: 1, Lease: time.Minute,
		Queue: 5 * time.Second, Seq: 1, Permits: n, Capacity: capacity}
}

func semState(t *testing.T, b *Backend) store.State {
	t.Helper()
	st, err := b.Inspect(t.Context(), "s")
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// Permits fit in the capacity; waiters are served in arrival order, each
// release letting in the first ones whose permits fit.
func TestSemaphoreCapacityAndOrder(t *testing.T) {
	b, _ := fairPair(t)
	g := grants(t, b, "s")
	if a := mustAcquire(t, b, sem("a", 2, 3)); !a.Acquired || a.Capacity != 3 {
		t.Fatalf("a: %+v", a)
	}
	mustAcquire(t, b, sem("b", 1, 3))
	if c := mustAcquire(t, b, sem("c", 2, 3)); !c.Queued || c.Capacity != 3 {
		t.Fatalf("c on a full semaphore: %+v, want queued", c)
	}
	mustAcquire(t, b, sem("d", 1, 3))
	if st := semState(t, b); st.Kind != store.Semaphore || st.Capacity != 3 || st.Used != 3 || st.Queued != 2 || st.QueuedPermits != 3 || len(st.Holders) != 2 {
		t.Fatalf("state: %+v", st)
	}
	release(t, b, sem("a", 2, 3), store.Freed)
	if n := nextNotice(t, g); n.Grantee != store.GranteeID("c") {
		t.Fatalf("grant after a: %+v", n)
	}
	noNotice(t, g) // d does not fit yet: b 1 + c 2
	release(t, b, sem("b", 1, 3), store.Freed)
	if n := nextNotice(t, g); n.Grantee != store.GranteeID("d") {
		t.Fatalf("grant after b: %+v", n)
	}
	if st := semState(t, b); st.Used != 3 || st.Queued != 0 {
		t.Fatalf("state: %+v", st)
	}
}

// A request for many permits is not passed by small ones: once it waits,
// the small ones queue behind it even while permits are free.
func TestSemaphoreLargeRequestNotStarved(t *testing.T) {
	b, _ := fairPair(t)
	g := grants(t, b, "s")
	mustAcquire(t, b, sem("a", 1, 3))
	if big := mustAcquire(t, b, sem("big", 3, 3)); !big.Queued {
		t.Fatalf("big: %+v", big)
	}
	if small := mustAcquire(t, b, sem("small", 1, 3)); !small.Queued {
		t.Fatalf("a small request passed a waiting large one: %+v", small)
	}
	try := sem("try", 1, 3)
	try.Queue = 0
	if g := mustAcquire(t, b, try); g.Acquired || g.Queued {
		t.Fatalf("TryAcquire past a waiting request: %+v", g)
	}
	release(t, b, sem("a", 1, 3), store.Freed)
	if n := nextNotice(t, g); n.Grantee != store.GranteeID("big") {
		t.Fatalf("grant: %+v", n)
	}
	noNotice(t, g)
	release(t, b, sem("big", 3, 3), store.Freed)
	if n := nextNotice(t, g); n.Grantee != store.GranteeID("small") {
		t.Fatalf("grant: %+v", n)
	}
}

// The capacity in Redis is in force: set by the first user, kept for the
// fence retention; a request for more permits than it is refused with
// ErrInvalidOption and changes nothing; SetPermits grows it (letting
// waiters in at once) or shrinks it (revoking nothing).
func TestSemaphoreCapacityStoredAndSet(t *testing.T) {
	b, _ := fairPair(t)
	ctx := t.Context()
	g := grants(t, b, "s")
	mustAcquire(t, b, sem("a", 2, 2))
	if other := mustAcquire(t, b, sem("b", 1, 5)); !other.Queued || other.Capacity != 2 {
		t.Fatalf("a client that believes in 5 permits: %+v, want queued, capacity 2", other)
	}
	if ttl := rdbOf(b).PTTL(ctx, b.cfg.Keys.Capacity("s")).Val(); ttl < 50*time.Second {
		t.Fatalf("capacity TTL %v, want the fence retention (1m here)", ttl)
	}
	if _, err := b.Acquire(ctx, sem("huge", 3, 5)); !errors.Is(err, store.ErrInvalidOption) || errors.Is(err, store.ErrBackend) {
		t.Fatalf("3 permits of 2: %v, want ErrInvalidOption", err)
	}
	if before, held, err := b.SetPermits(ctx, "s", 3); err != nil || before != 2 || held != 3 {
		t.Fatalf("SetPermits(3) = %d, %d, %v; want 2 before, and 3 held once b is let in", before, held, err)
	}
	if n := nextNotice(t, g); n.Grantee != store.GranteeID("b") {
		t.Fatalf("grant after growing: %+v", n)
	}
	if _, _, err := b.SetPermits(ctx, "s", 1); err != nil {
		t.Fatal(err)
	}
	if st := semState(t, b); st.Capacity != 1 || st.Used != 3 || len(st.Holders) != 2 {
		t.Fatalf("after shrinking below the permits held: %+v, want nothing revoked", st)
	}
	if c := mustAcquire(t, b, sem("c", 1, 1)); !c.Queued {
		t.Fatalf("acquisition over a shrunk capacity: %+v, want queued", c)
	}
	release(t, b, sem("a", 2, 2), store.Freed)
	noNotice(t, g) // b still holds 1 of 1
	release(t, b, sem("b", 1, 5), store.Freed)
	if n := nextNotice(t, g); n.Grantee != store.GranteeID("c") {
		t.Fatalf("grant once below the new capacity: %+v", n)
	}
}

// A holder's permits come back when its lease ends (it died), by the
// server's clock; renewals keep the others; every key has a TTL and
// nothing is left when all are gone but the counter and the capacity.
func TestSemaphoreLeases(t *testing.T) {
	b, _ := fairPair(t)
	ctx := t.Context()
	k := b.cfg.Keys
	g := grants(t, b, "s")
	mustAcquire(t, b, sem("dead", 1, 2))
	mustAcquire(t, b, sem("live", 1, 2))
	mustAcquire(t, b, sem("w", 2, 2))
	for _, key := range []string{k.Lock("s"), k.Holders("s"), k.Queue("s"), k.QueueDeadlines("s"), k.QueueInfo("s"), k.Fence("s"), k.Capacity("s")} {
		if ttl := rdbOf(b).PTTL(ctx, key).Val(); ttl <= 0 {
			t.Fatalf("%s has TTL %v", key, ttl)
		}
	}
	r := sem("live", 1, 2)
	r.Queue, r.Seq = 0, 2
	if errs := renew(t, b, []store.Request{r}); errs[0] != nil {
		t.Fatalf("renewal: %v", errs[0])
	}
	rdbOf(b).ZAdd(ctx, k.Holders("s"), redisZ(time.Now().Add(-time.Second), "dead"))
	release(t, b, sem("live", 1, 2), store.Freed) // the release purges the dead holder too
	if n := nextNotice(t, g); n.Grantee != store.GranteeID("w") {
		t.Fatalf("grant after the dead holder's lease: %+v", n)
	}
	release(t, b, sem("w", 2, 2), store.Freed)
	keys := rdbOf(b).Keys(ctx, "t:{s}*").Val()
	if len(keys) != 2 {
		t.Fatalf("keys left: %v, want the counter and the capacity", keys)
	}
}

// Kinds never mix.
func TestSemaphoreKindsDoNotMix(t *testing.T) {
	b, _ := fairPair(t)
	mustAcquire(t, b, sem("a", 1, 2))
	for _, r := range []store.Request{{Name: "s", Owner: "p", Hold: 1, Lease: time.Minute}, place("s", "q"), rw("z", store.Write)} {
		r.Name = "s"
		if _, err := b.Acquire(t.Context(), r); !errors.Is(err, store.ErrWrongKind) {
			t.Fatalf("%v acquire of a semaphore: %v", r.Kind, err)
		}
	}
	mustAcquire(t, b, rw("r", store.Read)) // lock f
	other := sem("x", 1, 2)
	other.Name = "f"
	if _, err := b.Acquire(t.Context(), other); !errors.Is(err, store.ErrWrongKind) {
		t.Fatalf("semaphore acquire of a read-write lock: %v", err)
	}
	if _, _, err := b.SetPermits(t.Context(), "f", 3); !errors.Is(err, store.ErrWrongKind) {
		t.Fatalf("SetPermits of a read-write lock: %v", err)
	}
}

// A waiter that asks for more permits than a shrunk capacity loses its
// place instead of blocking the queue: those behind it are served, its
// next refresh finds no place, and asking again is refused.
func TestSemaphoreShrinkDropsWaiterThatCannotFit(t *testing.T) {
	b, _ := fairPair(t)
	ctx := t.Context()
	g := grants(t, b, "s")
	mustAcquire(t, b, sem("a", 2, 3))
	if big := mustAcquire(t, b, sem("big", 3, 3)); !big.Queued {
		t.Fatalf("big: %+v", big)
	}
	if small := mustAcquire(t, b, sem("small", 1, 3)); !small.Queued {
		t.Fatalf("small: %+v", small)
	}
	if _, _, err := b.SetPermits(ctx, "s", 2); err != nil {
		t.Fatal(err)
	}
	if st := semState(t, b); st.Queued != 1 || st.QueuedPermits != 1 {
		t.Fatalf("after shrinking below a waiter's request: %+v, want only small queued", st)
	}
	release(t, b, sem("a", 2, 3), store.Freed)
	if n := nextNotice(t, g); n.Grantee != store.GranteeID("small") {
		t.Fatalf("grant after a: %+v, want small (big can never fit)", n)
	}
	r := sem("big", 3, 3)
	r.Seq = 2
	if errs := renew(t, b, []store.Request{r}); !errors.Is(errs[0], store.ErrNotHeld) {
		t.Fatalf("refresh of the dropped place: %v, want ErrNotHeld", errs[0])
	}
	if _, err := b.Acquire(ctx, sem("big2", 3, 3)); !errors.Is(err, store.ErrInvalidOption) {
		t.Fatalf("asking again for 3 of 2: %v, want ErrInvalidOption", err)
	}
}

// The permits in use that Inspect reports are those of live holders: a
// holder whose lease ran out (it died) no longer counts, even before a
// script has purged it.
func TestSemaphoreInspectCountsLiveHolders(t *testing.T) {
	b, _ := fairPair(t)
	ctx := t.Context()
	mustAcquire(t, b, sem("dead", 2, 3))
	mustAcquire(t, b, sem("live", 1, 3))
	rdbOf(b).ZAdd(ctx, b.cfg.Keys.Holders("s"), redisZ(time.Now().Add(-time.Second), "dead"))
	if st := semState(t, b); st.Used != 1 || len(st.Holders) != 1 || st.Holders[0].Permits != 1 {
		t.Fatalf("state with a dead holder: %+v, want 1 permit used by live", st)
	}
}

// SetPermits refuses a name whose queue holds another kind's waiters,
// even while the lock itself is free.
func TestSemaphoreSetPermitsOverOtherQueue(t *testing.T) {
	b, _ := fairPair(t)
	ctx := t.Context()
	mustAcquire(t, b, rw("w", store.Write))
	other := rw("r", store.Read)
	if g := mustAcquire(t, b, other); !g.Queued {
		t.Fatalf("reader: %+v", g)
	}
	rdbOf(b).Del(ctx, b.cfg.Keys.Lock("f"), b.cfg.Keys.Holders("f")) // the writer's lease ran out
	if _, _, err := b.SetPermits(ctx, "f", 3); !errors.Is(err, store.ErrWrongKind) {
		t.Fatalf("SetPermits over a queue of readers: %v, want ErrWrongKind", err)
	}
}
