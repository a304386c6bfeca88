package distlock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/redistest"
)

// observed is an Observer that keeps what it sees and signals each
// change. (The store conformance suite checks calls and holds on every
// store; these tests check what needs Redis's faults.)
type observed struct {
	mu      sync.Mutex
	changed chan struct{}
	ends    []observedCall
	events  []distlock.Event
}

type observedCall struct {
	call distlock.Call
	res  distlock.CallResult
}

func newObserved() *observed { return &observed{changed: make(chan struct{})} }

func (o *observed) note(f func()) {
	o.mu.Lock()
	defer o.mu.Unlock()
	f()
	close(o.changed)
	o.changed = make(chan struct{})
}

func (o *observed) StartCall(ctx context.Context, _ distlock.Call) context.Context { return ctx }
func (o *observed) EndCall(_ context.Context, c distlock.Call, r distlock.CallResult) {
	o.note(func() { o.ends = append(o.ends, observedCall{c, r}) })
}
func (o *observed) Event(ev distlock.Event) { o.note(func() { o.events = append(o.events, ev) }) }

// await returns the first event of kind, waiting for it for d at most.
func (o *observed) await(t *testing.T, kind distlock.EventKind, d time.Duration) distlock.Event {
	t.Helper()
	deadline := time.After(d)
	for {
		o.mu.Lock()
		changed := o.changed
		for _, e := range o.events {
			if e.Kind == kind {
				o.mu.Unlock()
				return e
			}
		}
		o.mu.Unlock()
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("no %v event within %v", kind, d)
		}
	}
}

// call returns the last ended call of op.
func (o *observed) call(t *testing.T, op string) observedCall {
	t.Helper()
	o.mu.Lock()
	defer o.mu.Unlock()
	for i := len(o.ends) - 1; i >= 0; i-- {
		if o.ends[i].call.Op == op {
			return o.ends[i]
		}
	}
	t.Fatalf("no call %q ended (calls: %+v)", op, o.ends)
	return observedCall{}
}

