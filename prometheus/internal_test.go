package prometheus

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock"
	prom "github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
)

// TestIndexes: each index function finds each value of its table at its
// place, and nothing else.
func TestIndexes(t *testing.T) {
	check := func(what string, table []string, index func(string) int) {
		for i, v := range table {
			if got := index(v); got != i {
				t.Errorf("%s %q: index %d, want %d", what, v, got, i)
			}
		}
		for _, v := range []string{"", "unknown", "MUTEX"} {
			if got := index(v); got != -1 {
				t.Errorf("%s %q: index %d, want -1", what, v, got)
			}
		}
	}
	check("kind", kinds[:], func(s string) int { return kindIndex(distlock.Kind(s)) })
	check("store", stores[:], storeIndex)
	check("op", ops[:], opIndex)
	check("outcome", outcomes[:], func(s string) int { return outcomeIndex(distlock.Outcome(s)) })
	check("reason", reasons[:], func(s string) int { return reasonIndex(distlock.LossReason(s)) })
	for _, op := range ops {
		if a := (distlock.Call{Op: op}).Acquires(); a != (opIndex(op) <= opIndex("campaign")) {
			t.Errorf("op %q: Acquires %v, out of the order of ops", op, a)
		}
	}
}

// lockUnlock feeds c what a Client tells its observers of one Lock and
// one Unlock of a Mutex of the given name.
func lockUnlock(c *Collector, name string) {
	ctx := context.Background()
	lock := distlock.Call{Op: "lock", Name: name, Lock: distlock.KindMutex, Store: "redis"}
	ctx2 := c.StartCall(ctx, lock)
	c.Event(distlock.Event{Kind: distlock.EventAcquired, Name: name, Lock: distlock.KindMutex, Store: "redis", Hold: 1, Token: 7, Holds: 1})
	c.EndCall(ctx2, lock, distlock.CallResult{Outcome: distlock.OutcomeOK, Duration: time.Millisecond, Token: 7, Hold: 1})
	unlock := distlock.Call{Op: "unlock", Name: name, Lock: distlock.KindMutex, Store: "redis", Hold: 1}
	ctx2 = c.StartCall(ctx, unlock)
	c.Event(distlock.Event{Kind: distlock.EventEnded, Name: name, Lock: distlock.KindMutex, Store: "redis", Hold: 1, Token: 7, Held: time.Millisecond})
	c.Event(distlock.Event{Kind: distlock.EventReleased, Name: name, Lock: distlock.KindMutex, Store: "redis", Hold: 1, Token: 7})
	c.EndCall(ctx2, unlock, distlock.CallResult{Outcome: distlock.OutcomeOK, Duration: time.Millisecond})
}

// TestNoAllocations: once their series exist, calls and events allocate
// nothing, with or without the label name.
func TestNoAllocations(t *testing.T) {
	for _, c := range []*Collector{New(), New(WithLockNames("jobs", "orders"))} {
		for _, name := range []string{"jobs", "users:1"} {
			lockUnlock(c, name)
			renewed := distlock.Event{Kind: distlock.EventRenewed, Name: name, Lock: distlock.KindMutex, Store: "redis", Latency: time.Millisecond}
			waiting := distlock.Event{Kind: distlock.EventWaiting, Name: name, Lock: distlock.KindMutex, Store: "redis"}
			waited := distlock.Event{Kind: distlock.EventWaitEnded, Name: name, Lock: distlock.KindMutex, Store: "redis"}
			lost := distlock.Event{Kind: distlock.EventLost, Name: name, Lock: distlock.KindMutex, Store: "redis", Reason: distlock.LossGone}
			events := func() {
				for _, ev := range []distlock.Event{renewed, waiting, waited, lost} {
					c.Event(ev)
				}
			}
			events()
			if n := testing.AllocsPerRun(100, func() { lockUnlock(c, name) }); n != 0 {
				t.Errorf("a Lock and Unlock of %q: %v allocations", name, n)
			}
			if n := testing.AllocsPerRun(100, events); n != 0 {
				t.Errorf("the other events of %q: %v allocations", name, n)
			}
		}
	}
}

