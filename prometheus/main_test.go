package prometheus_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/distlock/distlock"
	distlockprom "github.com/distlock/distlock/prometheus"
	"github.com/distlock/distlock/redisstore"
	"github.com/distlock/distlock/redistest"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// A rig is a Collector registered with a registry of its own, served over
// HTTP by promhttp, and a redis-server for the Clients it observes.
type rig struct {
	srv  *redistest.Server
	col  *distlockprom.Collector
	http *httptest.Server
}

// newRig starts a rig, stopped when the test ends.
func newRig(t *testing.T, opts ...distlockprom.Option) *rig {
	t.Helper()
	r := &rig{srv: redistest.Start(t), col: distlockprom.New(opts...)}
	reg := prometheus.NewRegistry()
	reg.MustRegister(r.col)
	r.http = httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	t.Cleanup(r.http.Close)
	return r
}

// client returns a Client on the rig's server, closed when the test ends,
// observed by the rig's Collector (then by opts' observers) if observed.
func (r *rig) client(t *testing.T, observed bool, opts ...distlock.Option) *distlock.Client {
	t.Helper()
	opts = append([]distlock.Option{distlock.WithLogger(nil)}, opts...)
	if observed {
		opts = append([]distlock.Option{distlock.WithObserver(r.col)}, opts...)
	}
	c := distlock.New(redisstore.New(r.srv.Client(t)), opts...)
	t.Cleanup(func() { c.Close() })
	return c
}

// scrape fetches the rig's metrics as Prometheus does, and parses them.
func (r *rig) scrape(t *testing.T) metrics {
	t.Helper()
	resp, err := r.http.Client().Get(r.http.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: %s", resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	return fams
}

// metrics is a scrape, by metric name.
type metrics map[string]*dto.MetricFamily

// value sums the samples of the metric name whose labels include the
// pairs given (label, value, label, value...): the values of counters and
// gauges, the counts of histograms. It is 0 when there is none.
func (m metrics) value(name string, pairs ...string) float64 {
	var sum float64
	for _, s := range m.samples(name, pairs...) {
		switch {
		case s.Counter != nil:
			sum += s.Counter.GetValue()
		case s.Gauge != nil:
			sum += s.Gauge.GetValue()
		case s.Histogram != nil:
			sum += float64(s.Histogram.GetSampleCount())
		}
	}
	return sum
}

// samples returns the samples of the metric name whose labels include the
// pairs given.
func (m metrics) samples(name string, pairs ...string) []*dto.Metric {
	f := m[name]
	if f == nil {
		return nil
	}
	var out []*dto.Metric
next:
	for _, s := range f.Metric {
		for i := 0; i+1 < len(pairs); i += 2 {
			if label(s, pairs[i]) != pairs[i+1] {
				continue next
			}
		}
		out = append(out, s)
	}
	return out
}

// label returns the value of s's label name, "" if it has none.
func label(s *dto.Metric, name string) string {
	for _, l := range s.Label {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// observer is a distlock.Observer that passes on the events it sees.
// Installed after the Collector, it sees each event once the Collector
// has counted it.
type observer chan distlock.Event

func (o observer) StartCall(ctx context.Context, _ distlock.Call) context.Context { return ctx }
func (o observer) EndCall(context.Context, distlock.Call, distlock.CallResult)    {}
func (o observer) Event(ev distlock.Event) {
	select {
	case o <- ev:
	default: // the test does not wait for this many
	}
}

// await waits for an event of kind about the lock name.
func (o observer) await(t *testing.T, kind distlock.EventKind, name string) distlock.Event {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case ev := <-o:
			if ev.Kind == kind && ev.Name == name {
				return ev
			}
		case <-timeout:
			t.Fatalf("no event %v of %q within 10s", kind, name)
		}
	}
}

// testCtx is a context that ends with the test, bounded so that a broken
// wake-up fails the test instead of hanging it.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	t.Cleanup(cancel)
	return ctx
}
