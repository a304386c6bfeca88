package otel_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/distlock/distlock"
	distlockotel "github.com/distlock/distlock/otel"
	"github.com/distlock/distlock/redistest"
	"go.opentelemetry.io/otel"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace/noop"
)

// The Observer called directly, in orders the engine may produce, with
// no Client: it starts and keeps nothing it should not.

var (
	lockCall = distlock.Call{Op: "lock", Name: "x", Lock: distlock.KindMutex, Store: "redis"}
	ok7      = distlock.CallResult{Outcome: distlock.OutcomeOK, Token: 3, Hold: 7}
	acquired = distlock.Event{Kind: distlock.EventAcquired, Name: "x", Lock: distlock.KindMutex, Store: "redis", Hold: 7, Token: 3, Holds: 1}
	ended    = distlock.Event{Kind: distlock.EventEnded, Name: "x", Lock: distlock.KindMutex, Store: "redis", Hold: 7, Token: 3, Held: time.Second}
)

func recorded(t *testing.T, opts ...sdktrace.TracerProviderOption) (*distlockotel.Observer, *tracetest.SpanRecorder) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(append([]sdktrace.TracerProviderOption{sdktrace.WithSpanProcessor(rec)}, opts...)...)
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return distlockotel.New(distlockotel.WithTracerProvider(tp)), rec
}

// An EventEnded of a hold the Observer does not know is ignored; an
// acquisition whose hold it never saw acquired starts no lease span.
func TestUnknownHold(t *testing.T) {
	obs, rec := recorded(t)
	obs.Event(ended)
	obs.EndCall(obs.StartCall(context.Background(), lockCall), lockCall, ok7)
	if names := spanNames(rec); len(names) != 1 || names[0] != "distlock.lock" {
		t.Errorf("spans %v, want distlock.lock only", names)
	}
	if n := distlockotel.Holds(obs); n != 0 {
		t.Errorf("%d holds kept", n)
	}
}

// A hold that ends before its acquisition's call does (another goroutine
// lost it) gets no lease span, and is not kept.
func TestHoldEndedBeforeEndCall(t *testing.T) {
	obs, rec := recorded(t)
	ctx := obs.StartCall(context.Background(), lockCall)
	obs.Event(acquired)
	obs.Event(ended)
	obs.EndCall(ctx, lockCall, ok7)
	if names := spanNames(rec); len(names) != 1 || names[0] != "distlock.lock" {
		t.Errorf("spans %v, want distlock.lock only", names)
	}
	if n := distlockotel.Holds(obs); n != 0 {
		t.Errorf("%d holds kept", n)
	}
}

// A hold that ends while its lease span is being started ends the span
// as soon as it has started.
func TestHoldEndedWhileLeaseStarts(t *testing.T) {
	var obs *distlockotel.Observer
	obs, rec := recorded(t, sdktrace.WithSpanProcessor(onStart(func(s sdktrace.ReadWriteSpan) {
		if s.Name() == "distlock.lease" {
			obs.Event(ended)
		}
	})))
	ctx := obs.StartCall(context.Background(), lockCall)
	obs.Event(acquired)
	obs.EndCall(ctx, lockCall, ok7)
	if names := spanNames(rec); len(names) != 2 {
		t.Fatalf("spans %v, want distlock.lock and distlock.lease ended", names)
	}
	if n := distlockotel.Holds(obs); n != 0 {
		t.Errorf("%d holds kept", n)
	}
	if started, ended := len(rec.Started()), len(rec.Ended()); started != ended {
		t.Errorf("%d spans started, %d ended", started, ended)
	}
}

// A second acquisition of the same hold (re-entry), and a second
// EventAcquired with Holds 1 for it, start no second lease span.
func TestSecondAcquisitionOfHold(t *testing.T) {
	obs, rec := recorded(t)
	for range 2 {
		ctx := obs.StartCall(context.Background(), lockCall)
		obs.Event(acquired)
		reentry := acquired
		reentry.Holds = 2
		obs.Event(reentry)
		obs.EndCall(ctx, lockCall, ok7)
	}
	obs.Event(ended)
	obs.Event(ended)
	leases := 0
	for _, s := range rec.Ended() {
		if s.Name() == "distlock.lease" {
			leases++
		}
	}
	if leases != 1 || distlockotel.Holds(obs) != 0 || len(rec.Started()) != len(rec.Ended()) {
		t.Errorf("%d lease spans (want 1), %d holds kept, %d of %d spans ended", leases, distlockotel.Holds(obs), len(rec.Ended()), len(rec.Started()))
	}
}

// Without options, New uses the global providers.
func TestGlobalProviders(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	prevTP, prevMP := otel.GetTracerProvider(), otel.GetMeterProvider()
	otel.SetTracerProvider(tp)
	otel.SetMeterProvider(mp)
	t.Cleanup(func() {
		otel.SetTracerProvider(prevTP)
		otel.SetMeterProvider(prevMP)
		_ = tp.Shutdown(context.Background())
		_ = mp.Shutdown(context.Background())
	})

	ctx := testCtx(t)
	locks := newClient(t, redistest.Start(t), distlock.WithObserver(distlockotel.New()))
	lease, err := locks.Mutex("global", distlock.WithTTL(300*time.Millisecond)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b := &bed{metrics: reader}
	eventually(t, "a renewal counted by the global meter provider", func() bool {
		return count(b.collect(t), "distlock.renewals", resultKV("ok")) > 0
	})
	if err := lease.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if names := spanNames(rec); !slices.Equal(names, []string{"distlock.lock", "distlock.lease", "distlock.unlock"}) {
		t.Errorf("the global tracer provider got spans %v, want distlock.lock, distlock.lease, distlock.unlock", names)
	}
}

func spanNames(rec *tracetest.SpanRecorder) []string {
	var names []string
	for _, s := range rec.Ended() {
		names = append(names, s.Name())
	}
	return names
}

// onStart is a span processor that calls fn as each span starts.
type onStart func(sdktrace.ReadWriteSpan)

func (f onStart) OnStart(_ context.Context, s sdktrace.ReadWriteSpan) { f(s) }
func (onStart) OnEnd(sdktrace.ReadOnlySpan)                           {}
func (onStart) Shutdown(context.Context) error                        { return nil }
func (onStart) ForceFlush(context.Context) error                      { return nil }

// On a no-op tracer provider, the Observer never ends the caller's span.
func TestNoopLeavesCallersSpan(t *testing.T) {
	tp := sdktrace.NewTracerProvider()
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	ctx, parent := tp.Tracer("app").Start(context.Background(), "request")
	obs := distlockotel.New(distlockotel.WithTracerProvider(noop.NewTracerProvider()))
	obs.Event(acquired)
	obs.EndCall(obs.StartCall(ctx, lockCall), lockCall, ok7)
	obs.Event(ended)
	if !parent.IsRecording() {
		t.Error("the Observer ended the caller's span")
	}
	if n := distlockotel.Holds(obs); n != 0 {
		t.Errorf("%d holds kept", n)
	}
	parent.End()
}
