package harness

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// The semaphore's scenarios.
//
// i: acquire+release rates of one permit of distlock's Semaphore and of
// the naive counting semaphore (RawSem), uncontended, beside the Mutex, the
// FairMutex and the raw mutex baseline: one goroutine on a new key each
// time (as in a), then Config.Parallel goroutines on their own keys (as in
// b). It is runRates, as g is.
//
// j: SemConfig.Goroutines goroutines of one process share a semaphore of
// SemConfig.Permits permits: each takes one permit, holds it
// SemConfig.Hold, releases it and asks again at once.
//
// k: the same across processes: SemConfig.Procs worker processes of
// SemConfig.ProcWorkers goroutines each.
//
// In j and k every holder enters the guard with EnterPermits: more permits
// inside at once than the capacity is a violation. A wait runs from the
// Acquire (Lock) call to the acquisition.

// SemConfig sizes scenarios j and k.
type SemConfig struct {
	Duration    time.Duration // per semaphore per run
	Permits     int           // the capacity
	Goroutines  int           // j: goroutines of the one process
	Procs       int           // k: worker processes
	ProcWorkers int           // k: goroutines per process
	Hold        time.Duration // time a permit is held
}

// DefaultSemConfig is what lockbench runs without flags.
func DefaultSemConfig() SemConfig {
	return SemConfig{
		Duration:    2 * time.Second,
		Permits:     DefaultPermits,
		Goroutines:  32,
		Procs:       4,
		ProcWorkers: 8,
		Hold:        time.Millisecond,
	}
}

// A SemResult is what the holders of one run of j or k did. Their
// acquisitions per second are Result.OpsPerS, their Jain index
// Result.Fairness, the violations (more permits inside than the capacity)
// Result.Viol.
type SemResult struct {
	Workers int // goroutines, in all processes
	// Each acquisition's wait, from the Lock (Acquire) call to the
	// acquisition, over all goroutines.
	WaitP50, WaitP99, WaitMax time.Duration
	// WaitMean is their mean: by Little's law, Workers / the acquisition
	// rate less the time a permit is held and released, whatever the
	// order waiters are served in.
	WaitMean time.Duration
	// The fewest and the most acquisitions of one goroutine: a goroutine
	// with none starved for the whole run.
	MinCount, MaxCount int64
	// MaxPermits is the most permits the guard saw held at once (at most
	// the capacity, or it is a violation).
	MaxPermits int64
	// Busy is the mean share of the capacity held: the time the permits
	// were held (measured) over the run's length times the capacity.
	Busy float64
	Hold time.Duration // mean, measured
	// CPU over the run, as shares of one core (see StreamResult).
	ServerBusy, ClientBusy, OtherBusy, Steal float64
	// Per acquisition (INFO commandstats over the run): the commands Redis
	// ran (those inside scripts included), the script calls (EVALSHA,
	// EVAL), and the µs Redis spent in them.
	Cmds, Scripts, ScriptUsec float64
}

// A PermitsResult is what the goroutines of one process did in j or k.
type PermitsResult struct {
	Counts  []int64 // acquisitions per goroutine
	Errors  int64
	HoldNs  int64   // total time permits were held
	WaitsUs []int64 // each acquisition's wait, in µs
	CPUNs   int64   // the process's CPU time while they ran (getrusage)
}

// ContendPermits runs workers goroutines that take one permit of the
// semaphore key with lk until end, each holding it for hold and asking
// again at once, and enter g with EnterPermits (capacity permits).
func ContendPermits(lk Locker, g *Guard, key string, workers int, hold time.Duration, capacity int, end time.Time) PermitsResult {
	ctx, cancel := context.WithDeadline(context.Background(), end)
	defer cancel()
	return contendPermits(ctx, lk, g, key, workers, hold, capacity, func() bool { return time.Now().Before(end) })
}

// ContendPermitsN is ContendPermits for n acquisitions in all (a go test
// benchmark's b.N) instead of a time.
func ContendPermitsN(lk Locker, g *Guard, key string, workers int, hold time.Duration, capacity int, n int) PermitsResult {
	var left atomic.Int64
	left.Store(int64(n))
	return contendPermits(context.Background(), lk, g, key, workers, hold, capacity, func() bool { return left.Add(-1) >= 0 })
}

