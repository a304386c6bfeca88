package harness

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// Config sizes the scenarios.
type Config struct {
	Duration      time.Duration // per library per run, scenarios a-d
	Rounds        int           // hand-overs per library per run, scenario e
	Hold          time.Duration // time in the critical section, scenarios c-d
	Parallel      int           // goroutines of scenario b
	InProc        int           // goroutines of scenario c
	Procs         int           // processes of scenario d
	ProcWorkers   int           // goroutines per process of scenario d
	HandoverPause time.Duration // the holder keeps the lock 1-2× this long once the waiter waits (e)
	CountRounds   int           // extra hand-overs under MONITOR (e)
	Scale         ScaleConfig
	Stream        StreamConfig // scenario h
	Sem           SemConfig    // scenarios j and k
}

// DefaultConfig is what lockbench runs without flags.
func DefaultConfig() Config {
	return Config{
		Duration:      time.Second,
		Rounds:        25,
		Hold:          100 * time.Microsecond,
		Parallel:      32,
		InProc:        16,
		Procs:         4,
		ProcWorkers:   4,
		HandoverPause: 10 * time.Millisecond,
		CountRounds:   5,
		Scale:         DefaultScaleConfig(),
		Stream:        DefaultStreamConfig(),
		Sem:           DefaultSemConfig(),
	}
}

// A Result is what one library did in one run of one scenario.
type Result struct {
	Lib      string
	Elapsed  time.Duration
	Ops      int64   // acquire+release pairs (a-d, g: one goroutine; h: the readers')
	OpsPerS  float64 // (a-d, g: one goroutine; h: the readers' acquisitions)
	Errors   int64   // failed acquisitions or releases (not counting the end of a run)
	Changes  float64 // owner changes per second (c-d)
	Fairness float64 // Jain's index over workers (c-d)
	Viol     int64   // mutual exclusion violations (c-e)
	HoldMean time.Duration
	// CPU per acquire+release (a-c): of redis-server (INFO cpu) and of the
	// client process (getrusage), in µs.
	ServerCPUPerOp float64
	ClientCPUPerOp float64
	// CmdsPerRT is the mean number of commands per go-redis round trip (a,
	// b; 0 for rueidislock, whose client has no go-redis hook).
	CmdsPerRT float64
	// ScriptUsec is the mean execution time of one EVALSHA in Redis (a-c).
	ScriptUsec float64
	// SeenPerOp is what the observer of an observed library (DistlockProm,
	// DistlockOtel) recorded per acquire+release during the run (a, b):
	// Seen.Records, 2 calls counted by the Collector, 3 spans exported by
	// the OpenTelemetry SDK. 0 for the others.
	SeenPerOp float64

	// Hand-over (e).
	Rounds        int
	P50, P90      time.Duration
	CmdsPerRound  float64   // every command Redis executed (INFO commandstats), incl. inside scripts
	TopPerRound   float64   // commands the clients sent (MONITOR pass)
	InScriptRound float64   // commands run by Lua scripts (MONITOR pass)
	Br            Breakdown // medians of traced rounds (distlock, raw pub/sub)
	// ReleaseP50 is the p50 of the holder's release call (its Unlock)
	// over the timed rounds, the waiter blocked in another process.
	ReleaseP50 time.Duration

	// ParOpsPerS is the second figure of scenarios g and i: acquire+release per second
	// of Config.Parallel goroutines on their own keys (OpsPerS is one
	// goroutine's, on a new key each time).
	ParOpsPerS float64
	// ParServerCPUPerOp is redis-server's CPU per acquire+release in
	// that half, in µs (ServerCPUPerOp is the one goroutine's).
	ParServerCPUPerOp float64
	// Stream is what the writer and the readers did (h).
	Stream StreamResult
	// Sem is what the holders of a semaphore did (j, k).
	Sem SemResult
}

// Scenario names.
const (
	ScenA = "a"
	ScenB = "b"
	ScenC = "c"
	ScenD = "d"
	ScenE = "e"
	ScenF = "f"
	ScenG = "g"
	ScenH = "h"
	ScenI = "i"
	ScenJ = "j"
	ScenK = "k"
)

