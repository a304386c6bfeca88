package redisbackend

import (
	"errors"
	"testing"
	"time"

	"github.com/distlock/distlock/store"
)

// rw is the request of a new owner of one side of the read-write lock f.
func rw(owner string, kind store.Kind) store.Request {
	return store.Request{Name: "f", Kind: kind, Owner: owner, Hold: 1, Lease: time.Minute, Queue: 5 * time.Second, Seq: 1}
}

func holders(t *testing.T, b *Backend) map[string]store.Holder {
	t.Helper()
	st, err := b.Inspect(t.Context(), "f")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]store.Holder{}
	for _, h := range st.Holders {
		out[h.Owner] = h
	}
	return out
}

func release(t *testing.T, b *Backend, r store.Request, want store.Release) {
	t.Helper()
	if got, err := b.Release(t.Context(), r); err != nil || got != want {
		t.Fatalf("release %s hold %d = %v, %v; want %v", r.Owner, r.Hold, got, err, want)
	}
}

// Readers share the lock; a writer waits for all of them; a reader that
// arrives after a waiting writer waits behind it; the last reader's release
// grants the writer alone, and the writer's release the readers behind it.
func TestRWReadersShareWritersWait(t *testing.T) {
	b, _ := fairPair(t)
	g := grants(t, b, "f")
	r1 := mustAcquire(t, b, rw("r1", store.Read))
	r2 := mustAcquire(t, b, rw("r2", store.Read))
	if !r1.Acquired || !r2.Acquired || r2.Token <= r1.Token {
		t.Fatalf("two readers: %+v %+v", r1, r2)
	}
	if w := mustAcquire(t, b, rw("w", store.Write)); !w.Queued || w.TTL <= 0 {
		t.Fatalf("writer while reading: %+v, want queued first in line", w)
	}
	if r3 := mustAcquire(t, b, rw("r3", store.Read)); !r3.Queued {
		t.Fatalf("reader behind a waiting writer: %+v, want queued", r3)
	}
	st, err := b.Inspect(t.Context(), "f")
	if err != nil || st.Kind != store.Write || len(st.Holders) != 2 || st.QueuedReaders != 1 || st.QueuedWriters != 1 {
		t.Fatalf("state: %+v, %v", st, err)
	}
	release(t, b, rw("r1", store.Read), store.Freed)
	noNotice(t, g)
	release(t, b, rw("r2", store.Read), store.Freed)
	n := nextNotice(t, g)
	if n.Grantee != store.GranteeID("w") || n.Token <= r2.Token {
		t.Fatalf("grant after the last reader: %+v", n)
	}
	noNotice(t, g)
	if hs := holders(t, b); len(hs) != 1 || hs["w"].Writes != 1 {
		t.Fatalf("holders: %+v", hs)
	}
	release(t, b, rw("w", store.Write), store.Freed)
	if n := nextNotice(t, g); n.Grantee != store.GranteeID("r3") {
		t.Fatalf("grant after the writer: %+v", n)
	}
}

// A writer's release grants every reader at the head of the queue, up to
// the next writer: one message per process names all of its grantees.
func TestRWWriterReleaseGrantsReadersInARow(t *testing.T) {
	b1, b2 := fairPair(t)
	g1, g2 := grants(t, b1, "f"), grants(t, b2, "f")
	mustAcquire(t, b1, rw("w1", store.Write))
	for _, w := range []struct {
		owner string
		b     *Backend
		kind  store.Kind
	}{{"ra", b1, store.Read}, {"rb", b2, store.Read}, {"rc", b1, store.Read}, {"w2", b2, store.Write}, {"rd", b1, store.Read}} {
		if g := mustAcquire(t, w.b, rw(w.owner, w.kind)); !g.Queued {
			t.Fatalf("%s: %+v", w.owner, g)
		}
	}
	release(t, b1, rw("w1", store.Write), store.Freed)
	got := map[string]bool{}
	for _, n := range []store.Notice{nextNotice(t, g1), nextNotice(t, g1), nextNotice(t, g2)} {
		got[n.Grantee] = true
	}
	for _, o := range []string{"ra", "rb", "rc"} {
		if !got[store.GranteeID(o)] {
			t.Fatalf("reader %s not granted: %v", o, got)
		}
	}
	noNotice(t, g1)
	noNotice(t, g2)
	if hs := holders(t, b1); len(hs) != 3 {
		t.Fatalf("holders after the writer's release: %v, want the three readers", hs)
	}
	if st, _ := b1.Inspect(t.Context(), "f"); st.QueuedWriters != 1 || st.QueuedReaders != 1 {
		t.Fatalf("queue after the grants: %+v", st)
	}
}

