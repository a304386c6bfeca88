package otel_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock"
	distlockotel "github.com/distlock/distlock/otel"
	"github.com/distlock/distlock/redisstore"
	"github.com/distlock/distlock/redistest"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// A bed is a redis-server, a Client on it observed by an Observer on SDK
// providers that record every span and metric, and a tracer of the test's
// own for parent spans.
type bed struct {
	srv     *redistest.Server
	locks   *distlock.Client
	obs     *distlockotel.Observer
	spans   *tracetest.SpanRecorder
	metrics *sdkmetric.ManualReader
	tracer  trace.Tracer
}

// newBed starts a bed. When the test ends, it closes the Client and
// checks that the Observer let go of every hold and ended every span.
func newBed(t *testing.T) *bed {
	t.Helper()
	b := &bed{srv: redistest.Start(t), spans: tracetest.NewSpanRecorder(), metrics: sdkmetric.NewManualReader()}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(b.spans))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(b.metrics))
	t.Cleanup(func() {
		_ = tp.Shutdown(context.Background())
		_ = mp.Shutdown(context.Background())
	})
	b.tracer = tp.Tracer("test")
	b.obs = distlockotel.New(distlockotel.WithTracerProvider(tp), distlockotel.WithMeterProvider(mp))
	b.locks = newClient(t, b.srv, distlock.WithObserver(b.obs))
	t.Cleanup(func() {
		b.locks.Close()
		if n := distlockotel.Holds(b.obs); n != 0 {
			t.Errorf("after Close, the observer still keeps %d holds", n)
		}
		if started, ended := len(b.spans.Started()), len(b.spans.Ended()); started != ended {
			t.Errorf("after Close, %d spans started and %d ended", started, ended)
		}
	})
	return b
}

// newClient returns a Client on srv, closed when the test ends.
func newClient(t testing.TB, srv *redistest.Server, opts ...distlock.Option) *distlock.Client {
	t.Helper()
	c := distlock.New(redisstore.New(srv.Client(t)), append([]distlock.Option{distlock.WithLogger(nil)}, opts...)...)
	t.Cleanup(func() { c.Close() })
	return c
}

// testCtx is a context that ends with the test, bounded so that a hang
// fails the test.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// ended returns the ended spans named name.
func (b *bed) ended(name string) []sdktrace.ReadOnlySpan {
	var spans []sdktrace.ReadOnlySpan
	for _, s := range b.spans.Ended() {
		if s.Name() == name {
			spans = append(spans, s)
		}
	}
	return spans
}

// one returns the one ended span named name, failing the test if there
// is not exactly one.
func (b *bed) one(t *testing.T, name string) sdktrace.ReadOnlySpan {
	t.Helper()
	spans := b.ended(name)
	if len(spans) != 1 {
		t.Fatalf("%d spans %s ended, want 1 (ended: %v)", len(spans), name, b.names())
	}
	return spans[0]
}

// await waits for a span named name to end and returns it.
func (b *bed) await(t *testing.T, name string) sdktrace.ReadOnlySpan {
	t.Helper()
	eventually(t, name+" ended", func() bool { return len(b.ended(name)) > 0 })
	return b.one(t, name)
}

// names lists the names of the ended spans.
func (b *bed) names() []string {
	var names []string
	for _, s := range b.spans.Ended() {
		names = append(names, s.Name())
	}
	return names
}

// eventually waits up to 10 s for cond.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within 10s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// attr returns the value of span's attribute key.
func attr(span sdktrace.ReadOnlySpan, key string) (attribute.Value, bool) {
	for _, kv := range span.Attributes() {
		if string(kv.Key) == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

// wantAttrs checks span's attributes against want, by their values as
// strings.
func wantAttrs(t *testing.T, span sdktrace.ReadOnlySpan, want map[string]string) {
	t.Helper()
	for k, v := range want {
		got, ok := attr(span, k)
		if !ok {
			t.Errorf("span %s: no attribute %s (want %q)", span.Name(), k, v)
		} else if got.Emit() != v {
			t.Errorf("span %s: %s = %q, want %q", span.Name(), k, got.Emit(), v)
		}
	}
}

// event returns span's event named name.
func event(span sdktrace.ReadOnlySpan, name string) (sdktrace.Event, bool) {
	i := slices.IndexFunc(span.Events(), func(e sdktrace.Event) bool { return e.Name == name })
	if i < 0 {
		return sdktrace.Event{}, false
	}
	return span.Events()[i], true
}

// noOwner checks that no attribute of spans, of their events or links,
// names an owner or has secret among its value.
func noOwner(t *testing.T, spans []sdktrace.ReadOnlySpan, secret string) {
	t.Helper()
	check := func(span string, kvs []attribute.KeyValue) {
		for _, kv := range kvs {
			if strings.Contains(strings.ToLower(string(kv.Key)), "owner") {
				t.Errorf("span %s: attribute %s names an owner", span, kv.Key)
			}
			if strings.Contains(kv.Value.Emit(), secret) {
				t.Errorf("span %s: attribute %s = %q holds the owner id %q", span, kv.Key, kv.Value.Emit(), secret)
			}
		}
	}
	for _, s := range spans {
		check(s.Name(), s.Attributes())
		for _, e := range s.Events() {
			check(s.Name()+" event "+e.Name, e.Attributes)
		}
		for _, l := range s.Links() {
			check(s.Name()+" link", l.Attributes)
		}
		if strings.Contains(s.Status().Description, secret) {
			t.Errorf("span %s: status %q holds the owner id", s.Name(), s.Status().Description)
		}
	}
}

// collect reads the metrics.
func (b *bed) collect(t *testing.T) metricdata.ResourceMetrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := b.metrics.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	return rm
}

// metricOf finds the metric named name.
func metricOf(rm metricdata.ResourceMetrics, name string) (metricdata.Metrics, bool) {
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == name {
				return m, true
			}
		}
	}
	return metricdata.Metrics{}, false
}

// count is the sum of the counter name's points whose attributes include
// attrs.
func count(rm metricdata.ResourceMetrics, name string, attrs ...attribute.KeyValue) int64 {
	m, ok := metricOf(rm, name)
	if !ok {
		return 0
	}
	sum, _ := m.Data.(metricdata.Sum[int64])
	var n int64
	for _, p := range sum.DataPoints {
		if has(p.Attributes, attrs) {
			n += p.Value
		}
	}
	return n
}

// observations is the number of values recorded by the histogram name in
// its points whose attributes include attrs.
func observations(rm metricdata.ResourceMetrics, name string, attrs ...attribute.KeyValue) uint64 {
	m, ok := metricOf(rm, name)
	if !ok {
		return 0
	}
	h, _ := m.Data.(metricdata.Histogram[float64])
	var n uint64
	for _, p := range h.DataPoints {
		if has(p.Attributes, attrs) {
			n += p.Count
		}
	}
	return n
}

func has(set attribute.Set, attrs []attribute.KeyValue) bool {
	for _, kv := range attrs {
		if v, ok := set.Value(kv.Key); !ok || v != kv.Value {
			return false
		}
	}
	return true
}

// attributeSets are the attribute sets of m's points.
func attributeSets(m metricdata.Metrics) []attribute.Set {
	var sets []attribute.Set
	switch d := m.Data.(type) {
	case metricdata.Sum[int64]:
		for _, p := range d.DataPoints {
			sets = append(sets, p.Attributes)
		}
	case metricdata.Histogram[float64]:
		for _, p := range d.DataPoints {
			sets = append(sets, p.Attributes)
		}
	}
	return sets
}
