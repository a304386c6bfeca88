// Command etcdbench benchmarks distlock on etcd (etcdstore: its Mutex,
// and its FairMutex once the store serves it) against
// go.etcd.io/etcd/client/v3/concurrency's Mutex, in one invocation, on an
// embedded etcd cluster (package etcdtest's members, run in a child
// process) that it starts itself, and prints a markdown report with
// ratios to concurrency.Mutex of the same run. See ../../README.md.
//
//	go run ./cmd/etcdbench                        # a, b, c, e on 1 member, 5 runs
//	go run ./cmd/etcdbench -members 1,3 -out ../docs/benchmarks.md
//	go run ./cmd/etcdbench -scenarios s -locks 100000   # held locks
//	go run ./cmd/etcdbench -scenarios w           # server settings and the hand-over
package main

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/distlock/distlock/bench/internal/etcdbench"
	"github.com/distlock/distlock/bench/internal/harness"
)

type config struct {
	runs       int
	duration   time.Duration
	parallel   int
	clients    int
	goroutines int
	hold       time.Duration
	rounds     int
	pause      time.Duration
	longPause  time.Duration
	jitter     time.Duration
	libs       []string
	scale      etcdbench.ScaleConfig
}

func main() {
	etcdbench.RunServerIfRequested()

	var c config
	members := flag.String("members", "1", "cluster sizes to run a, b, c and e on, comma-separated (1, 3)")
	flag.IntVar(&c.runs, "runs", 5, "runs of a, b, c and e; the report shows medians, and ratios as medians of per-run ratios")
	flag.DurationVar(&c.duration, "duration", time.Second, "time per library per run of a, b and c")
	flag.IntVar(&c.parallel, "parallel", 32, "goroutines of b, each on a key of its own")
	flag.IntVar(&c.clients, "clients", 4, "clients (etcd clients and lock clients of their own) of c")
	flag.IntVar(&c.goroutines, "goroutines", 4, "goroutines per client of c")
	flag.DurationVar(&c.hold, "hold", 100*time.Microsecond, "time in the critical section in c")
	flag.IntVar(&c.rounds, "rounds", 20, "hand-overs per library per run of e")
	flag.DurationVar(&c.pause, "pause", 20*time.Millisecond, "in e, how long the holder keeps the lock once the waiter waits")
	flag.DurationVar(&c.jitter, "jitter", 100*time.Millisecond, "in e and w, a random sleep of up to this before each round (0: rounds back to back, in step with the server's 100 ms watch resync)")
	flag.DurationVar(&c.longPause, "long-pause", 200*time.Millisecond, "e is run again with this pause (0: not)")
	scen := flag.String("scenarios", "a,b,c,e", "scenarios, comma-separated: a, b, c, e; s (held locks) and w (server settings and the hand-over) run only when named")
	libsFlag := flag.String("libs", strings.Join(etcdbench.HandoverLibs, ","), "libraries (concurrency, the baseline, always runs; concurrency-rev1 only in e and w)")
	flag.IntVar(&c.scale.Locks, "locks", 100_000, "locks held in s")
	flag.DurationVar(&c.scale.TTL, "scale-ttl", 0, "their lease in s (0: the library's default, 30 s)")
	flag.DurationVar(&c.scale.Window, "scale-window", 25*time.Second, "how long s measures renewals once the locks are held")
	flag.IntVar(&c.scale.AcquireConc, "scale-conc", 64, "goroutines taking the locks in s")
	out := flag.String("out", "", "markdown file to write the report into (between <!-- etcdbench:begin/end --> markers)")
	pin := flag.Bool("pin", true, "pin the server process to the last CPU and this process to the others")
	timeout := flag.Duration("timeout", 40*time.Minute, "hard limit for the whole invocation")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the clients (this process, not the server's) to this file")
	flag.Parse()
	stop, err := harness.StartCPUProfile(*cpuProfile)
	if err != nil {
		fatal(err)
	}
	defer stop()

	c.libs = []string{etcdbench.Concurrency}
	for _, l := range harness.SplitList(*libsFlag) {
		if l != etcdbench.Concurrency {
			if !slices.Contains(etcdbench.HandoverLibs, l) {
				fatal(fmt.Errorf("unknown library %q", l))
			}
			c.libs = append(c.libs, l)
		}
	}
	var sizes []int
	for _, m := range strings.Split(*members, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(m))
		if err != nil || n < 1 {
			fatal(fmt.Errorf("bad -members %q", *members))
		}
		sizes = append(sizes, n)
	}
	scenarios := harness.SplitList(*scen)
	if c.runs < 1 || c.rounds < 1 || c.duration <= 0 || c.parallel < 1 || c.clients < 1 || c.goroutines < 1 {
		fatal(errors.New("-runs, -rounds, -duration, -parallel, -clients and -goroutines must be positive"))
	}

	serverCPUs, err := harness.PinServers(*pin)
	if err != nil {
		fatal(err)
	}
	harness.StopOnSignalOrTimeout(*timeout, stopAll)

	inv := harness.NewInvocation("etcdbench")
	w := inv.W
	for _, n := range sizes {
		if harness.HasAny(scenarios, "a", "b", "c", "e") {
			r := runRates(c, etcdbench.ServerConfig{Members: n}, scenarios, serverCPUs)
			reportRates(w, c, n, scenarios, r)
		}
	}
	if harness.HasAny(scenarios, "w") {
		sweep(w, c, serverCPUs)
	}
	if harness.HasAny(scenarios, "s") {
		scaleRun(w, c, serverCPUs)
	}
	w("%s\n", machine(inv.Load0, harness.LoadAvg(), time.Since(inv.Start), serverCPUs))
	if err := inv.Print(*out, etcdbench.Splice); err != nil {
		fatal(err)
	}
}

