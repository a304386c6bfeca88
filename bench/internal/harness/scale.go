package harness

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/redisstore"
	"github.com/redis/go-redis/v9"
)

// ScaleConfig sizes scenario f.
type ScaleConfig struct {
	Locks       int           // locks held by one client
	TTL         time.Duration // their lease (the watchdog renews every TTL/6 to TTL/3)
	Hold        time.Duration // how long renewals are measured
	AcquireConc int           // goroutines acquiring the locks
	Waiters     int           // waiting goroutines
	WaitKeys    int           // keys they wait on
	CPUProfile  string        // if set, a CPU profile of the renewal window is written there
}

// DefaultScaleConfig: 100k locks with a 3 s lease (a renewal tick every
// 500 ms, each lock renewed every second), measured over 4 s; 10k waiters on
// 1k keys.
func DefaultScaleConfig() ScaleConfig {
	return ScaleConfig{Locks: 100_000, TTL: 3 * time.Second, Hold: 4 * time.Second, AcquireConc: 64, Waiters: 10_000, WaitKeys: 1_000}
}

// ScaleResult is what the 100k-locks part of scenario f measured.
type ScaleResult struct {
	Locks          int
	AcquireSecs    float64
	HeapPerLock    float64 // bytes of Go heap per held lock (after GC)
	ObjectsPerLock float64
	WindowSecs     float64
	Ticks          int     // renewal bursts in the window
	Renewed        int64   // Renewed events in the window
	RoundTrips     int64   // go-redis round trips in the window (a pipeline is one)
	Commands       int64   // commands the client sent in the window
	Evalsha        int64   // EVALSHA + EVAL calls Redis counted in the window
	ClientCPU      float64 // seconds (getrusage, user+system) in the window
	ServerCPU      float64 // seconds (INFO cpu) in the window
	Lost           int64
	RenewFailed    int64
}

// PerTick divides by the number of ticks.
func (r ScaleResult) PerTick(v float64) float64 {
	if r.Ticks == 0 {
		return 0
	}
	return v / float64(r.Ticks)
}

// Per100Renewals is v per 100 renewed locks.
func (r ScaleResult) Per100Renewals(v float64) float64 {
	if r.Renewed == 0 {
		return 0
	}
	return v / float64(r.Renewed) * 100
}

// renewWatch counts Renewed events and groups them into ticks: the engine
// renews every due lock in one batch and reports them together, so a gap
// of more than tickGap starts a new tick.
type renewWatch struct {
	on          atomic.Bool
	mu          sync.Mutex
	last        time.Time
	ticks       int
	renewed     int64
	total       atomic.Int64 // every Renewed event
	lost, fails atomic.Int64
}

const tickGap = 100 * time.Millisecond

func (w *renewWatch) handle(ev distlock.Event) {
	switch ev.Kind {
	case distlock.EventRenewed:
		w.total.Add(1)
		now := time.Now()
		w.mu.Lock()
		if w.on.Load() {
			if now.Sub(w.last) > tickGap {
				w.ticks++
			}
			w.renewed++
		}
		w.last = now
		w.mu.Unlock()
	case distlock.EventLost:
		w.lost.Add(1)
	case distlock.EventRenewFailed:
		w.fails.Add(1)
	}
}

// quiet waits until a renewal burst has happened and ended (no Renewed
// event for tickGap), so that a window starts and ends between ticks.
func (w *renewWatch) quiet(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	seen := w.total.Load()
	for time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
		if w.total.Load() == seen {
			continue
		}
		w.mu.Lock()
		last := w.last
		w.mu.Unlock()
		if time.Since(last) > tickGap/2 {
			return nil
		}
	}
	return fmt.Errorf("no renewal burst within %v", timeout)
}

// CPUTime is the user+system CPU time this process has used.
func CPUTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func heapNow() runtime.MemStats {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m
}

