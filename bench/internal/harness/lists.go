package harness

import (
	"slices"
	"strings"
)

// SplitList splits a comma-separated flag value, such as "a, b,c", into
// its items, trimmed, leaving out empty ones.
func SplitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// HasAny reports whether list holds any of items.
func HasAny(list []string, items ...string) bool {
	return slices.ContainsFunc(list, func(s string) bool { return slices.Contains(items, s) })
}

// Rotated is xs rotated left by n, the order of run n of a bench whose
// libraries take turns being first: xs[n%len], xs[(n+1)%len], ...
func Rotated[T any](xs []T, n int) []T {
	out := make([]T, 0, len(xs))
	for k := range xs {
		out = append(out, xs[(n+k)%len(xs)])
	}
	return out
}
