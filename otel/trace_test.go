package otel_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/distlock"
	distlockotel "github.com/distlock/distlock/otel"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// A Lock under a parent span is a child span distlock.lock with the
// lock's attributes and no owner id; the lease is a span distlock.lease,
// child of it, ended by the Unlock, whose span is linked to it.
func TestLockUnlockSpans(t *testing.T) {
	b := newBed(t)
	ctx := testCtx(t)
	ctx, parent := b.tracer.Start(ctx, "request")
	m := b.locks.Mutex("orders:42")

	lease, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	info, err := m.Inspect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Holder.ID == "" {
		t.Fatal("Inspect shows no holder id")
	}
	if len(b.ended("distlock.lease")) != 0 {
		t.Fatal("the lease span ended while the lock is held")
	}
	if err := lease.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	parent.End()

	lock := b.one(t, "distlock.lock")
	if lock.Parent().SpanID() != parent.SpanContext().SpanID() || lock.SpanContext().TraceID() != parent.SpanContext().TraceID() {
		t.Errorf("distlock.lock's parent is %v, want the request's span %v", lock.Parent(), parent.SpanContext())
	}
	token := strconv.FormatUint(lease.Token(), 10)
	wantAttrs(t, lock, map[string]string{
		"distlock.lock.kind": "mutex", "distlock.store": "redis", "db.system.name": "redis",
		"distlock.lock.name": "orders:42", "distlock.outcome": "ok", "distlock.token": token,
	})
	if _, ok := attr(lock, "distlock.wait"); !ok {
		t.Error("distlock.lock has no distlock.wait")
	}
	if lock.Status().Code != codes.Unset {
		t.Errorf("distlock.lock status %v, want Unset", lock.Status())
	}

	leaseSpan := b.one(t, "distlock.lease")
	if leaseSpan.Parent().SpanID() != lock.SpanContext().SpanID() {
		t.Errorf("distlock.lease's parent is %v, want distlock.lock %v", leaseSpan.Parent().SpanID(), lock.SpanContext().SpanID())
	}
	wantAttrs(t, leaseSpan, map[string]string{
		"distlock.lock.kind": "mutex", "distlock.store": "redis", "distlock.lock.name": "orders:42", "distlock.token": token,
	})
	if held, ok := attr(leaseSpan, "distlock.held"); !ok || held.AsFloat64() <= 0 {
		t.Errorf("distlock.lease: distlock.held = %v (present %v), want > 0", held.AsFloat64(), ok)
	}
	if leaseSpan.Status().Code != codes.Unset || len(leaseSpan.Events()) != 0 {
		t.Errorf("released lease: status %v, events %v; want Unset, none", leaseSpan.Status(), leaseSpan.Events())
	}

	unlock := b.one(t, "distlock.unlock")
	if unlock.Parent().SpanID() != parent.SpanContext().SpanID() {
		t.Errorf("distlock.unlock's parent is %v, want the request's span", unlock.Parent())
	}
	wantAttrs(t, unlock, map[string]string{"distlock.outcome": "ok", "distlock.lock.name": "orders:42"})
	if hold, _ := attr(unlock, "distlock.hold"); hold.AsInt64() == 0 {
		t.Error("distlock.unlock has no distlock.hold")
	} else if lh, _ := attr(leaseSpan, "distlock.hold"); lh != hold {
		t.Errorf("distlock.unlock's hold %v, the lease's %v", hold.Emit(), lh.Emit())
	}
	if links := unlock.Links(); len(links) != 1 || links[0].SpanContext.SpanID() != leaseSpan.SpanContext().SpanID() {
		t.Errorf("distlock.unlock's links %v, want the lease span %v", links, leaseSpan.SpanContext().SpanID())
	}
	if leaseSpan.EndTime().After(unlock.EndTime()) {
		t.Error("the lease span ended after the Unlock returned")
	}

	noOwner(t, b.spans.Ended(), info.Holder.ID)
	if got := b.names(); len(got) != 4 {
		t.Errorf("spans %v, want distlock.lock, distlock.lease, distlock.unlock, request", got)
	}
}

// A TryLock that finds the lock taken is an outcome busy, not an error;
// it starts no lease span.
func TestTryLockBusy(t *testing.T) {
	b := newBed(t)
	ctx := testCtx(t)
	other := newClient(t, b.srv)
	held, err := other.Mutex("cron").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Unlock(ctx)

	if _, err := b.locks.Mutex("cron").TryLock(ctx); !errors.Is(err, distlock.ErrNotAcquired) {
		t.Fatalf("TryLock: %v, want ErrNotAcquired", err)
	}
	span := b.one(t, "distlock.try-lock")
	wantAttrs(t, span, map[string]string{"distlock.outcome": "busy", "distlock.lock.name": "cron"})
	if span.Status().Code == codes.Error || len(span.Events()) != 0 {
		t.Errorf("busy TryLock: status %v, events %v; want no error", span.Status(), span.Events())
	}
	if _, ok := attr(span, "distlock.token"); ok {
		t.Error("a refused TryLock has a token")
	}
	if len(b.spans.Started()) != len(b.spans.Ended()) || distlockotel.Holds(b.obs) != 0 {
		t.Errorf("a refused TryLock left a span open or a hold kept")
	}
}

