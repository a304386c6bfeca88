package harness

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// The report's tables of scenarios j and k (i shares g's, ratesMarkdown).

var (
	mSemWaitP50 = metric{name: "wait p50", get: func(r Result) float64 { return float64(r.Sem.WaitP50) }, format: fmtDur, lowerBetter: true}
	mSemWaitP99 = metric{name: "wait p99", get: func(r Result) float64 { return float64(r.Sem.WaitP99) }, format: fmtDur, lowerBetter: true}
	mSemWaitAvg = metric{name: "wait mean", get: func(r Result) float64 { return float64(r.Sem.WaitMean) }, format: fmtDur, lowerBetter: true}
	mSemCmds    = metric{name: "Redis commands / acquisition", get: func(r Result) float64 { return r.Sem.Cmds }, format: fmtF(1)}
	mSemScripts = metric{name: "script calls / acquisition", get: func(r Result) float64 { return r.Sem.Scripts }, format: fmtF(2)}
	mSemScrUsec = metric{name: "script time / acquisition", get: func(r Result) float64 { return r.Sem.ScriptUsec }, format: fmtMicros}
	mSemWaitMax = metric{name: "wait max", get: func(r Result) float64 { return float64(r.Sem.WaitMax) }, format: fmtDur, lowerBetter: true}
	mSemBusy    = metric{name: "permits busy", get: func(r Result) float64 { return r.Sem.Busy }, format: fmtPercent}
	mSemMax     = metric{name: "most permits held at once", get: func(r Result) float64 { return float64(r.Sem.MaxPermits) }, format: fmtF(0)}
	mSemMin     = metric{name: "fewest acquisitions of a goroutine", get: func(r Result) float64 { return float64(r.Sem.MinCount) }, format: fmtF(0)}
	mSemMost    = metric{name: "most acquisitions of a goroutine", get: func(r Result) float64 { return float64(r.Sem.MaxCount) }, format: fmtF(0)}
	mSemSrv     = metric{name: "redis-server CPU", get: func(r Result) float64 { return r.Sem.ServerBusy }, format: fmtPercent}
	mSemCli     = metric{name: "client CPU", get: func(r Result) float64 { return r.Sem.ClientBusy }, format: fmtPercent}
	mSemOther   = metric{name: "other CPU", get: func(r Result) float64 { return r.Sem.OtherBusy }, format: fmtPercent}
	mSemSteal   = metric{name: "stolen CPU", get: func(r Result) float64 { return r.Sem.Steal }, format: fmtPercent}
)

func fmtPercent(v float64) string {
	if math.IsNaN(v) {
		return "–"
	}
	return fmt.Sprintf("%.0f %%", 100*v)
}

// lowest is the smallest value of a metric over runs (NaN for none).
func (r *Report) lowest(scen, lib string, m metric) float64 { return Min(r.values(scen, lib, m)) }

// highest is the largest value of a metric over runs (NaN for none).
func (r *Report) highest(scen, lib string, m metric) float64 { return Max(r.values(scen, lib, m)) }

// semMarkdown renders scenario j or k: a column per semaphore.
func (r *Report) semMarkdown(b *strings.Builder, scen string) {
	if r.Results[scen] == nil {
		return
	}
	w := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	sc := r.Cfg.Sem
	var libs []string
	for _, l := range r.LibsFor(scen) {
		if r.Results[scen][l] != nil {
			libs = append(libs, l)
		}
	}
	w("#### %s\n\n", ScenarioTitle(scen, r.Cfg))
	who := fmt.Sprintf("%d goroutines of one process", sc.Goroutines)
	if scen == ScenK {
		who = fmt.Sprintf("%d processes × %d goroutines", sc.Procs, sc.ProcWorkers)
	}
	w("%v per semaphore per run. %s share a semaphore of %d permits: each takes one permit, holds it %v and asks again at once, so the permits are never enough (the ceiling is %d permits / the measured hold). A wait runs from the Acquire (Lock) call to the acquisition. Every holder enters a guard that counts the permits held (shared by the processes): more than %d at once is a violation. Median over runs (min–max); × counting sem. is the median of the per-run ratios to the naive counting semaphore; violations and errors are summed over runs.\n\n",
		sc.Duration, who, sc.Permits, sc.Hold, sc.Permits, sc.Permits)
	t := libTable{r: r, w: w, scen: scen, libs: libs}
	t.header()
	row := t.row
	withRatio := func(m metric) func(string) string { return t.withRatio(m, RawSem, "counting sem.") }
	plain := func(m metric) func(string) string {
		return func(l string) string { return m.format(r.Value(scen, l, m)) + " (" + r.spread(scen, l, m) + ")" }
	}
	row("**acquisitions /s**", withRatio(mAcq))
	row(fmt.Sprintf("ceiling: %d / mean hold (measured hold)", sc.Permits), func(l string) string {
		h := r.Value(scen, l, mHold)
		if math.IsNaN(h) || h <= 0 {
			return "–"
		}
		return fmt.Sprintf("%s (%s)", perSec(float64(sc.Permits)/time.Duration(h).Seconds()), fmtDur(h))
	})
	row("permits busy (time held / run × capacity)", plain(mSemBusy))
	row("**wait p50**", withRatio(mSemWaitP50))
	row("**wait p99**", withRatio(mSemWaitP99))
	row("wait mean", withRatio(mSemWaitAvg))
	row("wait max (the longest of any run)", func(l string) string { return fmtDur(r.highest(scen, l, mSemWaitMax)) })
	row("**fairness (Jain)** over the goroutines' acquisitions", func(l string) string {
		return fmtF(3)(r.Value(scen, l, mFair)) + " (" + fmtF(3)(r.lowest(scen, l, mFair)) + " – " + fmtF(3)(r.highest(scen, l, mFair)) + ")"
	})
	row("acquisitions of one goroutine: fewest in any run / median of the runs' fewest / of the runs' most", func(l string) string {
		return fmt.Sprintf("%s / %s / %s", fmtF(0)(r.lowest(scen, l, mSemMin)), fmtF(0)(r.Value(scen, l, mSemMin)), fmtF(0)(r.Value(scen, l, mSemMost)))
	})
	row("**most permits held at once**", plain(mSemMax))
	row("per acquisition, in Redis (INFO commandstats): commands, those inside scripts included / script calls (EVALSHA) / time in scripts", func(l string) string {
		return fmtF(1)(r.Value(scen, l, mSemCmds)) + " / " + fmtF(2)(r.Value(scen, l, mSemScripts)) + " / " + fmtMicros(r.Value(scen, l, mSemScrUsec))
	})
	row("CPU, share of one core: redis-server / the client processes / the rest of the machine / stolen", func(l string) string {
		return fmtPercent(r.Value(scen, l, mSemSrv)) + " / " + fmtPercent(r.Value(scen, l, mSemCli)) + " / " + fmtPercent(r.Value(scen, l, mSemOther)) + " / " + fmtPercent(r.Value(scen, l, mSemSteal))
	})
	row(fmt.Sprintf("**violations** (more than %d permits held at once)", sc.Permits), func(l string) string { return fmtF(0)(r.total(scen, l, mViol)) })
	row("errors", func(l string) string { return fmtF(0)(r.total(scen, l, mErrs)) })
	w("\n")
}
