package etcdstore

import (
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"time"

	"github.com/distlock/distlock/store"
)

// Key names come back. An owner's key is named after a slot of the store
// on the lock (the store's random id and the smallest number that none of
// its live owners on that lock has), not after the owner: the next
// acquisition of the lock by the same process takes the name again.
//
// Why: etcd's index keeps every key name ever made until the cluster is
// compacted (never, by default), and every range over a lock's
// directory (the compare of an acquisition, a waiter's read) visits each
// name it kept, deleted or not. Had each acquisition a new name, the cost
// of taking a lock would grow with the number of times it was taken since
// the last compaction; with slots, it stays with the number of owners that
// contend for it at once.
//
// What makes a name safe to give again is what makes every request of an
// owner harmless once the owner has gone: a put of the owner compares its
// abandonment mark (and its key's absence, or the lock's); every other
// write but a release's delete (below) compares the key's mod revision,
// after a read that found the owner's own value there; and Abandon
// deletes the key only when it marks the owner for the first time. A slot is given again only once the store
// knows its owner has no key and can make none (its last release freed
// the lock or found nothing, its abandonment was confirmed, or its
// acquisition took nothing and left nothing) and no Abandon of it is on
// its way unconfirmed (one that lands after the name went to the next
// owner would mark the owner for the first time, and delete that key).
// Like the refusal of late puts, this rests on no request of an owner
// landing later than its mark lasts (store.AbandonFor of its lease).
//
// The one write that compares nothing is a release's delete of its
// owner's key (Release): it would delete whatever key has the name when
// it lands. So a delete pins its slot's number on the lock from the
// moment its key is named until its reply: a pinned number goes to no
// owner, whoever had it. A delete whose outcome is unknown may still land
// later: its number stays pinned for store.AbandonFor of the longest
// lease of the store's keys (a release does not say the hold's lease; a
// key's lease is at least its hold's).

// A slotOf names the slot of one owner on one lock (an owner of a
// multi-lock has one on each).
type slotOf struct{ owner, name string }

// A slotAt is slot number n on the lock name.
type slotAt struct {
	name string
	n    int
}

// A pin keeps a slot number from being given: while deletes of its key are
// on their way (sending), or until a time (a delete's outcome was
// unknown).
type pin struct {
	sending int
	until   time.Time
}

// slots are the slots of a store's owners.
type slots struct {
	id    string              // the store's: 64 random bits, in hex
	inUse map[slotAt]struct{} // one set for every lock: no map per lock held
	of    map[slotOf]int
	pins  map[slotAt]pin
	// sweepAt is the number of pins at which the next unknown outcome
	// drops the pins that have run out (a lock not bound again keeps its
	// own until then).
	sweepAt int
	// abandoning: an Abandon of the owner was sent with its slot's key and
	// not confirmed yet. Until one is, the slot stays the owner's whatever
	// else ends it: that Abandon may still land, and delete the key of the
	// name (it marks the owner first).
	abandoning map[slotOf]bool
}

func newSlots() slots {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return slots{id: hex.EncodeToString(b[:]), inUse: map[slotAt]struct{}{}, of: map[slotOf]int{},
		pins: map[slotAt]pin{}, sweepAt: minSweep, abandoning: map[slotOf]bool{}}
}

// slotKey is the key of slot n of the store in the lock name, for kind.
func (s *Store) slotKey(name string, kind store.Kind, n int) string {
	return s.kindDir(name, kind) + s.slots.id + "." + strconv.Itoa(n)
}

// bindKey returns the key of owner in the lock name, giving it a slot if
// it has none.
func (s *Store) bindKey(name string, kind store.Kind, owner string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bindKeyLocked(name, kind, owner)
}

