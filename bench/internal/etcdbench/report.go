package etcdbench

import (
	"fmt"
	"math"

	"github.com/distlock/distlock/bench/internal/harness"
)

// Results collect per-run figures (harness.Results, whose Spread here
// also shows runs that all gave the same value), and the libraries that
// the store does not support.
type Results struct {
	*harness.Results
	Unsupported map[string]string // library → why
}

// NewResults returns empty Results.
func NewResults() *Results {
	r := &Results{Results: harness.NewResults(), Unsupported: map[string]string{}}
	r.EqualSpread = true
	return r
}

// Ms formats milliseconds as harness.Ms does, but in ms from a second on
// too ("1234 ms").
func Ms(v float64) string {
	if v >= 1000 {
		return fmt.Sprintf("%.0f ms", v)
	}
	return harness.Ms(v)
}

// RatioStr formats a ratio as harness.RatioStr does, but an infinite one
// as "+Inf×" or "-Inf×".
func RatioStr(v float64) string {
	if math.IsInf(v, 0) {
		return fmt.Sprintf("%.0f×", v)
	}
	return harness.RatioStr(v)
}

// Splice writes md into file between "<!-- etcdbench:begin -->" and
// "<!-- etcdbench:end -->" (appending both markers and md if absent),
// keeping the rest of the file.
func Splice(file, md string) error { return harness.SpliceMarked(file, "etcdbench", md) }
