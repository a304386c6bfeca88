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
	if g.MaxHolders() != 2 || g.Holders() != 0 || g.Emptied().IsZero() {
		t.Errorf("max holders %d, holders %d, emptied %v; want 2, 0, a time", g.MaxHolders(), g.Holders(), g.Emptied())
	}
}

// TestSharedGuardReaders: readers share the guard with each other, never
// with an exclusive holder, whichever comes first.
func TestSharedGuardReaders(t *testing.T) {
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
	g.EnterShared()
	other.EnterShared()
	g.EnterShared() // three readers: no violation
	if v, n := g.Violations(), other.Holders(); v != 0 || n != 3 {
		t.Fatalf("three readers: %d violations, %d holders", v, n)
	}
	before := time.Now()
	g.ExitShared()
	other.ExitShared()
	if !g.Emptied().IsZero() {
		t.Error("emptied while a reader is inside")
	}
	g.ExitShared()
	if e := other.Emptied(); e.Before(before.Add(-time.Second)) || e.After(time.Now().Add(time.Second)) {
		t.Errorf("emptied at %v, want about %v", e, before)
	}
	other.Enter(1) // a writer alone: fine
	other.Exit()
	if g.Violations() != 0 {
		t.Fatalf("%d violations, want 0", g.Violations())
	}
	g.EnterShared()
	other.Enter(1)  // a writer with a reader inside
	g.EnterShared() // a reader with the writer inside
	other.Exit()
	g.ExitShared()
	g.ExitShared()
	if g.Violations() != 2 || g.MaxHolders() != 3 || g.Entries() != 7 || g.Holders() != 0 {
		t.Errorf("violations %d, max holders %d, entries %d, holders %d; want 2, 3, 7, 0", g.Violations(), g.MaxHolders(), g.Entries(), g.Holders())
	}
}

