package prometheus_test

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	distlockprom "github.com/distlock/distlock/prometheus"
	"github.com/prometheus/client_golang/prometheus"
)

// spec is the metrics of the spec (notes/observer-spec.md), with their
// labels in order: the dashboard and users' alerts depend on them.
var spec = map[string][]string{
	"distlock_acquire_duration_seconds": {"kind", "store", "outcome"},
	"distlock_calls_total":              {"op", "kind", "store", "outcome"},
	"distlock_hold_duration_seconds":    {"kind", "store"},
	"distlock_renewals_total":           {"kind", "store", "result"},
	"distlock_renewal_duration_seconds": {"store"},
	"distlock_losses_total":             {"kind", "store", "reason"},
	"distlock_held_locks":               {"kind", "store"},
	"distlock_waiters":                  {"kind", "store"},
}

var descRE = regexp.MustCompile(`fqName: "([^"]*)", help: "((?:[^"\\]|\\.)*)".*variableLabels: \{([^}]*)\}`)

// described returns the metrics that col describes, with their labels in
// order, and fails the test if one has no help.
func described(t *testing.T, col prometheus.Collector) map[string][]string {
	t.Helper()
	ch := make(chan *prometheus.Desc)
	go func() {
		col.Describe(ch)
		close(ch)
	}()
	out := map[string][]string{}
	for d := range ch {
		m := descRE.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("cannot read %v", d)
		}
		if m[2] == "" {
			t.Errorf("%s has no help", m[1])
		}
		out[m[1]] = strings.Split(m[3], ",")
	}
	return out
}

// TestDescribe: the Collector describes exactly the metrics of the spec,
// labels in order, with the label name last with WithLockNames, and names
// them after WithNamespace.
func TestDescribe(t *testing.T) {
	got := described(t, distlockprom.New())
	if len(got) != len(spec) {
		t.Errorf("%d metrics, want %d: %v", len(got), len(spec), got)
	}
	for name, labels := range spec {
		if !slices.Equal(got[name], labels) {
			t.Errorf("%s: labels %v, want %v", name, got[name], labels)
		}
	}

	got = described(t, distlockprom.New(distlockprom.WithLockNames("a"), distlockprom.WithNamespace("locks")))
	for name, labels := range spec {
		name = "locks" + strings.TrimPrefix(name, "distlock")
		if want := append(slices.Clone(labels), "name"); !slices.Equal(got[name], want) {
			t.Errorf("%s: labels %v, want %v", name, got[name], want)
		}
	}
}

// TestRegister: two Collectors cannot share a registry (their metrics
// collide), two of other namespaces can, and nothing registers itself.
func TestRegister(t *testing.T) {
	reg := prometheus.NewRegistry()
	if err := reg.Register(distlockprom.New()); err != nil {
		t.Fatal(err)
	}
	if err := reg.Register(distlockprom.New()); err == nil {
		t.Error("a second Collector of the same namespace registered")
	}
	if err := reg.Register(distlockprom.New(distlockprom.WithNamespace("other"))); err != nil {
		t.Error(err)
	}
	// Were the metrics registered by the package itself, this would fail.
	col := distlockprom.New()
	if err := prometheus.DefaultRegisterer.Register(col); err != nil {
		t.Errorf("the default registry: %v", err)
	}
	prometheus.DefaultRegisterer.Unregister(col)
}