// ScenarioTitle describes a scenario.
func ScenarioTitle(s string, c Config) string {
	switch s {
	case ScenA:
		return "(a) 1 goroutine, new key per acquire+release"
	case ScenB:
		return fmt.Sprintf("(b) %d goroutines, own keys", c.Parallel)
	case ScenC:
		return fmt.Sprintf("(c) %d goroutines, 1 process, 1 key, %v hold", c.InProc, c.Hold)
	case ScenD:
		return fmt.Sprintf("(d) %d processes × %d goroutines, 1 key, %v hold", c.Procs, c.ProcWorkers, c.Hold)
	case ScenE:
		return "(e) hand-over to a waiter in another process"
	case ScenF:
		return "(f) scale"
	case ScenG:
		return fmt.Sprintf("(g) RWMutex rates: 1 goroutine on new keys, and %d goroutines on their own keys", c.Parallel)
	case ScenH:
		st := c.Stream
		return fmt.Sprintf("(h) %d processes × %d readers holding %v, a writer every %v–%v holding %v", st.Procs, st.Workers, st.ReadHold, st.WriteMin, st.WriteMax, st.WriteHold)
	case ScenI:
		return fmt.Sprintf("(i) Semaphore rates: 1 goroutine on new keys, and %d goroutines on their own keys", c.Parallel)
	case ScenJ:
		return fmt.Sprintf("(j) %d goroutines, 1 process, %d permits, %v hold", c.Sem.Goroutines, c.Sem.Permits, c.Sem.Hold)
	case ScenK:
		return fmt.Sprintf("(k) %d processes × %d goroutines, %d permits, %v hold", c.Sem.Procs, c.Sem.ProcWorkers, c.Sem.Permits, c.Sem.Hold)
	}
	return s
}

// Run runs scenario s (a-e, g-k) once for lib on the server at addr.
func Run(s, lib, addr string, c Config) (Result, error) {
	switch s {
	case ScenA:
		return runUncontended(lib, addr, c.Duration, 1, true)
	case ScenB:
		return runUncontended(lib, addr, c.Duration, c.Parallel, false)
	case ScenC:
		return runInProc(lib, addr, c)
	case ScenD:
		return runProcs(lib, addr, c)
	case ScenE:
		return runHandover(lib, addr, c)
	case ScenG:
		return runRates(lib, addr, c)
	case ScenH:
		return runStream(lib, addr, c)
	case ScenI:
		return runRates(lib, addr, c)
	case ScenJ:
		return runSemInProc(lib, addr, c)
	case ScenK:
		return runSemProcs(lib, addr, c)
	}
	return Result{}, fmt.Errorf("unknown scenario %q", s)
}

// FlushAll empties the server between runs.
func FlushAll(addr string) error {
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		return err
	}
	return rdb.ConfigResetStat(ctx).Err()
}

// runUncontended: goroutines acquire and release keys no one else uses,
// either a new key every time (fresh) or one key per goroutine.
func runUncontended(lib, addr string, d time.Duration, goroutines int, fresh bool) (Result, error) {
	hook := &CountingHook{}
	lk, err := NewLocker(lib, addr, Options{Hook: hook})
	if err != nil {
		return Result{}, err
	}
	defer lk.Close()
	if err := warmUp(lk, "warm"); err != nil {
		return Result{}, err
	}
	// What an observer recorded before the run (the warm-up's pair);
	// reading it flushes what it has queued.
	seen0, observed, err := Observed(lk)
	if err != nil {
		return Result{}, err
	}
	var ops, errs atomic.Int64
	cpu := startCPU(addr)
	rt0, cmd0 := hook.RoundTrips(), hook.Commands.Load()
	start := time.Now()
	end := start.Add(d)
	var wg sync.WaitGroup
	// Nothing here should wait, but a run must end by itself whatever a
	// library does.
	ctx, cancel := context.WithDeadline(context.Background(), end.Add(10*time.Second))
	defer cancel()
	for g := range goroutines {
		wg.Go(func() {
			prefix := "u:" + strconv.Itoa(g) + ":"
			key := prefix + "k"
			var n int64
			for i := 0; time.Now().Before(end); i++ {
				if fresh {
					key = prefix + strconv.Itoa(i)
				}
				unlock, err := lk.Lock(ctx, key)
				if err != nil {
					errs.Add(1)
					continue
				}
				if err := unlock(ctx); err != nil {
					errs.Add(1)
					continue
				}
				n++
			}
			ops.Add(n)
		})
	}
	wg.Wait()
	el := time.Since(start)
	r := Result{Lib: lib, Elapsed: el, Ops: ops.Load(), OpsPerS: float64(ops.Load()) / el.Seconds(), Errors: errs.Load()}
	r.ServerCPUPerOp, r.ClientCPUPerOp = cpu.perOp(r.Ops)
	r.ScriptUsec = cpu.scriptUsec()
	if rt := hook.RoundTrips() - rt0; rt > 0 {
		r.CmdsPerRT = float64(hook.Commands.Load()-cmd0) / float64(rt)
	}
	// Read after the CPU: the flush and the gathering are not the pairs'.
	if observed && r.Ops > 0 {
		seen1, _, err := Observed(lk)
		if err != nil {
			return Result{}, err
		}
		r.SeenPerOp = float64(seen1.Records-seen0.Records) / float64(r.Ops)
	}
	return r, nil
}

