package bench_test

import (
	"bytes"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock/bench/internal/harness"
	"github.com/distlock/distlock/redistest"
)

func TestJain(t *testing.T) {
	for _, c := range []struct {
		in   []int64
		want float64
	}{
		{[]int64{5, 5, 5, 5}, 1},
		{[]int64{8, 0, 0, 0}, 0.25},
		{[]int64{1, 3}, 0.8},
		{nil, 0},
		{[]int64{0, 0}, 0},
	} {
		if got := harness.Jain(c.in); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("Jain(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}

func TestMedianPercentile(t *testing.T) {
	if got := harness.Median([]float64{3, 1, 2}); got != 2 {
		t.Errorf("median = %v", got)
	}
	if got := harness.Median([]float64{4, 1, 2, 3}); got != 2.5 {
		t.Errorf("median = %v", got)
	}
	if !math.IsNaN(harness.Median(nil)) {
		t.Error("median of nothing is not NaN")
	}
	ds := []time.Duration{5, 1, 4, 2, 3}
	if got := harness.Percentile(ds, 50); got != 3 {
		t.Errorf("p50 = %v", got)
	}
	if got := harness.Percentile(ds, 90); got != 5 {
		t.Errorf("p90 = %v", got)
	}
}

func TestSharedGuard(t *testing.T) {
	g, err := harness.NewSharedGuard()
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	other, err := harness.OpenGuard(g.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	g.Enter(1)
	g.Exit()
	other.Enter(2) // an owner change, seen through the other mapping
	g.Enter(1)     // a violation: 2 is inside
	other.Exit()
	g.Exit()
	if g.OwnerChanges() != 2 || other.Violations() != 1 || other.Entries() != 3 {
		t.Errorf("changes %d violations %d entries %d, want 2 1 3", g.OwnerChanges(), other.Violations(), other.Entries())
	}
}

func TestCommandStatsDelta(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-server")
	}
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := t.Context()
	before, err := harness.ReadCommandStats(ctx, rdb)
	if err != nil {
		t.Fatal(err)
	}
	rdb.Eval(ctx, "redis.call('SET', KEYS[1], '1'); return redis.call('GET', KEYS[1])", []string{"k"})
	rdb.Set(ctx, "x", "1", 0)
	after, err := harness.ReadCommandStats(ctx, rdb)
	if err != nil {
		t.Fatal(err)
	}
	d := after.Delta(before)
	// eval + the two commands it ran + set; INFO and connection set-up
	// are not counted.
	if d["eval"] != 1 || d["set"] != 2 || d["get"] != 1 || d.Total() != 4 {
		t.Errorf("delta = %v", d)
	}
}

func TestChartAndReport(t *testing.T) {
	cfg := harness.DefaultConfig()
	rep := harness.NewReport(cfg, harness.AllLibs, []string{"a", "e"}, 2)
	for run := range 2 {
		for i, lib := range harness.AllLibs {
			rep.Add("a", harness.Result{Lib: lib, OpsPerS: float64(1000 * (i + 1 + run))})
			rep.Add("e", harness.Result{Lib: lib, P50: time.Duration(100*(i+1)) * time.Microsecond, Rounds: 3})
		}
	}
	md := rep.Markdown()
	for _, want := range []string{"| (a) 1 goroutine", "(1.00×)", "hand-over p50", "#### Targets", "(a) distlock ≥ 0.95× raw baseline | 1.75× |"} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	groups := rep.ChartGroups()
	if len(groups) != 2 || groups[1].Ratios["distlock"] != 0.5 {
		t.Fatalf("groups = %+v", groups)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "c.png")
	if err := harness.DrawChart(path, "title", "sub", harness.AllLibs, groups); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if img.Bounds().Dx() < 700 || img.Bounds().Dy() < 400 {
		t.Errorf("chart is %v", img.Bounds())
	}

	doc := filepath.Join(dir, "doc.md")
	os.WriteFile(doc, []byte("intro\n<!-- lockbench:begin -->\nold\n<!-- lockbench:end -->\noutro\n"), 0o644)
	if err := harness.Splice(doc, "new\n"); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(doc)
	if string(got) != "intro\n<!-- lockbench:begin -->\nnew\n<!-- lockbench:end -->\noutro\n" {
		t.Errorf("spliced:\n%s", got)
	}
}

func TestParseFlags(t *testing.T) {
	if s, err := harness.ParseScenarios("a, F"); err != nil || len(s) != 2 || s[1] != "f" {
		t.Errorf("ParseScenarios = %v %v", s, err)
	}
	if _, err := harness.ParseScenarios("g"); err == nil {
		t.Error("scenario g accepted")
	}
	if l, err := harness.ParseLibs("distlock"); err != nil || len(l) != 2 || l[0] != "raw" {
		t.Errorf("ParseLibs = %v %v", l, err)
	}
}

// TestScenariosSmoke runs every timed scenario briefly for distlock and
// the baseline, with worker processes, and checks mutual exclusion.
func TestScenariosSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-server and worker processes")
	}
	srv := redistest.Start(t)
	cfg := harness.DefaultConfig()
	cfg.Duration = 200 * time.Millisecond
	cfg.Rounds = 3
	cfg.CountRounds = 1
	cfg.Parallel = 4
	cfg.InProc = 4
	cfg.Procs = 2
	cfg.ProcWorkers = 2
	cfg.HandoverPause = 2 * time.Millisecond
	for _, s := range []string{"a", "b", "c", "d", "e"} {
		for _, lib := range []string{harness.Raw, harness.Distlock} {
			if err := harness.FlushAll(srv.Addr()); err != nil {
				t.Fatal(err)
			}
			res, err := harness.Run(s, lib, srv.Addr(), cfg)
			if err != nil {
				t.Fatalf("%s/%s: %v", s, lib, err)
			}
			if res.Viol != 0 || res.Errors != 0 {
				t.Errorf("%s/%s: %d violations, %d errors", s, lib, res.Viol, res.Errors)
			}
			if s == "e" {
				if res.Rounds != 3 || res.P50 <= 0 || res.TopPerRound <= 0 {
					t.Errorf("%s/%s: %+v", s, lib, res)
				}
			} else if res.Ops == 0 {
				t.Errorf("%s/%s: no acquisitions", s, lib)
			}
		}
	}
}

// TestScaleSmoke runs scenario f small.
func TestScaleSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-server and worker processes")
	}
	srv := redistest.Start(t)
	sc := harness.ScaleConfig{Locks: 500, TTL: 1500 * time.Millisecond, Hold: 600 * time.Millisecond, AcquireConc: 8, Waiters: 100, WaitKeys: 10}
	sr, wr, err := harness.RunScale(srv.Addr(), sc)
	if err != nil {
		t.Fatal(err)
	}
	if sr.Ticks == 0 || sr.Renewed == 0 || sr.RoundTrips == 0 || sr.Lost != 0 {
		t.Errorf("scale: %+v", sr)
	}
	if wr.PubSubConns != 1 || wr.Channels != 10 || wr.Acquired != 100 || wr.Violations != 0 || wr.Errors != 0 {
		t.Errorf("waiters: %+v", wr)
	}
}
