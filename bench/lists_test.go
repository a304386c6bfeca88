package bench_test

import (
	"slices"
	"testing"

	"github.com/distlock/distlock/bench/internal/harness"
)

// TestLists checks the flag lists of sqlbench and etcdbench and the
// order of the libraries in each run.
func TestLists(t *testing.T) {
	if got := harness.SplitList(" a, b,,c ,"); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Errorf("SplitList = %q", got)
	}
	if harness.SplitList("") != nil {
		t.Error("SplitList of nothing")
	}
	if !harness.HasAny([]string{"a", "c"}, "b", "c") || harness.HasAny([]string{"a"}, "b") {
		t.Error("HasAny")
	}
	xs := []string{"x", "y", "z"}
	for n, want := range [][]string{{"x", "y", "z"}, {"y", "z", "x"}, {"z", "x", "y"}, {"x", "y", "z"}} {
		if got := harness.Rotated(xs, n); !slices.Equal(got, want) {
			t.Errorf("Rotated(%q, %d) = %q, want %q", xs, n, got, want)
		}
	}
	if len(harness.Rotated([]string(nil), 1)) != 0 {
		t.Error("Rotated of nothing")
	}
}