// bindKeyLocked is bindKey with s.mu held.
func (s *Store) bindKeyLocked(name string, kind store.Kind, owner string) string {
	at := slotOf{owner, name}
	n, ok := s.slots.of[at]
	if !ok {
		for {
			if _, taken := s.slots.inUse[slotAt{name, n}]; !taken && !s.slots.pinned(slotAt{name, n}) {
				break
			}
			n++
		}
		s.slots.inUse[slotAt{name, n}] = struct{}{}
		s.slots.of[at] = n
	}
	return s.slotKey(name, kind, n)
}

// ownKey returns the key of owner in the lock name: its slot's, or, if it
// has none (it never acquired, or is known gone), a key that no store
// makes.
func (s *Store) ownKey(name string, kind store.Kind, owner string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ownKeyLocked(name, kind, owner)
}

func (s *Store) ownKeyLocked(name string, kind store.Kind, owner string) string {
	n, ok := s.slots.of[slotOf{owner, name}]
	if !ok {
		return s.kindDir(name, kind) + "-"
	}
	return s.slotKey(name, kind, n)
}

// abandonKey is the key of owner for an Abandon about to be sent: its
// slot's, given to it now if it has none, and its own until an Abandon of
// it is confirmed (abandoned). An owner without a slot may still get one:
// its acquisition may not have bound its key yet (the Client abandons an
// attempt whose caller gave up the moment it was started), and its put
// may reach etcd before this Abandon, with no mark to refuse it. That put
// must be of the key this Abandon deletes: bindKey gives the acquisition
// the slot reserved here.
func (s *Store) abandonKey(name string, kind store.Kind, owner string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.slots.abandoning[slotOf{owner, name}] = true
	return s.bindKeyLocked(name, kind, owner)
}

// abandoned records that an Abandon of owner in the lock name was
// confirmed: the owner is marked, and no copy of an Abandon of it deletes
// a key any more.
func (s *Store) abandoned(owner, name string) {
	s.mu.Lock()
	delete(s.slots.abandoning, slotOf{owner, name})
	s.mu.Unlock()
}

// unbind gives the slot of owner in the lock name back, unless an Abandon
// of the owner is on its way: the owner has no key there, and can make
// none.
func (s *Store) unbind(owner, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	at := slotOf{owner, name}
	n, ok := s.slots.of[at]
	if !ok || s.slots.abandoning[at] {
		return
	}
	delete(s.slots.of, at)
	delete(s.slots.inUse, slotAt{name, n})
}

// minSweep is the least number of pins at which pins that have run out
// are dropped.
const minSweep = 64

// pin pins slot at while a delete of its key is on its way. s.mu must be
// held.
func (sl *slots) pin(at slotAt) {
	p := sl.pins[at]
	p.sending++
	sl.pins[at] = p
}

// pinned reports whether slot at is pinned; it drops a pin that has run
// out. s.mu must be held.
func (sl *slots) pinned(at slotAt) bool {
	p, ok := sl.pins[at]
	if !ok {
		return false
	}
	if p.sending > 0 || time.Now().Before(p.until) {
		return true
	}
	delete(sl.pins, at)
	return false
}

// unpin ends a pin of slot at by a delete that was answered, or, if its
// outcome is unknown, keeps the slot pinned for store.AbandonFor of the
// longest lease of the store's keys: the delete may still land until
// then.
func (s *Store) unpin(at slotAt, unknown bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sl := &s.slots
	p := sl.pins[at]
	p.sending--
	if unknown {
		var longest time.Duration
		for ttl := range s.classes {
			longest = max(longest, time.Duration(ttl)*time.Second)
		}
		if u := time.Now().Add(store.AbandonFor(longest)); u.After(p.until) {
			p.until = u
		}
	}
	if p.sending <= 0 && !time.Now().Before(p.until) {
		delete(sl.pins, at)
		return
	}
	sl.pins[at] = p
	if unknown && len(sl.pins) >= sl.sweepAt {
		for a := range sl.pins {
			sl.pinned(a)
		}
		sl.sweepAt = max(minSweep, 2*len(sl.pins))
	}
}
