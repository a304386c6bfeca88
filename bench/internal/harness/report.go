package harness

import (
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"time"
)

// A Report gathers every run of one lockbench invocation.
type Report struct {
	Cfg       Config
	Libs      []string
	Scenarios []string
	Runs      int
	// Results[scenario][lib] has one Result per run, in run order; run i
	// of every library ran against the same server, one after another.
	Results map[string]map[string][]Result
	// Extra lists reference libraries run in one scenario only.
	Extra   map[string][]string
	Scale   []ScaleResult
	Waiters []WaitersResult
	Machine string
	Command string
	Took    time.Duration
}

// NewReport returns an empty report.
func NewReport(cfg Config, libs, scenarios []string, runs int) *Report {
	return &Report{Cfg: cfg, Libs: libs, Scenarios: scenarios, Runs: runs, Results: map[string]map[string][]Result{}, Extra: map[string][]string{}}
}

// LibsFor lists the libraries of a scenario: every library, then its
// references and, after AddObservers, the observed libraries in a and b.
// Scenarios g to k have their own lists (RateLibs, StreamLibs,
// SemRateLibs, SemLibs): the baseline, the RWMutex, the Semaphore and the
// naive counting semaphore always, distlock's Mutex and FairMutex if
// selected.
func (r *Report) LibsFor(scen string) []string {
	switch scen {
	case ScenG:
		return r.keep(RateLibs)
	case ScenH:
		return r.keep(StreamLibs)
	case ScenI:
		return r.keep(SemRateLibs)
	case ScenJ, ScenK:
		return r.keep(SemLibs)
	}
	return append(append([]string(nil), r.Libs...), r.Extra[scen]...)
}

// keep returns those of libs that are the baseline, a side of the RWMutex,
// a semaphore, or selected.
func (r *Report) keep(libs []string) []string {
	var out []string
	for _, l := range libs {
		switch {
		case l == Raw, l == DistlockRW, l == DistlockRWRead, l == DistlockRWWrite, l == DistlockSem, l == RawSem, slices.Contains(r.Libs, l):
			out = append(out, l)
		}
	}
	return out
}

// Add records one result.
func (r *Report) Add(scen string, res Result) {
	if r.Results[scen] == nil {
		r.Results[scen] = map[string][]Result{}
	}
	r.Results[scen][res.Lib] = append(r.Results[scen][res.Lib], res)
}

// A metric is one number of a Result.
type metric struct {
	name        string
	get         func(Result) float64
	format      func(float64) string
	lowerBetter bool
	ratio       bool // show the ratio to the baseline
}

func perSec(v float64) string { return groupDigits(v) + "/s" }

func groupDigits(v float64) string {
	if math.IsNaN(v) {
		return "–"
	}
	s := fmt.Sprintf("%.0f", v)
	if digits, ok := strings.CutPrefix(s, "-"); ok {
		return "-" + group(digits)
	}
	return group(s)
}

func fmtDur(v float64) string {
	if math.IsNaN(v) {
		return "–"
	}
	d := time.Duration(v)
	switch {
	case d >= time.Second:
		return fmt.Sprintf("%.2f s", d.Seconds())
	case d >= 10*time.Millisecond:
		return fmt.Sprintf("%.0f ms", float64(d)/1e6)
	case d >= time.Millisecond:
		return fmt.Sprintf("%.1f ms", float64(d)/1e6)
	}
	return fmt.Sprintf("%.0f µs", float64(d)/1e3)
}

func fmtDepth(v float64) string {
	if math.IsNaN(v) || v == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f", v)
}

func fmtMicros(v float64) string {
	if math.IsNaN(v) {
		return "–"
	}
	return fmt.Sprintf("%.1f µs", v)
}

func fmtF(prec int) func(float64) string {
	return func(v float64) string {
		if math.IsNaN(v) {
			return "–"
		}
		return fmt.Sprintf("%.*f", prec, v)
	}
}