// cpuMeter measures the CPU redis-server and this process use.
type cpuMeter struct {
	stats      *redis.Client
	srv0, cli0 time.Duration
	calls0     CommandStats
	usec0      CommandStats
}

func startCPU(addr string) *cpuMeter {
	ctx := context.Background()
	m := &cpuMeter{stats: redis.NewClient(&redis.Options{Addr: addr})}
	m.srv0, _ = ServerCPU(ctx, m.stats)
	m.calls0, _ = ReadCommandStats(ctx, m.stats)
	m.usec0, _ = ReadCommandUsec(ctx, m.stats)
	m.cli0 = CPUTime()
	return m
}

// perOp returns µs of server and client CPU per op since the start.
func (m *cpuMeter) perOp(ops int64) (server, client float64) {
	cli := CPUTime() - m.cli0
	srv, err := ServerCPU(context.Background(), m.stats)
	if ops == 0 || err != nil {
		return 0, 0
	}
	return float64(srv-m.srv0) / 1e3 / float64(ops), float64(cli) / 1e3 / float64(ops)
}

// scriptUsec returns the mean execution time of a script call
// (EVALSHA/EVAL, INFO commandstats) since the start, and closes m.
func (m *cpuMeter) scriptUsec() float64 {
	defer m.stats.Close()
	ctx := context.Background()
	calls, err1 := ReadCommandStats(ctx, m.stats)
	usec, err2 := ReadCommandUsec(ctx, m.stats)
	if err1 != nil || err2 != nil {
		return 0
	}
	n := calls["evalsha"] + calls["eval"] - m.calls0["evalsha"] - m.calls0["eval"]
	t := usec["evalsha"] + usec["eval"] - m.usec0["evalsha"] - m.usec0["eval"]
	if n <= 0 {
		return 0
	}
	return float64(t) / float64(n)
}

// A ContendResult is what the workers of one process did on one key.
type ContendResult struct {
	Counts []int64 // acquisitions per worker
	Errors int64
	HoldNs int64 // total time spent in the critical section
}

// Contend runs workers goroutines that take key in turn until end, each
// holding it for hold, checking mutual exclusion with g.
func Contend(lk Locker, g *Guard, key string, workers, base int, hold time.Duration, end time.Time) ContendResult {
	ctx, cancel := context.WithDeadline(context.Background(), end)
	defer cancel()
	counts := make([]int64, workers)
	var errs, holdNs atomic.Int64
	var wg sync.WaitGroup
	for i := range workers {
		wg.Go(func() {
			owner := int64(base + i + 1)
			for time.Now().Before(end) {
				unlock, err := lk.Lock(ctx, key)
				if err != nil {
					if ctx.Err() != nil {
						return
					}
					errs.Add(1)
					time.Sleep(time.Millisecond) // do not spin on a failing server
					continue
				}
				g.Enter(owner)
				t := time.Now()
				Sleep(hold)
				holdNs.Add(int64(time.Since(t)))
				g.Exit()
				counts[i]++
				uctx, ucancel := context.WithTimeout(context.Background(), 5*time.Second)
				if err := unlock(uctx); err != nil {
					errs.Add(1)
				}
				ucancel()
			}
		})
	}
	wg.Wait()
	return ContendResult{Counts: counts, Errors: errs.Load(), HoldNs: holdNs.Load()}
}

