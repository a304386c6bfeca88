package redisbackend

import (
	"testing"

	"github.com/distlock/distlock/internal/engine"
)

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
	refresh := func(r engine.Request, seq uint64) engine.Grant {
		t.Helper()
		r.Seq = seq
		var g engine.Grant
		b.Renew(ctx, []engine.Request{r}, func(_ int, gr engine.Grant, err error) {
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