// A writer that takes the read side too (downgrade) still reads when it
// releases its write hold: no writer gets in between, and the readers at
// the head of the queue join it. Taking the write side with only read
// holds (upgrade) is refused with ErrDeadlock, and changes nothing.
func TestRWDowngradeAndUpgrade(t *testing.T) {
	b, _ := fairPair(t)
	g := grants(t, b, "f")
	w := mustAcquire(t, b, rw("w", store.Write))
	down := rw("w", store.Read)
	down.Hold, down.Reenter = 2, true
	if d := mustAcquire(t, b, down); !d.Acquired || d.Holds != 2 || d.Token != w.Token {
		t.Fatalf("downgrade: %+v", d)
	}
	mustAcquire(t, b, rw("r", store.Read))
	mustAcquire(t, b, rw("w2", store.Write))
	release(t, b, rw("w", store.Write), store.Remaining) // hold 1, the write side
	if n := nextNotice(t, g); n.Grantee != store.GranteeID("r") {
		t.Fatalf("grant after the downgrade: %+v", n)
	}
	noNotice(t, g)
	hs := holders(t, b)
	if len(hs) != 2 || hs["w"].Writes != 0 || hs["w"].Holds != 1 {
		t.Fatalf("holders after the downgrade: %+v", hs)
	}
	up := rw("r", store.Write)
	up.Hold, up.Reenter = 2, true
	if _, err := b.Acquire(t.Context(), up); !errors.Is(err, store.ErrDeadlock) || errors.Is(err, store.ErrBackend) {
		t.Fatalf("upgrade: %v, want ErrDeadlock", err)
	}
	again := rw("w", store.Write)
	again.Hold, again.Reenter = 3, true
	if _, err := b.Acquire(t.Context(), again); !errors.Is(err, store.ErrDeadlock) {
		t.Fatalf("write re-entry after the downgrade: %v, want ErrDeadlock", err)
	}
	if hs := holders(t, b); hs["r"].Holds != 1 || hs["w"].Holds != 1 {
		t.Fatalf("a refused upgrade changed the holds: %+v", hs)
	}
	release(t, b, down, store.Freed)
	noNotice(t, g)
	release(t, b, rw("r", store.Read), store.Freed)
	if n := nextNotice(t, g); n.Grantee != store.GranteeID("w2") {
		t.Fatalf("grant after the readers: %+v", n)
	}
}

// Each holder's lease is its own: a reader whose lease ran out (it died)
// is purged, and never revived by a late renewal; the others keep theirs,
// and the waiting writer goes when they are gone. Every key has a TTL.
func TestRWReaderLeases(t *testing.T) {
	b, _ := fairPair(t)
	ctx := t.Context()
	k := b.cfg.Keys
	mustAcquire(t, b, rw("dead", store.Read))
	mustAcquire(t, b, rw("live", store.Read))
	mustAcquire(t, b, rw("w", store.Write))
	for _, key := range []string{k.Lock("f"), k.Holders("f"), k.Queue("f"), k.QueueDeadlines("f"), k.QueueInfo("f"), k.Fence("f")} {
		if ttl := rdbOf(b).PTTL(ctx, key).Val(); ttl <= 0 {
			t.Fatalf("%s has TTL %v", key, ttl)
		}
	}
	r := rw("live", store.Read)
	r.Queue, r.Seq = 0, 2
	if errs := renew(t, b, []store.Request{r}); errs[0] != nil {
		t.Fatalf("renewal of a reader: %v", errs[0])
	}
	rdbOf(b).ZAdd(ctx, k.Holders("f"), redisZ(time.Now().Add(-time.Second), "dead"))
	dead := rw("dead", store.Read)
	dead.Queue, dead.Seq = 0, 2
	if errs := renew(t, b, []store.Request{dead}); !errors.Is(errs[0], store.ErrNotHeld) {
		t.Fatalf("renewal of an expired reader: %v, want ErrNotHeld", errs[0])
	}
	g := grants(t, b, "f")
	release(t, b, rw("live", store.Read), store.Freed)
	if n := nextNotice(t, g); n.Grantee != store.GranteeID("w") {
		t.Fatalf("grant: %+v", n)
	}
	if hs := holders(t, b); len(hs) != 1 || hs["w"].Writes != 1 {
		t.Fatalf("holders: %+v, want the writer alone (the dead reader purged)", hs)
	}
}

