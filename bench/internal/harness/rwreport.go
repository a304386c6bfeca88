package harness

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// The report's tables of scenarios g and h.

var (
	mOps1   = metric{name: "1 goroutine, new keys: acquire+release /s", get: func(r Result) float64 { return r.OpsPerS }, format: perSec, ratio: true}
	mOpsPar = metric{name: "own keys: acquire+release /s", get: func(r Result) float64 { return r.ParOpsPerS }, format: perSec, ratio: true}
	mParCPU = metric{name: "redis-server CPU / op (parallel)", get: func(r Result) float64 { return r.ParServerCPUPerOp }, format: fmtMicros}

	mWriterP50  = metric{name: "writer's wait p50", get: func(r Result) float64 { return float64(r.Stream.WriterP50) }, format: fmtDur, lowerBetter: true}
	mWriterP99  = metric{name: "writer's wait p99", get: func(r Result) float64 { return float64(r.Stream.WriterP99) }, format: fmtDur, lowerBetter: true}
	mReaderP50  = metric{name: "readers' wait p50", get: func(r Result) float64 { return float64(r.Stream.ReaderP50) }, format: fmtDur, lowerBetter: true}
	mReaderP99  = metric{name: "readers' wait p99", get: func(r Result) float64 { return float64(r.Stream.ReaderP99) }, format: fmtDur, lowerBetter: true}
	mReadHold   = metric{name: "mean read hold (measured)", get: func(r Result) float64 { return float64(r.Stream.ReadHold) }, format: fmtDur}
	mToQueued   = metric{name: "Lock → queued", get: func(r Result) float64 { return float64(r.Stream.ToQueued) }, format: fmtDur}
	mDrain      = metric{name: "queued → holders gone", get: func(r Result) float64 { return float64(r.Stream.Drain) }, format: fmtDur}
	mHandoff    = metric{name: "holders gone → acquired", get: func(r Result) float64 { return float64(r.Stream.Handoff) }, format: fmtDur}
	mBusy       = metric{name: "redis-server CPU", get: func(r Result) float64 { return r.Stream.ServerBusy }, format: fmtF(2)}
	mClientBusy = metric{name: "client CPU", get: func(r Result) float64 { return r.Stream.ClientBusy }, format: fmtF(2)}
	mOtherBusy  = metric{name: "other CPU", get: func(r Result) float64 { return r.Stream.OtherBusy }, format: fmtF(2)}
	mSteal      = metric{name: "stolen CPU", get: func(r Result) float64 { return r.Stream.Steal }, format: fmtF(2)}
	mHolders    = metric{name: "most holders at once", get: func(r Result) float64 { return float64(r.Stream.MaxHolders) }, format: fmtF(0)}
	mAmid       = metric{name: "writes asked while readers held the lock", get: func(r Result) float64 {
		if r.Stream.Writes == 0 {
			return math.NaN()
		}
		return 100 * float64(r.Stream.AmidReaders) / float64(r.Stream.Writes)
	}, format: func(v float64) string {
		if math.IsNaN(v) {
			return "–"
		}
		return fmt.Sprintf("%.0f %%", v)
	}}
)

// spread formats the min–max of a metric over runs.
func (r *Report) spread(scen, lib string, m metric) string {
	vs := r.values(scen, lib, m)
	if len(vs) == 0 {
		return "–"
	}
	return m.format(Min(vs)) + " – " + m.format(Max(vs))
}

// total sums a metric over runs.
func (r *Report) total(scen, lib string, m metric) float64 {
	var t float64
	for _, v := range r.values(scen, lib, m) {
		t += v
	}
	return t
}

// ratesMarkdown renders scenario g or i: a row per lock, with its ratios
// to the baseline and to the Mutex (and in i to the naive counting
// semaphore).
func (r *Report) ratesMarkdown(b *strings.Builder, scen string) {
	if r.Results[scen] == nil {
		return
	}
	w := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	w("#### %s\n\n", ScenarioTitle(scen, r.Cfg))
	bases := []string{Distlock}
	if scen == ScenI {
		bases = append(bases, RawSem)
		w("Uncontended, %v per lock per half: one goroutine on a new key for every acquire+release (as in a), then %d goroutines each on its own key (as in b). A semaphore's acquire+release is Acquire of one permit of %d and its release. No peer has a semaphore: the comparison is with distlock's own mutexes, the baseline and a naive counting semaphore on raw go-redis (a counter with no owner and no lease). × baseline, × Mutex and × counting sem. are the medians of the per-run ratios; min–max is over runs.\n\n", r.Cfg.Duration, r.Cfg.Parallel, DefaultPermits)
	} else {
		w("Uncontended, %v per lock per half: one goroutine on a new key for every acquire+release (as in a), then %d goroutines each on its own key (as in b). No peer has a read-write lock: the comparison is with distlock's own mutexes and the baseline. × baseline and × Mutex are the medians of the per-run ratios; min–max is over runs.\n\n", r.Cfg.Duration, r.Cfg.Parallel)
	}
	baseTitle := map[string]string{Distlock: "× Mutex", RawSem: "× counting sem."}
	par := fmt.Sprintf("%d goroutines, own keys", r.Cfg.Parallel)
	head := func() string {
		h := " × baseline" + medianOfRatios + " |"
		for _, base := range bases {
			h += " " + baseTitle[base] + medianOfRatios + " |"
		}
		return h + " min–max |"
	}
	w("| lock | 1 goroutine, new keys: acquire+release /s |%s %s: acquire+release /s |%s redis-server CPU / op: 1 goroutine; %d | EVALSHA execution (1 goroutine) | errors |\n", head(), par, head(), r.Cfg.Parallel)
	w("|---|")
	for range 2 * (len(bases) + 3) {
		w("---:|")
	}
	w("---:|---:|---:|\n")
	vs := func(lib, base string, m metric) string {
		if r.Results[scen][base] == nil {
			return "–"
		}
		return trimRatio(r.RatioTo(scen, lib, base, m)) + "×"
	}
	cells := func(l string, m metric) string {
		c := fmt.Sprintf(" %s | %s× |", perSec(r.Value(scen, l, m)), trimRatio(r.Ratio(scen, l, m)))
		for _, base := range bases {
			c += " " + vs(l, base, m) + " |"
		}
		return c + " " + r.spread(scen, l, m) + " |"
	}
	for _, l := range r.LibsFor(scen) {
		if r.Results[scen][l] == nil {
			continue
		}
		w("| %s |%s%s %s | %s | %s |\n", LibTitle(l), cells(l, mOps1), cells(l, mOpsPar),
			fmtMicros(r.Value(scen, l, mSrvCPU))+"; "+fmtMicros(r.Value(scen, l, mParCPU)), fmtMicros(r.Value(scen, l, mScript)), fmtF(0)(r.total(scen, l, mErrs)))
	}
	w("\n")
}

