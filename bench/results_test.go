package bench_test

import (
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/distlock/distlock/bench/internal/harness"
)

// TestResults checks the per-run figures of sqlbench and etcdbench:
// medians, the median of per-run ratios, the largest value, the spread
// over runs, and the formats.
func TestResults(t *testing.T) {
	r := harness.NewResults()
	for i, v := range []float64{10, 20, 30} {
		r.Add("a", "base", "ops", v)
		r.Add("a", "lib", "ops", v*float64(i+1))
		r.Add("a", "lib", "same", 7)
	}
	if q := r.Ratio("a", "lib", "base", "ops"); q != 2 {
		t.Errorf("ratio %v, want 2", q)
	}
	if m := r.Med("a", "lib", "ops"); m != 40 {
		t.Errorf("median %v, want 40", m)
	}
	if m := r.Max("a", "lib", "ops"); m != 90 {
		t.Errorf("max %v, want 90", m)
	}
	if !math.IsNaN(r.Med("a", "none", "ops")) || !math.IsNaN(r.Max("a", "none", "ops")) {
		t.Error("a median or a max of nothing")
	}
	if s := r.Spread("a", "lib", "ops", harness.Num); s != " (10.0–90.0)" {
		t.Errorf("spread %q", s)
	}
	if s := r.Spread("a", "lib", "same", harness.Num); s != "" {
		t.Errorf("spread of equal runs %q, want none", s)
	}
	r.EqualSpread = true
	if s := r.Spread("a", "lib", "same", harness.Num); s != " (7.00–7.00)" {
		t.Errorf("spread of equal runs with EqualSpread %q", s)
	}
	for _, c := range []struct {
		f    func(float64) string
		v    float64
		want string
	}{
		{harness.Num, 12345.4, "12,345"},
		{harness.Num, math.NaN(), "—"},
		{harness.Count, 1234567, "1,234,567"},
		{harness.Count, 2.5, "2.5"},
		{harness.Ms, 1234, "1.23 s"},
		{harness.Ms, 0.5, "0.50 ms"},
		{harness.RatioStr, 0.05, "0.050×"},
		{harness.RatioStr, math.Inf(1), "—"},
	} {
		if got := c.f(c.v); got != c.want {
			t.Errorf("format of %v: %q, want %q", c.v, got, c.want)
		}
	}
}

// TestSpliceMarked checks that a report replaces what stands between its
// markers, and is appended with them to a file without them.
func TestSpliceMarked(t *testing.T) {
	f := filepath.Join(t.TempDir(), "x.md")
	_ = os.WriteFile(f, []byte("head\n<!-- xbench:begin -->\nold\n<!-- xbench:end -->\ntail\n"), 0o644)
	if err := harness.SpliceMarked(f, "xbench", "new\n"); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(f); string(b) != "head\n<!-- xbench:begin -->\nnew\n<!-- xbench:end -->\ntail\n" {
		t.Errorf("spliced: %q", b)
	}
	g := filepath.Join(t.TempDir(), "y.md")
	if err := harness.SpliceMarked(g, "xbench", "new\n"); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(g); string(b) != "\n<!-- xbench:begin -->\nnew\n<!-- xbench:end -->\n" {
		t.Errorf("appended: %q", b)
	}
}
