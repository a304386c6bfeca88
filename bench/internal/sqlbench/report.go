package sqlbench

import (
	"fmt"
	"math"
	"os"
	"strings"

	"github.com/distlock/distlock/bench/internal/harness"
)

// Results collects per-run figures: scenario → library → metric → one
// value per run.
type Results struct {
	vals map[string]map[string]map[string][]float64
}

// NewResults returns empty Results.
func NewResults() *Results {
	return &Results{vals: map[string]map[string]map[string][]float64{}}
}

// Add records one run's value of metric.
func (r *Results) Add(scen, lib, metric string, v float64) {
	if r.vals[scen] == nil {
		r.vals[scen] = map[string]map[string][]float64{}
	}
	if r.vals[scen][lib] == nil {
		r.vals[scen][lib] = map[string][]float64{}
	}
	r.vals[scen][lib][metric] = append(r.vals[scen][lib][metric], v)
}

// Values are the runs' values of metric.
func (r *Results) Values(scen, lib, metric string) []float64 {
	return r.vals[scen][lib][metric]
}

// Med is the median over runs (NaN for none).
func (r *Results) Med(scen, lib, metric string) float64 {
	return harness.Median(r.Values(scen, lib, metric))
}

// Max is the largest value over runs (NaN for none).
func (r *Results) Max(scen, lib, metric string) float64 {
	vs := r.Values(scen, lib, metric)
	if len(vs) == 0 {
		return math.NaN()
	}
	m := math.Inf(-1)
	for _, v := range vs {
		m = math.Max(m, v)
	}
	return m
}

// Ratio is the median over runs of lib's value ÷ ref's in the same run
// (runs are paired by index: both libraries ran in every run).
func (r *Results) Ratio(scen, lib, ref, metric string) float64 {
	a, b := r.Values(scen, lib, metric), r.Values(scen, ref, metric)
	var q []float64
	for i := range min(len(a), len(b)) {
		if b[i] != 0 && !math.IsNaN(a[i]) && !math.IsNaN(b[i]) {
			q = append(q, a[i]/b[i])
		}
	}
	return harness.Median(q)
}

// Spread is " (min–max)" of the runs ("" for fewer than 2, or all equal).
func (r *Results) Spread(scen, lib, metric string, f func(float64) string) string {
	vs := r.Values(scen, lib, metric)
	if len(vs) < 2 {
		return ""
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, v := range vs {
		lo, hi = math.Min(lo, v), math.Max(hi, v)
	}
	if lo == hi {
		return ""
	}
	return " (" + f(lo) + "–" + f(hi) + ")"
}

// Num formats a rate or a count.
func Num(v float64) string {
	switch {
	case math.IsNaN(v):
		return "—"
	case v >= 100:
		return commas(int64(math.Round(v)))
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

// Count formats a count (a median of counts may end in .5).
func Count(v float64) string {
	if math.IsNaN(v) {
		return "—"
	}
	if v == math.Trunc(v) {
		return commas(int64(v))
	}
	return fmt.Sprintf("%.1f", v)
}

// Ms formats milliseconds.
func Ms(v float64) string {
	switch {
	case math.IsNaN(v):
		return "—"
	case v >= 1000:
		return fmt.Sprintf("%.2f s", v/1000)
	case v >= 10:
		return fmt.Sprintf("%.0f ms", v)
	case v >= 1:
		return fmt.Sprintf("%.1f ms", v)
	default:
		return fmt.Sprintf("%.2f ms", v)
	}
}

// Fix3 formats with 3 decimals.
func Fix3(v float64) string {
	if math.IsNaN(v) {
		return "—"
	}
	return fmt.Sprintf("%.3f", v)
}

// RatioStr formats a ratio.
func RatioStr(v float64) string {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return "—"
	case v >= 10:
		return fmt.Sprintf("%.0f×", v)
	case v >= 0.1:
		return fmt.Sprintf("%.2f×", v)
	default:
		return fmt.Sprintf("%.3f×", v)
	}
}

func commas(n int64) string {
	if n < 0 {
		return "-" + commas(-n)
	}
	s := fmt.Sprint(n)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// Splice writes md into file between "<!-- sqlbench:begin -->" and
// "<!-- sqlbench:end -->" (appending both markers and md if absent),
// keeping the rest of the file.
func Splice(file, md string) error {
	const begin, end = "<!-- sqlbench:begin -->", "<!-- sqlbench:end -->"
	b, err := os.ReadFile(file)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	s := string(b)
	block := begin + "\n" + md + end
	i, j := strings.Index(s, begin), strings.Index(s, end)
	if i >= 0 && j > i {
		s = s[:i] + block + s[j+len(end):]
	} else {
		s += "\n" + block + "\n"
	}
	return os.WriteFile(file, []byte(s), 0o644)
}