// TestSharedGuardPermits: a semaphore's holders add the permits they hold;
// an entry that takes them above the capacity is a violation.
func TestSharedGuardPermits(t *testing.T) {
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
	g.EnterPermits(2, 4)
	other.EnterPermits(1, 4)
	g.EnterPermits(1, 4) // 4 of 4: no violation
	if v, n := other.Violations(), other.Permits(); v != 0 || n != 4 {
		t.Fatalf("4 of 4 permits: %d violations, %d inside", v, n)
	}
	other.EnterPermits(2, 4) // 6 of 4
	other.ExitPermits(2)
	g.ExitPermits(2)
	other.EnterPermits(2, 4) // 4 of 4 again
	other.ExitPermits(2)
	other.ExitPermits(1)
	if !g.Emptied().IsZero() {
		t.Error("emptied while a permit is held")
	}
	g.ExitPermits(1)
	if g.Violations() != 1 || g.MaxPermits() != 6 || g.Permits() != 0 || g.Entries() != 5 || g.Emptied().IsZero() {
		t.Errorf("violations %d, max permits %d, permits %d, entries %d, emptied %v; want 1, 6, 0, 5, a time",
			g.Violations(), g.MaxPermits(), g.Permits(), g.Entries(), g.Emptied())
	}
	if g.Holders() != 0 || g.MaxHolders() != 0 {
		t.Errorf("permits counted as holders: %d, most %d", g.Holders(), g.MaxHolders())
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
	reportHas(t, md, "| (a) 1 goroutine", "(1.00×)", "hand-over p50", "#### Targets", "(a) distlock ≥ 0.95× raw baseline | 1.75× |",
		"| (a) no Go peer faster than distlock | distlock 1.75×, rueidislock 5.50× of baseline | **missed** |",
		"| distlock FairMutex |", "| (e) FairMutex hand-over p50 ≤ 1.0× spinning SET NX | 400 µs vs 100 µs: 4.00×", "| (e) FairMutex ≤ 10 Redis commands per hand-over |")
	panels := rep.ChartPanels()
	if len(panels) != 2 || !panels[1].LowerBetter || panels[0].LowerBetter {
		t.Fatalf("panels = %+v", panels)
	}
	if b := panels[1].Bars; len(b) != len(harness.AllLibs) || b[0].Lib != harness.Raw || b[1].Lib != harness.Distlock ||
		b[1].Ratio != 2 || b[1].Text != "200 µs" {
		t.Fatalf("hand-over panel bars = %+v", b)
	}

	// The read-write lock's scenarios have tables of their own, and no bar
	// in the chart.
	rw := harness.NewReport(cfg, harness.AllLibs, []string{"b", "g", "h"}, 2)
	for run := range 2 {
		rw.Add("b", harness.Result{Lib: harness.Raw, OpsPerS: 1000})
		for i, lib := range harness.RateLibs {
			rw.Add("g", harness.Result{Lib: lib, OpsPerS: float64(1000 * (5 - i)), ParOpsPerS: float64(8000 * (5 - i))})
		}
		ms := time.Millisecond
		rw.Add("h", harness.Result{Lib: harness.DistlockRW, OpsPerS: 6000, Fairness: 1, Stream: harness.StreamResult{
			Writes: 2, WriterWaits: []time.Duration{2 * ms, 4 * ms}, WriterP50: 2 * ms, WriterP99: 4 * ms, AmidReaders: 2, MaxHolders: 12,
			Queued: 2, ToQueued: ms, Drain: ms, Handoff: 300 * time.Microsecond, ServerBusy: 0.5}})
		rw.Add("h", harness.Result{Lib: harness.Distlock, OpsPerS: 600, Fairness: 1, Viol: int64(run), Stream: harness.StreamResult{
			Writes: 1, WriterWaits: []time.Duration{8 * ms}, WriterP50: 8 * ms, WriterP99: 8 * ms, MaxHolders: 1}})
	}
	md = rw.Markdown()
	reportHas(t, md,
		"#### (g) RWMutex rates: 1 goroutine on new keys, and 32 goroutines on their own keys",
		"| distlock RWMutex RLock | 2,000/s | 0.40× | 0.50× | 2,000/s – 2,000/s | 16,000/s | 0.40× | 0.50× |",
		"#### (h) 3 processes × 4 readers holding 1ms, a writer every 20ms–50ms holding 1ms",
		"| measure: median over runs (min–max); a ratio is the median of the per-run ratios | distlock RWMutex | distlock |\n",
		"| **writer's wait p50** | 2.0 ms (2.0 ms – 2.0 ms) | 8.0 ms (8.0 ms – 8.0 ms), 4.00× RWMutex |\n",
		"| writer's wait, all runs pooled: p50 / p99 / max (writes) | 2.0 ms / 4.0 ms / 4.0 ms (4) | 8.0 ms / 8.0 ms / 8.0 ms (2) |",
		"| **most holders at once** (readers overlapping) | 12 (12 – 12) | 1 (1 – 1) |",
		"| **violations** (a writer overlapping anyone, or a mutex's holders overlapping) | 0 | 1 |",
	)
	if strings.Contains(md, "#### Targets") {
		t.Errorf("a report without targets has a Targets table:\n%s", md)
	}
	if p := rw.ChartPanels(); len(p) != 1 {
		t.Errorf("chart panels of b, g, h: %+v", p)
	}
	// The semaphore's scenarios: i has g's table, j and k a column per
	// semaphore; none has a bar in the chart.
	sem := harness.NewReport(cfg, harness.AllLibs, []string{"i", "j", "k"}, 2)
	for run := range 2 {
		for i, lib := range harness.SemRateLibs {
			sem.Add("i", harness.Result{Lib: lib, OpsPerS: float64(1000 * (5 - i)), ParOpsPerS: float64(8000 * (5 - i))})
		}
		for _, s := range []string{"j", "k"} {
			sem.Add(s, harness.Result{Lib: harness.RawSem, OpsPerS: 2000, Fairness: 0.9, HoldMean: time.Millisecond, Sem: harness.SemResult{
				WaitP50: 4 * time.Millisecond, WaitP99: 40 * time.Millisecond, WaitMax: time.Duration(50+run) * time.Millisecond, MaxPermits: 8, MinCount: int64(run), MaxCount: 90, Busy: 0.25}})
			sem.Add(s, harness.Result{Lib: harness.DistlockSem, OpsPerS: 3000, Fairness: 1, HoldMean: time.Millisecond, Viol: int64(run), Sem: harness.SemResult{
				WaitP50: 4 * time.Millisecond, WaitP99: 10 * time.Millisecond, WaitMax: 12 * time.Millisecond, MaxPermits: 8, MinCount: 60, MaxCount: 62, Busy: 0.375}})
		}
	}
	md = sem.Markdown()
	reportHas(t, md,
		"#### (i) Semaphore rates: 1 goroutine on new keys, and 32 goroutines on their own keys",
		"| × baseline (median of per-run ratios) | × Mutex (median of per-run ratios) | × counting sem. (median of per-run ratios) | min–max |",
		"| distlock Semaphore | 1,000/s | 0.20× | 0.25× | 0.50× | 1,000/s – 1,000/s | 8,000/s | 0.20× | 0.25× | 0.50× |",
		"#### (j) 32 goroutines, 1 process, 8 permits, 1ms hold",
		"#### (k) 4 processes × 8 goroutines, 8 permits, 1ms hold",
		"| measure: median over runs (min–max); a ratio is the median of the per-run ratios | raw go-redis counting semaphore (spin) | distlock Semaphore |\n",
		"| **acquisitions /s** | 2,000/s (2,000/s – 2,000/s) | 3,000/s (3,000/s – 3,000/s), 1.50× counting sem. |",
		"| ceiling: 8 / mean hold (measured hold) | 8,000/s (1.0 ms) | 8,000/s (1.0 ms) |",
		"| **wait p99** | 40 ms (40 ms – 40 ms) | 10 ms (10 ms – 10 ms), 0.25× counting sem. |",
		"| wait max (the longest of any run) | 51 ms | 12 ms |",
		"| acquisitions of one goroutine: fewest in any run / median of the runs' fewest / of the runs' most | 0 / 0 / 90 | 60 / 60 / 62 |",
		"| **violations** (more than 8 permits held at once) | 0 | 1 |",
		"| **fairness (Jain)** over the goroutines' acquisitions | 0.900 (0.900 – 0.900) | 1.000 (1.000 – 1.000) |",
	)
	if strings.Contains(md, "#### Targets") || strings.Contains(md, "#### Summary") {
		t.Errorf("a report of i, j and k has a Targets or a Summary table:\n%s", md)
	}
	if p := sem.ChartPanels(); len(p) != 0 {
		t.Errorf("chart panels of i, j, k: %+v", p)
	}

	dir := t.TempDir()
	path := filepath.Join(dir, "c.png")
	if err := harness.DrawChart(path, "title", "sub", panels); err != nil {
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
	// Two panels side by side, each with a bar per library: distlock's
	// is drawn in its colour.
	if img.Bounds().Dx() < 1000 || img.Bounds().Dy() < 200 {
		t.Errorf("chart is %v", img.Bounds())
	}
	red := 0
	for y := img.Bounds().Min.Y; y < img.Bounds().Max.Y; y++ {
		for x := img.Bounds().Min.X; x < img.Bounds().Max.X; x++ {
			if r, g, b, _ := img.At(x, y).RGBA(); r>>8 == 0xd6 && g>>8 == 0x27 && b>>8 == 0x28 {
				red++
			}
		}
	}
	if red == 0 {
		t.Errorf("no distlock bar in the chart")
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
	if s, err := harness.ParseScenarios("g,H"); err != nil || strings.Join(s, ",") != "g,h" {
		t.Errorf("ParseScenarios = %v %v", s, err)
	}
	if s, err := harness.ParseScenarios("i,J,k"); err != nil || strings.Join(s, ",") != "i,j,k" {
		t.Errorf("ParseScenarios = %v %v", s, err)
	}
	if _, err := harness.ParseScenarios("l"); err == nil {
		t.Error("scenario l accepted")
	}
	if l, err := harness.ParseLibs("distlock"); err != nil || len(l) != 2 || l[0] != "raw" {
		t.Errorf("ParseLibs = %v %v", l, err)
	}
	if l, err := harness.ParseLibs("rueidislock,distlock-fair,distlock"); err != nil || strings.Join(l, ",") != "raw,distlock,distlock-fair,rueidislock" {
		t.Errorf("ParseLibs = %v %v", l, err)
	}
	if got := harness.LibTitle(harness.DistlockFair); got != "distlock FairMutex" {
		t.Errorf("title %q", got)
	}
	// g and h: the RWMutex always, the Mutex and FairMutex if selected.
	rep := harness.NewReport(harness.DefaultConfig(), []string{harness.Raw, harness.DistlockFair}, []string{"g", "h"}, 1)
	if got := strings.Join(rep.LibsFor("g"), ","); got != "raw,distlock-fair,distlock-rw-read,distlock-rw-write" {
		t.Errorf("LibsFor(g) = %s", got)
	}
	if got := strings.Join(rep.LibsFor("h"), ","); got != "distlock-rw,distlock-fair" {
		t.Errorf("LibsFor(h) = %s", got)
	}
	// i, j and k: both semaphores always, the mutexes of i if selected.
	if got := strings.Join(rep.LibsFor("i"), ","); got != "raw,distlock-fair,raw-sem,distlock-sem" {
		t.Errorf("LibsFor(i) = %s", got)
	}
	if got := strings.Join(rep.LibsFor("k"), ","); got != "raw-sem,distlock-sem" {
		t.Errorf("LibsFor(k) = %s", got)
	}
}

// TestSplitHandover checks how a traced hand-over is split: a plain
// mutex's waiter reads the notification, sends an attempt and gets its
// reply; a FairMutex's waiter reads its grant and returns, with no attempt.
func TestSplitHandover(t *testing.T) {
	us := func(n int64) int64 { return 1_000_000_000 + n*1000 }
	// Release at 0 (its reply at 70 µs), notification read at 100, attempt
	// sent at 120, reply at 180, Lock returns at 190.
	br, ok := harness.SplitHandover(harness.Distlock, us(0), us(70), us(190), us(100), us(120), us(180))
	want := harness.Breakdown{ToRead: 100 * time.Microsecond, ToIssue: 20 * time.Microsecond, RoundTrip: 60 * time.Microsecond,
		ToReturn: 10 * time.Microsecond, FromRead: 90 * time.Microsecond, Release: 70 * time.Microsecond, Rounds: 1}
	if !ok || br != want {
		t.Errorf("plain: %+v %v, want %+v", br, ok, want)
	}
	// A plain waiter whose attempt was not seen: not split.
	if _, ok := harness.SplitHandover(harness.Distlock, us(0), us(70), us(190), us(100), 0, 0); ok {
		t.Error("plain hand-over without an attempt split")
	}
	// FairMutex: the grant is read at 100, Lock returns at 130; the
	// renewal to the full TTL left at 110, before Lock returned.
	br, ok = harness.SplitHandover(harness.DistlockFair, us(0), us(70), us(130), us(100), us(110), us(170))
	want = harness.Breakdown{ToRead: 100 * time.Microsecond, ToReturn: 30 * time.Microsecond, FromRead: 30 * time.Microsecond,
		Grant: true, AfterGrant: 10 * time.Microsecond, Release: 70 * time.Microsecond, Rounds: 1, Early: 1}
	if !ok || br != want {
		t.Errorf("fair: %+v %v, want %+v", br, ok, want)
	}
	// FairMutex, no command seen before Lock returned.
	br, ok = harness.SplitHandover(harness.DistlockFair, us(0), us(70), us(130), us(100), 0, 0)
	if !ok || br.AfterGrant != 0 || br.Early != 0 || br.ToIssue != 0 || br.RoundTrip != 0 || br.FromRead != 30*time.Microsecond {
		t.Errorf("fair, no renewal seen: %+v %v", br, ok)
	}
	// The waiter was armed after the release: its first read is later
	// traffic, or none.
	if _, ok := harness.SplitHandover(harness.DistlockFair, us(0), us(70), us(130), 0, 0, 0); ok {
		t.Error("hand-over without a read split")
	}
}

// TestScenariosSmoke runs every timed scenario briefly for distlock's
// Mutex and FairMutex and the baseline, with worker processes, and checks
// mutual exclusion.
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
		for _, lib := range []string{harness.Raw, harness.Distlock, harness.DistlockFair} {
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
				// Traced rounds may miss a step (the waiter is armed on a
				// timer), so a Breakdown may be empty; one that is not
				// has the shape of the library's hand-over.
				fair := lib == harness.DistlockFair
				if br := res.Br; br != (harness.Breakdown{}) && (br.Grant != fair || fair && (br.ToIssue != 0 || br.RoundTrip != 0)) {
					t.Errorf("%s/%s: breakdown %+v", s, lib, br)
				}
			} else if res.Ops == 0 {
				t.Errorf("%s/%s: no acquisitions", s, lib)
			}
		}
	}
}

