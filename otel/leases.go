package otel

import (
	"sync"

	"github.com/distlock/distlock"
	"go.opentelemetry.io/otel/trace"
)

// A leaseKey names a hold. Its id is unique in its Client only: the store
// and the lock's name keep apart most holds of several Clients that share
// an Observer (see Observer).
type leaseKey struct {
	store, name string
	hold        uint64
}

// A lease is a hold between its EventAcquired and its EventEnded, and the
// span of it once the acquisition's call has ended.
type lease struct {
	claimed bool            // the acquisition's EndCall starts, or started, the span
	span    trace.Span      // the span, once started
	ended   *distlock.Event // an EventEnded that came while the span was being started
}

// leases are the holds of the Clients an Observer serves. A hold enters
// at its EventAcquired, which comes before its acquisition's EndCall, and
// leaves at its EventEnded, which comes once per hold: so an EventEnded
// that comes before EndCall leaves no span behind, and every entry goes.
// No span is started or ended under mu.
type leases struct {
	mu sync.Mutex
	m  map[leaseKey]lease
}

// acquired enters the new hold k (EventAcquired with Holds 1).
func (ls *leases) acquired(k leaseKey) {
	ls.mu.Lock()
	if _, ok := ls.m[k]; !ok {
		ls.m[k] = lease{}
	}
	ls.mu.Unlock()
}

// claim claims hold k for its acquisition to start its span. It reports
// false if the hold has ended or was claimed before (a re-entry of it).
func (ls *leases) claim(k leaseKey) bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	l, ok := ls.m[k]
	if !ok || l.claimed {
		return false
	}
	l.claimed = true
	ls.m[k] = l
	return true
}

// started gives hold k, claimed, its span. If the hold ended in the
// meantime, it leaves, and started returns its EventEnded for the caller
// to end the span with.
func (ls *leases) started(k leaseKey, span trace.Span) (ended distlock.Event, ok bool) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	l := ls.m[k]
	if l.ended != nil {
		delete(ls.m, k)
		return *l.ended, true
	}
	l.span = span
	ls.m[k] = l
	return distlock.Event{}, false
}

// end takes hold k out at its EventEnded ev and returns its span for the
// caller to end, or nil: the hold was unknown, it had no span (a
// MultiMutex's member, an acquisition that failed or was not recorded),
// or its span is being started, and started will hand ev over.
func (ls *leases) end(k leaseKey, ev distlock.Event) trace.Span {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	l, ok := ls.m[k]
	if !ok {
		return nil
	}
	if l.claimed && l.span == nil {
		l.ended = new(distlock.Event) // rare: a copy, so that ev stays on the caller's stack
		*l.ended = ev
		ls.m[k] = l
		return nil
	}
	delete(ls.m, k)
	return l.span
}

// span returns the span of hold k, or nil.
func (ls *leases) span(k leaseKey) trace.Span {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.m[k].span
}

// len is the number of holds entered.
func (ls *leases) len() int {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return len(ls.m)
}