// TestOddValues: a store, a kind, an op, an outcome or a reason the
// Collector does not know is reported as it is.
func TestOddValues(t *testing.T) {
	c := New()
	call := distlock.Call{Op: "frobnicate", Name: "x", Lock: "spinlock", Store: "cockroach"}
	c.EndCall(context.Background(), call, distlock.CallResult{Outcome: "meh"})
	c.EndCall(context.Background(), distlock.Call{Op: "lock", Name: "x", Lock: distlock.KindMutex, Store: "cockroach"}, distlock.CallResult{Outcome: "meh"})
	c.Event(distlock.Event{Kind: distlock.EventAcquired, Name: "x", Lock: "spinlock", Store: "cockroach", Holds: 1})
	c.Event(distlock.Event{Kind: distlock.EventLost, Name: "x", Lock: distlock.KindMutex, Store: "redis", Reason: "stolen"})
	want := `
# HELP distlock_calls_total Calls of the lock API (acquisitions, unlock, extend, once, once-per), by how they ended.
# TYPE distlock_calls_total counter
distlock_calls_total{kind="mutex",op="lock",outcome="meh",store="cockroach"} 1
distlock_calls_total{kind="spinlock",op="frobnicate",outcome="meh",store="cockroach"} 1
# HELP distlock_held_locks Locks held now by this process (a re-entered lock counts once).
# TYPE distlock_held_locks gauge
distlock_held_locks{kind="spinlock",store="cockroach"} 1
# HELP distlock_losses_total Locks lost while held, by reason: gone, revoked, renewal-failed, expired.
# TYPE distlock_losses_total counter
distlock_losses_total{kind="mutex",reason="stolen",store="redis"} 1
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "distlock_calls_total", "distlock_held_locks", "distlock_losses_total"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(c, "distlock_acquire_duration_seconds"); n != 1 {
		t.Errorf("%d acquisition series, want 1", n)
	}
}

// TestBuckets: the options set the buckets they name, the specific over
// WithBuckets whatever their order, and bad buckets make New panic.
func TestBuckets(t *testing.T) {
	cfg := newConfig([]Option{WithWaitBuckets(1, 2), WithBuckets(5, 6, 7)})
	if len(cfg.wait) != 2 || len(cfg.hold) != 3 || len(cfg.renewal) != 3 {
		t.Errorf("wait %v, hold %v, renewal %v", cfg.wait, cfg.hold, cfg.renewal)
	}
	cfg = newConfig(nil)
	if cfg.wait[0] != 0.0005 || cfg.wait[len(cfg.wait)-1] != 60 {
		t.Errorf("default wait buckets %v, want 0.0005 .. 60", cfg.wait)
	}
	for _, b := range [][]float64{{1, 1}, {2, 1}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("buckets %v: no panic", b)
				}
			}()
			New(WithHoldBuckets(b...))
		}()
	}
	c := New(WithRenewalBuckets(0.1, 1))
	c.Event(distlock.Event{Kind: distlock.EventRenewed, Name: "x", Lock: distlock.KindMutex, Store: "redis", Latency: 500 * time.Millisecond})
	ch := make(chan prom.Metric, 10)
	c.renewal.Collect(ch)
	close(ch)
	for m := range ch {
		pb := &dto.Metric{}
		if err := m.Write(pb); err != nil {
			t.Fatal(err)
		}
		if n := len(pb.GetHistogram().GetBucket()); n != 2 {
			t.Errorf("%d renewal buckets, want 2", n)
		}
	}
}

// BenchmarkObserverLockUnlock: what the Collector itself does for one Lock
// and one Unlock, without the store or the engine: two calls and three
// events (go test -run '^$' -bench Observer -benchmem).
func BenchmarkObserverLockUnlock(b *testing.B) {
	for _, bc := range []struct {
		name string
		opts []Option
	}{{"names=none", nil}, {"names=2", []Option{WithLockNames("jobs", "orders")}}} {
		b.Run(bc.name, func(b *testing.B) {
			c := New(bc.opts...)
			b.ReportAllocs()
			for b.Loop() {
				lockUnlock(c, "jobs")
			}
		})
	}
}
