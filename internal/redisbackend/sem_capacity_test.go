package redisbackend

import (
	"testing"
	"time"

	"github.com/distlock/distlock/store"
)

// A semaphore's capacity outlives every holder's lease and every place,
// whichever step gave them (an acquisition, a grant, a renewal, a refresh,
// SetPermits), however short the fence retention.
func TestSemaphoreCapacityOutlivesHoldersAndPlaces(t *testing.T) {
	b := newBackendRetention(t, time.Second) // much shorter than the leases and queue timeouts here
	ctx := t.Context()
	capTTL := func() time.Duration { return rdbOf(b).PTTL(ctx, b.cfg.Keys.Capacity("s")).Val() }
	a := sem("a", 1, 2) // a lease of a minute
	mustAcquire(t, b, a)
	if ttl := capTTL(); ttl < 50*time.Second {
		t.Fatalf("capacity TTL %v beside a lease of 1m", ttl)
	}
	if _, _, err := b.SetPermits(ctx, "s", 1); err != nil {
		t.Fatal(err)
	}
	if ttl := capTTL(); ttl < 50*time.Second {
		t.Fatalf("capacity TTL %v after SetPermits, beside a lease of 1m", ttl)
	}
	renewal := a
	renewal.Seq, renewal.Lease, renewal.Queue = 2, 10*time.Minute, 0
	if errs := renew(t, b, []store.Request{renewal}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	if ttl := capTTL(); ttl < 9*time.Minute {
		t.Fatalf("capacity TTL %v after a renewal for 10m", ttl)
	}
	w := sem("w", 1, 3)
	w.Queue = time.Hour
	if g := mustAcquire(t, b, w); !g.Queued {
		t.Fatalf("w: %+v", g)
	}
	if ttl := capTTL(); ttl < 59*time.Minute {
		t.Fatalf("capacity TTL %v beside a place of 1h", ttl)
	}
	w.Seq, w.Queue = 2, 2*time.Hour
	if errs := renew(t, b, []store.Request{w}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	if ttl := capTTL(); ttl < 119*time.Minute {
		t.Fatalf("capacity TTL %v after a refresh for 2h", ttl)
	}
}

// Waiters whose holder's lease ended without a release, refreshed after
// the fence retention: the capacity is still the one set, so the first is
// granted and the second, which would not fit, waits. (The capacity used
// to expire a retention after the last acquisition, and the refresh set
// it again from the waiter's own argument: both were granted.)
func TestSemaphoreRefreshAfterRetentionKeepsCapacity(t *testing.T) {
	b := newBackendRetention(t, time.Second) // much shorter than the leases and queue timeouts here
	ctx := t.Context()
	h := sem("h", 1, 3)
	h.Lease = 1500 * time.Millisecond
	mustAcquire(t, b, h)
	if _, _, err := b.SetPermits(ctx, "s", 1); err != nil {
		t.Fatal(err)
	}
	var ws []store.Request
	for _, owner := range []string{"w1", "w2"} {
		w := sem(owner, 1, 3)
		w.Queue = time.Minute
		if g := mustAcquire(t, b, w); !g.Queued {
			t.Fatalf("%s: %+v", owner, g)
		}
		w.Seq = 2
		ws = append(ws, w)
	}
	// Wait for h's lease to end (1.5 s, longer than the retention).
	deadline := time.Now().Add(10 * time.Second)
	for semState(t, b).Used != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the holder's lease did not end")
		}
		time.Sleep(50 * time.Millisecond)
	}
	var gs [2]store.Grant
	b.Renew(ctx, ws, func(i int, g store.Grant, err error) {
		if err != nil {
			t.Errorf("refresh %d: %v", i, err)
		}
		gs[i] = g
	})
	if !gs[0].Acquired || gs[0].Capacity != 1 || !gs[1].Queued || gs[1].Capacity != 1 {
		t.Fatalf("refreshes after the holder's lease ended: %+v, want w1 granted, w2 queued, capacity 1", gs)
	}
	if st := semState(t, b); st.Capacity != 1 || st.Used != 1 {
		t.Fatalf("state: %+v", st)
	}
}

// SetPermits drops every waiter that asks for more than the new capacity,
// wherever it is in the queue: the others keep their places, in order.
func TestSemaphoreShrinkDropsEveryWaiterThatCannotFit(t *testing.T) {
	b, _ := fairPair(t)
	ctx := t.Context()
	mustAcquire(t, b, sem("a", 3, 3))
	for _, w := range []store.Request{sem("small", 1, 3), sem("big", 3, 3), sem("two", 2, 3), sem("bigger", 3, 3)} {
		if g := mustAcquire(t, b, w); !g.Queued {
			t.Fatalf("%s: %+v", w.Owner, g)
		}
	}
	if _, _, err := b.SetPermits(ctx, "s", 2); err != nil {
		t.Fatal(err)
	}
	if st := semState(t, b); st.Queued != 2 || st.QueuedPermits != 3 {
		t.Fatalf("after shrinking to 2: %+v, want small and two queued", st)
	}
	for _, w := range []store.Request{sem("big", 3, 3), sem("bigger", 3, 3)} {
		w.Seq = 2
		if errs := renew(t, b, []store.Request{w}); errs[0] == nil {
			t.Fatalf("refresh of %s's dropped place: nil, want ErrNotHeld", w.Owner)
		}
	}
}

// A semaphore waiter's refresh carries the capacity in force, whether it
// is still queued or was granted; other kinds' carry none.
func TestRefreshCarriesCapacity(t *testing.T) {
	b, _ := fairPair(t)
	ctx := t.Context()
	mustAcquire(t, b, sem("a", 2, 2))
	w := sem("w", 1, 5) // believes in 5 permits
	mustAcquire(t, b, w)
	mustAcquire(t, b, place("f", "h"))
	f := place("f", "fw")
	mustAcquire(t, b, f)
	refresh := func(r store.Request, seq uint64) store.Grant {
		t.Helper()
		r.Seq = seq
		var g store.Grant
		b.Renew(ctx, []store.Request{r}, func(_ int, gr store.Grant, err error) {
			if err != nil {
				t.Fatal(err)
			}
			g = gr
		})
		return g
	}
	if g := refresh(w, 2); !g.Queued || g.Capacity != 2 {
		t.Fatalf("semaphore waiter's refresh: %+v, want queued, capacity 2", g)
	}
	if g := refresh(f, 2); !g.Queued || g.Capacity != 0 {
		t.Fatalf("fair waiter's refresh: %+v, want queued, no capacity", g)
	}
	if _, _, err := b.SetPermits(ctx, "s", 3); err != nil { // grants w
		t.Fatal(err)
	}
	if g := refresh(w, 3); !g.Acquired || g.Capacity != 3 {
		t.Fatalf("refresh of a granted semaphore waiter: %+v, want acquired, capacity 3", g)
	}
}