// TestRWScenariosSmoke runs scenarios g and h briefly, with worker
// processes, and checks the guard: no violation, and readers of the
// RWMutex overlap (a mutex's holders never do).
func TestRWScenariosSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-server and worker processes")
	}
	srv := redistest.Start(t)
	cfg := harness.DefaultConfig()
	cfg.Duration = 100 * time.Millisecond
	cfg.Parallel = 4
	cfg.Stream = harness.StreamConfig{Duration: 400 * time.Millisecond, Procs: 2, Workers: 2,
		ReadHold: 5 * time.Millisecond, WriteHold: time.Millisecond, WriteMin: 10 * time.Millisecond, WriteMax: 20 * time.Millisecond}
	for _, lib := range harness.RateLibs {
		if err := harness.FlushAll(srv.Addr()); err != nil {
			t.Fatal(err)
		}
		res, err := harness.Run("g", lib, srv.Addr(), cfg)
		if err != nil {
			t.Fatalf("g/%s: %v", lib, err)
		}
		if res.Errors != 0 || res.Ops == 0 || res.OpsPerS <= 0 || res.ParOpsPerS <= 0 {
			t.Errorf("g/%s: %+v", lib, res)
		}
	}
	for _, lib := range harness.StreamLibs {
		if err := harness.FlushAll(srv.Addr()); err != nil {
			t.Fatal(err)
		}
		res, err := harness.Run("h", lib, srv.Addr(), cfg)
		if err != nil {
			t.Fatalf("h/%s: %v", lib, err)
		}
		st := res.Stream
		if res.Viol != 0 || res.Errors != 0 {
			t.Errorf("h/%s: %d violations, %d errors", lib, res.Viol, res.Errors)
		}
		if res.Ops == 0 || st.Writes == 0 || len(st.WriterWaits) != st.Writes || st.WriterP50 <= 0 || st.ReaderP50 <= 0 {
			t.Errorf("h/%s: %d reads, %d writes: %+v", lib, res.Ops, st.Writes, st)
		}
		if lib == harness.DistlockRW && st.MaxHolders < 2 {
			t.Errorf("h/%s: readers never overlapped (most holders at once: %d)", lib, st.MaxHolders)
		}
		if lib != harness.DistlockRW && st.MaxHolders != 1 {
			t.Errorf("h/%s: most holders at once %d, want 1", lib, st.MaxHolders)
		}
	}
}