var (
	mOps      = metric{name: "acquire+release /s", get: func(r Result) float64 { return r.OpsPerS }, format: perSec, ratio: true}
	mAcq      = metric{name: "acquisitions /s", get: func(r Result) float64 { return r.OpsPerS }, format: perSec, ratio: true}
	mChanges  = metric{name: "owner changes /s", get: func(r Result) float64 { return r.Changes }, format: perSec, ratio: true}
	mFair     = metric{name: "fairness (Jain)", get: func(r Result) float64 { return r.Fairness }, format: fmtF(2)}
	mViol     = metric{name: "mutual exclusion violations", get: func(r Result) float64 { return float64(r.Viol) }, format: fmtF(0)}
	mErrs     = metric{name: "errors", get: func(r Result) float64 { return float64(r.Errors) }, format: fmtF(0)}
	mHold     = metric{name: "mean hold (measured)", get: func(r Result) float64 { return float64(r.HoldMean) }, format: fmtDur}
	mP50      = metric{name: "hand-over p50", get: func(r Result) float64 { return float64(r.P50) }, format: fmtDur, lowerBetter: true, ratio: true}
	mP90      = metric{name: "hand-over p90", get: func(r Result) float64 { return float64(r.P90) }, format: fmtDur, lowerBetter: true, ratio: true}
	mRelease  = metric{name: "holder's release call p50", get: func(r Result) float64 { return float64(r.ReleaseP50) }, format: fmtDur, lowerBetter: true, ratio: true}
	mCmds     = metric{name: "Redis commands / hand-over (all, INFO commandstats)", get: func(r Result) float64 { return r.CmdsPerRound }, format: fmtF(1)}
	mTop      = metric{name: "… sent by clients (MONITOR)", get: func(r Result) float64 { return r.TopPerRound }, format: fmtF(1)}
	mInScript = metric{name: "… run inside Lua scripts (MONITOR)", get: func(r Result) float64 { return r.InScriptRound }, format: fmtF(1)}
	mSrvCPU   = metric{name: "redis-server CPU / op", get: func(r Result) float64 { return r.ServerCPUPerOp }, format: fmtMicros}
	mCliCPU   = metric{name: "client CPU / op", get: func(r Result) float64 { return r.ClientCPUPerOp }, format: fmtMicros}
	mDepth    = metric{name: "commands per go-redis round trip", get: func(r Result) float64 { return r.CmdsPerRT }, format: fmtDepth}
	mScript   = metric{name: "EVALSHA execution (commandstats)", get: func(r Result) float64 { return r.ScriptUsec }, format: fmtMicros}
	mRounds   = metric{name: "rounds", get: func(r Result) float64 { return float64(r.Rounds) }, format: fmtF(0)}
)

// metrics lists what the report shows per scenario; the first is the
// headline (charted) metric.
func metrics(scen string) []metric {
	switch scen {
	case ScenA, ScenB:
		return []metric{mOps, mSrvCPU, mScript, mCliCPU, mDepth, mErrs}
	case ScenC:
		return []metric{mChanges, mAcq, mFair, mViol, mHold, mSrvCPU, mScript, mCliCPU, mErrs}
	case ScenD:
		return []metric{mChanges, mAcq, mFair, mViol, mHold, mErrs}
	case ScenE:
		return []metric{mP50, mP90, mRelease, mCmds, mTop, mInScript, mViol, mRounds}
	}
	return nil
}

// values returns the metric of every run of lib.
func (r *Report) values(scen, lib string, m metric) []float64 {
	var out []float64
	for _, res := range r.Results[scen][lib] {
		out = append(out, m.get(res))
	}
	return out
}

// Value is the median of a metric over runs.
func (r *Report) Value(scen, lib string, m metric) float64 {
	return Median(r.values(scen, lib, m))
}

// Ratio is the median over runs of lib's metric divided by the baseline's
// in the same run (for a lower-is-better metric, lib / baseline too: the
// caller knows which way is better).
func (r *Report) Ratio(scen, lib string, m metric) float64 {
	return r.RatioTo(scen, lib, Raw, m)
}

// RatioTo is the median over runs of lib's metric divided by base's in the
// same run.
func (r *Report) RatioTo(scen, lib, base string, m metric) float64 {
	bs := r.Results[scen][base]
	var out []float64
	for i, res := range r.Results[scen][lib] {
		if i >= len(bs) {
			break
		}
		b := m.get(bs[i])
		if b == 0 {
			continue
		}
		out = append(out, m.get(res)/b)
	}
	return Median(out)
}

