package harness

import (
	"fmt"
	"math"
	"strings"
)

// The formats of the figures of sqlbench's and etcdbench's reports: "—"
// for NaN (no value).

// Num formats a rate or a count: 12,345, 12.3 or 1.23.
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

// Ms formats milliseconds: 1.23 s, 123 ms, 12 ms, 1.2 ms or 0.12 ms.
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

// RatioStr formats a ratio: 12×, 1.23× or 0.012× ("—" for an infinite
// one too).
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

// commas writes n with a comma between groups of three digits.
func commas(n int64) string {
	if n < 0 {
		return "-" + commas(-n)
	}
	return group(fmt.Sprint(n))
}

// group puts a comma between groups of three of digits, from the right.
func group(digits string) string {
	var b strings.Builder
	for i, c := range digits {
		if i > 0 && (len(digits)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}