var servers []*etcdbench.Server

func startServer(cfg etcdbench.ServerConfig, cpus []int) *etcdbench.Server {
	s, err := etcdbench.StartServer(cfg, cpus)
	if err != nil {
		fatal(err)
	}
	servers = append(servers, s)
	return s
}

func stopAll() {
	for _, s := range servers {
		s.Stop()
	}
	servers = nil
}

// lockers makes n Lockers of lib, or reports it unsupported.
func lockers(r *etcdbench.Results, lib string, srv *etcdbench.Server, n int) []etcdbench.Locker {
	var ls []etcdbench.Locker
	for range n {
		l, err := etcdbench.NewLocker(lib, srv.Endpoints, etcdbench.Options{})
		if errors.Is(err, etcdbench.ErrUnsupported) {
			r.Unsupported[lib] = err.Error()
			closeAll(ls)
			return nil
		}
		if err != nil {
			fatal(err)
		}
		ls = append(ls, l)
	}
	return ls
}

func closeAll(ls []etcdbench.Locker) {
	for _, l := range ls {
		_ = l.Close()
	}
}

// runRates runs scenarios a, b, c and e on a fresh cluster of cfg.
func runRates(c config, cfg etcdbench.ServerConfig, scenarios []string, cpus []int) *etcdbench.Results {
	r := etcdbench.NewResults()
	srv := startServer(cfg, cpus)
	defer func() { srv.Stop() }()
	rateLibs := slices.DeleteFunc(slices.Clone(c.libs), func(l string) bool { return l == etcdbench.ConcurrencyRev1 })
	tag := fmt.Sprintf("m%d", cfg.Members)
	// One untimed pass of every library first (the first slot on a fresh
	// server is slow).
	for _, lib := range rateLibs {
		ls := lockers(r, lib, srv, 1)
		if ls == nil {
			continue
		}
		_, _ = etcdbench.Uncontended(ls[0], "warm/"+lib+"/", 1, c.duration/2)
		closeAll(ls)
	}
	for run := range c.runs {
		if harness.HasAny(scenarios, "a") {
			interleaved(r, c, srv, tag, run, rateLibs)
		}
		for _, lib := range harness.Rotated(rateLibs, run) {
			if _, ok := r.Unsupported[lib]; ok {
				continue
			}
			p := fmt.Sprintf("%s/%d/%s/", tag, run, lib)
			if harness.HasAny(scenarios, "b") {
				const sc = "b"
				ls := lockers(r, lib, srv, 1)
				if ls == nil {
					continue
				}
				m0, merr := srv.Metrics()
				scpu, ccpu, t0 := srv.CPU(), harness.CPUTime(), time.Now()
				v, err := etcdbench.Uncontended(ls[0], p+sc+"/", c.parallel, c.duration)
				pairs := v * time.Since(t0).Seconds()
				scpu, ccpu = srv.CPU()-scpu, harness.CPUTime()-ccpu
				m1, merr2 := srv.Metrics()
				closeAll(ls)
				check(err, sc, lib)
				if merr == nil && merr2 == nil {
					// The server's KV requests per pair (Range, Txn, Put,
					// DeleteRange...): the same work asked of it, or not.
					r.Add(sc, lib, "kv", m0.Delta(m1, "grpc_server_started_total", `grpc_service="etcdserverpb.KV"`)/pairs)
				}
				r.Add(sc, lib, "ops", v)
				// CPU per pair, in µs: the server's, and this process's
				// (the clients', with the harness's small share).
				r.Add(sc, lib, "scpu", float64(scpu.Microseconds())/pairs)
				r.Add(sc, lib, "ccpu", float64(ccpu.Microseconds())/pairs)
				harness.Logf("%s %s run %d %-16s %8.0f pairs/s, CPU per pair: server %.0f µs, client %.0f µs", tag, sc, run+1, lib, v,
					float64(scpu.Microseconds())/pairs, float64(ccpu.Microseconds())/pairs)
			}
			if harness.HasAny(scenarios, "c") {
				ls := lockers(r, lib, srv, c.clients)
				if ls == nil {
					continue
				}
				m0, merr := srv.Metrics()
				scpu, ccpu := srv.CPU(), harness.CPUTime()
				cr, err := etcdbench.Contended(ls, c.goroutines, p+"c", c.hold, c.duration)
				scpu, ccpu = srv.CPU()-scpu, harness.CPUTime()-ccpu
				m1, merr2 := srv.Metrics()
				closeAll(ls)
				check(err, "c", lib)
				if acqs := cr.AcqPerS * c.duration.Seconds(); acqs > 0 {
					// What an acquisition costs, the waiting included: the
					// server's and the clients' CPU, the KV requests, and the
					// watch requests (creations and cancellations).
					r.Add("c", lib, "scpu", float64(scpu.Microseconds())/acqs)
					r.Add("c", lib, "ccpu", float64(ccpu.Microseconds())/acqs)
					if merr == nil && merr2 == nil {
						r.Add("c", lib, "kv", m0.Delta(m1, "grpc_server_started_total", `grpc_service="etcdserverpb.KV"`)/acqs)
						r.Add("c", lib, "watch", m0.Delta(m1, "grpc_server_msg_received_total", `grpc_method="Watch"`)/acqs)
					}
				}
				r.Add("c", lib, "changes", cr.ChangesPerS)
				r.Add("c", lib, "acq", cr.AcqPerS)
				r.Add("c", lib, "jain", cr.Jain)
				r.Add("c", lib, "viol", float64(cr.Violations))
				r.Add("c", lib, "hold", float64(cr.HoldMean)/1e6)
				harness.Logf("%s c run %d %-16s %8.0f changes/s %8.0f acq/s Jain %.3f violations %d hold %v", tag, run+1, lib, cr.ChangesPerS, cr.AcqPerS, cr.Jain, cr.Violations, cr.HoldMean)
			}
		}
		if harness.HasAny(scenarios, "e") {
			pauses := []time.Duration{c.pause}
			if c.longPause > 0 {
				pauses = append(pauses, c.longPause)
			}
			for pi, pause := range pauses {
				scen := "e"
				if pi == 1 {
					scen = "e2"
				}
				for _, lib := range harness.Rotated(c.libs, run) {
					if _, ok := r.Unsupported[lib]; ok {
						continue
					}
					ls := lockers(r, lib, srv, 2)
					if ls == nil {
						continue
					}
					hr, err := etcdbench.Handover(ls[0], ls[1], fmt.Sprintf("%s/%d/%s/%s/", tag, run, lib, scen), c.rounds, pause, c.jitter, slowWatchers(srv))
					closeAll(ls)
					check(err, scen, lib)
					addHandover(r, scen, lib, hr)
					harness.Logf("%s %s run %d %-16s p50 %v p99 %v release p50 %v unsynced watchers at release %.0f%% of rounds", tag, scen, run+1, lib,
						harness.Percentile(hr.Handovers, 50), harness.Percentile(hr.Handovers, 99), harness.Percentile(hr.Releases, 50), 100*r.Values(scen, lib, "slow")[len(r.Values(scen, lib, "slow"))-1])
				}
			}
		}
	}
	return r
}