// ChartPanels returns a panel per timed scenario: its headline metric for
// every library that has it, the baseline first.
func (r *Report) ChartPanels() []ChartPanel {
	var ps []ChartPanel
	for _, s := range r.timedScenarios() {
		m := metrics(s)[0]
		p := ChartPanel{Title: ScenarioTitle(s, r.Cfg), Metric: m.name, LowerBetter: m.lowerBetter}
		for _, l := range r.LibsFor(s) {
			v := r.Value(s, l, m)
			p.Bars = append(p.Bars, ChartBar{Lib: l, Value: v, Text: m.format(v), Ratio: r.Ratio(s, l, m)})
		}
		ps = append(ps, p)
	}
	return ps
}

// Markdown renders the report.
func (r *Report) Markdown() string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	r.headMarkdown(&b)

	// Summary.
	if timed := r.timedScenarios(); len(timed) > 0 {
		w("#### Summary\n\n")
		w("| scenario | metric: median over runs (in brackets: median of the per-run ratios to the baseline) |")
		for _, l := range r.Libs {
			w(" %s |", LibTitle(l))
		}
		w("\n|---|---|")
		for range r.Libs {
			w("---:|")
		}
		w("\n")
		for _, s := range timed {
			for _, m := range metrics(s) {
				if !m.ratio && m.name != mFair.name && m.name != mViol.name && m.name != mCmds.name && m.name != mTop.name {
					continue
				}
				w("| %s | %s", ScenarioTitle(s, r.Cfg), m.name)
				if m.lowerBetter {
					w(" (lower is better)")
				}
				w(" |")
				for _, l := range r.Libs {
					v := r.Value(s, l, m)
					if m.ratio {
						ratio := r.Ratio(s, l, m)
						w(" %s (%s×) |", m.format(v), trimRatio(ratio))
					} else {
						w(" %s |", m.format(v))
					}
				}
				w("\n")
			}
		}
		w("\n")
		w("#### Per scenario: median, and the spread (min–max) of the headline metric over runs\n\n")
		for _, s := range timed {
			ms := metrics(s)
			w("**%s**\n\n| library |", ScenarioTitle(s, r.Cfg))
			for _, m := range ms {
				w(" %s |", m.name)
			}
			w(" %s min–max |\n|---|", ms[0].name)
			for range ms {
				w("---:|")
			}
			w("---:|\n")
			for _, l := range r.LibsFor(s) {
				w("| %s |", LibTitle(l))
				for _, m := range ms {
					w(" %s |", m.format(r.Value(s, l, m)))
				}
				if vs := r.values(s, l, ms[0]); len(vs) == 0 {
					w(" – |\n")
				} else {
					w(" %s – %s |\n", ms[0].format(Min(vs)), ms[0].format(Max(vs)))
				}
			}
			w("\n")
		}
	}
	r.observersMarkdown(&b)
	r.breakdownMarkdown(&b)
	r.ratesMarkdown(&b, ScenG)
	r.streamMarkdown(&b)
	r.ratesMarkdown(&b, ScenI)
	r.semMarkdown(&b, ScenJ)
	r.semMarkdown(&b, ScenK)
	if len(r.Scale) > 0 || len(r.Waiters) > 0 {
		r.scaleMarkdown(&b)
	}
	r.targetsMarkdown(&b)
	return b.String()
}

// timedScenarios are those of a-e that ran: the summary and the chart
// compare the peers in them (f to k have their own tables).
func (r *Report) timedScenarios() []string {
	var out []string
	for _, s := range r.Scenarios {
		if slices.Contains([]string{ScenA, ScenB, ScenC, ScenD, ScenE}, s) && r.Results[s] != nil {
			out = append(out, s)
		}
	}
	return out
}

func medianScale(rs []ScaleResult, f func(ScaleResult) float64) float64 {
	var xs []float64
	for _, r := range rs {
		xs = append(xs, f(r))
	}
	return Median(xs)
}

func medianWaiters(rs []WaitersResult, f func(WaitersResult) float64) float64 {
	var xs []float64
	for _, r := range rs {
		xs = append(xs, f(r))
	}
	return Median(xs)
}