// streamMarkdown renders scenario h: a column per lock.
func (r *Report) streamMarkdown(b *strings.Builder) {
	if r.Results[ScenH] == nil {
		return
	}
	w := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	st := r.Cfg.Stream
	var libs []string
	for _, l := range r.LibsFor(ScenH) {
		if r.Results[ScenH][l] != nil {
			libs = append(libs, l)
		}
	}
	w("#### %s\n\n", ScenarioTitle(ScenH, r.Cfg))
	w("%v per lock per run. The readers (%d processes × %d goroutines) take the lock, hold it %v and ask again at once; the writer (the lockbench process) asks every %v–%v and holds it %v. With the RWMutex the readers take its read side and the writer its write side; with the Mutex and the FairMutex everyone takes the same exclusive lock. A wait runs from the Lock (RLock) call to the acquisition. Median over runs (min–max); × RWMutex is the median of the per-run ratios; violations and errors are summed over runs; the pooled row puts the writes of every run together.\n\n",
		st.Duration, st.Procs, st.Workers, st.ReadHold, st.WriteMin, st.WriteMax, st.WriteHold)
	t := libTable{r: r, w: w, scen: ScenH, libs: libs}
	t.header()
	row := t.row
	withRatio := func(m metric) func(string) string { return t.withRatio(m, DistlockRW, "RWMutex") }
	row("**writer's wait p50**", withRatio(mWriterP50))
	row("**writer's wait p99**", withRatio(mWriterP99))
	row("writer's wait, all runs pooled: p50 / p99 / max (writes)", func(l string) string {
		var all []time.Duration
		for _, res := range r.Results[ScenH][l] {
			all = append(all, res.Stream.WriterWaits...)
		}
		if len(all) == 0 {
			return "–"
		}
		return fmt.Sprintf("%s / %s / %s (%d)", fmtDur(float64(Percentile(all, 50))), fmtDur(float64(Percentile(all, 99))), fmtDur(float64(Percentile(all, 100))), len(all))
	})
	row(mAmid.name, func(l string) string { return mAmid.format(r.Value(ScenH, l, mAmid)) })
	row("writer's wait split, p50 of each step (writes that queued): Lock → queued (Waiting event) / → the holders ahead gone (guard empty) / → acquired", func(l string) string {
		return fmt.Sprintf("%s / %s / %s", mToQueued.format(r.Value(ScenH, l, mToQueued)), mDrain.format(r.Value(ScenH, l, mDrain)), mHandoff.format(r.Value(ScenH, l, mHandoff)))
	})
	row("**readers' acquisitions /s**", withRatio(mAcq))
	row(mReaderP50.name, withRatio(mReaderP50))
	row(mReaderP99.name, withRatio(mReaderP99))
	row("**most holders at once** (readers overlapping)", func(l string) string {
		return mHolders.format(r.Value(ScenH, l, mHolders)) + " (" + r.spread(ScenH, l, mHolders) + ")"
	})
	row("readers' fairness (Jain)", func(l string) string { return mFair.format(r.Value(ScenH, l, mFair)) })
	row(mReadHold.name, func(l string) string { return mReadHold.format(r.Value(ScenH, l, mReadHold)) })
	row("CPU, share of one core: redis-server / the client processes / the rest of the machine / stolen by the hypervisor", func(l string) string {
		pc := func(m metric) string { return fmt.Sprintf("%.0f %%", 100*r.Value(ScenH, l, m)) }
		return pc(mBusy) + " / " + pc(mClientBusy) + " / " + pc(mOtherBusy) + " / " + pc(mSteal)
	})
	row("**violations** (a writer overlapping anyone, or a mutex's holders overlapping)", func(l string) string { return fmtF(0)(r.total(ScenH, l, mViol)) })
	row("errors", func(l string) string { return fmtF(0)(r.total(ScenH, l, mErrs)) })
	w("\n")
}