// runScale holds cfg.Locks locks with one distlock client and measures its
// renewals. It runs in a worker process of its own, so that the heap and
// CPU figures are this scenario's only.
func runScale(addr string, cfg ScaleConfig) (ScaleResult, error) {
	ctx := context.Background()
	hook := &CountingHook{}
	w := &renewWatch{}
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	rdb.AddHook(hook)
	defer rdb.Close()
	stats := redis.NewClient(&redis.Options{Addr: addr})
	defer stats.Close()
	c := distlock.New(redisstore.New(rdb), distlock.WithEventHandler(w.handle))
	// No Close: releasing 100k locks is not measured; the server is
	// stopped after this process exits.

	m0 := heapNow()
	leases := make([]*distlock.Lease, cfg.Locks)
	start := time.Now()
	var next atomic.Int64
	var failed atomic.Int64
	var wg sync.WaitGroup
	for range cfg.AcquireConc {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= cfg.Locks {
					return
				}
				l, err := c.Mutex("f:"+strconv.Itoa(i), distlock.WithTTL(cfg.TTL)).TryLock(ctx)
				if err != nil {
					failed.Add(1)
					continue
				}
				leases[i] = l
			}
		})
	}
	wg.Wait()
	res := ScaleResult{Locks: cfg.Locks, AcquireSecs: time.Since(start).Seconds()}
	if n := failed.Load(); n > 0 {
		return res, fmt.Errorf("%d of %d acquisitions failed", n, cfg.Locks)
	}
	m1 := heapNow()
	res.HeapPerLock = (float64(m1.HeapAlloc) - float64(m0.HeapAlloc)) / float64(cfg.Locks)
	res.ObjectsPerLock = (float64(m1.HeapObjects) - float64(m0.HeapObjects)) / float64(cfg.Locks)

	// The window starts and ends right after a renewal burst.
	if err := w.quiet(2 * cfg.TTL); err != nil {
		return res, err
	}
	if cfg.CPUProfile != "" {
		stop, err := StartCPUProfile(cfg.CPUProfile)
		if err != nil {
			return res, err
		}
		defer stop()
	}
	cs0, err := ReadCommandStats(ctx, stats)
	if err != nil {
		return res, err
	}
	scpu0, _ := ServerCPU(ctx, stats)
	rt0, cmd0 := hook.RoundTrips(), hook.Commands.Load()
	cpu0 := CPUTime()
	t0 := time.Now()
	w.on.Store(true)
	time.Sleep(cfg.Hold)
	if err := w.quiet(2 * cfg.TTL); err != nil {
		return res, err
	}
	w.on.Store(false)
	res.WindowSecs = time.Since(t0).Seconds()
	res.ClientCPU = (CPUTime() - cpu0).Seconds()
	res.RoundTrips = hook.RoundTrips() - rt0
	res.Commands = hook.Commands.Load() - cmd0
	cs1, err := ReadCommandStats(ctx, stats)
	if err != nil {
		return res, err
	}
	scpu1, _ := ServerCPU(ctx, stats)
	res.ServerCPU = (scpu1 - scpu0).Seconds()
	d := cs1.Delta(cs0)
	res.Evalsha = d["evalsha"] + d["eval"]
	w.mu.Lock()
	res.Ticks, res.Renewed = w.ticks, w.renewed
	w.mu.Unlock()
	res.Lost, res.RenewFailed = w.lost.Load(), w.fails.Load()
	runtime.KeepAlive(leases)
	return res, nil
}

// WaitersResult is what the waiters part of scenario f measured.
type WaitersResult struct {
	Waiters, Keys   int
	SetupSecs       float64 // until every waiter waits
	HeapPerWaiter   float64 // bytes of Go heap per waiting goroutine, after GC
	StackPerWaiter  float64 // bytes of goroutine stack per waiter (the caller's goroutine)
	PubSubConns     int     // the waiting client's connections in pub/sub mode on the server
	Channels        int     // channels subscribed
	DrainSecs       float64 // from releasing the keys until every waiter had the lock once
	CmdsPerHandover float64 // commands Redis ran during the drain, per acquisition
	Acquired        int64
	Errors          int64
	Violations      int64
}