// interleaved runs (a) for every library of libs at once, in turns of
// aBlock pairs (Interleaved), and records each one's rate, CPU and KV
// requests per pair over its turns.
func interleaved(r *etcdbench.Results, c config, srv *etcdbench.Server, tag string, run int, libs []string) {
	var names, prefixes []string
	var ws []etcdbench.Worker
	var all []etcdbench.Locker
	for _, lib := range harness.Rotated(libs, run) {
		if _, ok := r.Unsupported[lib]; ok {
			continue
		}
		ls := lockers(r, lib, srv, 1)
		if ls == nil {
			continue
		}
		w, err := ls[0].Worker()
		check(err, "a", lib)
		names, ws, all = append(names, lib), append(ws, w), append(all, ls...)
		prefixes = append(prefixes, fmt.Sprintf("%s/%d/%s/a/", tag, run, lib))
	}
	defer closeAll(all)
	defer harness.CloseAll(ws)
	scpu, ccpu, kv := make([]time.Duration, len(ws)), make([]time.Duration, len(ws)), make([]float64, len(ws))
	var m0 etcdbench.Metrics
	var s0, c0 time.Duration
	var merr error
	pairs, took, err := etcdbench.Interleaved(ws, prefixes, aBlock, c.duration,
		func(int) { m0, merr = srv.Metrics(); s0, c0 = srv.CPU(), harness.CPUTime() },
		func(i int) {
			scpu[i] += srv.CPU() - s0
			ccpu[i] += harness.CPUTime() - c0
			if m1, err := srv.Metrics(); err == nil && merr == nil {
				kv[i] += m0.Delta(m1, "grpc_server_started_total", `grpc_service="etcdserverpb.KV"`)
			} else {
				kv[i] = math.NaN()
			}
		})
	check(err, "a", strings.Join(names, ","))
	for i, lib := range names {
		n := float64(pairs[i])
		v := n / took[i].Seconds()
		r.Add("a", lib, "ops", v)
		if !math.IsNaN(kv[i]) {
			r.Add("a", lib, "kv", kv[i]/n)
		}
		r.Add("a", lib, "scpu", float64(scpu[i].Microseconds())/n)
		r.Add("a", lib, "ccpu", float64(ccpu[i].Microseconds())/n)
		harness.Logf("%s a run %d %-16s %8.0f pairs/s, CPU per pair: server %.0f µs, client %.0f µs", tag, run+1, lib, v,
			float64(scpu[i].Microseconds())/n, float64(ccpu[i].Microseconds())/n)
	}
}