// TestSemScenariosSmoke runs scenarios i, j and k briefly for both
// semaphores, with worker processes in k, and checks the guard: never more
// permits held than the capacity, and the permits are shared (more than
// one held at once). distlock's Semaphore serves its waiters in order: no
// goroutine may go without a permit for a whole run.
func TestSemScenariosSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-server and worker processes")
	}
	srv := redistest.Start(t)
	cfg := harness.DefaultConfig()
	cfg.Duration = 100 * time.Millisecond
	cfg.Parallel = 4
	cfg.Sem = harness.SemConfig{Duration: 300 * time.Millisecond, Permits: 3, Goroutines: 6, Procs: 2, ProcWorkers: 3, Hold: 2 * time.Millisecond}
	for _, s := range []string{"i", "j", "k"} {
		for _, lib := range harness.SemLibs {
			if err := harness.FlushAll(srv.Addr()); err != nil {
				t.Fatal(err)
			}
			res, err := harness.Run(s, lib, srv.Addr(), cfg)
			if err != nil {
				t.Fatalf("%s/%s: %v", s, lib, err)
			}
			if res.Viol != 0 || res.Errors != 0 || res.Ops == 0 {
				t.Errorf("%s/%s: %d violations, %d errors, %d acquisitions", s, lib, res.Viol, res.Errors, res.Ops)
			}
			if s == "i" {
				if res.OpsPerS <= 0 || res.ParOpsPerS <= 0 {
					t.Errorf("i/%s: %+v", lib, res)
				}
				continue
			}
			sm := res.Sem
			if sm.Workers != 6 || sm.WaitP50 <= 0 || sm.WaitMax < sm.WaitP99 || sm.WaitMean <= 0 || sm.Busy <= 0 || res.Fairness <= 0 || sm.Cmds <= 0 || sm.Scripts <= 0 {
				t.Errorf("%s/%s: %+v", s, lib, res)
			}
			if sm.MaxPermits < 2 || sm.MaxPermits > 3 {
				t.Errorf("%s/%s: most permits held at once %d, want 2 or 3 of 3", s, lib, sm.MaxPermits)
			}
			if lib == harness.DistlockSem && sm.MinCount == 0 {
				t.Errorf("%s/%s: a goroutine never got a permit (%d–%d per goroutine)", s, lib, sm.MinCount, sm.MaxCount)
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
	// 10 release channels, and the process's channel of force-unlock
	// notices (distlock:holder:<host>:<pid>), all on the waiting client's
	// one connection.
	if wr.PubSubConns != 1 || wr.Channels != 11 || wr.Acquired != 100 || wr.Violations != 0 || wr.Errors != 0 {
		t.Errorf("waiters: %+v", wr)
	}
}