// runWaiters holds cfg.WaitKeys locks with one client and has cfg.Waiters
// goroutines of another client wait for them; then it releases them and
// times how long the waiters take to each get the lock once.
func runWaiters(addr string, cfg ScaleConfig) (WaitersResult, error) {
	res := WaitersResult{Waiters: cfg.Waiters, Keys: cfg.WaitKeys}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	hrdb := redis.NewClient(&redis.Options{Addr: addr})
	defer hrdb.Close()
	// Named, so that its subscription connections are told from the
	// holder's (which hears force-unlock notices on one).
	wrdb := redis.NewClient(&redis.Options{Addr: addr, ClientName: waitersClientName})
	defer wrdb.Close()
	stats := redis.NewClient(&redis.Options{Addr: addr})
	defer stats.Close()
	holder := distlock.New(redisstore.New(hrdb))
	defer holder.Close()
	var waiting atomic.Int64
	waiter := distlock.New(redisstore.New(wrdb), distlock.WithEventHandler(func(ev distlock.Event) {
		if ev.Kind == distlock.EventWaiting {
			waiting.Add(1)
		}
	}))
	defer waiter.Close()

	key := func(k int) string { return "w:" + strconv.Itoa(k) }
	held := make([]*distlock.Lease, cfg.WaitKeys)
	for k := range held {
		l, err := holder.Mutex(key(k)).TryLock(ctx)
		if err != nil {
			return res, err
		}
		held[k] = l
	}
	if err := warmUp(&distLocker{c: waiter, ttl: distlock.DefaultTTL}, "warm"); err != nil {
		return res, err
	}

	m0 := heapNow()
	inside := make([]atomic.Int32, cfg.WaitKeys)
	var acquired, errs, viol atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for i := range cfg.Waiters {
		wg.Go(func() {
			k := i % cfg.WaitKeys
			l, err := waiter.Mutex(key(k)).Lock(ctx)
			if err != nil {
				errs.Add(1)
				return
			}
			if inside[k].Add(1) != 1 {
				viol.Add(1)
			}
			inside[k].Add(-1)
			acquired.Add(1)
			if err := l.Unlock(ctx); err != nil {
				errs.Add(1)
			}
		})
	}
	for waiting.Load() < int64(cfg.Waiters) {
		if ctx.Err() != nil || time.Since(start) > 60*time.Second {
			return res, fmt.Errorf("only %d of %d waiters waiting", waiting.Load(), cfg.Waiters)
		}
		time.Sleep(5 * time.Millisecond)
	}
	res.SetupSecs = time.Since(start).Seconds()
	time.Sleep(200 * time.Millisecond)
	m1 := heapNow()
	res.HeapPerWaiter = (float64(m1.HeapAlloc) - float64(m0.HeapAlloc)) / float64(cfg.Waiters)
	res.StackPerWaiter = (float64(m1.StackInuse) - float64(m0.StackInuse)) / float64(cfg.Waiters)
	var err error
	if res.PubSubConns, err = PubSubClients(ctx, stats, waitersClientName); err != nil {
		return res, err
	}
	chans, err := stats.PubSubChannels(ctx, "*").Result()
	if err != nil {
		return res, err
	}
	res.Channels = len(chans)

	cs0, err := ReadCommandStats(ctx, stats)
	if err != nil {
		return res, err
	}
	t0 := time.Now()
	var rg sync.WaitGroup
	for part := range 16 {
		rg.Go(func() {
			for k := part; k < len(held); k += 16 {
				if err := held[k].Unlock(ctx); err != nil {
					errs.Add(1)
				}
			}
		})
	}
	rg.Wait()
	wg.Wait()
	res.DrainSecs = time.Since(t0).Seconds()
	cs1, err := ReadCommandStats(ctx, stats)
	if err != nil {
		return res, err
	}
	res.Acquired, res.Errors, res.Violations = acquired.Load(), errs.Load(), viol.Load()
	if res.Acquired > 0 {
		res.CmdsPerHandover = float64(cs1.Delta(cs0).Total()) / float64(res.Acquired)
	}
	return res, nil
}

// RunScale runs both parts of scenario f in worker processes, each on a
// server emptied first.
func RunScale(addr string, cfg ScaleConfig) (ScaleResult, WaitersResult, error) {
	var sr ScaleResult
	var wr WaitersResult
	if err := FlushAll(addr); err != nil {
		return sr, wr, err
	}
	p, err := StartWorker(WorkerSpec{Mode: "scale", Addr: addr, Scale: cfg, MaxLife: 3 * time.Minute})
	if err != nil {
		return sr, wr, err
	}
	err = p.Result(3*time.Minute, &sr)
	p.Kill()
	if err != nil {
		return sr, wr, fmt.Errorf("scale: %w", err)
	}
	if err := FlushAll(addr); err != nil {
		return sr, wr, err
	}
	p, err = StartWorker(WorkerSpec{Mode: "waiters", Addr: addr, Scale: cfg, MaxLife: 3 * time.Minute})
	if err != nil {
		return sr, wr, err
	}
	err = p.Result(3*time.Minute, &wr)
	_ = p.Wait(30 * time.Second)
	if err != nil {
		return sr, wr, fmt.Errorf("waiters: %w", err)
	}
	return sr, wr, nil
}

// waitersClientName names the connections of the waiting client of the
// waiters half of scenario f (CLIENT SETNAME).
const waitersClientName = "lockbench-waiters"