// aBlock is the pairs of one library's turn in (a): about a tenth of a
// second.
const aBlock = 200

func addHandover(r *etcdbench.Results, scen, lib string, hr etcdbench.HandoverResult) {
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
	r.Add(scen, lib, "p50", ms(harness.Percentile(hr.Handovers, 50)))
	r.Add(scen, lib, "p99", ms(harness.Percentile(hr.Handovers, 99)))
	r.Add(scen, lib, "rel", ms(harness.Percentile(hr.Releases, 50)))
	slow := 0
	for _, v := range hr.SlowWatchers {
		if v > 0 {
			slow++
		}
	}
	r.Add(scen, lib, "slow", float64(slow)/float64(max(len(hr.SlowWatchers), 1)))
}

func check(err error, scen, lib string) {
	if err != nil {
		fatal(fmt.Errorf("scenario %s, %s: %w", scen, lib, err))
	}
}

func reportRates(w func(string, ...any), c config, members int, scenarios []string, r *etcdbench.Results) {
	base := etcdbench.Concurrency
	w("#### %d member(s)\n\n", members)
	w("Every figure is the median over %d runs (min–max); a ratio is the median of the per-run ratios to concurrency.Mutex in the same run.\n\n", c.runs)
	row := func(scen, lib, metric string, f func(float64) string, ratio bool) string {
		if _, ok := r.Unsupported[lib]; ok {
			return "unsupported"
		}
		if len(r.Values(scen, lib, metric)) == 0 {
			return "—"
		}
		s := f(r.Med(scen, lib, metric)) + r.Spread(scen, lib, metric, f)
		if ratio && lib != base {
			s += ", **" + etcdbench.RatioStr(r.Ratio(scen, lib, base, metric)) + "**"
		}
		return s
	}
	libs := slices.DeleteFunc(slices.Clone(c.libs), func(l string) bool { return l == etcdbench.ConcurrencyRev1 })
	header := func(ls []string) {
		var titles []string
		for _, l := range ls {
			titles = append(titles, etcdbench.Title(l))
		}
		harness.TableHeader(w, "measure", titles)
	}
	if harness.HasAny(scenarios, "a", "b", "c") {
		header(libs)
		line := func(name, scen, metric string, f func(float64) string, ratio bool) {
			if !harness.HasAny(scenarios, scen) {
				return
			}
			w("| %s |", name)
			for _, l := range libs {
				w(" %s |", row(scen, l, metric, f, ratio))
			}
			w("\n")
		}
		line(fmt.Sprintf("(a) 1 goroutine, a new key per pair, the libraries in turns of %d pairs: pairs/s, ÷ concurrency", aBlock), "a", "ops", harness.Num, true)
		line(fmt.Sprintf("(b) %d goroutines, a key each: pairs/s, ÷ concurrency", c.parallel), "b", "ops", harness.Num, true)
		line("(a) CPU per pair, server: µs, ÷ concurrency", "a", "scpu", harness.Num, true)
		line("(a) CPU per pair, clients: µs, ÷ concurrency", "a", "ccpu", harness.Num, true)
		line("(a) KV requests to the server per pair (the metric grpc_server_started_total)", "a", "kv", harness.Fix3, false)
		line("(b) CPU per pair, server: µs, ÷ concurrency", "b", "scpu", harness.Num, true)
		line("(b) CPU per pair, clients: µs, ÷ concurrency", "b", "ccpu", harness.Num, true)
		line(fmt.Sprintf("(c) %d clients × %d goroutines on one key, hold %v: **owner changes/s**, ÷ concurrency", c.clients, c.goroutines, c.hold), "c", "changes", harness.Num, true)
		line("(c) acquisitions/s", "c", "acq", harness.Num, false)
		line("(c) **Jain** over the goroutines' acquisitions", "c", "jain", harness.Fix3, false)
		line("(c) hold measured (ms)", "c", "hold", harness.Fix3, false)
		line("(c) mutual-exclusion violations (max over runs is what counts; must be 0)", "c", "viol", harness.Num, false)
		line("(c) CPU per acquisition, server: µs, ÷ concurrency", "c", "scpu", harness.Num, true)
		line("(c) CPU per acquisition, clients: µs, ÷ concurrency", "c", "ccpu", harness.Num, true)
		line("(c) KV requests to the server per acquisition (grpc_server_started_total)", "c", "kv", harness.Fix3, false)
		line("(c) watch requests per acquisition, creations and cancellations (grpc_server_msg_received_total)", "c", "watch", harness.Fix3, false)
		w("\n")
	}
	if harness.HasAny(scenarios, "e") {
		header(c.libs)
		for _, e := range []struct {
			scen  string
			pause time.Duration
		}{{"e", c.pause}, {"e2", c.longPause}} {
			if e.scen == "e2" && c.longPause <= 0 {
				continue
			}
			line := func(name, metric string, f func(float64) string, ratio bool) {
				w("| (e) pause %v: %s |", e.pause, name)
				for _, l := range c.libs {
					w(" %s |", row(e.scen, l, metric, f, ratio))
				}
				w("\n")
			}
			line("**hand-over p50**, ÷ concurrency (lower is better)", "p50", etcdbench.Ms, true)
			line("hand-over p99", "p99", etcdbench.Ms, true)
			line("holder's Unlock call p50", "rel", etcdbench.Ms, false)
			line("share of rounds with an unsynced watcher at the release", "slow", func(v float64) string { return fmt.Sprintf("%.0f %%", 100*v) }, false)
		}
		w("\n(e): %d hand-overs per library per run; a hand-over is the time from the start of the holder's Unlock to the waiter's Lock returning, the waiter being another etcd client. The holder releases `pause` after the waiter waits (distlock: its EventWaiting; concurrency.Mutex: its key is in the server). \"Unsynced watcher\": etcd_debugging_mvcc_slow_watcher_total > 0, read from the server just before the release.\n\n", c.rounds)
	}
	for lib, why := range r.Unsupported {
		w("%s: unsupported (%s).\n\n", etcdbench.Title(lib), why)
	}
}