func (r *Report) scaleMarkdown(b *strings.Builder) {
	w := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	sc := r.Cfg.Scale
	if len(r.Scale) > 0 {
		s := func(f func(ScaleResult) float64) float64 { return medianScale(r.Scale, f) }
		w("#### (f) %s locks held by one distlock client (lease %v), %d run(s)\n\n", groupDigits(float64(sc.Locks)), sc.TTL, len(r.Scale))
		w("| measure | value |\n|---|---:|\n")
		w("| acquiring them (TryLock, %d goroutines) | %.1f s |\n", sc.AcquireConc, s(func(x ScaleResult) float64 { return x.AcquireSecs }))
		w("| Go heap per held lock (after GC) | %.0f B (%.1f objects) |\n", s(func(x ScaleResult) float64 { return x.HeapPerLock }), s(func(x ScaleResult) float64 { return x.ObjectsPerLock }))
		w("| renewal window measured | %.1f s, %.0f ticks |\n", s(func(x ScaleResult) float64 { return x.WindowSecs }), s(func(x ScaleResult) float64 { return float64(x.Ticks) }))
		w("| locks renewed per tick | %s |\n", groupDigits(s(func(x ScaleResult) float64 { return x.PerTick(float64(x.Renewed)) })))
		w("| round trips per tick (a pipeline is one) | %.1f |\n", s(func(x ScaleResult) float64 { return x.PerTick(float64(x.RoundTrips)) }))
		w("| EVALSHA per tick (INFO commandstats) | %.1f |\n", s(func(x ScaleResult) float64 { return x.PerTick(float64(x.Evalsha)) }))
		w("| round trips per 100 renewed locks | %.4f |\n", s(func(x ScaleResult) float64 { return x.Per100Renewals(float64(x.RoundTrips)) }))
		w("| EVALSHA per 100 renewed locks | %.3f |\n", s(func(x ScaleResult) float64 { return x.Per100Renewals(float64(x.Evalsha)) }))
		w("| client CPU (getrusage), share of one core | %.1f %% |\n", s(func(x ScaleResult) float64 { return 100 * x.ClientCPU / x.WindowSecs }))
		w("| client CPU per tick | %.0f ms |\n", s(func(x ScaleResult) float64 { return 1000 * x.PerTick(x.ClientCPU) }))
		w("| client CPU per renewed lock | %.1f µs |\n", s(func(x ScaleResult) float64 { return 1e6 * x.ClientCPU / math.Max(1, float64(x.Renewed)) }))
		w("| redis-server CPU, share of one core | %.1f %% |\n", s(func(x ScaleResult) float64 { return 100 * x.ServerCPU / x.WindowSecs }))
		w("| locks lost / failed renewals | %.0f / %.0f |\n\n", s(func(x ScaleResult) float64 { return float64(x.Lost) }), s(func(x ScaleResult) float64 { return float64(x.RenewFailed) }))
	}
	if len(r.Waiters) > 0 {
		v := func(f func(WaitersResult) float64) float64 { return medianWaiters(r.Waiters, f) }
		w("#### (f) %s goroutines of one distlock client waiting on %s keys, %d run(s)\n\n", groupDigits(float64(sc.Waiters)), groupDigits(float64(sc.WaitKeys)), len(r.Waiters))
		w("| measure | value |\n|---|---:|\n")
		w("| time until all wait | %.2f s |\n", v(func(x WaitersResult) float64 { return x.SetupSecs }))
		w("| subscription (pub/sub) connections on the server | %.0f |\n", v(func(x WaitersResult) float64 { return float64(x.PubSubConns) }))
		w("| channels subscribed | %.0f |\n", v(func(x WaitersResult) float64 { return float64(x.Channels) }))
		w("| Go heap per waiter (after GC) | %.0f B |\n", v(func(x WaitersResult) float64 { return x.HeapPerWaiter }))
		w("| goroutine stack per waiter (the caller's goroutine) | %.0f B |\n", v(func(x WaitersResult) float64 { return x.StackPerWaiter }))
		w("| drain: release the %s keys until every waiter had the lock once | %.2f s |\n", groupDigits(float64(sc.WaitKeys)), v(func(x WaitersResult) float64 { return x.DrainSecs }))
		w("| Redis commands per acquisition during the drain (all, incl. in scripts) | %.1f |\n", v(func(x WaitersResult) float64 { return x.CmdsPerHandover }))
		w("| acquired / errors / violations | %.0f / %.0f / %.0f |\n\n", v(func(x WaitersResult) float64 { return float64(x.Acquired) }), v(func(x WaitersResult) float64 { return float64(x.Errors) }), v(func(x WaitersResult) float64 { return float64(x.Violations) }))
	}
}

