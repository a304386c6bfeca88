package harness

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/distlock/distlock"
	distlockotel "github.com/distlock/distlock/otel"
	distlockprom "github.com/distlock/distlock/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// The observed libraries: distlock's Mutex, as Distlock, with an observer
// installed, so that what observing costs is measured like everything
// else (lockbench -observers: scenarios a and b, beside plain distlock).
const (
	// DistlockProm has the Prometheus Collector (prometheus.New())
	// registered on a fresh prometheus.Registry, never scraped during a
	// run.
	DistlockProm = "distlock-prom"
	// DistlockOtel has the OpenTelemetry Observer (otel.New()) on an SDK
	// TracerProvider that samples every span (AlwaysSample) and batches
	// them (the SDK's BatchSpanProcessor, defaults) to an exporter that
	// counts and drops them, and on an SDK MeterProvider with a
	// ManualReader, never collected during a run.
	DistlockOtel = "distlock-otel"
)

// ObservedLibs are the observed libraries, in report order.
var ObservedLibs = []string{DistlockProm, DistlockOtel}

// ObservedScenarios are the scenarios lockbench -observers adds
// ObservedLibs to: one goroutine on new keys, and Config.Parallel
// goroutines on their own keys, where a pair is cheapest and the
// observer's share of it largest.
var ObservedScenarios = []string{ScenA, ScenB}

// What an observer recorded, read with Observed.
type Seen struct {
	// Calls are the calls the observer recorded: the sum of the
	// Collector's distlock_calls_total, or the OpenTelemetry Observer's
	// spans of calls (every span but distlock.lease).
	Calls int64
	// Records is what the observer recorded per call and hold, the
	// report's "seen per acquire+release": Calls for the Collector (2 per
	// pair: Lock and Unlock), every span exported for the OpenTelemetry
	// Observer (3 per pair: distlock.lock, distlock.unlock and the hold's
	// distlock.lease). A span the batcher dropped (its queue full) is not
	// in it.
	Records int64
	// Spans counts the spans exported, by name (OpenTelemetry).
	Spans map[string]int64
	// Metrics names the metric families gathered from the registry
	// (Prometheus), or the metrics the ManualReader collected
	// (OpenTelemetry: renewals and losses only, so none for pairs that
	// end before a renewal).
	Metrics []string
}

// Observed reads what the observer of lk (a Locker of an observed
// library) has recorded so far: it flushes the span batcher, and gathers
// the registry or collects the reader, so it costs time and CPU of its
// own. ok is false for a Locker without an observer.
func Observed(lk Locker) (s Seen, ok bool, err error) {
	d, isDist := lk.(*distLocker)
	if !isDist || d.obs == nil {
		return Seen{}, false, nil
	}
	s, err = d.obs.seen()
	return s, true, err
}

// An observation is the observer of an observed library and what it
// records into.
type observation struct {
	obs   distlock.Observer
	seen  func() (Seen, error)
	close func() error
}

func newObservation(lib string) (*observation, error) {
	switch lib {
	case DistlockProm:
		return newPromObservation()
	case DistlockOtel:
		return newOtelObservation(), nil
	}
	return nil, fmt.Errorf("%q has no observer", lib)
}

func newPromObservation() (*observation, error) {
	col := distlockprom.New()
	reg := prometheus.NewRegistry()
	if err := reg.Register(col); err != nil {
		return nil, err
	}
	return &observation{
		obs: col,
		seen: func() (Seen, error) {
			mfs, err := reg.Gather()
			if err != nil {
				return Seen{}, err
			}
			var s Seen
			for _, mf := range mfs {
				s.Metrics = append(s.Metrics, mf.GetName())
				if mf.GetName() != "distlock_calls_total" {
					continue
				}
				for _, m := range mf.GetMetric() {
					s.Calls += int64(m.GetCounter().GetValue())
				}
			}
			s.Records = s.Calls
			return s, nil
		},
		close: func() error { return nil },
	}, nil
}

func newOtelObservation() *observation {
	exp := &discardExporter{spans: map[string]int64{}}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithBatcher(exp))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	return &observation{
		obs: distlockotel.New(distlockotel.WithTracerProvider(tp), distlockotel.WithMeterProvider(mp)),
		seen: func() (Seen, error) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := tp.ForceFlush(ctx); err != nil {
				return Seen{}, err
			}
			var rm metricdata.ResourceMetrics
			if err := reader.Collect(ctx, &rm); err != nil {
				return Seen{}, err
			}
			s := Seen{Spans: exp.counts()}
			for name, n := range s.Spans {
				s.Records += n
				if name != "distlock.lease" {
					s.Calls += n
				}
			}
			for _, sm := range rm.ScopeMetrics {
				for _, m := range sm.Metrics {
					s.Metrics = append(s.Metrics, m.Name)
				}
			}
			return s, nil
		},
		close: func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			return errors.Join(tp.Shutdown(ctx), mp.Shutdown(ctx))
		},
	}
}

// A discardExporter drops the spans the batcher gives it, counting them by
// name (once per batch, in the batcher's goroutine).
type discardExporter struct {
	mu    sync.Mutex
	spans map[string]int64
}