// slowWatchers is a probe for Handover: the server's unsynced watchers.
func slowWatchers(srv *etcdbench.Server) func() (float64, error) {
	return func() (float64, error) {
		m, err := srv.Metrics()
		if err != nil {
			return 0, err
		}
		return m.Sum("etcd_debugging_mvcc_slow_watcher_total"), nil
	}
}

// sweep runs the hand-over on one member with each server setting.
func sweep(w func(string, ...any), c config, cpus []int) {
	settings := []etcdbench.ServerConfig{
		{Members: 1}, // etcdtest's members
		{Members: 1, TickMs: 100, ElectionMs: 1000},        // etcd's default Raft timing
		{Members: 1, TickMs: 10, ElectionMs: 100},          // 5× faster than etcdtest's
		{Members: 1, BatchInterval: 10 * time.Millisecond}, // backend commits 10× as often
		{Members: 1, BatchInterval: time.Second},
	}
	libs := []string{etcdbench.Concurrency, etcdbench.ConcurrencyRev1, etcdbench.Distlock}
	w("#### Server settings and the hand-over (1 member; pause %v; %d runs × %d rounds)\n\n", c.pause, c.runs, c.rounds)
	var titles []string
	for _, l := range libs {
		titles = append(titles, etcdbench.Title(l)+" p50 (p99)")
	}
	harness.TableHeader(w, "server setting", titles)
	for _, cfg := range settings {
		r := etcdbench.NewResults()
		srv := startServer(cfg, cpus)
		for run := range c.runs {
			for _, lib := range harness.Rotated(libs, run) {
				ls := lockers(r, lib, srv, 2)
				hr, err := etcdbench.Handover(ls[0], ls[1], fmt.Sprintf("w/%d/%s/", run, lib), c.rounds, c.pause, c.jitter, nil)
				closeAll(ls)
				check(err, "w", lib)
				addHandover(r, "w", lib, hr)
			}
		}
		srv.Stop()
		name := "etcdtest's (heartbeat 50 ms, election 500 ms, batch interval 100 ms)"
		if cfg.Custom() {
			name = cfg.String()
		}
		w("| %s |", name)
		for _, l := range libs {
			w(" %s (%s) |", etcdbench.Ms(r.Med("w", l, "p50")), etcdbench.Ms(r.Med("w", l, "p99")))
		}
		w("\n")
		harness.Logf("w %s: %s p50 %.1f ms, %s %.1f ms, %s %.1f ms", name, libs[0], r.Med("w", libs[0], "p50"), libs[1], r.Med("w", libs[1], "p50"), libs[2], r.Med("w", libs[2], "p50"))
	}
	w("\n")

	// The pause before the release, on etcdtest's member: rounds back to
	// back (jitter 0), and with a random phase (-jitter).
	pauses := []time.Duration{0, 20 * time.Millisecond, 50 * time.Millisecond, 80 * time.Millisecond, 150 * time.Millisecond}
	type col struct {
		lib    string
		jitter time.Duration
	}
	cols := []col{{etcdbench.Concurrency, 0}, {etcdbench.Concurrency, c.jitter}, {etcdbench.ConcurrencyRev1, c.jitter}, {etcdbench.Distlock, c.jitter}}
	w("#### The holder's pause before its release, and the hand-over (1 member, etcdtest's settings; %d runs × %d rounds)\n\n", c.runs, c.rounds)
	titles = nil
	for _, cl := range cols {
		titles = append(titles, fmt.Sprintf("%s, jitter %v: p50 (p99); rounds with an unsynced watcher", etcdbench.Title(cl.lib), cl.jitter))
	}
	harness.TableHeader(w, "pause after the waiter waits", titles)
	srv := startServer(etcdbench.ServerConfig{Members: 1}, cpus)
	defer srv.Stop()
	for _, pause := range pauses {
		r := etcdbench.NewResults()
		for run := range c.runs {
			for _, cl := range harness.Rotated(cols, run) {
				ls := lockers(r, cl.lib, srv, 2)
				hr, err := etcdbench.Handover(ls[0], ls[1], fmt.Sprintf("p/%v/%d/%s/%v/", pause, run, cl.lib, cl.jitter), c.rounds, pause, cl.jitter, slowWatchers(srv))
				closeAll(ls)
				check(err, "w", cl.lib)
				addHandover(r, "p", cl.lib+"/"+cl.jitter.String(), hr)
			}
		}
		w("| %v |", pause)
		for _, cl := range cols {
			l := cl.lib + "/" + cl.jitter.String()
			w(" %s (%s); %.0f %% |", etcdbench.Ms(r.Med("p", l, "p50")), etcdbench.Ms(r.Med("p", l, "p99")), 100*harness.Median(r.Values("p", l, "slow")))
		}
		w("\n")
		harness.Logf("w pause %v: back to back %.1f ms, random phase %.1f ms, rev1 %.1f ms, distlock %.1f ms", pause,
			r.Med("p", cols[0].lib+"/"+cols[0].jitter.String(), "p50"), r.Med("p", cols[1].lib+"/"+cols[1].jitter.String(), "p50"),
			r.Med("p", cols[2].lib+"/"+cols[2].jitter.String(), "p50"), r.Med("p", cols[3].lib+"/"+cols[3].jitter.String(), "p50"))
	}
	w("\n")
}