// breakdownMarkdown shows where a push-based hand-over's time goes.
func (r *Report) breakdownMarkdown(b *strings.Builder) {
	var libs []string
	for _, l := range r.LibsFor(ScenE) {
		for _, res := range r.Results[ScenE][l] {
			if res.Br != (Breakdown{}) {
				libs = append(libs, l)
				break
			}
		}
	}
	if len(libs) == 0 {
		return
	}
	w := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	w("**(e) where a push-based hand-over's time goes** (separate traced rounds; the waiter's go-redis connections and commands are timestamped; median of each step, then median over runs. A FairMutex's notification is the grant itself: the release made the waiter the owner, so no acquisition attempt follows)\n\n")
	w("| library | release start → notification read by the waiter | → acquisition attempt sent | attempt round trip | reply → Lock returns | notification read → Lock returns | the holder's release call (start → reply) |\n|---|---:|---:|---:|---:|---:|---:|\n")
	var notes []string
	for _, l := range libs {
		var brs []Breakdown
		for _, res := range r.Results[ScenE][l] {
			if res.Br != (Breakdown{}) {
				brs = append(brs, res.Br)
			}
		}
		step := func(f func(Breakdown) time.Duration) string {
			var xs []float64
			for _, br := range brs {
				xs = append(xs, float64(f(br)))
			}
			return fmtDur(Median(xs))
		}
		grant := brs[0].Grant
		attempt := func(f func(Breakdown) time.Duration) string {
			if grant {
				return "– (none)"
			}
			return step(f)
		}
		w("| %s | %s | %s | %s | %s | %s | %s |\n", LibTitle(l),
			step(func(x Breakdown) time.Duration { return x.ToRead }),
			attempt(func(x Breakdown) time.Duration { return x.ToIssue }),
			attempt(func(x Breakdown) time.Duration { return x.RoundTrip }),
			attempt(func(x Breakdown) time.Duration { return x.ToReturn }),
			step(func(x Breakdown) time.Duration { return x.FromRead }),
			step(func(x Breakdown) time.Duration { return x.Release }))
		if grant {
			rounds, early := 0, 0
			var after []float64
			for _, br := range brs {
				rounds += br.Rounds
				early += br.Early
				if br.Early > 0 {
					after = append(after, float64(br.AfterGrant))
				}
			}
			note := fmt.Sprintf("%s: the renewal of the granted lease to the full TTL (which Lock does not wait for) left before Lock returned in %d of %d traced rounds", LibTitle(l), early, rounds)
			if len(after) > 0 {
				note += fmt.Sprintf(", %s after the grant's read (median)", fmtDur(Median(after)))
			}
			notes = append(notes, note+".")
		}
	}
	w("\n")
	for _, n := range notes {
		w("%s\n\n", n)
	}
}

func verdict(ok bool) string {
	if ok {
		return "**met**"
	}
	return "**missed**"
}

