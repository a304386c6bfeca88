package otel_test

import (
	"context"
	"testing"

	"github.com/distlock/distlock"
	distlockotel "github.com/distlock/distlock/otel"
	"github.com/distlock/distlock/redistest"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// observers are the cases the benchmarks compare: no Observer; one whose
// spans are all sampled out (the cost in production when a trace is not
// kept); one whose spans are all recorded, and dropped (no exporter).
func observers(b *testing.B) map[string]*distlockotel.Observer {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	never := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()))
	always := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()))
	b.Cleanup(func() {
		_ = never.Shutdown(context.Background())
		_ = always.Shutdown(context.Background())
		_ = mp.Shutdown(context.Background())
	})
	return map[string]*distlockotel.Observer{
		"none":        nil,
		"sampled-out": distlockotel.New(distlockotel.WithTracerProvider(never), distlockotel.WithMeterProvider(mp)),
		"recorded":    distlockotel.New(distlockotel.WithTracerProvider(always), distlockotel.WithMeterProvider(mp)),
	}
}

var cases = []string{"none", "sampled-out", "recorded"}

// BenchmarkLockUnlock measures a Lock and Unlock pair on a local
// redis-server, with and without an Observer.
func BenchmarkLockUnlock(b *testing.B) {
	srv := redistest.Start(b)
	obs := observers(b)
	for _, name := range cases {
		b.Run(name, func(b *testing.B) {
			var opts []distlock.Option
			if o := obs[name]; o != nil {
				opts = append(opts, distlock.WithObserver(o))
			}
			m := newClient(b, srv, opts...).Mutex("bench")
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				lease, err := m.Lock(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if err := lease.Unlock(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkObserver measures the Observer alone: the calls a Lock and
// Unlock pair makes of it.
func BenchmarkObserver(b *testing.B) {
	obs := observers(b)
	unlock := distlock.Call{Op: "unlock", Name: "x", Lock: distlock.KindMutex, Store: "redis", Hold: 7}
	released := distlock.Event{Kind: distlock.EventReleased, Name: "x", Lock: distlock.KindMutex, Store: "redis", Hold: 7, Token: 3}
	okUnlock := distlock.CallResult{Outcome: distlock.OutcomeOK}
	for _, name := range cases[1:] {
		o := obs[name]
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				lctx := o.StartCall(ctx, lockCall)
				o.Event(acquired)
				o.EndCall(lctx, lockCall, ok7)
				uctx := o.StartCall(ctx, unlock)
				o.Event(ended)
				o.Event(released)
				o.EndCall(uctx, unlock, okUnlock)
			}
		})
	}
}
