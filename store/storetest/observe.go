package storetest

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/store"
)

// A recorder is an Observer that keeps every call and event it sees.
type recorder struct {
	mu      sync.Mutex
	changed chan struct{} // closed and replaced at each record
	starts  []distlock.Call
	ends    []endedCall
	events  []distlock.Event
}

type endedCall struct {
	call   distlock.Call
	result distlock.CallResult
	marked bool // the context EndCall got is the one StartCall returned
}

type recorderMark struct{}

func newRecorder() *recorder { return &recorder{changed: make(chan struct{})} }

func (r *recorder) record(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f()
	close(r.changed)
	r.changed = make(chan struct{})
}

func (r *recorder) StartCall(ctx context.Context, c distlock.Call) context.Context {
	r.record(func() { r.starts = append(r.starts, c) })
	return context.WithValue(ctx, recorderMark{}, c.Op)
}

func (r *recorder) EndCall(ctx context.Context, c distlock.Call, res distlock.CallResult) {
	marked := ctx.Value(recorderMark{}) == c.Op
	r.record(func() { r.ends = append(r.ends, endedCall{c, res, marked}) })
}

func (r *recorder) Event(ev distlock.Event) {
	r.record(func() { r.events = append(r.events, ev) })
}

// await waits until ok holds of the events seen, failing the test after
// d; ok runs under the recorder's mutex.
func (r *recorder) await(t *testing.T, d time.Duration, what string, ok func(events []distlock.Event) bool) {
	t.Helper()
	deadline := time.After(d)
	for {
		r.mu.Lock()
		done, changed := ok(r.events), r.changed
		r.mu.Unlock()
		if done {
			return
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("no %s within %v", what, d)
		}
	}
}

// snapshot returns copies of what r has seen.
func (r *recorder) snapshot() ([]distlock.Call, []endedCall, []distlock.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.starts), slices.Clone(r.ends), slices.Clone(r.events)
}

// count returns how many events of kind ev has.
func count(events []distlock.Event, kind distlock.EventKind) int {
	n := 0
	for _, e := range events {
		if e.Kind == kind {
			n++
		}
	}
	return n
}