// targetsMarkdown checks the performance targets against the run (no
// table when none of them was measured, as in a run of g and h alone).
// A ratio in it is the median of the per-run ratios, as elsewhere, unless
// it says it is the ratio of the medians.
func (r *Report) targetsMarkdown(out *strings.Builder) {
	var rows strings.Builder
	defer func() {
		if rows.Len() > 0 {
			fmt.Fprintf(out, "#### Targets\n\n| target | measured: medians over runs; a ratio is the median of the per-run ratios unless it says \"ratio of the medians\" | verdict |\n|---|---|---|\n%s\n", rows.String())
		}
	}()
	b := &rows
	w := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	has := func(s string) bool { return r.Results[s] != nil && r.Results[s][Distlock] != nil }
	// fastestPeer is the Go peer with the highest median ratio to the
	// baseline in scen, by metric m.
	fastestPeer := func(scen string, m metric) (string, float64) {
		best, bestLib := 0.0, ""
		for _, l := range []string{Redsync, Redislock, Rueidislock} {
			if r.Results[scen][l] == nil {
				continue
			}
			if v := r.Ratio(scen, l, m); v > best {
				best, bestLib = v, l
			}
		}
		return bestLib, best
	}
	if has(ScenA) {
		v := r.Ratio(ScenA, Distlock, mOps)
		w("| (a) distlock ≥ 0.95× raw baseline | %.2f× | %s |\n", v, verdict(v >= 0.95))
		if l, p := fastestPeer(ScenA, mOps); l != "" {
			w("| (a) no Go peer faster than distlock | distlock %.2f×, %s %.2f× of baseline | %s |\n", v, LibTitle(l), p, verdict(v >= p))
		}
		if c := r.Ratio(ScenA, Distlock, mSrvCPU); c > 0 {
			w("| (a) redis-server CPU per pair ≤ 1.25× the baseline's | %s vs %s: %.2f× | %s |\n",
				fmtMicros(r.Value(ScenA, Distlock, mSrvCPU)), fmtMicros(r.Value(ScenA, Raw, mSrvCPU)), c, verdict(c <= 1.25))
		}
	}
	if has(ScenB) {
		d := r.Ratio(ScenB, Distlock, mOps)
		if l, p := fastestPeer(ScenB, mOps); l != "" {
			w("| (b) distlock ahead of every Go peer | distlock %.2f×, %s %.2f× of baseline | %s |\n", d, LibTitle(l), p, verdict(d > p))
		}
	}
	if has(ScenD) {
		bestLib, _ := fastestPeer(ScenD, mChanges)
		best, d := r.Value(ScenD, bestLib, mChanges), r.Value(ScenD, Distlock, mChanges)
		if bestLib != "" && best > 0 {
			w("| (d) owner changes/s ≥ 3× best peer | %s/s vs %s/s (%s): %.2f× (ratio of the medians) | %s |\n", groupDigits(d), groupDigits(best), LibTitle(bestLib), d/best, verdict(d >= 3*best))
		}
	}
	if has(ScenE) {
		v := r.Ratio(ScenE, Distlock, mP50)
		ref := ""
		if r.Results[ScenE][RawPubSub] != nil {
			ref = fmt.Sprintf(" (the raw pub/sub reference: %s, %.2f×)", fmtDur(r.Value(ScenE, RawPubSub, mP50)), r.Ratio(ScenE, RawPubSub, mP50))
		}
		w("| (e) hand-over p50 ≤ 1.0× spinning SET NX | %s vs %s: %.2f×%s | %s |\n", fmtDur(r.Value(ScenE, Distlock, mP50)), fmtDur(r.Value(ScenE, Raw, mP50)), v, ref, verdict(v <= 1.0))
		if rel := r.Ratio(ScenE, Distlock, mRelease); rel > 0 {
			ref := ""
			if r.Results[ScenE][RawPubSub] != nil {
				ref = fmt.Sprintf(" (the raw pub/sub reference: %s, %.2f×)", fmtDur(r.Value(ScenE, RawPubSub, mRelease)), r.Ratio(ScenE, RawPubSub, mRelease))
			}
			w("| (e) holder's release call p50 ≤ 1.5× the baseline's | %s vs %s: %.2f×%s | %s |\n",
				fmtDur(r.Value(ScenE, Distlock, mRelease)), fmtDur(r.Value(ScenE, Raw, mRelease)), rel, ref, verdict(rel <= 1.5))
		}
		top := r.Value(ScenE, Distlock, mTop)
		all := r.Value(ScenE, Distlock, mCmds)
		w("| (e) ≤ 10 Redis commands per hand-over | %.1f sent by clients; %.1f counting those inside scripts | %s (as sent) / %s (incl. scripts) |\n", top, all, verdict(top <= 10), verdict(all <= 10))
	}
	r.fairTargetsMarkdown(b)
	if len(r.Scale) > 0 {
		rt := medianScale(r.Scale, func(x ScaleResult) float64 { return x.Per100Renewals(float64(x.RoundTrips)) })
		ev := medianScale(r.Scale, func(x ScaleResult) float64 { return x.Per100Renewals(float64(x.Evalsha)) })
		mem := medianScale(r.Scale, func(x ScaleResult) float64 { return x.HeapPerLock })
		lost := medianScale(r.Scale, func(x ScaleResult) float64 { return float64(x.Lost) })
		w("| (f) ≤ 1 round trip per 100 held locks per renewal tick | %.4f round trips (%.3f EVALSHA) per 100 renewed locks; %.0f lost | %s |\n", rt, ev, lost, verdict(rt <= 1 && ev <= 1 && lost == 0))
		w("| (f) ≤ 2 KiB client memory per held lock | %.0f B | %s |\n", mem, verdict(mem <= 2048))
	}
	if len(r.Waiters) > 0 {
		c := medianWaiters(r.Waiters, func(x WaitersResult) float64 { return float64(x.PubSubConns) })
		w("| (f) %s waiters on %s keys over one subscription connection | %.0f connection(s) | %s |\n", groupDigits(float64(r.Cfg.Scale.Waiters)), groupDigits(float64(r.Cfg.Scale.WaitKeys)), c, verdict(c == 1))
	}
}

