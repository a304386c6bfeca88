package harness

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/distlock/distlock"
	"github.com/redis/go-redis/v9"
)

// The read-write lock's scenarios.
//
// g: acquire+release rates of both sides of distlock's RWMutex, uncontended,
// beside its Mutex, its FairMutex and the raw baseline: one goroutine on a
// new key each time (as in a), then Config.Parallel goroutines on their own
// keys (as in b).
//
// h: a stream of readers and a writer. Reader processes run goroutines
// that take the lock's read side, hold it, release it and ask again at
// once, so that the lock is never free of readers; this process is the
// writer: every WriteMin–WriteMax it asks for the write side, holds it
// WriteHold and releases it. The writer's wait runs from its Lock call to
// the acquisition; so does every reader's. Readers enter the shared guard
// as shared holders, the writer as an exclusive one: a writer that
// overlaps anyone is a violation, and the guard records the most holders
// inside at once (readers overlap each other). The same workload runs with
// the Mutex and the FairMutex taken by readers and writer alike, where
// every holder is exclusive.

// StreamConfig sizes scenario h.
type StreamConfig struct {
	Duration  time.Duration // per lock per run
	Procs     int           // reader processes
	Workers   int           // reader goroutines per process
	ReadHold  time.Duration // a reader's time in the critical section
	WriteHold time.Duration // the writer's
	// The writer's pause between a release and its next request, uniform
	// in [WriteMin, WriteMax).
	WriteMin, WriteMax time.Duration
}

// DefaultStreamConfig is what lockbench runs without flags.
func DefaultStreamConfig() StreamConfig {
	return StreamConfig{
		Duration:  4 * time.Second,
		Procs:     3,
		Workers:   4,
		ReadHold:  time.Millisecond,
		WriteHold: time.Millisecond,
		WriteMin:  20 * time.Millisecond,
		WriteMax:  50 * time.Millisecond,
	}
}

// A StreamResult is what the writer and the readers did in one run of h.
// The readers' acquisitions per second are Result.OpsPerS, their Jain
// index Result.Fairness, violations Result.Viol.
type StreamResult struct {
	Writes      int
	WriterWaits []time.Duration // each write's, from Lock to acquisition
	WriterP50   time.Duration
	WriterP99   time.Duration
	WriterMax   time.Duration
	// AmidReaders counts the writes requested while readers held the lock
	// (the guard's holders at the writer's Lock call).
	AmidReaders int
	// The writer's wait split in three, p50 of each step over the writes
	// that queued (Queued of them): from Lock to the Waiting event (the
	// RWMutex: the try refused, the watch set up and the place confirmed);
	// from then until the guard emptied (the holders ahead of the writer
	// leave; 0 when they had left already); and from then to the
	// acquisition (the last holder's release, the grant or notification,
	// the writer's wake-up).
	Queued    int
	ToQueued  time.Duration
	Drain     time.Duration
	Handoff   time.Duration
	ReaderP50 time.Duration
	ReaderP99 time.Duration
	ReadHold  time.Duration // mean, measured
	// CPU over the run, as shares of one core: redis-server's (INFO cpu;
	// near 1, Redis is the bottleneck), the client processes' (the readers'
	// and the writer's, getrusage), the rest of the machine's (/proc/stat:
	// everything busy, less those two: other programs on the machine) and
	// the time the hypervisor stole. When pinned, the clients have one core.
	ServerBusy, ClientBusy, OtherBusy, Steal float64
	// MaxHolders is the most holders the guard saw inside at once: readers
	// of the RWMutex overlap (> 1); a mutex's holders must not (1).
	MaxHolders int64
}

// runRates: scenario g, one library (or side of the RWMutex).
func runRates(lib, addr string, c Config) (Result, error) {
	one, err := runUncontended(lib, addr, c.Duration, 1, true)
	if err != nil {
		return Result{}, err
	}
	par, err := runUncontended(lib, addr, c.Duration, c.Parallel, false)
	if err != nil {
		return Result{}, err
	}
	one.ParOpsPerS = par.OpsPerS
	one.ParServerCPUPerOp = par.ServerCPUPerOp
	one.Errors += par.Errors
	one.Elapsed += par.Elapsed
	return one, nil
}

// streamLibs returns the libraries of the readers and of the writer of h
// for lib, and whether the readers share the lock.
func streamLibs(lib string) (read, write string, shared bool) {
	if lib == DistlockRW {
		return DistlockRWRead, DistlockRWWrite, true
	}
	return lib, lib, false
}