// A refresh finds the lock free of live holders and takes it for the
// first waiter; a TryRLock never queues and never passes a waiting writer.
func TestRWRefreshAndTry(t *testing.T) {
	b, _ := fairPair(t)
	ctx := t.Context()
	mustAcquire(t, b, rw("r", store.Read))
	mustAcquire(t, b, rw("w", store.Write))
	try := rw("t", store.Read)
	try.Queue = 0
	if g := mustAcquire(t, b, try); g.Acquired || g.Queued {
		t.Fatalf("TryRLock past a waiting writer: %+v", g)
	}
	rdbOf(b).ZAdd(ctx, b.cfg.Keys.Holders("f"), redisZ(time.Now().Add(-time.Second), "r"))
	w := rw("w", store.Write)
	w.Seq = 2
	var got store.Grant
	var err error
	b.Renew(ctx, []store.Request{w}, func(_ int, g store.Grant, e error) { got, err = g, e })
	if err != nil || !got.Acquired || got.Seq != 2 || got.Lease != 5*time.Second {
		t.Fatalf("refresh of the writer once the reader's lease ran out: %+v, %v", got, err)
	}
}

// Kinds never mix: a read-write lock refuses the mutexes, and the reverse.
func TestRWKindsDoNotMix(t *testing.T) {
	b, _ := fairPair(t)
	mustAcquire(t, b, rw("r", store.Read))
	for _, r := range []store.Request{
		{Name: "f", Owner: "p", Hold: 1, Lease: time.Minute},
		place("f", "q"),
	} {
		if _, err := b.Acquire(t.Context(), r); !errors.Is(err, store.ErrWrongKind) {
			t.Fatalf("%v acquire of a read-write lock: %v", r.Kind, err)
		}
	}
	mustAcquire(t, b, place("g", "x"))
	mustAcquire(t, b, place("g", "y"))
	other := rw("z", store.Write)
	other.Name = "g"
	if _, err := b.Acquire(t.Context(), other); !errors.Is(err, store.ErrWrongKind) {
		t.Fatalf("write acquire of a fair mutex: %v", err)
	}
	rdbOf(b).Del(t.Context(), b.cfg.Keys.Lock("g")) // free, but its queue is a fair one
	if _, err := b.Acquire(t.Context(), other); !errors.Is(err, store.ErrWrongKind) {
		t.Fatalf("write acquire of a fair mutex's queue: %v", err)
	}
}

// ForceUnlock drops every holder and grants the lock on; abandoning a
// granted reader lets the writer behind it in.
func TestRWForceUnlockAndAbandon(t *testing.T) {
	b, _ := fairPair(t)
	g := grants(t, b, "f")
	mustAcquire(t, b, rw("r1", store.Read))
	mustAcquire(t, b, rw("r2", store.Read))
	mustAcquire(t, b, rw("w", store.Write))
	mustAcquire(t, b, rw("r3", store.Read))
	if ok, err := b.ForceUnlock(t.Context(), "f"); err != nil || !ok {
		t.Fatal(ok, err)
	}
	if n := nextNotice(t, g); n.Grantee != store.GranteeID("w") {
		t.Fatalf("grant after force-unlock: %+v", n)
	}
	if freed, err := b.Abandon(t.Context(), store.Request{Name: "f", Kind: store.Write, Owner: "w", Lease: time.Minute}); err != nil || !freed {
		t.Fatal(freed, err)
	}
	if n := nextNotice(t, g); n.Grantee != store.GranteeID("r3") {
		t.Fatalf("grant after abandoning the writer: %+v", n)
	}
}
