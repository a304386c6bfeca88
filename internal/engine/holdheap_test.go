package engine

import (
	"math/rand/v2"
	"testing"
	"time"
)

// TestHoldHeap runs random pushes, fixes, removals and pops against a
// plain list: the heap must always give the earliest next event, keep
// every hold's index right, and count the due holds exactly.
func TestHoldHeap(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var q holdHeap
	in := map[*Hold]bool{}
	check := func(step int) {
		t.Helper()
		if len(q) != len(in) {
			t.Fatalf("step %d: %d entries, want %d", step, len(q), len(in))
		}
		for i, e := range q {
			if e.h.index != i || e.next != e.h.next || !in[e.h] {
				t.Fatalf("step %d: entry %d: index %d, key %v, hold's next %v, in %v", step, i, e.h.index, e.next, e.h.next, in[e.h])
			}
			if i > 0 && q[(i-1)/2].next > e.next {
				t.Fatalf("step %d: entry %d (%v) before its parent (%v)", step, i, e.next, q[(i-1)/2].next)
			}
		}
		now := time.Duration(rng.IntN(1000))
		want := 0
		for h := range in {
			if h.next <= now {
				want++
			}
		}
		if got := q.due(now); got != want {
			t.Fatalf("step %d: due(%v) = %d, want %d", step, now, got, want)
		}
	}
	someHold := func() *Hold {
		for h := range in {
			return h
		}
		return nil
	}
	for step := range 5000 {
		switch op := rng.IntN(10); {
		case op < 4 || len(in) == 0:
			h := &Hold{leaseClock: leaseClock{index: -1, next: time.Duration(rng.IntN(1000))}}
			q.push(h)
			in[h] = true
		case op < 7:
			h := someHold()
			h.next = time.Duration(rng.IntN(1000))
			q.fix(h)
		case op < 9:
			h := someHold()
			q.remove(h)
			delete(in, h)
			if h.index != -1 {
				t.Fatalf("step %d: a removed hold has index %d", step, h.index)
			}
		default:
			earliest := time.Duration(1 << 62)
			for h := range in {
				earliest = min(earliest, h.next)
			}
			h := q.pop()
			if h.next != earliest {
				t.Fatalf("step %d: pop gave %v, the earliest is %v", step, h.next, earliest)
			}
			delete(in, h)
		}
		check(step)
	}
}
