package harness

import "math"

// Results collect the figures of the runs of sqlbench and etcdbench:
// scenario → library → metric → one value per run (NaN where a run did
// not measure it). lockbench keeps whole Results in a Report instead.
type Results struct {
	// EqualSpread makes Spread show the spread of runs that all gave the
	// same value, " (x–x)", rather than nothing.
	EqualSpread bool
	vals        map[string]map[string]map[string][]float64
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
	return Median(r.Values(scen, lib, metric))
}

// Max is the largest value over runs (NaN for none).
func (r *Results) Max(scen, lib, metric string) float64 {
	return Max(r.Values(scen, lib, metric))
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
	return Median(q)
}

// Spread is " (min–max)" of the runs, formatted by f: "" for fewer than
// 2 runs, or for runs that all gave the same value unless EqualSpread.
func (r *Results) Spread(scen, lib, metric string, f func(float64) string) string {
	vs := r.Values(scen, lib, metric)
	if len(vs) < 2 {
		return ""
	}
	lo, hi := Min(vs), Max(vs)
	if lo == hi && !r.EqualSpread {
		return ""
	}
	return " (" + f(lo) + "–" + f(hi) + ")"
}
