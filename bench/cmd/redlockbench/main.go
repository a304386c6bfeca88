// Command redlockbench compares distlock's Redlock (NewRedlock) with
// redsync's over the same independent redis-server masters, in one run,
// and prints a Markdown report with medians and ratios:
//
//	(a) 1 goroutine, a new key per acquire+release: pairs per second
//	(b) 32 goroutines, keys of their own: pairs per second
//	(c) hand-over: from the start of the holder's release call to the
//	    waiter's Lock returning, the waiter being another client (its own
//	    connections); p50 and p90
//
// Usage (from bench/):
//
//	go run ./cmd/redlockbench [-masters 3] [-runs 5] [-duration 2s] [-rounds 20]
//
// With -pin (the default, on Linux with 2 CPUs or more), the masters run on
// the last CPU and this process on the others.
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/distlock/distlock/bench/internal/harness"
	"github.com/distlock/distlock/bench/internal/quorumbench"
	"github.com/distlock/distlock/redistest"
)

func main() {
	masters := flag.Int("masters", 3, "independent redis-server masters")
	runs := flag.Int("runs", 5, "runs of each measure; the report shows medians")
	duration := flag.Duration("duration", 2*time.Second, "time per library per run of (a) and (b)")
	parallel := flag.Int("parallel", 32, "goroutines of (b)")
	rounds := flag.Int("rounds", 20, "hand-overs per library per run of (c)")
	pause := flag.Duration("pause", 20*time.Millisecond, "how long the holder keeps the lock once the waiter waits, in (c)")
	pin := flag.Bool("pin", true, "pin the masters to the last CPU and this process to the others")
	flag.Parse()
	if *masters < 3 || *masters%2 == 0 || *runs < 1 || *rounds < 1 || *duration <= 0 || *parallel < 1 {
		fatal(fmt.Errorf("want an odd -masters ≥ 3, and positive -runs, -rounds, -duration and -parallel"))
	}

	serverCPUs, err := harness.PinServers(*pin)
	if err != nil {
		fatal(err)
	}
	var addrs []string
	var servers []*redistest.Server
	stop := func() {
		for _, s := range servers {
			_ = s.Stop()
		}
	}
	defer stop()
	for range *masters {
		srv, err := redistest.NewServer()
		if err != nil {
			stop()
			fatal(err)
		}
		servers = append(servers, srv)
		addrs = append(addrs, srv.Addr())
		if serverCPUs != nil {
			if err := harness.Pin(srv.PID(), serverCPUs); err != nil {
				stop()
				fatal(err)
			}
		}
	}

	single := map[string][]float64{}
	par := map[string][]float64{}
	p50 := map[string][]float64{}
	p90 := map[string][]float64{}
	start := time.Now()
	for run := range *runs {
		for _, lib := range harness.Rotated(quorumbench.Libs, run) { // no library always first
			r, err := measure(lib, addrs, *duration, *parallel, *rounds, *pause)
			if err != nil {
				stop()
				fatal(fmt.Errorf("%s: %w", lib, err))
			}
			single[lib] = append(single[lib], r.single)
			par[lib] = append(par[lib], r.par)
			p50[lib] = append(p50[lib], ms(quorumbench.Percentile(r.handover, 50)))
			p90[lib] = append(p90[lib], ms(quorumbench.Percentile(r.handover, 90)))
			fmt.Fprintf(os.Stderr, "run %d/%d %-9s (a) %7.0f/s  (b) %7.0f/s  (c) p50 %.2f ms p90 %.2f ms\n",
				run+1, *runs, lib, r.single, r.par, ms(quorumbench.Percentile(r.handover, 50)), ms(quorumbench.Percentile(r.handover, 90)))
		}
	}

	med := func(m map[string][]float64, lib string) float64 { return quorumbench.Median(m[lib]) }
	var b strings.Builder
	fmt.Fprintf(&b, "### Redlock over %d masters: distlock vs redsync\n\n", *masters)
	fmt.Fprintf(&b, "`go run ./cmd/redlockbench %s`, %d runs (medians), %v per run of (a) and (b), %d hand-overs per run of (c); took %v.\n\n",
		strings.Join(os.Args[1:], " "), *runs, *duration, *rounds, time.Since(start).Round(time.Second))
	fmt.Fprintf(&b, "| library | (a) 1 goroutine, pairs/s | (b) %d goroutines, pairs/s | (c) hand-over p50 | (c) p90 |\n|---|---|---|---|---|\n", *parallel)
	for _, lib := range quorumbench.Libs {
		fmt.Fprintf(&b, "| %s | %.0f | %.0f | %.2f ms | %.2f ms |\n", lib, med(single, lib), med(par, lib), med(p50, lib), med(p90, lib))
	}
	r := quorumbench.Redsync
	for _, d := range []string{quorumbench.Distlock, quorumbench.DistlockRueidis} {
		fmt.Fprintf(&b, "| **%s ÷ redsync** (ratio of the medians) | **%.2f×** | **%.2f×** | **%.1f× faster** | **%.1f× faster** |\n",
			d, med(single, d)/med(single, r), med(par, d)/med(par, r), med(p50, r)/med(p50, d), med(p90, r)/med(p90, d))
	}
	b.WriteString("\n")
	fmt.Fprintf(&b, "Machine: %d CPUs, %s/%s. %s\n", runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, pinning(serverCPUs))
	fmt.Print(b.String())
}

// A result is one library's figures in one run.
type result struct {
	single, par float64
	handover    []time.Duration
}

func measure(lib string, addrs []string, d time.Duration, parallel, rounds int, pause time.Duration) (result, error) {
	var r result
	l, err := quorumbench.New(lib, addrs)
	if err != nil {
		return r, err
	}
	defer l.Close()
	if r.single, err = quorumbench.Uncontended(l, 1, d); err != nil {
		return r, err
	}
	if r.par, err = quorumbench.Uncontended(l, parallel, d); err != nil {
		return r, err
	}
	w, err := quorumbench.New(lib, addrs)
	if err != nil {
		return r, err
	}
	defer w.Close()
	r.handover, err = quorumbench.Handover(l, w, rounds, pause)
	return r, err
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func pinning(serverCPUs []int) string {
	if serverCPUs == nil {
		return "Not pinned."
	}
	return fmt.Sprintf("Pinned: the masters on CPU %v, this process on the others.", serverCPUs)
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "redlockbench:", err)
	os.Exit(1)
}