// Sleep blocks the thread for d with nanosleep: time.Sleep rounds short
// sleeps up to about a millisecond on Linux when the process has nothing
// else to do (the network poller waits in whole milliseconds), and
// spinning would steal the CPU the server and the clients need.
func Sleep(d time.Duration) {
	if d <= 0 {
		return
	}
	ts := syscall.NsecToTimespec(int64(d))
	for syscall.Nanosleep(&ts, &ts) == syscall.EINTR {
	}
}

func contendResult(lib string, el time.Duration, g *Guard, counts []int64, errs, holdNs int64) Result {
	ops := Sum(counts)
	r := Result{
		Lib: lib, Elapsed: el, Ops: ops, OpsPerS: float64(ops) / el.Seconds(), Errors: errs,
		Changes:  float64(g.OwnerChanges()) / el.Seconds(),
		Fairness: Jain(counts),
		Viol:     g.Violations(),
	}
	if ops > 0 {
		r.HoldMean = time.Duration(holdNs / ops)
	}
	return r
}

// runInProc: scenario c.
func runInProc(lib, addr string, c Config) (Result, error) {
	lk, err := NewLocker(lib, addr, Options{})
	if err != nil {
		return Result{}, err
	}
	defer lk.Close()
	if err := warmUp(lk, "warm"); err != nil {
		return Result{}, err
	}
	g := NewLocalGuard()
	cpu := startCPU(addr)
	start := time.Now()
	res := Contend(lk, g, "c", c.InProc, 0, c.Hold, start.Add(c.Duration))
	r := contendResult(lib, c.Duration, g, res.Counts, res.Errors, res.HoldNs)
	r.ServerCPUPerOp, r.ClientCPUPerOp = cpu.perOp(r.Ops)
	r.ScriptUsec = cpu.scriptUsec()
	return r, nil
}

// runProcs: scenario d, with worker processes.
func runProcs(lib, addr string, c Config) (Result, error) {
	g, err := NewSharedGuard()
	if err != nil {
		return Result{}, err
	}
	defer g.Close()
	procs := make([]*Proc, 0, c.Procs)
	defer func() {
		for _, p := range procs {
			p.Kill()
		}
	}()
	for i := range c.Procs {
		p, err := StartWorker(WorkerSpec{
			Mode: "contend", Lib: lib, Addr: addr, Key: "d",
			Workers: c.ProcWorkers, WorkerBase: i * c.ProcWorkers, Hold: c.Hold,
			GuardPath: g.Path(), MaxLife: c.Duration + time.Minute,
		})
		if err != nil {
			return Result{}, err
		}
		procs = append(procs, p)
	}
	start := time.Now().Add(100 * time.Millisecond)
	end := start.Add(c.Duration)
	for _, p := range procs {
		if err := p.Send(fmt.Sprintf("go %d %d", start.UnixNano(), end.UnixNano())); err != nil {
			return Result{}, err
		}
	}
	var counts []int64
	var errs, holdNs int64
	for _, p := range procs {
		var res ContendResult
		if err := p.Result(c.Duration+30*time.Second, &res); err != nil {
			return Result{}, err
		}
		counts = append(counts, res.Counts...)
		errs += res.Errors
		holdNs += res.HoldNs
	}
	for _, p := range procs {
		_ = p.Wait(10 * time.Second)
	}
	procs = nil
	return contendResult(lib, c.Duration, g, counts, errs, holdNs), nil
}

// A Handover measures hand-overs (scenario e): this process holds the
// lock; a worker process waits for it. Each round: the holder acquires,
// tells the waiter to wait, keeps the lock for a pause, and releases; the
// latency is from the start of the release to the waiter's acquisition
// (both clocks are the same machine's). The waiter then releases.
type Handover struct {
	lib   string
	lk    Locker
	g     *Guard
	p     *Proc
	pause time.Duration

	lastRelease time.Duration // the last round's release call
}

