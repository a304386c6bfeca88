package etcdbench

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/bench/internal/harness"
)

// ScaleConfig sizes the held-locks scenario.
type ScaleConfig struct {
	Locks       int           // locks held by one distlock Client
	TTL         time.Duration // their lease; 0: the library's default (30 s)
	Window      time.Duration // how long renewals are measured once all are held
	AcquireConc int           // goroutines taking the locks
}

// ScaleResult is what Scale measured. Request counts are the server's
// (its gRPC metrics), over the window.
type ScaleResult struct {
	Locks, Held    int
	AcquireSecs    float64
	HeapPerLock    float64 // bytes of the client's Go heap per held lock, after GC
	ObjectsPerLock float64
	Goroutines     int // the client's goroutines while holding them
	ServerRSSPer   float64
	WindowSecs     float64
	Ticks          int   // renewal bursts (Renewed events more than tickGap apart start a new one)
	Renewed        int64 // Renewed events in the window
	RenewFailed    int64
	Lost           int64
	// LostTaking and RenewFailedTaking: while the locks were being taken.
	LostTaking, RenewFailedTaking int64

	KeepAliveMsgs    float64 // LeaseKeepAlive messages received, as the gRPC metrics count them (a stream's end, io.EOF, counts as one)
	KeepAliveStreams float64 // LeaseKeepAlive streams started
	KeepAliveEnded   float64 // LeaseKeepAlive streams ended (handled)
	Txn, Range       float64 // unary calls handled
	LeaseGrant       float64
	LeaseRevoke      float64
	ServerRenewals   float64 // etcd_debugging_lease_renewed_total
	ClientCPU        float64 // seconds, this process
	ServerCPU        float64 // seconds, the server process
}

// KeepAliveRequests are the keep-alive requests the server received: the
// messages less the ends of streams (which the metrics count as messages).
func (r ScaleResult) KeepAliveRequests() float64 { return r.KeepAliveMsgs - r.KeepAliveEnded }

// PerTick divides v by the ticks.
func (r ScaleResult) PerTick(v float64) float64 {
	if r.Ticks == 0 {
		return 0
	}
	return v / float64(r.Ticks)
}

// PerRenewal divides v by the renewals.
func (r ScaleResult) PerRenewal(v float64) float64 {
	if r.Renewed == 0 {
		return 0
	}
	return v / float64(r.Renewed)
}

const tickGap = 200 * time.Millisecond

// renewWatch counts Renewed events in the window, grouped into ticks (a
// gap of more than tickGap starts a new one). It is harness's renewWatch
// but for the gap and the window: this one's starts at once (not after a
// burst) and its first event starts a tick.
type renewWatch struct {
	on          atomic.Bool
	mu          sync.Mutex
	last        time.Time
	ticks       int
	renewed     int64
	lost, fails atomic.Int64
}