// testObserved: an Observer sees every call and every hold of every kind
// the store serves: each acquisition a call that ends with its token and
// hold, each hold one EventAcquired and one EventEnded of the same id, each
// wait an EventWaiting and an EventWaitEnded, the store named as it names
// itself, and a loss with its reason.
func testObserved(t *testing.T, s *suite) {
	kinds := append([]lockKind{mutexKind}, queuedKinds...)
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			rec := newRecorder()
			a := s.client(t, nil, distlock.WithObserver(rec))
			name := s.name(t, "")
			served(t, k.name, k.err(a, name))
			observeKind(t, s, rec, a, k, name)
		})
	}
	t.Run("MultiMutex", func(t *testing.T) {
		rec := newRecorder()
		a := s.client(t, nil, distlock.WithObserver(rec))
		x, y := s.name(t, "x"), s.name(t, "y")
		l, err := a.MultiMutex([]string{x, y}).Lock(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		unlock(t, l)
		_, ends, events := rec.snapshot()
		if len(ends) != 2 || ends[0].call.Op != "lock" || ends[0].result.Outcome != distlock.OutcomeOK || ends[1].call.Op != "unlock" {
			t.Fatalf("calls %+v, want a lock and an unlock, both ok", ends)
		}
		checkHolds(t, events, 2, distlock.KindMutex)
	})
	t.Run("Loss", func(t *testing.T) {
		if !has[store.ForceUnlocker](t, s) {
			t.Skip("the store cannot force an unlock")
		}
		rec := newRecorder()
		a, b := s.client(t, nil, distlock.WithObserver(rec)), s.client(t, nil)
		name := s.name(t, "")
		m, _ := shortLease(t, a, name, 500*time.Millisecond)
		l, err := m.Lock(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		if ok, err := b.Mutex(name).ForceUnlock(ctx(t)); err != nil || !ok {
			t.Fatalf("ForceUnlock: %v, %v", ok, err)
		}
		rec.await(t, 20*time.Second, "EventLost", func(events []distlock.Event) bool { return count(events, distlock.EventLost) > 0 })
		unlockLost(t, l)
		_, _, events := rec.snapshot()
		var lost, ended distlock.Event
		for _, e := range events {
			switch e.Kind {
			case distlock.EventLost:
				lost = e
			case distlock.EventEnded:
				ended = e
			}
		}
		if lost.Reason != distlock.LossRevoked && lost.Reason != distlock.LossGone {
			t.Errorf("EventLost after a ForceUnlock has reason %q, want %q or %q", lost.Reason, distlock.LossRevoked, distlock.LossGone)
		}
		if ended.Hold != lost.Hold || ended.Reason != lost.Reason || !errors.Is(ended.Err, distlock.ErrLockLost) {
			t.Errorf("EventEnded %+v does not match EventLost %+v (same hold, reason, a cause wrapping ErrLockLost)", ended, lost)
		}
		checkHolds(t, events, 1, distlock.KindMutex)
	})
	t.Run("Close", func(t *testing.T) {
		rec := newRecorder()
		a := s.client(t, nil, distlock.WithObserver(rec))
		if _, err := a.Mutex(s.name(t, "")).Lock(ctx(t)); err != nil {
			t.Fatal(err)
		}
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		_, _, events := rec.snapshot()
		checkHolds(t, events, 1, distlock.KindMutex)
		for _, e := range events {
			if e.Kind == distlock.EventEnded && !errors.Is(e.Err, distlock.ErrClosed) {
				t.Errorf("the hold that Close ended reports %v, want ErrClosed", e.Err)
			}
		}
	})
}

// observeKind takes the lock name of kind k with a, makes a second call of
// a wait for it, releases both, and checks what rec saw.
func observeKind(t *testing.T, s *suite, rec *recorder, a *distlock.Client, k lockKind, name string) {
	ctx := ctx(t)
	l, err := k.lock(a, name, true, ctx)
	if err != nil {
		t.Fatal(err)
	}
	tryCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if k.name != "Election" { // a candidate has no try: it would wait its 5 s
		if _, err := k.lock(a, name, false, tryCtx); !errors.Is(err, distlock.ErrNotAcquired) {
			t.Fatalf("a try while held: %v, want ErrNotAcquired", err)
		}
	}
	waiter := async(func() (*distlock.Lease, error) { return k.lock(a, name, true, ctx) })
	rec.await(t, 10*time.Second, "EventWaiting", func(events []distlock.Event) bool { return count(events, distlock.EventWaiting) > 0 })
	unlock(t, l)
	r := get(t, waiter, 10*time.Second, "the waiter")
	if r.err != nil {
		t.Fatal(r.err)
	}
	unlock(t, r.l)

	starts, ends, events := rec.snapshot()
	want := systemName(s, t)
	if len(starts) != len(ends) {
		t.Errorf("%d calls started, %d ended", len(starts), len(ends))
	}
	acquired := map[uint64]uint64{} // hold → token, from the calls
	for _, e := range ends {
		c, res := e.call, e.result
		if !e.marked {
			t.Errorf("call %q: EndCall did not get the context StartCall returned", c.Op)
		}
		if c.Name != name || c.Store != want || c.Lock != kindOf(k) {
			t.Errorf("call %+v, want name %q, store %q, kind %q", c, name, want, kindOf(k))
		}
		if c.Acquires() && res.Outcome == distlock.OutcomeOK {
			if res.Hold == 0 || res.Token == 0 {
				t.Errorf("acquisition %q ok with hold %d, token %d", c.Op, res.Hold, res.Token)
			}
			acquired[res.Hold] = res.Token
		}
		if c.Op == "try-lock" || c.Op == "try-acquire" {
			if res.Outcome != distlock.OutcomeBusy {
				t.Errorf("the refused %q: outcome %q, want %q", c.Op, res.Outcome, distlock.OutcomeBusy)
			}
		}
		if c.Op == "unlock" && (res.Outcome != distlock.OutcomeOK || acquired[c.Hold] == 0) {
			t.Errorf("unlock: outcome %q of hold %d (acquired %v)", res.Outcome, c.Hold, acquired)
		}
	}
	if len(acquired) != 2 {
		t.Errorf("%d acquisitions reported a hold, want 2", len(acquired))
	}
	for _, e := range events {
		if e.Kind == distlock.EventAcquired && acquired[e.Hold] != e.Token {
			t.Errorf("EventAcquired of hold %d, token %d: the calls reported %v", e.Hold, e.Token, acquired)
		}
	}
	if w, we := count(events, distlock.EventWaiting), count(events, distlock.EventWaitEnded); w == 0 || w != we {
		t.Errorf("%d EventWaiting, %d EventWaitEnded: want as many, and some", w, we)
	}
	checkHolds(t, events, 2, kindOf(k))
	for _, e := range events {
		if e.Store != want {
			t.Errorf("event %v names the store %q, want %q", e.Kind, e.Store, want)
		}
		if e.Kind == distlock.EventEnded && e.Err != nil {
			t.Errorf("the hold released by Unlock ended with %v", e.Err)
		}
	}
}

// checkHolds checks that events report n holds of kind, each acquired
// once and ended once.
func checkHolds(t *testing.T, events []distlock.Event, n int, kind distlock.Kind) {
	t.Helper()
	acquired, ended := map[uint64]int{}, map[uint64]int{}
	for _, e := range events {
		switch {
		case e.Kind == distlock.EventAcquired && e.Holds == 1:
			acquired[e.Hold]++
		case e.Kind == distlock.EventEnded:
			ended[e.Hold]++
		default:
			continue
		}
		if e.Hold == 0 || e.Lock != kind {
			t.Errorf("event %v of hold %d, kind %q: want a hold id and kind %q", e.Kind, e.Hold, e.Lock, kind)
		}
	}
	if len(acquired) != n {
		t.Errorf("%d holds acquired, want %d", len(acquired), n)
	}
	for h, k := range acquired {
		if k != 1 || ended[h] != 1 {
			t.Errorf("hold %d: %d EventAcquired, %d EventEnded; want one of each", h, k, ended[h])
		}
	}
	if len(ended) != len(acquired) {
		t.Errorf("%d holds ended, %d acquired", len(ended), len(acquired))
	}
}

// kindOf is the Kind that the calls and events of k name.
func kindOf(k lockKind) distlock.Kind {
	switch k.name {
	case "FairMutex":
		return distlock.KindFairMutex
	case "RWMutex":
		return distlock.KindRWMutex
	case "Semaphore":
		return distlock.KindSemaphore
	case "Election":
		return distlock.KindElection
	}
	return distlock.KindMutex
}

// systemName is the name the suite's stores give themselves, "other" if
// they do not (store.SystemNamer).
func systemName(s *suite, t *testing.T) string {
	st := s.newStore(t)
	defer st.Close()
	if n, ok := st.(store.SystemNamer); ok {
		if n.System() == "" {
			t.Errorf("%T names its system \"\"", st)
		}
		return n.System()
	}
	return "other"
}