func scaleRun(w func(string, ...any), c config, cpus []int) {
	srv := startServer(etcdbench.ServerConfig{Members: 1}, cpus)
	defer srv.Stop()
	harness.Logf("s: %d locks…", c.scale.Locks)
	sr, err := etcdbench.Scale(srv, c.scale, harness.Logf)
	if err != nil {
		fatal(fmt.Errorf("scenario s: %w", err))
	}
	ttl := "library default (30 s)"
	if c.scale.TTL > 0 {
		ttl = c.scale.TTL.String()
	}
	harness.Logf("s: %+v", sr)
	w("#### (s) %s locks held by one distlock Client (Mutex on etcdstore, lease %s), 1 member\n\n", harness.Num(float64(sr.Locks)), ttl)
	w("| measure | value |\n|---|---:|\n")
	w("| taking them (TryLock, %d goroutines) | %.1f s (%s/s) |\n", c.scale.AcquireConc, sr.AcquireSecs, harness.Num(float64(sr.Locks)/sr.AcquireSecs))
	w("| while taking them: locks lost; renewals failed | %d; %d |\n", sr.LostTaking, sr.RenewFailedTaking)
	w("| client Go heap per held lock (after GC) | %.0f B (%.1f objects) |\n", sr.HeapPerLock, sr.ObjectsPerLock)
	w("| client goroutines while holding them | %s |\n", harness.Num(float64(sr.Goroutines)))
	w("| server RSS growth per held lock | %.0f B |\n", sr.ServerRSSPer)
	w("| window | %.1f s |\n", sr.WindowSecs)
	w("| renewals (Renewed events) in the window; renewal ticks (bursts > %v apart) | %s; %d |\n", 200*time.Millisecond, harness.Num(float64(sr.Renewed)), sr.Ticks)
	w("| renewals failed; locks lost | %d; %d |\n", sr.RenewFailed, sr.Lost)
	per := func(v float64) string {
		return fmt.Sprintf("%s (%s per tick, %.2f per renewal)", harness.Num(v), harness.Num(sr.PerTick(v)), sr.PerRenewal(v))
	}
	w("| LeaseKeepAlive requests the server received (messages %s, less %s stream ends the gRPC metrics count as messages) | %s |\n", harness.Num(sr.KeepAliveMsgs), harness.Num(sr.KeepAliveEnded), per(sr.KeepAliveRequests()))
	w("| LeaseKeepAlive streams opened | %s |\n", per(sr.KeepAliveStreams))
	w("| etcd lease renewals (etcd_debugging_lease_renewed_total) | %s |\n", per(sr.ServerRenewals))
	w("| Range calls | %s |\n", per(sr.Range))
	w("| Txn calls | %s |\n", per(sr.Txn))
	w("| LeaseGrant; LeaseRevoke calls | %s; %s |\n", harness.Num(sr.LeaseGrant), harness.Num(sr.LeaseRevoke))
	w("| CPU in the window: client; server | %.1f s (%.0f %% of a core); %.1f s (%.0f %%) |\n\n", sr.ClientCPU, 100*sr.ClientCPU/sr.WindowSecs, sr.ServerCPU, 100*sr.ServerCPU/sr.WindowSecs)
}

func machine(load0, load1 string, took time.Duration, serverCPUs []int) string {
	rev := harness.Commit("ETCDBENCH_COMMIT")
	pin := "Not pinned (-pin=false)."
	if serverCPUs != nil {
		pin = fmt.Sprintf("Pinned: the etcd server process on CPU %v, etcdbench on the others.", serverCPUs)
	}
	return fmt.Sprintf("distlock at commit %s; etcd server and client v3.7.3, embedded members of etcdtest (in a child process; heartbeat 50 ms, election 500 ms, no fsync). %d CPU cores (%s), %s %s/%s. %s Load average %s at the start, %s at the end; took %v.\n",
		rev, runtime.NumCPU(), harness.CPUModel(), runtime.Version(), runtime.GOOS, runtime.GOARCH, pin, load0, load1, took.Round(time.Second))
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "etcdbench:", err)
	stopAll()
	os.Exit(1)
}
