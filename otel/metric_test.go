package otel_test

import (
	"testing"
	"time"

	"github.com/distlock/distlock"
	"go.opentelemetry.io/otel/attribute"
)

func kindKV(k string) attribute.KeyValue   { return attribute.String("distlock.lock.kind", k) }
func storeKV(s string) attribute.KeyValue  { return attribute.String("distlock.store", s) }
func resultKV(r string) attribute.KeyValue { return attribute.String("distlock.result", r) }
func reasonKV(r string) attribute.KeyValue { return attribute.String("distlock.reason", r) }

// Renewals are counted and timed, and traced by no span.
func TestRenewalMetrics(t *testing.T) {
	b := newBed(t)
	ctx := testCtx(t)
	m := b.locks.Mutex("renewed", distlock.WithTTL(300*time.Millisecond))
	lease, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	info, err := m.Inspect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "two renewals", func() bool {
		return count(b.collect(t), "distlock.renewals", kindKV("mutex"), storeKV("redis"), resultKV("ok")) >= 2
	})
	if err := lease.Unlock(ctx); err != nil {
		t.Fatal(err)
	}

	rm := b.collect(t)
	if n := observations(rm, "distlock.renewal.duration", storeKV("redis")); n == 0 {
		t.Error("no renewal round trip in distlock.renewal.duration")
	}
	if d, ok := metricOf(rm, "distlock.renewal.duration"); !ok || d.Unit != "s" {
		t.Errorf("distlock.renewal.duration: unit %q (present %v), want s", d.Unit, ok)
	}
	if n := count(rm, "distlock.renewals", resultKV("failed")); n != 0 {
		t.Errorf("%d failed renewals against a healthy redis-server", n)
	}
	if n := count(rm, "distlock.losses"); n != 0 {
		t.Errorf("%d losses, want 0", n)
	}
	onlyCalls(t, b.spans.Ended())
	if got := len(b.spans.Ended()); got != 3 {
		t.Errorf("spans %v, want lock, lease, unlock", b.names())
	}
	for _, sm := range rm.ScopeMetrics {
		for _, mt := range sm.Metrics {
			for _, set := range attributeSets(mt) {
				for _, kv := range set.ToSlice() {
					if kv.Value.Emit() == info.Holder.ID {
						t.Errorf("metric %s: attribute %s holds the owner id", mt.Name, kv.Key)
					}
				}
			}
		}
	}
}
