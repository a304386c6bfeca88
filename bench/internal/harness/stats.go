package harness

import (
	"math"
	"slices"
	"time"
)

// Jain is Jain's fairness index of per-worker counts: (Σx)² / (n·Σx²).
// It is 1 when every worker got the same share and 1/n when one got all.
// It is 0 for no workers or no acquisitions.
func Jain(counts []int64) float64 {
	var sum, sq float64
	for _, c := range counts {
		x := float64(c)
		sum += x
		sq += x * x
	}
	if len(counts) == 0 || sq == 0 {
		return 0
	}
	return sum * sum / (float64(len(counts)) * sq)
}

// Median of xs (the mean of the two middle values for an even count); NaN
// for none.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// Percentile of ds, nearest rank (p in [0, 100]).
func Percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	rank = min(max(rank, 1), len(s))
	return s[rank-1]
}

// Sum of counts.
func Sum(counts []int64) int64 {
	var t int64
	for _, c := range counts {
		t += c
	}
	return t
}

// Min is the smallest of xs; NaN for none, or if one is NaN.
func Min(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	lo := math.Inf(1)
	for _, x := range xs {
		lo = math.Min(lo, x)
	}
	return lo
}

// Max is the largest of xs; NaN for none, or if one is NaN.
func Max(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	hi := math.Inf(-1)
	for _, x := range xs {
		hi = math.Max(hi, x)
	}
	return hi
}