// NewHandover starts the waiter process and makes two untimed rounds, so
// that connections, subscriptions and scripts are in place.
func NewHandover(lib, addr string, pause time.Duration) (*Handover, error) {
	lk, err := NewLocker(lib, addr, Options{})
	if err != nil {
		return nil, err
	}
	g, err := NewSharedGuard()
	if err != nil {
		lk.Close()
		return nil, err
	}
	p, err := StartWorker(WorkerSpec{Mode: "waiter", Lib: lib, Addr: addr, Key: "e", GuardPath: g.Path(), MaxLife: 10 * time.Minute})
	if err != nil {
		lk.Close()
		g.Close()
		return nil, err
	}
	h := &Handover{lib: lib, lk: lk, g: g, p: p, pause: pause}
	for range 2 {
		if _, err := h.Round(); err != nil {
			h.Close()
			return nil, err
		}
	}
	h.g.Reset()
	return h, nil
}

// Round makes one hand-over and returns its latency.
func (h *Handover) Round() (time.Duration, error) {
	lat, _, err := h.round(false)
	return lat, err
}

// A Round's holder release call is timed too: LastRelease is the last
// one's length.
func (h *Handover) LastRelease() time.Duration { return h.lastRelease }

// TracedRound makes one hand-over with the waiter's steps timed (for
// distlock, its FairMutex and the raw pub/sub reference; a zero Breakdown
// otherwise, or when a step was not seen).
func (h *Handover) TracedRound() (time.Duration, Breakdown, error) {
	return h.round(true)
}

func (h *Handover) round(trace bool) (time.Duration, Breakdown, error) {
	var br Breakdown
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	unlock, err := h.lk.Lock(ctx, "e")
	if err != nil {
		return 0, br, fmt.Errorf("holder: %w", err)
	}
	h.g.Enter(1)
	cmd := "wait"
	if trace {
		cmd = "wait-traced"
	}
	if err := h.p.Send(cmd); err != nil {
		return 0, br, err
	}
	// A pause of random length, so that the release falls at a random
	// phase of a polling waiter's retry period (e.g. bsm/redislock's 10 ms).
	time.Sleep(h.pause + rand.N(h.pause))
	h.g.Exit()
	t0 := time.Now().UnixNano()
	if err := unlock(ctx); err != nil {
		return 0, br, fmt.Errorf("holder release: %w", err)
	}
	rel := time.Now().UnixNano()
	h.lastRelease = time.Duration(rel - t0)
	line, err := h.p.Read(30 * time.Second)
	if err != nil {
		return 0, br, err
	}
	var t1, tRead, tIssue, tDone int64
	if _, err := fmt.Sscanf(line, "acq %d %d %d %d", &t1, &tRead, &tIssue, &tDone); err != nil {
		return 0, br, fmt.Errorf("waiter: %s", line)
	}
	if line, err = h.p.Read(30 * time.Second); err != nil || line != "rel" {
		return 0, br, fmt.Errorf("waiter release: %q %v", line, err)
	}
	if trace {
		br, _ = SplitHandover(h.lib, t0, rel, t1, tRead, tIssue, tDone)
	}
	return time.Duration(t1 - t0), br, nil
}

// Violations counts the rounds where the waiter held the lock while the
// holder was inside.
func (h *Handover) Violations() int64 { return h.g.Violations() }

// Close stops the waiter.
func (h *Handover) Close() {
	_ = h.p.Send("quit")
	_ = h.p.Wait(10 * time.Second)
	h.lk.Close()
	h.g.Close()
}

