package bench_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock/bench/internal/harness"
	"github.com/distlock/distlock/redistest"
)

// TestObservedLibs: distlock with the Prometheus Collector and with the
// OpenTelemetry Observer lock and unlock on a real redis-server, and their
// observers see every call: the registry's distlock_calls_total counts
// both calls of each pair, the SDK exports a lock, an unlock and a lease
// span for each. Then scenarios a and b run briefly with each, and report
// what the observer saw per pair.
func TestObservedLibs(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-server")
	}
	srv := redistest.Start(t)
	const pairs = 5
	for _, lib := range harness.ObservedLibs {
		t.Run(lib, func(t *testing.T) {
			if err := harness.FlushAll(srv.Addr()); err != nil {
				t.Fatal(err)
			}
			lk, err := harness.NewLocker(lib, srv.Addr(), harness.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer lk.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			before, ok, err := harness.Observed(lk)
			if err != nil || !ok {
				t.Fatalf("Observed before: ok %v, %v", ok, err)
			}
			if before.Records != 0 {
				t.Errorf("seen before any call: %+v", before)
			}
			for i := range pairs {
				unlock, err := lk.Lock(ctx, "obs:"+strconv.Itoa(i))
				if err != nil {
					t.Fatal(err)
				}
				if err := unlock(ctx); err != nil {
					t.Fatal(err)
				}
			}
			s, _, err := harness.Observed(lk)
			if err != nil {
				t.Fatal(err)
			}
			switch lib {
			case harness.DistlockProm:
				if s.Calls != 2*pairs || s.Records != 2*pairs {
					t.Errorf("distlock_calls_total = %d (records %d), want %d", s.Calls, s.Records, 2*pairs)
				}
				for _, want := range []string{"distlock_calls_total", "distlock_acquire_duration_seconds", "distlock_hold_duration_seconds"} {
					if !slices.Contains(s.Metrics, want) {
						t.Errorf("registry lacks %s: %v", want, s.Metrics)
					}
				}
			case harness.DistlockOtel:
				for _, name := range []string{"distlock.lock", "distlock.unlock", "distlock.lease"} {
					if s.Spans[name] != pairs {
						t.Errorf("%d spans %s exported, want %d (all: %v)", s.Spans[name], name, pairs, s.Spans)
					}
				}
				if s.Calls != 2*pairs || s.Records != 3*pairs {
					t.Errorf("calls %d, records %d, want %d and %d", s.Calls, s.Records, 2*pairs, 3*pairs)
				}
			}
		})
	}

	plain, err := harness.NewLocker(harness.Distlock, srv.Addr(), harness.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if _, ok, err := harness.Observed(plain); ok || err != nil {
		t.Errorf("plain distlock observed: %v %v", ok, err)
	}

	cfg := harness.DefaultConfig()
	cfg.Duration = 200 * time.Millisecond
	cfg.Parallel = 4
	for _, s := range harness.ObservedScenarios {
		for _, lib := range harness.ObservedLibs {
			if err := harness.FlushAll(srv.Addr()); err != nil {
				t.Fatal(err)
			}
			res, err := harness.Run(s, lib, srv.Addr(), cfg)
			if err != nil {
				t.Fatalf("%s/%s: %v", s, lib, err)
			}
			if res.Errors != 0 || res.Ops == 0 || res.ClientCPUPerOp <= 0 {
				t.Errorf("%s/%s: %+v", s, lib, res)
			}
			// The Collector counts synchronously: exactly both calls of
			// every pair. The batcher may drop spans if its queue fills.
			if lib == harness.DistlockProm && res.SeenPerOp != 2 || lib == harness.DistlockOtel && (res.SeenPerOp <= 0 || res.SeenPerOp > 3) {
				t.Errorf("%s/%s: seen %.3f per pair", s, lib, res.SeenPerOp)
			}
			t.Logf("%s/%s: %.0f pairs/s, seen %.3f per pair", s, lib, res.OpsPerS, res.SeenPerOp)
		}
	}
}

// TestObserversReport: -observers adds the observed libraries to a and b
// only, after the selected ones; the report gives their ratios to the
// baseline and to plain distlock of the same run, and what a pair gained.
func TestObserversReport(t *testing.T) {
	if _, err := harness.ParseLibs("distlock,distlock-prom"); err == nil || !strings.Contains(err.Error(), "-observers") {
		t.Errorf("ParseLibs(distlock-prom): %v, want a pointer to -observers", err)
	}
	libs := []string{harness.Raw, harness.Distlock}
	rep := harness.NewReport(harness.DefaultConfig(), libs, []string{"a", "b", "c"}, 3)
	rep.AddObservers()
	if got := strings.Join(rep.LibsFor("a"), ","); got != "raw,distlock,distlock-prom,distlock-otel" {
		t.Errorf("LibsFor(a) = %s", got)
	}
	if got := strings.Join(rep.LibsFor("b"), ","); got != "raw,distlock,distlock-prom,distlock-otel" {
		t.Errorf("LibsFor(b) = %s", got)
	}
	if got := strings.Join(rep.LibsFor("c"), ","); got != "raw,distlock" {
		t.Errorf("LibsFor(c) = %s", got)
	}
	for run := range 3 {
		// Per run: raw 10,000/s, distlock 8,000/s (100 µs a pair, 40 µs
		// of client CPU); Prometheus 0.95× distlock, 2 µs of CPU more;
		// OpenTelemetry 0.8×, 15 µs more. Run 2 is slower for everyone.
		k := 1.0
		if run == 2 {
			k = 0.5
		}
		rep.Add("a", harness.Result{Lib: harness.Raw, OpsPerS: 10000 * k, ClientCPUPerOp: 30})
		rep.Add("a", harness.Result{Lib: harness.Distlock, OpsPerS: 8000 * k, ClientCPUPerOp: 40})
		rep.Add("a", harness.Result{Lib: harness.DistlockProm, OpsPerS: 7600 * k, ClientCPUPerOp: 42, SeenPerOp: 2})
		rep.Add("a", harness.Result{Lib: harness.DistlockOtel, OpsPerS: 6400 * k, ClientCPUPerOp: 55, SeenPerOp: 3})
	}
	md := rep.Markdown()
	reportHas(t, md,
		"#### Observers: what metrics and traces cost",
		"| (a) 1 goroutine, new key per acquire+release | distlock | 8,000/s (4,000/s – 8,000/s) | 0.80× | – | 125.0 µs | – | 40.0 µs | – | – | 0 |",
		"| (a) 1 goroutine, new key per acquire+release | distlock + Prometheus | 7,600/s (3,800/s – 7,600/s) | 0.76× | 0.95× | 131.6 µs | +6.6 µs | 42.0 µs | +2.0 µs | 2.00 | 0 |",
		"| (a) 1 goroutine, new key per acquire+release | distlock + OpenTelemetry | 6,400/s (3,200/s – 6,400/s) | 0.64× | 0.80× | 156.2 µs | +31.2 µs | 55.0 µs | +15.0 µs | 3.00 | 0 |",
		"| distlock + OpenTelemetry | 6,400/s |", // a row of the per-scenario table
	)
	// Only the selected libraries are columns of the summary.
	if strings.Contains(md, "| scenario | metric: median over runs (in brackets: median of the per-run ratios to the baseline) | raw go-redis (spin) | distlock | distlock +") {
		t.Errorf("observed libraries in the summary:\n%s", md)
	}
	if panels := rep.ChartPanels(); len(panels) != 1 || len(panels[0].Bars) != 4 {
		t.Errorf("chart panels %+v, want (a) with 4 bars", panels)
	}
}
