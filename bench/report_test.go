package bench_test

import (
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock/bench/internal/harness"
)

// TestReportStatesItsRun checks that the generated block says what
// produced it, so that the prose around it need not repeat the figures:
// the exact command, the number of runs, how long it took, and which
// ratios are medians of per-run ratios and which ratios of medians.
func TestReportStatesItsRun(t *testing.T) {
	libs := []string{harness.Distlock, harness.Rueidislock}
	rep := harness.NewReport(harness.DefaultConfig(), libs, []string{"a", "d", "f"}, 7)
	rep.Command = "go run ./cmd/lockbench -runs 7 -out ../docs/benchmarks.md"
	rep.Took = 3*time.Minute + 35*time.Second + 400*time.Millisecond
	for run := range 7 {
		rep.Add("a", harness.Result{Lib: harness.Raw, OpsPerS: 1000})
		rep.Add("a", harness.Result{Lib: harness.Distlock, OpsPerS: float64(500 + 100*run)})
		rep.Add("a", harness.Result{Lib: harness.Rueidislock, OpsPerS: 900})
		for _, l := range append([]string{harness.Raw}, libs...) {
			rep.Add("d", harness.Result{Lib: l, Changes: 1000, OpsPerS: 1000, Fairness: 1})
		}
	}
	rep.Scale = []harness.ScaleResult{{Locks: 100, HeapPerLock: 600, WindowSecs: 1, Ticks: 2, Renewed: 100, RoundTrips: 2}}
	rep.Waiters = []harness.WaitersResult{{PubSubConns: 1}}
	md := rep.Markdown()
	reportHas(t, md,
		"Generated in 3 min 35 s (7 runs of scenarios a and d, 1 run of f) by this command, run in `bench/`:\n\n```sh\ngo run ./cmd/lockbench -runs 7 -out ../docs/benchmarks.md\n```\n",
		"is the median of 7 runs",
		"| scenario | metric: median over runs (in brackets: median of the per-run ratios to the baseline) |",
		"| target | measured: medians over runs; a ratio is the median of the per-run ratios unless it says \"ratio of the medians\" | verdict |",
		"(rueidislock): 1.00× (ratio of the medians) |",
		"| (a) distlock ≥ 0.95× raw baseline | 0.80× |",
	)

	one := harness.NewReport(harness.DefaultConfig(), libs, []string{"e"}, 1)
	one.Command = "go run ./cmd/lockbench -scenarios e -runs 1"
	one.Took = 42 * time.Second
	one.Add("e", harness.Result{Lib: harness.Raw, P50: time.Millisecond})
	if md := one.Markdown(); !strings.HasPrefix(md, "Generated in 42 s (1 run of scenario e) by this command") {
		t.Errorf("report of one run begins:\n%s", md[:min(len(md), 200)])
	}
}

// reportHas fails t for each of wants that md lacks.
func reportHas(t *testing.T, md string, wants ...string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
}