func contendPermits(ctx context.Context, lk Locker, g *Guard, key string, workers int, hold time.Duration, capacity int, more func() bool) PermitsResult {
	cpu0 := CPUTime()
	counts := make([]int64, workers)
	waits := make([][]int64, workers)
	var errs, holdNs atomic.Int64
	var wg sync.WaitGroup
	for i := range workers {
		wg.Go(func() {
			for more() {
				t0 := time.Now()
				unlock, err := lk.Lock(ctx, key)
				if err != nil {
					if ctx.Err() != nil {
						return
					}
					errs.Add(1)
					time.Sleep(time.Millisecond) // do not spin on a failing server
					continue
				}
				waits[i] = append(waits[i], time.Since(t0).Microseconds())
				g.EnterPermits(1, int64(capacity))
				t := time.Now()
				Sleep(hold)
				holdNs.Add(int64(time.Since(t)))
				g.ExitPermits(1)
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
	return PermitsResult{Counts: counts, Errors: errs.Load(), HoldNs: holdNs.Load(), WaitsUs: slices.Concat(waits...), CPUNs: int64(CPUTime() - cpu0)}
}

// Waits returns the waits of r as durations.
func (r PermitsResult) Waits() []time.Duration {
	out := make([]time.Duration, len(r.WaitsUs))
	for i, us := range r.WaitsUs {
		out[i] = time.Duration(us) * time.Microsecond
	}
	return out
}

// semKey is the semaphore of scenarios j and k.
const semKey = "sem"

// cpuShares measures the CPU of redis-server, of this process and of the
// machine over a run, and the commands Redis ran.
type cpuShares struct {
	stats                     *redis.Client
	srv0, cli0, busy0, steal0 time.Duration
	srvOK, machineOK          bool
	t0                        time.Time
	calls0, usec0             CommandStats
}

func startShares(addr string) *cpuShares {
	s := &cpuShares{stats: redis.NewClient(&redis.Options{Addr: addr})}
	var err error
	s.srv0, err = ServerCPU(context.Background(), s.stats)
	s.srvOK = err == nil
	s.calls0, _ = ReadCommandStats(context.Background(), s.stats)
	s.usec0, _ = ReadCommandUsec(context.Background(), s.stats)
	s.cli0 = CPUTime()
	s.busy0, s.steal0, s.machineOK = machineCPU()
	s.t0 = time.Now()
	return s
}

// stop fills the CPU shares of res since the start, and its commands per
// acquisition; workers is the CPU the worker processes reported. It closes
// s.
func (s *cpuShares) stop(res *Result, workers time.Duration) {
	defer s.stats.Close()
	r := &res.Sem
	el := time.Since(s.t0)
	srv, err := ServerCPU(context.Background(), s.stats)
	cli := CPUTime() - s.cli0 + workers
	busy, steal, machineOK := machineCPU()
	calls, err1 := ReadCommandStats(context.Background(), s.stats)
	usec, err2 := ReadCommandUsec(context.Background(), s.stats)
	if err1 == nil && err2 == nil && s.calls0 != nil && s.usec0 != nil && res.Ops > 0 {
		d, du := calls.Delta(s.calls0), usec.Delta(s.usec0)
		n := float64(res.Ops)
		r.Cmds = float64(d.Total()) / n
		r.Scripts = float64(d["evalsha"]+d["eval"]) / n
		r.ScriptUsec = float64(du["evalsha"]+du["eval"]) / n
	}
	share := func(d time.Duration) float64 { return float64(d) / float64(el) }
	r.ClientBusy = share(cli)
	if err == nil && s.srvOK {
		r.ServerBusy = share(srv - s.srv0)
		if machineOK && s.machineOK {
			r.OtherBusy = max(0, share(busy-s.busy0-(srv-s.srv0)-cli))
			r.Steal = share(steal - s.steal0)
		}
	}
}

// semResult gathers the per-process results of a run of j or k.
func semResult(lib string, el time.Duration, g *Guard, capacity int, parts []PermitsResult) (Result, time.Duration) {
	var counts []int64
	var waits []time.Duration
	var errs, holdNs, cpuNs int64
	for _, p := range parts {
		counts = append(counts, p.Counts...)
		errs += p.Errors
		holdNs += p.HoldNs
		cpuNs += p.CPUNs
		waits = append(waits, p.Waits()...)
	}
	ops := Sum(counts)
	r := Result{
		Lib: lib, Elapsed: el, Ops: ops, OpsPerS: float64(ops) / el.Seconds(), Errors: errs,
		Fairness: Jain(counts), Viol: g.Violations(),
		Sem: SemResult{
			Workers:    len(counts),
			WaitP50:    Percentile(waits, 50),
			WaitP99:    Percentile(waits, 99),
			WaitMax:    Percentile(waits, 100),
			WaitMean:   mean(waits),
			MaxPermits: g.MaxPermits(),
			Busy:       float64(holdNs) / (float64(el) * float64(capacity)),
		},
	}
	if len(counts) > 0 {
		r.Sem.MinCount, r.Sem.MaxCount = slices.Min(counts), slices.Max(counts)
	}
	if ops > 0 {
		r.HoldMean = time.Duration(holdNs / ops)
		r.Sem.Hold = r.HoldMean
	}
	return r, time.Duration(cpuNs)
}

// runSemInProc: scenario j.
func runSemInProc(lib, addr string, c Config) (Result, error) {
	sc := c.Sem
	lk, err := NewLocker(lib, addr, Options{Permits: sc.Permits})
	if err != nil {
		return Result{}, err
	}
	defer lk.Close()
	if err := warmUp(lk, semKey); err != nil {
		return Result{}, err
	}
	g := NewLocalGuard()
	cpu := startShares(addr)
	start := time.Now()
	res := ContendPermits(lk, g, semKey, sc.Goroutines, sc.Hold, sc.Permits, start.Add(sc.Duration))
	el := time.Since(start)
	r, _ := semResult(lib, el, g, sc.Permits, []PermitsResult{res})
	cpu.stop(&r, 0) // this process's CPU is the goroutines'
	return r, nil
}

// runSemProcs: scenario k, with worker processes.
func runSemProcs(lib, addr string, c Config) (Result, error) {
	sc := c.Sem
	g, err := NewSharedGuard()
	if err != nil {
		return Result{}, err
	}
	defer g.Close()
	procs := make([]*Proc, 0, sc.Procs)
	defer func() {
		for _, p := range procs {
			p.Kill()
		}
	}()
	for range sc.Procs {
		p, err := StartWorker(WorkerSpec{
			Mode: "permits", Lib: lib, Addr: addr, Key: semKey,
			Workers: sc.ProcWorkers, Hold: sc.Hold, Permits: sc.Permits,
			GuardPath: g.Path(), MaxLife: sc.Duration + time.Minute,
		})
		if err != nil {
			return Result{}, err
		}
		procs = append(procs, p)
	}
	start := time.Now().Add(100 * time.Millisecond)
	end := start.Add(sc.Duration)
	for _, p := range procs {
		if err := p.Send(fmt.Sprintf("go %d %d", start.UnixNano(), end.UnixNano())); err != nil {
			return Result{}, err
		}
	}
	time.Sleep(time.Until(start))
	cpu := startShares(addr)
	var parts []PermitsResult
	for _, p := range procs {
		var res PermitsResult
		if err := p.Result(sc.Duration+30*time.Second, &res); err != nil {
			return Result{}, err
		}
		parts = append(parts, res)
	}
	r, workers := semResult(lib, sc.Duration, g, sc.Permits, parts)
	cpu.stop(&r, workers)
	var werr error
	for _, p := range procs {
		werr = errors.Join(werr, p.Wait(10*time.Second))
	}
	procs = nil
	return r, werr
}

func mean(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	var t time.Duration
	for _, d := range ds {
		t += d
	}
	return t / time.Duration(len(ds))
}