// A Lock whose context ends first is a timeout: status Error, the error
// recorded.
func TestLockTimeout(t *testing.T) {
	b := newBed(t)
	ctx := testCtx(t)
	other := newClient(t, b.srv)
	held, err := other.Mutex("busy").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Unlock(ctx)

	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if _, err := b.locks.Mutex("busy").Lock(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock: %v, want DeadlineExceeded", err)
	}
	span := b.one(t, "distlock.lock")
	wantAttrs(t, span, map[string]string{"distlock.outcome": "timeout"})
	if span.Status().Code != codes.Error {
		t.Errorf("timed-out Lock: status %v, want Error", span.Status())
	}
	if _, ok := event(span, "exception"); !ok {
		t.Error("timed-out Lock: no exception event")
	}
	if wait, _ := attr(span, "distlock.wait"); wait.AsFloat64() < 0.09 {
		t.Errorf("distlock.wait = %v, want ≥ 0.1 s", wait.AsFloat64())
	}
	if len(b.ended("distlock.lease")) != 0 {
		t.Error("a timed-out Lock has a lease span")
	}
}

// A lock revoked by another Client ends its lease span with an event
// distlock.lost, reason revoked, and the status Error; the loss is
// counted.
func TestRevokedLease(t *testing.T) {
	b := newBed(t)
	ctx := testCtx(t)
	lease, err := b.locks.Mutex("job").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	lock := b.one(t, "distlock.lock")
	operator := newClient(t, b.srv)
	if _, err := operator.Mutex("job").Revoke(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-lease.Context().Done():
	case <-ctx.Done():
		t.Fatal("the lease context did not end after Revoke")
	}

	span := b.await(t, "distlock.lease")
	if span.Parent().SpanID() != lock.SpanContext().SpanID() {
		t.Error("distlock.lease is not a child of distlock.lock")
	}
	ev, ok := event(span, "distlock.lost")
	if !ok {
		t.Fatalf("no event distlock.lost: %v", span.Events())
	}
	reason := ""
	message := ""
	for _, kv := range ev.Attributes {
		switch kv.Key {
		case "distlock.reason":
			reason = kv.Value.AsString()
		case "exception.message":
			message = kv.Value.AsString()
		}
	}
	if reason != "revoked" || message == "" {
		t.Errorf("distlock.lost: reason %q, message %q; want revoked and the error", reason, message)
	}
	if span.Status().Code != codes.Error {
		t.Errorf("lost lease: status %v, want Error", span.Status())
	}

	if err := lease.Unlock(ctx); !errors.Is(err, distlock.ErrLockLost) {
		t.Errorf("Unlock after the loss: %v, want ErrLockLost", err)
	}
	unlock := b.one(t, "distlock.unlock")
	if unlock.Status().Code != codes.Error {
		t.Errorf("Unlock of a lost lock: status %v, want Error", unlock.Status())
	}
	eventually(t, "loss counted", func() bool {
		return count(b.collect(t), "distlock.losses", reasonKV("revoked"), kindKV("mutex"), storeKV("redis")) == 1
	})
	if got := len(b.ended("distlock.lease")); got != 1 {
		t.Errorf("%d lease spans, want 1", got)
	}
}