// fairTargetsMarkdown checks the fair mutex's targets.
func (r *Report) fairTargetsMarkdown(b *strings.Builder) {
	w := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	has := func(s, lib string) bool { return r.Results[s] != nil && r.Results[s][lib] != nil }
	const f = DistlockFair
	if has(ScenE, f) {
		v := r.Ratio(ScenE, f, mP50)
		ref := ""
		if has(ScenE, RawPubSub) {
			ref = fmt.Sprintf("; the raw pub/sub reference: %s, %.2f×", fmtDur(r.Value(ScenE, RawPubSub, mP50)), r.Ratio(ScenE, RawPubSub, mP50))
		}
		if has(ScenE, Distlock) {
			ref += fmt.Sprintf("; distlock Mutex: %s, %.2f×", fmtDur(r.Value(ScenE, Distlock, mP50)), r.Ratio(ScenE, Distlock, mP50))
		}
		w("| (e) FairMutex hand-over p50 ≤ 1.0× spinning SET NX | %s vs %s: %.2f×%s | %s |\n", fmtDur(r.Value(ScenE, f, mP50)), fmtDur(r.Value(ScenE, Raw, mP50)), v, ref, verdict(v <= 1.0))
		top := r.Value(ScenE, f, mTop)
		all := r.Value(ScenE, f, mCmds)
		w("| (e) FairMutex ≤ 10 Redis commands per hand-over | %.1f sent by clients; %.1f counting those inside scripts | %s (as sent) / %s (incl. scripts) |\n", top, all, verdict(top <= 10), verdict(all <= 10))
	}
	if has(ScenD, f) && has(ScenD, Rueidislock) {
		v := r.RatioTo(ScenD, f, Rueidislock, mChanges)
		plain := ""
		if has(ScenD, Distlock) {
			plain = fmt.Sprintf("; distlock Mutex: %s/s, %.2f×", groupDigits(r.Value(ScenD, Distlock, mChanges)), r.RatioTo(ScenD, Distlock, Rueidislock, mChanges))
		}
		w("| (d) FairMutex owner changes/s ≥ 2× rueidislock | %s/s vs %s/s: %.2f×%s | %s |\n", groupDigits(r.Value(ScenD, f, mChanges)), groupDigits(r.Value(ScenD, Rueidislock, mChanges)), v, plain, verdict(v >= 2))
	}
	for _, s := range []string{ScenC, ScenD} {
		if !has(s, f) {
			continue
		}
		j := r.Value(s, f, mFair)
		plain := ""
		if has(s, Distlock) {
			plain = fmt.Sprintf(" (distlock Mutex: %.2f)", r.Value(s, Distlock, mFair))
		}
		w("| (%s) FairMutex fairness (Jain) ≥ 0.99 | %.3f%s | %s |\n", s, j, plain, verdict(j >= 0.99))
	}
}

// Splice writes md into the file at path between the markers
// <!-- lockbench:begin --> and <!-- lockbench:end -->, keeping what is
// around them; a file without markers gets them appended.
func Splice(path, md string) error {
	const begin, end = "<!-- lockbench:begin -->", "<!-- lockbench:end -->"
	old, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	block := begin + "\n" + md + end
	s := string(old)
	i, j := strings.Index(s, begin), strings.Index(s, end)
	switch {
	case i >= 0 && j > i:
		s = s[:i] + block + s[j+len(end):]
	case s == "":
		s = block + "\n"
	default:
		s = strings.TrimRight(s, "\n") + "\n\n" + block + "\n"
	}
	return os.WriteFile(path, []byte(s), 0o644)
}