func (w *renewWatch) handle(ev distlock.Event) {
	switch ev.Kind {
	case distlock.EventRenewed:
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

// Scale holds cfg.Locks locks with one distlock Client (Mutex on
// etcdstore) on srv, and measures the client's heap per lock and what the
// server sees of their renewals over cfg.Window. logf reports progress.
func Scale(srv *Server, cfg ScaleConfig, logf func(string, ...any)) (ScaleResult, error) {
	res := ScaleResult{Locks: cfg.Locks}
	w := &renewWatch{}
	runtime.GC()
	var m0 runtime.MemStats
	runtime.ReadMemStats(&m0)
	rss0 := srv.RSS()
	l, err := NewLocker(Distlock, srv.Endpoints, Options{Events: w.handle, TTL: cfg.TTL})
	if err != nil {
		return res, err
	}
	defer l.Close()
	c := l.(*distLocker).Distlock()
	conc := max(cfg.AcquireConc, 1)
	leases := make([]*distlock.Lease, cfg.Locks)
	ctx := context.Background()
	var next atomic.Int64
	var failed atomic.Int64
	var firstErr error
	var once sync.Once
	start := time.Now()
	var wg sync.WaitGroup
	for range conc {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= cfg.Locks {
					return
				}
				var opts []distlock.MutexOption
				if cfg.TTL > 0 {
					opts = append(opts, distlock.WithTTL(cfg.TTL))
				}
				le, err := c.Mutex("s/"+strconv.Itoa(i), opts...).TryLock(ctx)
				if err != nil {
					failed.Add(1)
					once.Do(func() { firstErr = err })
					continue
				}
				leases[i] = le
				if i > 0 && i%10000 == 0 {
					logf("scale: %d locks taken in %.1fs (so far: %d lost, %d renewals failed)", i, time.Since(start).Seconds(), w.lost.Load(), w.fails.Load())
				}
			}
		})
	}
	wg.Wait()
	res.AcquireSecs = time.Since(start).Seconds()
	if f := failed.Load(); f > 0 {
		return res, fmt.Errorf("%d of %d TryLock failed, the first: %w", f, cfg.Locks, firstErr)
	}
	res.Held = cfg.Locks
	res.LostTaking, res.RenewFailedTaking = w.lost.Load(), w.fails.Load()
	runtime.GC()
	runtime.GC()
	var m1 runtime.MemStats
	runtime.ReadMemStats(&m1)
	res.HeapPerLock = (float64(m1.HeapAlloc) - float64(m0.HeapAlloc)) / float64(cfg.Locks)
	res.ObjectsPerLock = (float64(m1.HeapObjects) - float64(m0.HeapObjects)) / float64(cfg.Locks)
	res.Goroutines = runtime.NumGoroutine()
	res.ServerRSSPer = float64(srv.RSS()-rss0) / float64(cfg.Locks)
	logf("scale: %d locks held after %.1fs; heap %.0f B/lock; the window (%v) starts", cfg.Locks, res.AcquireSecs, res.HeapPerLock, cfg.Window)

	before, err := srv.Metrics()
	if err != nil {
		return res, err
	}
	cpu0, scpu0 := harness.CPUTime(), srv.CPU()
	w.mu.Lock()
	w.on.Store(true)
	w.last = time.Time{}
	w.mu.Unlock()
	lost0, fail0 := w.lost.Load(), w.fails.Load()
	t0 := time.Now()
	time.Sleep(cfg.Window)
	w.mu.Lock()
	w.on.Store(false)
	res.Ticks, res.Renewed = w.ticks, w.renewed
	w.mu.Unlock()
	res.WindowSecs = time.Since(t0).Seconds()
	res.ClientCPU = (harness.CPUTime() - cpu0).Seconds()
	res.ServerCPU = (srv.CPU() - scpu0).Seconds()
	after, err := srv.Metrics()
	if err != nil {
		return res, err
	}
	res.Lost, res.RenewFailed = w.lost.Load()-lost0, w.fails.Load()-fail0
	const rcv, started, handled = "grpc_server_msg_received_total", "grpc_server_started_total", "grpc_server_handled_total"
	res.KeepAliveMsgs = before.Delta(after, rcv, `grpc_method="LeaseKeepAlive"`)
	res.KeepAliveStreams = before.Delta(after, started, `grpc_method="LeaseKeepAlive"`)
	res.KeepAliveEnded = before.Delta(after, handled, `grpc_method="LeaseKeepAlive"`)
	res.Txn = before.Delta(after, handled, `grpc_method="Txn"`)
	res.Range = before.Delta(after, handled, `grpc_method="Range"`)
	res.LeaseGrant = before.Delta(after, handled, `grpc_method="LeaseGrant"`)
	res.LeaseRevoke = before.Delta(after, handled, `grpc_method="LeaseRevoke"`)
	res.ServerRenewals = before.Delta(after, "etcd_debugging_lease_renewed_total")

	// Release them (not measured), so the server is clean for what follows.
	rctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	next.Store(0)
	for range conc {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(leases) {
					return
				}
				if leases[i] != nil {
					_ = leases[i].Unlock(rctx)
				}
			}
		})
	}
	wg.Wait()
	return res, nil
}