// ReadersResult is what the reader goroutines of one process did.
type ReadersResult struct {
	Counts  []int64 // acquisitions per goroutine
	Errors  int64
	HoldNs  int64   // total time in the critical section
	WaitsUs []int64 // each acquisition's wait, from Lock to acquisition, in µs
	CPUNs   int64   // the process's CPU time while they ran (getrusage)
}

// Read runs workers goroutines that take key with lk (for the RWMutex: its
// read side), hold it for hold and ask again at once, until stop is
// closed. Shared readers enter g with EnterShared, others with Enter.
func Read(lk Locker, g *Guard, key string, workers, base int, hold time.Duration, shared bool, stop <-chan struct{}) ReadersResult {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	cpu0 := CPUTime()
	counts := make([]int64, workers)
	waits := make([][]int64, workers)
	var errs, holdNs atomic.Int64
	var wg sync.WaitGroup
	for i := range workers {
		wg.Go(func() {
			owner := int64(base + i + 1)
			for ctx.Err() == nil {
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
				if shared {
					g.EnterShared()
				} else {
					g.Enter(owner)
				}
				t := time.Now()
				Sleep(hold)
				holdNs.Add(int64(time.Since(t)))
				if shared {
					g.ExitShared()
				} else {
					g.Exit()
				}
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
	var all []int64
	for _, w := range waits {
		all = append(all, w...)
	}
	return ReadersResult{Counts: counts, Errors: errs.Load(), HoldNs: holdNs.Load(), WaitsUs: all, CPUNs: int64(CPUTime() - cpu0)}
}

// A ReaderStream is scenario h: reader processes keep the lock busy, and
// this process writes now and then (Pause, then Write). Start starts the
// readers, Stop stops them and gathers everything.
type ReaderStream struct {
	lib       string
	c         StreamConfig
	lk        Locker
	g         *Guard
	procs     []*Proc
	start     time.Time
	waits     []time.Duration
	amid      int
	errs      int64
	waitingAt atomic.Int64 // unix ns of the writer's last Waiting event
	stats     *redis.Client
	// CPU times at Start: redis-server's, this process's, the machine's.
	srv0, cli0, busy0, steal0 time.Duration
	machineOK                 bool
	// The steps of the writes that queued (see StreamResult).
	toQueued, drain, handoff []time.Duration
}

// streamKey is the lock of scenario h.
const streamKey = "h"

// NewReaderStream starts the reader processes (idle until Start) and the
// writer's client, warmed up on the lock itself.
func NewReaderStream(lib, addr string, c StreamConfig) (*ReaderStream, error) {
	readLib, writeLib, shared := streamLibs(lib)
	s := &ReaderStream{lib: lib, c: c}
	lk, err := NewLocker(writeLib, addr, Options{Events: func(ev distlock.Event) {
		if ev.Kind == distlock.EventWaiting && ev.Name == streamKey {
			s.waitingAt.Store(time.Now().UnixNano())
		}
	}})
	if err != nil {
		return nil, err
	}
	if err := warmUp(lk, streamKey); err != nil {
		lk.Close()
		return nil, err
	}
	g, err := NewSharedGuard()
	if err != nil {
		lk.Close()
		return nil, err
	}
	s.lk, s.g = lk, g
	s.stats = redis.NewClient(&redis.Options{Addr: addr})
	for i := range c.Procs {
		p, err := StartWorker(WorkerSpec{
			Mode: "readers", Lib: readLib, Addr: addr, Key: streamKey,
			Workers: c.Workers, WorkerBase: i * c.Workers, Hold: c.ReadHold, Shared: shared,
			GuardPath: g.Path(), MaxLife: c.Duration + 30*time.Minute,
		})
		if err != nil {
			s.Close()
			return nil, err
		}
		s.procs = append(s.procs, p)
	}
	return s, nil
}

// Start lets the readers go.
func (s *ReaderStream) Start() error {
	for _, p := range s.procs {
		if err := p.Send("go"); err != nil {
			return err
		}
	}
	s.srv0, _ = ServerCPU(context.Background(), s.stats)
	s.cli0 = CPUTime()
	s.busy0, s.steal0, s.machineOK = machineCPU()
	s.start = time.Now()
	return nil
}

// Pause sleeps the writer's pause, WriteMin to WriteMax.
func (s *ReaderStream) Pause() {
	d := s.c.WriteMin
	if s.c.WriteMax > s.c.WriteMin {
		d += rand.N(s.c.WriteMax - s.c.WriteMin)
	}
	time.Sleep(d)
}

// Write takes the write side once, holds it WriteHold, releases it, and
// returns the wait from the Lock call to the acquisition.
func (s *ReaderStream) Write() (time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	amid := s.g.Holders() > 0
	s.waitingAt.Store(0)
	t0 := time.Now()
	unlock, err := s.lk.Lock(ctx, streamKey)
	t1 := time.Now()
	wait := t1.Sub(t0)
	if err != nil {
		s.errs++
		return 0, fmt.Errorf("writer: %w", err)
	}
	if ns := s.waitingAt.Load(); ns != 0 {
		queued := time.Unix(0, ns)
		out := queued // wall clock: the guard's times come from other processes
		if e := s.g.Emptied(); e.After(out) {
			out = e
		}
		t0, t1 := t0.Round(0), t1.Round(0)
		s.toQueued = append(s.toQueued, queued.Sub(t0))
		s.drain = append(s.drain, out.Sub(queued))
		s.handoff = append(s.handoff, t1.Sub(out))
	}
	s.g.Enter(int64(s.c.Procs*s.c.Workers + 1))
	Sleep(s.c.WriteHold)
	s.g.Exit()
	s.waits = append(s.waits, wait)
	if amid {
		s.amid++
	}
	if err := unlock(ctx); err != nil {
		s.errs++
		return wait, fmt.Errorf("writer release: %w", err)
	}
	return wait, nil
}

// Stop stops the readers and returns the run's result.
func (s *ReaderStream) Stop() (Result, error) {
	el := time.Since(s.start)
	srv, srvErr := ServerCPU(context.Background(), s.stats)
	cli := CPUTime() - s.cli0
	busy, steal, machineOK := machineCPU()
	for _, p := range s.procs {
		if err := p.Send("stop"); err != nil {
			return Result{}, err
		}
	}
	var counts []int64
	var readerWaits []time.Duration
	var errs, holdNs int64
	for _, p := range s.procs {
		var res ReadersResult
		if err := p.Result(30*time.Second, &res); err != nil {
			return Result{}, err
		}
		counts = append(counts, res.Counts...)
		cli += time.Duration(res.CPUNs)
		errs += res.Errors
		holdNs += res.HoldNs
		for _, us := range res.WaitsUs {
			readerWaits = append(readerWaits, time.Duration(us)*time.Microsecond)
		}
	}
	var werr error
	for _, p := range s.procs {
		werr = errors.Join(werr, p.Wait(10*time.Second))
	}
	s.procs = nil
	if werr != nil {
		return Result{}, werr
	}
	ops := Sum(counts)
	r := Result{
		Lib: s.lib, Elapsed: el, Ops: ops, OpsPerS: float64(ops) / el.Seconds(),
		Errors: errs + s.errs, Fairness: Jain(counts), Viol: s.g.Violations(),
		Stream: StreamResult{
			Writes:      len(s.waits),
			WriterWaits: s.waits,
			WriterP50:   Percentile(s.waits, 50),
			WriterP99:   Percentile(s.waits, 99),
			WriterMax:   Percentile(s.waits, 100),
			AmidReaders: s.amid,
			Queued:      len(s.toQueued),
			ToQueued:    Percentile(s.toQueued, 50),
			Drain:       Percentile(s.drain, 50),
			Handoff:     Percentile(s.handoff, 50),
			ReaderP50:   Percentile(readerWaits, 50),
			ReaderP99:   Percentile(readerWaits, 99),
			MaxHolders:  s.g.MaxHolders(),
		},
	}
	if ops > 0 {
		r.Stream.ReadHold = time.Duration(holdNs / ops)
	}
	share := func(d time.Duration) float64 { return float64(d) / float64(el) }
	r.Stream.ClientBusy = share(cli)
	if srvErr == nil {
		r.Stream.ServerBusy = share(srv - s.srv0)
		if machineOK && s.machineOK {
			r.Stream.OtherBusy = max(0, share(busy-s.busy0-(srv-s.srv0)-cli))
			r.Stream.Steal = share(steal - s.steal0)
		}
	}
	return r, nil
}

// Close stops the readers if Stop did not, and closes the writer.
func (s *ReaderStream) Close() {
	for _, p := range s.procs {
		p.Kill()
	}
	s.procs = nil
	s.lk.Close()
	s.g.Close()
	s.stats.Close()
}

// runStream: scenario h, one lock.
func runStream(lib, addr string, c Config) (Result, error) {
	s, err := NewReaderStream(lib, addr, c.Stream)
	if err != nil {
		return Result{}, err
	}
	defer s.Close()
	if err := s.Start(); err != nil {
		return Result{}, err
	}
	end := time.Now().Add(c.Stream.Duration)
	for {
		s.Pause()
		if time.Now().After(end) {
			break
		}
		if _, err := s.Write(); err != nil {
			return Result{}, err
		}
	}
	return s.Stop()
}