func (e *discardExporter) ExportSpans(_ context.Context, spans []sdktrace.ReadOnlySpan) error {
	e.mu.Lock()
	for _, s := range spans {
		e.spans[s.Name()]++
	}
	e.mu.Unlock()
	return nil
}

func (e *discardExporter) Shutdown(context.Context) error { return nil }

func (e *discardExporter) counts() map[string]int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return maps.Clone(e.spans)
}

// AddObservers makes the report run ObservedLibs in those of
// ObservedScenarios it has, after its libraries (lockbench -observers).
func (r *Report) AddObservers() {
	for _, s := range ObservedScenarios {
		if slices.Contains(r.Scenarios, s) {
			r.Extra[s] = append(r.Extra[s], ObservedLibs...)
		}
	}
}

var (
	mPairUsec = metric{name: "time per acquire+release (1 / rate)", get: func(r Result) float64 {
		if r.OpsPerS <= 0 {
			return math.NaN()
		}
		return 1e6 / r.OpsPerS
	}, format: fmtMicros, lowerBetter: true}
	mSeen = metric{name: "seen by the observer per acquire+release", get: func(r Result) float64 { return r.SeenPerOp }, format: fmtF(2)}
)

// DiffTo is the median over runs of lib's metric minus base's in the same
// run.
func (r *Report) DiffTo(scen, lib, base string, m metric) float64 {
	bs := r.Results[scen][base]
	var out []float64
	for i, res := range r.Results[scen][lib] {
		if i >= len(bs) {
			break
		}
		if d := m.get(res) - m.get(bs[i]); !math.IsNaN(d) {
			out = append(out, d)
		}
	}
	return Median(out)
}

// signedMicros formats a difference in µs with its sign.
func signedMicros(v float64) string {
	if math.IsNaN(v) {
		return "–"
	}
	return fmt.Sprintf("%+.1f µs", v)
}

// observersMarkdown renders what the observed libraries cost in a and b:
// a row per library beside the baseline and plain distlock, with the
// ratios to both and the time and client CPU a pair gained over plain
// distlock's, per run.
func (r *Report) observersMarkdown(b *strings.Builder) {
	var scens []string
	for _, s := range ObservedScenarios {
		if r.Results[s] != nil && HasAny(slices.Collect(maps.Keys(r.Results[s])), ObservedLibs...) {
			scens = append(scens, s)
		}
	}
	if len(scens) == 0 {
		return
	}
	w := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	w("#### Observers: what metrics and traces cost\n\n")
	w("distlock's Mutex as in the rows of distlock, with an observer installed (`-observers`): **%s**, the Prometheus Collector (`prometheus.New()`) registered on a fresh `prometheus.Registry`, not scraped during a run; **%s**, the OpenTelemetry Observer (`otel.New()`) on an SDK TracerProvider that samples every span (`AlwaysSample`) and batches them (`WithBatcher`, the SDK's defaults) to an exporter that drops them, and an SDK MeterProvider with a `ManualReader`, not collected during a run. A fresh registry and fresh providers for every run. × baseline and × distlock are the medians of the per-run ratios, \"added\" the median of the per-run differences from plain distlock; client CPU is this process's (`getrusage`), on the client core. \"Seen\" is what the observer recorded per acquire+release in the run: calls counted by the Collector (`distlock_calls_total`, 2 a pair: Lock and Unlock), spans exported by the SDK (3 a pair: `distlock.lock`, `distlock.unlock`, the hold's `distlock.lease`; fewer if the batcher dropped some).\n\n",
		LibTitle(DistlockProm), LibTitle(DistlockOtel))
	w("| scenario | library | acquire+release /s (min–max) | × baseline | × distlock | %s | added | client CPU / op | added | seen | errors |\n", mPairUsec.name)
	w("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	ratio := func(s, l, base string) string {
		if r.Results[s][base] == nil || l == base {
			return "–"
		}
		return trimRatio(r.RatioTo(s, l, base, mOps)) + "×"
	}
	added := func(s, l string, m metric) string {
		if r.Results[s][Distlock] == nil || l == Distlock || l == Raw {
			return "–"
		}
		return signedMicros(r.DiffTo(s, l, Distlock, m))
	}
	for _, s := range scens {
		for _, l := range r.LibsFor(s) {
			if r.Results[s][l] == nil || !(l == Raw || l == Distlock || slices.Contains(ObservedLibs, l)) {
				continue
			}
			seen := "–"
			if slices.Contains(ObservedLibs, l) {
				seen = mSeen.format(r.Value(s, l, mSeen))
			}
			w("| %s | %s | %s (%s) | %s | %s | %s | %s | %s | %s | %s | %s |\n", ScenarioTitle(s, r.Cfg), LibTitle(l),
				perSec(r.Value(s, l, mOps)), r.spread(s, l, mOps), ratio(s, l, Raw), ratio(s, l, Distlock),
				fmtMicros(r.Value(s, l, mPairUsec)), added(s, l, mPairUsec),
				fmtMicros(r.Value(s, l, mCliCPU)), added(s, l, mCliCPU),
				seen, fmtF(0)(r.total(s, l, mErrs)))
		}
	}
	w("\n")
}