func TestOutcomeOf(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want distlock.Outcome
	}{
		{nil, distlock.OutcomeOK},
		{fmt.Errorf("%w: %w", distlock.ErrNotAcquired, context.DeadlineExceeded), distlock.OutcomeTimeout},
		{fmt.Errorf("%w: %w", distlock.ErrNotAcquired, context.Canceled), distlock.OutcomeCanceled},
		{fmt.Errorf("%w: held by another owner", distlock.ErrNotAcquired), distlock.OutcomeBusy},
		{distlock.ErrBackend, distlock.OutcomeError},
		{distlock.ErrNotHeld, distlock.OutcomeError},
	} {
		if got := distlock.OutcomeOf(tc.err); got != tc.want {
			t.Errorf("OutcomeOf(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

// TestObservedOutcomes: each way a call can end is reported as its
// outcome, with the store and the kind.
func TestObservedOutcomes(t *testing.T) {
	srv := redistest.Start(t)
	obs := newObserved()
	a, _ := newClient(t, srv, distlock.WithObserver(obs))
	b, _ := newClient(t, srv)
	ctx := testCtx(t)
	held, err := b.Mutex("observed").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Unlock(ctx)

	if _, err := a.Mutex("observed").TryLock(ctx); !errors.Is(err, distlock.ErrNotAcquired) {
		t.Fatalf("TryLock of a held lock: %v", err)
	}
	if c := obs.call(t, "try-lock"); c.res.Outcome != distlock.OutcomeBusy || c.call.Store != "redis" || c.call.Lock != distlock.KindMutex {
		t.Errorf("try-lock: %+v, want busy, store redis, kind mutex", c)
	}

	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := a.Mutex("observed").Lock(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock past its deadline: %v", err)
	}
	if c := obs.call(t, "lock"); c.res.Outcome != distlock.OutcomeTimeout || !errors.Is(c.res.Err, distlock.ErrNotAcquired) {
		t.Errorf("lock past its deadline: %+v, want timeout", c)
	}

	cctx, cancelNow := context.WithCancel(ctx)
	cancelNow()
	if _, err := a.Semaphore("observed-sem", 1).Acquire(cctx, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire with a cancelled context: %v", err)
	}
	if c := obs.call(t, "acquire"); c.res.Outcome != distlock.OutcomeCanceled || c.call.Lock != distlock.KindSemaphore {
		t.Errorf("acquire cancelled: %+v, want canceled, kind semaphore", c)
	}

	l, err := a.RWMutex("observed-rw").RLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Extend(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	if c := obs.call(t, "extend"); c.res.Outcome != distlock.OutcomeOK || c.call.Hold == 0 || c.call.Lock != distlock.KindRWMutex {
		t.Errorf("extend: %+v, want ok, the lease's hold, kind rwmutex", c)
	}
	if err := l.Extend(ctx, time.Nanosecond); !errors.Is(err, distlock.ErrInvalidOption) {
		t.Fatalf("Extend by 1ns: %v", err)
	}
	if c := obs.call(t, "extend"); c.res.Outcome != distlock.OutcomeError || !errors.Is(c.res.Err, distlock.ErrInvalidOption) {
		t.Errorf("extend refused: %+v, want error", c)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(ctx); !errors.Is(err, distlock.ErrNotHeld) {
		t.Fatalf("second Unlock: %v", err)
	}
	if c := obs.call(t, "unlock"); c.res.Outcome != distlock.OutcomeError || !errors.Is(c.res.Err, distlock.ErrNotHeld) {
		t.Errorf("second unlock: %+v, want error, ErrNotHeld", c)
	}

	run, err := a.Once(ctx, "observed-once", time.Minute, func(context.Context, uint64) error { return nil })
	if err != nil || run.State != distlock.RanHere {
		t.Fatalf("Once: %+v, %v", run, err)
	}
	if c := obs.call(t, "once"); c.res.Outcome != distlock.OutcomeOK || c.call.Name != "observed-once" {
		t.Errorf("once: %+v", c)
	}
	if c := obs.call(t, "lock"); c.call.Name != "observed-once" || c.res.Outcome != distlock.OutcomeOK {
		t.Errorf("the acquisition inside Once: %+v, want a call lock of its own", c)
	}
}

// TestObservedRenewals: renewals are reported with their round trip.
func TestObservedRenewals(t *testing.T) {
	srv := redistest.Start(t)
	obs := newObserved()
	c, _ := newClient(t, srv, distlock.WithObserver(obs))
	ctx := testCtx(t)
	l, err := c.Mutex("renewed", distlock.WithTTL(300*time.Millisecond)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ev := obs.await(t, distlock.EventRenewed, 10*time.Second)
	if ev.Latency <= 0 || ev.Hold == 0 || ev.Store != "redis" || ev.Lock != distlock.KindMutex || ev.Token != l.Token() {
		t.Errorf("EventRenewed %+v: want a latency, the hold, store redis, kind mutex, token %d", ev, l.Token())
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	end := obs.await(t, distlock.EventEnded, 10*time.Second)
	if end.Hold != ev.Hold || end.Err != nil || end.Held <= 0 {
		t.Errorf("EventEnded %+v: want hold %d, no error, a hold time", end, ev.Hold)
	}
}

// TestObservedLossReasons: a loss is reported with why: the lease
// deadline passed with no renewal confirmed, Redis being down or paused.
// (Revoked and gone: the conformance suite; a fixed lease's expiry:
// TestObservedExpiry.)
func TestObservedLossReasons(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault func(*redistest.Server) error
		ttl   time.Duration
		want  distlock.LossReason
	}{
		{"killed", (*redistest.Server).Kill, time.Second, distlock.LossRenewalFailed},
		{"paused", (*redistest.Server).Pause, time.Second, distlock.LossRenewalFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.Start(t)
			obs := newObserved()
			c, _ := newClient(t, srv, distlock.WithObserver(obs))
			ctx := testCtx(t)
			l, err := c.Mutex("lost", distlock.WithTTL(tc.ttl)).Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := tc.fault(srv); err != nil {
				t.Fatal(err)
			}
			if tc.name == "paused" {
				t.Cleanup(func() { srv.Resume() })
			}
			lost := obs.await(t, distlock.EventLost, 10*time.Second)
			end := obs.await(t, distlock.EventEnded, 10*time.Second)
			if lost.Reason != tc.want || end.Reason != tc.want || end.Hold != lost.Hold {
				t.Errorf("lost %+v, ended %+v: want reason %q in both, one hold", lost, end, tc.want)
			}
			if !errors.Is(context.Cause(l.Context()), distlock.ErrLockLost) {
				t.Errorf("lease context cause %v", context.Cause(l.Context()))
			}
			// Redis back, so that the release and Close are answered.
			if tc.name == "paused" {
				err = srv.Resume()
			} else {
				err = srv.Restart()
			}
			if err != nil {
				t.Fatal(err)
			}
			_ = l.Unlock(ctx)
		})
	}
}

// TestObservedExpiry: a fixed lease that runs its course is reported as
// EventExpired, and its hold's end, with the reason "expired".
func TestObservedExpiry(t *testing.T) {
	srv := redistest.Start(t)
	obs := newObserved()
	c, _ := newClient(t, srv, distlock.WithObserver(obs))
	ctx := testCtx(t)
	l, err := c.Mutex("fixed", distlock.WithFixedLease(200*time.Millisecond)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	exp := obs.await(t, distlock.EventExpired, 10*time.Second)
	end := obs.await(t, distlock.EventEnded, 10*time.Second)
	if exp.Reason != distlock.LossExpired || end.Reason != distlock.LossExpired || !errors.Is(end.Err, distlock.ErrLeaseExpired) {
		t.Errorf("expired %+v, ended %+v: want reason %q in both, ErrLeaseExpired", exp, end, distlock.LossExpired)
	}
	obs.mu.Lock()
	for _, e := range obs.events {
		if e.Kind == distlock.EventLost {
			t.Errorf("a fixed lease's expiry reported as a loss: %+v", e)
		}
	}
	obs.mu.Unlock()
	_ = l.Unlock(ctx)
}