// runHandover: scenario e. Commands per round come from INFO commandstats
// over the timed rounds; a further pass under MONITOR splits them into
// commands sent by clients and commands run inside Lua scripts.
func runHandover(lib, addr string, c Config) (Result, error) {
	h, err := NewHandover(lib, addr, c.HandoverPause)
	if err != nil {
		return Result{}, err
	}
	defer h.Close()
	ctx := context.Background()
	stats := redis.NewClient(&redis.Options{Addr: addr})
	defer stats.Close()

	before, err := ReadCommandStats(ctx, stats)
	if err != nil {
		return Result{}, err
	}
	var lats, rels []time.Duration
	start := time.Now()
	budget := 3 * c.Duration // bounds slow pollers (redsync sleeps 50-250 ms)
	for len(lats) < c.Rounds && (len(lats) < 3 || time.Since(start) < budget) {
		lat, err := h.Round()
		if err != nil {
			return Result{}, err
		}
		lats = append(lats, lat)
		rels = append(rels, h.LastRelease())
	}
	after, err := ReadCommandStats(ctx, stats)
	if err != nil {
		return Result{}, err
	}
	n := len(lats)
	res := Result{
		Lib: lib, Elapsed: time.Since(start), Rounds: n,
		P50: Percentile(lats, 50), P90: Percentile(lats, 90), ReleaseP50: Percentile(rels, 50),
		CmdsPerRound: float64(after.Delta(before).Total()) / float64(n),
	}
	if c.CountRounds > 0 {
		mon, err := StartMonitor(addr)
		if err != nil {
			return Result{}, err
		}
		for range c.CountRounds {
			if _, err := h.Round(); err != nil {
				mon.Stop()
				return Result{}, err
			}
		}
		mon.Stop()
		top, in := mon.Counts()
		res.TopPerRound = float64(top) / float64(c.CountRounds)
		res.InScriptRound = float64(in) / float64(c.CountRounds)
	}
	if traced(lib) {
		var brs []Breakdown
		for range c.Rounds {
			_, br, err := h.TracedRound()
			if err != nil {
				return Result{}, err
			}
			if br != (Breakdown{}) {
				brs = append(brs, br)
			}
		}
		res.Br = medianBreakdown(brs)
	}
	res.Viol = h.Violations()
	return res, nil
}

// medianBreakdown takes the median of every step separately (AfterGrant
// over the rounds where it was seen).
func medianBreakdown(brs []Breakdown) Breakdown {
	if len(brs) == 0 {
		return Breakdown{}
	}
	med := func(f func(Breakdown) time.Duration, seenOnly bool) time.Duration {
		var ds []time.Duration
		for _, b := range brs {
			if d := f(b); d != 0 || !seenOnly {
				ds = append(ds, d)
			}
		}
		if len(ds) == 0 {
			return 0
		}
		return Percentile(ds, 50)
	}
	col := func(f func(Breakdown) time.Duration) time.Duration { return med(f, false) }
	out := Breakdown{
		ToRead:     col(func(b Breakdown) time.Duration { return b.ToRead }),
		ToIssue:    col(func(b Breakdown) time.Duration { return b.ToIssue }),
		RoundTrip:  col(func(b Breakdown) time.Duration { return b.RoundTrip }),
		ToReturn:   col(func(b Breakdown) time.Duration { return b.ToReturn }),
		Grant:      brs[0].Grant,
		AfterGrant: med(func(b Breakdown) time.Duration { return b.AfterGrant }, true),
		FromRead:   col(func(b Breakdown) time.Duration { return b.FromRead }),
		Release:    col(func(b Breakdown) time.Duration { return b.Release }),
	}
	for _, b := range brs {
		out.Rounds += b.Rounds
		out.Early += b.Early
	}
	return out
}

// ParseScenarios splits a comma-separated list like "a,b,f".
func ParseScenarios(s string) ([]string, error) {
	var out []string
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(strings.ToLower(f))
		switch f {
		case "":
		case ScenA, ScenB, ScenC, ScenD, ScenE, ScenF, ScenG, ScenH, ScenI, ScenJ, ScenK:
			out = append(out, f)
		default:
			return nil, fmt.Errorf("unknown scenario %q (want a-k)", f)
		}
	}
	return out, nil
}

// ParseLibs splits a comma-separated list of libraries; raw is always
// included (it is the baseline).
func ParseLibs(s string) ([]string, error) {
	if s == "" || s == "all" {
		return AllLibs, nil
	}
	want := map[string]bool{Raw: true}
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		ok := false
		for _, l := range AllLibs {
			if l == f {
				ok = true
			}
		}
		if slices.Contains(ObservedLibs, f) {
			return nil, fmt.Errorf("library %q runs with -observers (in scenarios %s, beside distlock)", f, strings.Join(ObservedScenarios, " and "))
		}
		if !ok {
			return nil, fmt.Errorf("unknown library %q (want %s)", f, strings.Join(AllLibs, ","))
		}
		want[f] = true
	}
	var out []string
	for _, l := range AllLibs {
		if want[l] {
			out = append(out, l)
		}
	}
	return out, nil
}