// A fixed lease that runs its course ends its span with an event
// distlock.expired, not an error.
func TestFixedLeaseExpired(t *testing.T) {
	b := newBed(t)
	ctx := testCtx(t)
	lease, err := b.locks.Mutex("fixed", distlock.WithFixedLease(100*time.Millisecond)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	<-lease.Context().Done()
	span := b.await(t, "distlock.lease")
	if _, ok := event(span, "distlock.expired"); !ok {
		t.Errorf("no event distlock.expired: %v", span.Events())
	}
	if _, ok := event(span, "distlock.lost"); ok || span.Status().Code == codes.Error {
		t.Errorf("an expired fixed lease is reported as lost: status %v, events %v", span.Status(), span.Events())
	}
	_ = lease.Unlock(ctx)
}

// Closing the Client ends the lease spans of its holds with an event
// distlock.closed, not an error.
func TestCloseEndsLease(t *testing.T) {
	b := newBed(t)
	ctx := testCtx(t)
	if _, err := b.locks.Mutex("a").Lock(ctx); err != nil {
		t.Fatal(err)
	}
	b.locks.Close()
	span := b.await(t, "distlock.lease")
	if _, ok := event(span, "distlock.closed"); !ok || span.Status().Code == codes.Error {
		t.Errorf("closed: status %v, events %v; want an event distlock.closed and no error", span.Status(), span.Events())
	}
}

// Re-entering a hold starts no second lease span; the one span ends with
// the hold, at the last Unlock.
func TestReentryOneLeaseSpan(t *testing.T) {
	b := newBed(t)
	ctx := testCtx(t)
	m := b.locks.Mutex("reentrant")
	outer, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	inner, err := m.Lock(outer.Context())
	if err != nil {
		t.Fatal(err)
	}
	if got := len(b.ended("distlock.lock")); got != 2 {
		t.Fatalf("%d lock spans, want 2", got)
	}
	if err := inner.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if len(b.ended("distlock.lease")) != 0 {
		t.Fatal("the lease span ended while the outer lease holds the lock")
	}
	if err := outer.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	span := b.one(t, "distlock.lease")
	for _, u := range b.ended("distlock.unlock") {
		if links := u.Links(); len(links) != 1 || links[0].SpanContext.SpanID() != span.SpanContext().SpanID() {
			t.Errorf("an Unlock's links %v, want the lease span", links)
		}
	}
	if n := distlockotel.Holds(b.obs); n != 0 {
		t.Errorf("%d holds kept after the last Unlock", n)
	}
}

// A MultiMutex's acquisition is one span, with no lease span for its
// members, and leaves nothing behind.
func TestMultiMutexNoLeaseSpan(t *testing.T) {
	b := newBed(t)
	ctx := testCtx(t)
	lease, err := b.locks.MultiMutex([]string{"b", "a"}).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	span := b.one(t, "distlock.lock")
	wantAttrs(t, span, map[string]string{"distlock.lock.name": "a+b", "distlock.outcome": "ok",
		"distlock.token": strconv.FormatUint(lease.Token(), 10)})
	if _, ok := attr(span, "distlock.hold"); ok {
		t.Error("a MultiMutex's span has a hold")
	}
	if err := lease.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if got := len(b.ended("distlock.lease")); got != 0 {
		t.Errorf("%d lease spans for a MultiMutex, want 0", got)
	}
	if n := distlockotel.Holds(b.obs); n != 0 {
		t.Errorf("%d holds kept after Unlock", n)
	}
}

// Under concurrent Locks, TryLocks and Unlocks, every hold gets one lease
// span, ended, and none is kept.
func TestConcurrent(t *testing.T) {
	b := newBed(t)
	ctx := testCtx(t)
	var acquisitions atomic.Int64
	var wg sync.WaitGroup
	for g := range 6 {
		wg.Go(func() {
			m := b.locks.Mutex("shared")
			for range 15 {
				take := m.Lock
				if g%2 == 1 {
					take = m.TryLock
				}
				lease, err := take(ctx)
				if errors.Is(err, distlock.ErrNotAcquired) {
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				acquisitions.Add(1)
				if err := lease.Unlock(ctx); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if got, want := len(b.ended("distlock.lease")), int(acquisitions.Load()); got != want {
		t.Errorf("%d lease spans for %d acquisitions", got, want)
	}
	if n := distlockotel.Holds(b.obs); n != 0 {
		t.Errorf("%d holds kept", n)
	}
	if started, ended := len(b.spans.Started()), len(b.spans.Ended()); started != ended {
		t.Errorf("%d spans started, %d ended", started, ended)
	}
}

// Extend is a span distlock.extend, linked to its lease's span.
func TestExtend(t *testing.T) {
	b := newBed(t)
	ctx := testCtx(t)
	lease, err := b.locks.Mutex("long").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := lease.Extend(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := lease.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	extend, leaseSpan := b.one(t, "distlock.extend"), b.one(t, "distlock.lease")
	wantAttrs(t, extend, map[string]string{"distlock.outcome": "ok", "distlock.lock.name": "long"})
	if _, ok := attr(extend, "distlock.wait"); ok {
		t.Error("Extend has a wait")
	}
	if links := extend.Links(); len(links) != 1 || links[0].SpanContext.SpanID() != leaseSpan.SpanContext().SpanID() {
		t.Errorf("distlock.extend's links %v, want the lease span", links)
	}
	onlyCalls(t, b.spans.Ended())
}

// Once is a span distlock.once; its acquisition a span of its own, whose
// lease ends before Once returns.
func TestOnce(t *testing.T) {
	b := newBed(t)
	ctx := testCtx(t)
	ran := false
	if _, err := b.locks.Once(ctx, "migrate", time.Minute, func(context.Context, uint64) error {
		ran = true
		return nil
	}); err != nil || !ran {
		t.Fatalf("Once: %v, ran %v", err, ran)
	}
	wantAttrs(t, b.one(t, "distlock.once"), map[string]string{"distlock.outcome": "ok", "distlock.lock.name": "migrate"})
	b.one(t, "distlock.lock")
	b.one(t, "distlock.lease")
	if n := distlockotel.Holds(b.obs); n != 0 {
		t.Errorf("%d holds kept after Once", n)
	}
}

// callSpans are the only spans the Observer makes in these tests.
var callSpans = map[string]bool{"distlock.lock": true, "distlock.try-lock": true, "distlock.unlock": true,
	"distlock.lease": true, "distlock.once": true, "distlock.extend": true}

// onlyCalls checks that spans are all of calls and leases (none of
// renewals, say).
func onlyCalls(t *testing.T, spans []sdktrace.ReadOnlySpan) {
	t.Helper()
	for _, s := range spans {
		if !callSpans[s.Name()] {
			t.Errorf("unexpected span %s", s.Name())
		}
	}
}
