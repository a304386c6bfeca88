package etcdstore

import (
	"strconv"
	"testing"
	"time"

	"github.com/distlock/distlock/store"
)

// TestPinnedSlotsAreNotGiven: a slot whose key a delete may still reach
// goes to no other owner: not while the delete is on its way, nor, if its
// outcome is unknown, until store.AbandonFor of the longest lease of the
// store's keys has passed; it is given again once the delete is answered,
// or once that time is over.
func TestPinnedSlotsAreNotGiven(t *testing.T) {
	s := New(nil)
	key := func(owner string) string { return s.bindKey("x", store.Plain, owner) }
	pin := func(at slotAt) {
		s.mu.Lock()
		s.slots.pin(at)
		s.mu.Unlock()
	}
	runOut := func(at slotAt) {
		s.mu.Lock()
		p := s.slots.pins[at]
		p.until = time.Now().Add(-time.Millisecond)
		s.slots.pins[at] = p
		s.mu.Unlock()
	}
	zero := slotAt{"x", 0}

	a := key("a")
	pin(zero) // a's release is on its way
	s.unbind("a", "x")
	if b := key("b"); b == a {
		t.Errorf("a slot with a delete on its way was given: %q", b)
	}
	s.unpin(zero, false)
	if c := key("c"); c != a {
		t.Errorf("after the delete was answered, the next owner got %q, want %q", c, a)
	}

	pin(zero)
	s.unbind("c", "x")
	s.class(leaseTTL(10 * time.Minute)) // the store keeps keys of 10-minute leases
	s.unpin(zero, true)
	if d := key("d"); d == a {
		t.Errorf("a slot whose delete's outcome is unknown was given: %q", d)
	}
	if p := s.slots.pins[zero]; time.Until(p.until) < store.AbandonFor(10*time.Minute)-time.Minute {
		t.Errorf("pinned for %v, want store.AbandonFor of the longest lease (10 min): %v", time.Until(p.until), store.AbandonFor(10*time.Minute))
	}
	runOut(zero)
	if e := key("e"); e != a {
		t.Errorf("once the pin ran out, the next owner got %q, want %q", e, a)
	}

	// Unknown outcomes on locks never bound again: their pins are dropped
	// once they have run out.
	for i := range 1000 {
		at := slotAt{"y" + strconv.Itoa(i), 0}
		pin(at)
		s.unpin(at, true)
		runOut(at)
	}
	if n := len(s.slots.pins); n > minSweep {
		t.Errorf("%d pins kept after 1000 that ran out, want at most %d", n, minSweep)
	}
}
