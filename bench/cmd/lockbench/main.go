// Command lockbench benchmarks distlock (its Mutex and its FairMutex)
// against its Go peers (a raw go-redis baseline, go-redsync/redsync/v4,
// bsm/redislock and rueidislock) in one invocation, on redis-server
// processes it starts itself on loopback ports, and prints a markdown
// report with ratios to the baseline of the same run; scenarios g and h
// measure its RWMutex against its own mutexes, i, j and k its Semaphore
// against its mutexes and a naive counting semaphore; -observers adds
// distlock with its Prometheus and OpenTelemetry observers to a and b.
// See ../../README.md.
//
//	go run ./cmd/lockbench -out ../docs/benchmarks.md -chart ../docs/benchmarks.png
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/distlock/distlock/bench/internal/harness"
	"github.com/distlock/distlock/redistest"
	"github.com/redis/go-redis/v9"
)

func main() {
	harness.RunWorkerIfRequested() // worker processes of scenarios d, e, f, h, k

	cfg := harness.DefaultConfig()
	flag.DurationVar(&cfg.Duration, "duration", cfg.Duration, "time per library per run in scenarios a-d, and per half of g (3× that bounds a run of e)")
	runs := flag.Int("runs", 5, "runs of each scenario a-e, g-k; the report shows medians")
	flag.IntVar(&cfg.Rounds, "rounds", cfg.Rounds, "hand-overs per library per run in scenario e")
	scen := flag.String("scenarios", "a,b,c,d,e,f", "scenarios to run, comma-separated (a-k; g and h, the RWMutex's, and i, j and k, the Semaphore's, run only when named)")
	libsFlag := flag.String("libs", "all", "libraries, comma-separated: "+strings.Join(harness.AllLibs, ",")+" (raw, the baseline, always runs)")
	out := flag.String("out", "", "markdown file to write the report into (between <!-- lockbench:begin/end --> markers)")
	chart := flag.String("chart", "", "PNG file to draw the ratio chart into")
	flag.DurationVar(&cfg.Hold, "hold", cfg.Hold, "time in the critical section in scenarios c and d")
	flag.IntVar(&cfg.Scale.Locks, "locks", cfg.Scale.Locks, "locks held in scenario f")
	flag.DurationVar(&cfg.Scale.TTL, "scale-ttl", cfg.Scale.TTL, "lease of the locks held in scenario f")
	flag.DurationVar(&cfg.Scale.Hold, "scale-hold", cfg.Scale.Hold, "how long renewals are measured in scenario f")
	flag.IntVar(&cfg.Scale.Waiters, "waiters", cfg.Scale.Waiters, "waiting goroutines in scenario f")
	flag.IntVar(&cfg.Scale.WaitKeys, "wait-keys", cfg.Scale.WaitKeys, "keys they wait on")
	scaleRuns := flag.Int("scale-runs", 1, "runs of scenario f")
	flag.DurationVar(&cfg.Stream.Duration, "stream-duration", cfg.Stream.Duration, "time per lock per run in scenario h")
	flag.IntVar(&cfg.Stream.Procs, "stream-procs", cfg.Stream.Procs, "reader processes in scenario h")
	flag.IntVar(&cfg.Stream.Workers, "stream-readers", cfg.Stream.Workers, "reader goroutines per process in scenario h")
	flag.DurationVar(&cfg.Stream.ReadHold, "read-hold", cfg.Stream.ReadHold, "a reader's time in the critical section in scenario h")
	flag.DurationVar(&cfg.Stream.WriteHold, "write-hold", cfg.Stream.WriteHold, "the writer's time in the critical section in scenario h")
	flag.DurationVar(&cfg.Stream.WriteMin, "write-every-min", cfg.Stream.WriteMin, "the writer's shortest pause between writes in scenario h")
	flag.DurationVar(&cfg.Stream.WriteMax, "write-every-max", cfg.Stream.WriteMax, "the writer's longest pause between writes in scenario h")
	flag.DurationVar(&cfg.Sem.Duration, "sem-duration", cfg.Sem.Duration, "time per semaphore per run in scenarios j and k")
	flag.IntVar(&cfg.Sem.Permits, "sem-permits", cfg.Sem.Permits, "the semaphore's permits in scenarios j and k")
	flag.IntVar(&cfg.Sem.Goroutines, "sem-goroutines", cfg.Sem.Goroutines, "goroutines sharing the semaphore in scenario j")
	flag.IntVar(&cfg.Sem.Procs, "sem-procs", cfg.Sem.Procs, "processes sharing the semaphore in scenario k")
	flag.IntVar(&cfg.Sem.ProcWorkers, "sem-proc-goroutines", cfg.Sem.ProcWorkers, "goroutines per process in scenario k")
	flag.DurationVar(&cfg.Sem.Hold, "sem-hold", cfg.Sem.Hold, "time a permit is held in scenarios j and k")
	flag.StringVar(&cfg.Scale.CPUProfile, "scale-cpuprofile", "", "write a CPU profile of the client during the renewal window of scenario f")
	timeout := flag.Duration("timeout", 15*time.Minute, "hard limit for the whole invocation")
	reference := flag.Bool("reference", true, "also run the raw go-redis pub/sub reference in scenario e")
	observers := flag.Bool("observers", false, "also run distlock with observers in scenarios a and b: "+strings.Join(harness.ObservedLibs, ", ")+" (the Prometheus Collector; the OpenTelemetry Observer on SDK providers, every span sampled and dropped), reported beside distlock, which -libs must keep")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of this process (scenarios a-c and e's holder run in it)")
	pin := flag.Bool("pin", true, "pin each redis-server to the last CPU and the clients (this process and its workers) to the others")
	flag.Parse()

	scenarios, err := harness.ParseScenarios(*scen)
	if err != nil {
		fatal(err)
	}
	libs, err := harness.ParseLibs(*libsFlag)
	if err != nil {
		fatal(err)
	}
	if *runs < 1 || cfg.Rounds < 1 || cfg.Duration <= 0 {
		fatal(fmt.Errorf("-runs, -rounds and -duration must be positive"))
	}
	if st := cfg.Stream; st.Duration <= 0 || st.Procs < 1 || st.Workers < 1 || st.WriteMin < 0 || st.WriteMax < st.WriteMin {
		fatal(fmt.Errorf("-stream-duration, -stream-procs and -stream-readers must be positive, and -write-every-max ≥ -write-every-min ≥ 0"))
	}
	if sc := cfg.Sem; sc.Duration <= 0 || sc.Permits < 1 || sc.Goroutines < 1 || sc.Procs < 1 || sc.ProcWorkers < 1 || sc.Hold < 0 {
		fatal(fmt.Errorf("-sem-duration, -sem-permits, -sem-goroutines, -sem-procs and -sem-proc-goroutines must be positive, -sem-hold ≥ 0"))
	}

	b := &bench{}
	if *pin {
		var err error
		if b.serverCPUs, b.clientCPUs, err = harness.PinApart(); err != nil {
			fatal(err)
		}
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		select {
		case s := <-sig:
			b.abort("got " + s.String())
		case <-time.After(*timeout):
			b.abort(fmt.Sprintf("-timeout %v exceeded", *timeout))
		}
	}()

	if *cpuprofile != "" {
		stop, err := harness.StartCPUProfile(*cpuprofile)
		if err != nil {
			fatal(err)
		}
		defer stop()
	}

	rep := harness.NewReport(cfg, libs, scenarios, *runs)
	if *reference {
		rep.Extra[harness.ScenE] = []string{harness.RawPubSub}
	}
	if *observers {
		if !slices.Contains(libs, harness.Distlock) {
			fatal(fmt.Errorf("-observers compares with distlock: keep it in -libs"))
		}
		rep.AddObservers()
	}
	rep.Command = "go run ./cmd/lockbench " + strings.Join(os.Args[1:], " ")
	start := time.Now()
	load0 := harness.LoadAvg()
	var version string
	for _, s := range scenarios {
		srv, err := b.server()
		if err != nil {
			fatal(err)
		}
		version = serverVersion(srv.Addr())
		if s == harness.ScenF {
			for i := range *scaleRuns {
				harness.Logf("f run %d/%d: %d locks, %d waiters…", i+1, *scaleRuns, cfg.Scale.Locks, cfg.Scale.Waiters)
				sr, wr, err := harness.RunScale(srv.Addr(), cfg.Scale)
				if err != nil {
					b.abort("scenario f: " + err.Error())
				}
				rep.Scale = append(rep.Scale, sr)
				rep.Waiters = append(rep.Waiters, wr)
				harness.Logf("f: heap/lock %.0f B, ticks %d, round trips %d, evalsha %d, renewed %d, cpu %.2fs/%.1fs, lost %d; waiters: pubsub conns %d, heap/waiter %.0f B, drain %.2fs",
					sr.HeapPerLock, sr.Ticks, sr.RoundTrips, sr.Evalsha, sr.Renewed, sr.ClientCPU, sr.WindowSecs, sr.Lost, wr.PubSubConns, wr.HeapPerWaiter, wr.DrainSecs)
			}
		} else {
			// The rotation gives the first slot on a fresh server to the
			// baseline, and that slot tends to be slow: the baseline's run
			// 1 of (a) measured 2-5 % below its later runs on a quiet host
			// and up to 55 % on a loaded one), which raises every
			// other library's ratio in that run. An untimed run of the
			// first library takes that slot.
			if err := harness.FlushAll(srv.Addr()); err != nil {
				b.abort(err.Error())
			}
			if _, err := harness.Run(s, rep.LibsFor(s)[0], srv.Addr(), cfg); err != nil {
				b.abort(fmt.Sprintf("scenario %s, warm-up: %v", s, err))
			}
			for run := range *runs {
				// Rotate the order so that no library always goes first.
				for _, lib := range harness.Rotated(rep.LibsFor(s), run) {
					if err := harness.FlushAll(srv.Addr()); err != nil {
						b.abort(err.Error())
					}
					res, err := harness.Run(s, lib, srv.Addr(), cfg)
					if err != nil {
						b.abort(fmt.Sprintf("scenario %s, %s: %v", s, lib, err))
					}
					rep.Add(s, res)
					harness.Logf("%s run %d/%d %-12s %s", s, run+1, *runs, lib, brief(s, res))
				}
			}
		}
		b.stopServer(srv)
	}
	rep.Took = time.Since(start)
	rep.Machine = machine(version, load0, harness.LoadAvg())
	if b.serverCPUs != nil {
		rep.Machine += fmt.Sprintf(" Pinned (-pin): redis-server on CPU %v, lockbench and its worker processes on CPU %v (GOMAXPROCS %d), so that client and server never share a core and the round trip does not flip between same-core and cross-core wake-ups.", b.serverCPUs, b.clientCPUs, len(b.clientCPUs))
	} else {
		rep.Machine += " Not pinned (-pin=false)."
	}

	md := rep.Markdown()
	fmt.Print(md)
	if *out != "" {
		if err := harness.Splice(*out, md); err != nil {
			fatal(err)
		}
		harness.Logf("report written into %s", *out)
	}
	if *chart != "" {
		if panels := rep.ChartPanels(); len(panels) > 0 {
			title := "distlock and Go peers vs raw go-redis (SET NX PX + compare-and-delete, spinning)"
			sub := fmt.Sprintf("median of %d runs; x baseline: the ratio to the baseline of the same run, median over runs", *runs)
			if err := harness.DrawChart(*chart, title, sub, panels); err != nil {
				fatal(err)
			}
			harness.Logf("chart written to %s", *chart)
		}
	}
}

func brief(s string, r harness.Result) string {
	switch s {
	case harness.ScenA, harness.ScenB:
		if r.SeenPerOp > 0 {
			return fmt.Sprintf("%8.0f ops/s  errors %d  client CPU %.1fµs/op  seen by the observer %.2f/op", r.OpsPerS, r.Errors, r.ClientCPUPerOp, r.SeenPerOp)
		}
		return fmt.Sprintf("%8.0f ops/s  errors %d", r.OpsPerS, r.Errors)
	case harness.ScenC, harness.ScenD:
		return fmt.Sprintf("%8.0f acq/s  %8.0f changes/s  fairness %.2f  violations %d  hold %v  errors %d", r.OpsPerS, r.Changes, r.Fairness, r.Viol, r.HoldMean, r.Errors)
	case harness.ScenE:
		return fmt.Sprintf("p50 %v  p90 %v  cmds/round %.1f (sent %.1f, in scripts %.1f)  rounds %d  violations %d", r.P50, r.P90, r.CmdsPerRound, r.TopPerRound, r.InScriptRound, r.Rounds, r.Viol)
	case harness.ScenG, harness.ScenI:
		return fmt.Sprintf("%8.0f ops/s (1 goroutine)  %8.0f ops/s (parallel)  errors %d", r.OpsPerS, r.ParOpsPerS, r.Errors)
	case harness.ScenJ, harness.ScenK:
		sm := r.Sem
		return fmt.Sprintf("%6.0f acq/s  busy %.0f%%  wait p50 %v p99 %v max %v mean %v  fairness %.3f  per goroutine %d–%d  most permits %d  hold %v  per acq: %.1f cmds %.2f scripts %.0fµs  CPU redis %.0f%% clients %.0f%% others %.0f%% steal %.0f%%  violations %d  errors %d",
			r.OpsPerS, 100*sm.Busy, sm.WaitP50, sm.WaitP99, sm.WaitMax, sm.WaitMean, r.Fairness, sm.MinCount, sm.MaxCount, sm.MaxPermits, sm.Hold, sm.Cmds, sm.Scripts, sm.ScriptUsec, 100*sm.ServerBusy, 100*sm.ClientBusy, 100*sm.OtherBusy, 100*sm.Steal, r.Viol, r.Errors)
	case harness.ScenH:
		st := r.Stream
		return fmt.Sprintf("writer wait p50 %v p99 %v max %v (%d writes, %d amid readers; split %v / %v / %v)  readers %6.0f acq/s wait p50 %v p99 %v  max holders %d  CPU redis %.0f%% clients %.0f%% others %.0f%% steal %.0f%%  violations %d  errors %d",
			st.WriterP50, st.WriterP99, st.WriterMax, st.Writes, st.AmidReaders, st.ToQueued, st.Drain, st.Handoff, r.OpsPerS, st.ReaderP50, st.ReaderP99, st.MaxHolders, 100*st.ServerBusy, 100*st.ClientBusy, 100*st.OtherBusy, 100*st.Steal, r.Viol, r.Errors)
	}
	return ""
}

// bench tracks the servers it started, to stop them on any exit.
type bench struct {
	mu         sync.Mutex
	servers    []*redistest.Server
	serverCPUs []int // when pinning
	clientCPUs []int
}

func (b *bench) server() (*redistest.Server, error) {
	srv, err := redistest.NewServer()
	if err != nil {
		return nil, err
	}
	if !strings.HasPrefix(srv.Addr(), "127.0.0.1:") {
		srv.Stop()
		return nil, fmt.Errorf("server not on loopback: %s", srv.Addr())
	}
	b.mu.Lock()
	b.servers = append(b.servers, srv)
	b.mu.Unlock()
	if b.serverCPUs != nil {
		if err := harness.Pin(srv.PID(), b.serverCPUs); err != nil {
			return nil, err
		}
	}
	return srv, nil
}

func (b *bench) stopServer(srv *redistest.Server) {
	_ = srv.Stop()
}

func (b *bench) abort(why string) {
	harness.Logf("lockbench: %s; stopping", why)
	b.mu.Lock()
	for _, s := range b.servers {
		_ = s.Stop()
	}
	b.mu.Unlock()
	os.Exit(1)
}

func serverVersion(addr string) string {
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	info, err := rdb.Info(context.Background(), "server").Result()
	if err != nil {
		return "?"
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			return v
		}
	}
	return "?"
}

func machine(redisVersion, load0, load1 string) string {
	kernel := "?"
	if out, err := exec.Command("uname", "-sr").Output(); err == nil {
		kernel = strings.TrimSpace(string(out))
	}
	// The library's commit: lockbench runs from bench/.
	rev := harness.Commit("")
	return fmt.Sprintf("distlock at commit %s. Machine: %d CPU cores (%s), %s, %s %s/%s, redis-server %s (one per scenario, on 127.0.0.1, no persistence), load average %s at the start and %s at the end.",
		rev, runtime.NumCPU(), harness.CPUModel(), kernel, runtime.Version(), runtime.GOOS, runtime.GOARCH, redisVersion, load0, load1)
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "lockbench:", err)
	os.Exit(1)
}
