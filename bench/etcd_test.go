package bench_test

// The etcd rows: distlock on etcdstore against concurrency.Mutex, on an
// embedded etcd member run in a child process (this test binary,
// re-executed; see TestMain). Run with -bench:
//
//	go test -run '^$' -bench Etcd -benchtime 2s -count 5

import (
	"context"
	"errors"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/distlock/distlock/bench/internal/etcdbench"
	"github.com/distlock/distlock/bench/internal/harness"
)

// startEtcd starts a 1-member cluster in a child process for tb. With
// LOCKBENCH_PIN=1 (Linux, 2+ CPUs) the server goes to the last CPU and
// this process to the others.
func startEtcd(tb testing.TB) *etcdbench.Server {
	tb.Helper()
	var cpus []int
	if os.Getenv("LOCKBENCH_PIN") == "1" {
		prev := runtime.GOMAXPROCS(0)
		var err error
		if cpus, _, err = harness.PinApart(); err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { runtime.GOMAXPROCS(prev) })
	}
	srv, err := etcdbench.StartServer(etcdbench.ServerConfig{Members: 1}, cpus)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(srv.Stop)
	return srv
}

// etcdLocker returns a Locker of lib, or skips if the store does not serve
// it yet.
func etcdLocker(tb testing.TB, lib string, srv *etcdbench.Server) etcdbench.Locker {
	tb.Helper()
	l, err := etcdbench.NewLocker(lib, srv.Endpoints, etcdbench.Options{})
	if errors.Is(err, etcdbench.ErrUnsupported) {
		tb.Skipf("unsupported: %v", err)
	}
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = l.Close() })
	return l
}

func etcdWorker(b *testing.B, l etcdbench.Locker) etcdbench.Worker {
	w, err := l.Worker()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = w.Close() })
	return w
}

// BenchmarkEtcdAcquireRelease: one goroutine takes and releases a new key
// each time.
func BenchmarkEtcdAcquireRelease(b *testing.B) {
	srv := startEtcd(b)
	for _, lib := range etcdbench.Libs {
		b.Run(lib, func(b *testing.B) {
			w := etcdWorker(b, etcdLocker(b, lib, srv))
			ctx := context.Background()
			i := 0
			for b.Loop() {
				u, err := w.Lock(ctx, "bench/a/"+lib+"/"+strconv.Itoa(i))
				if err == nil {
					err = u(ctx)
				}
				if err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

// BenchmarkEtcdAcquireReleaseParallel: 16 goroutines per CPU, each on a
// key of its own (and a Session of its own for concurrency.Mutex).
func BenchmarkEtcdAcquireReleaseParallel(b *testing.B) {
	srv := startEtcd(b)
	for _, lib := range etcdbench.Libs {
		b.Run(lib, func(b *testing.B) {
			l := etcdLocker(b, lib, srv)
			seq := make(chan int, 1)
			seq <- 0
			b.SetParallelism(16)
			b.RunParallel(func(pb *testing.PB) {
				n := <-seq
				seq <- n + 1
				w, err := l.Worker()
				if err != nil {
					b.Error(err)
					return
				}
				defer w.Close()
				key := "bench/b/" + lib + "/" + strconv.Itoa(n)
				ctx := context.Background()
				for pb.Next() {
					u, err := w.Lock(ctx, key)
					if err == nil {
						err = u(ctx)
					}
					if err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkEtcdHandover: a holder releases 20 ms after a waiter of another
// client waits, each round after a random sleep of up to 100 ms (a random
// phase against the server's 100 ms watch resync); an op is a round. The hand-over (the holder's Unlock call
// started → the waiter's Lock returned) is reported as p50-ms and p99-ms.
func BenchmarkEtcdHandover(b *testing.B) {
	srv := startEtcd(b)
	for _, lib := range etcdbench.HandoverLibs {
		b.Run(lib, func(b *testing.B) {
			holder, waiter := etcdLocker(b, lib, srv), etcdLocker(b, lib, srv)
			var all []time.Duration
			i := 0
			for b.Loop() {
				hr, err := etcdbench.Handover(holder, waiter, "bench/e/"+lib+"/"+strconv.Itoa(i)+"/", 1, 20*time.Millisecond, 100*time.Millisecond, nil)
				if err != nil {
					b.Fatal(err)
				}
				all = append(all, hr.Handovers...)
				i++
			}
			b.ReportMetric(float64(harness.Percentile(all, 50))/1e6, "p50-ms")
			b.ReportMetric(float64(harness.Percentile(all, 99))/1e6, "p99-ms")
		})
	}
}

// TestEtcdSmoke runs every etcd scenario with tiny counts on one member:
// every library takes and releases locks, contends without a violation,
// hands over, and distlock holds and renews a few locks.
func TestEtcdSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an etcd member")
	}
	srv := startEtcd(t)
	probe := func() (float64, error) {
		m, err := srv.Metrics()
		return m.Sum("etcd_debugging_mvcc_slow_watcher_total"), err
	}
	for _, lib := range etcdbench.HandoverLibs {
		t.Run(lib, func(t *testing.T) {
			l, w := etcdLocker(t, lib, srv), etcdLocker(t, lib, srv)
			for _, g := range []int{1, 3} {
				rate, err := etcdbench.Uncontended(l, "smoke/"+lib+"/u"+strconv.Itoa(g)+"/", g, 100*time.Millisecond)
				if err != nil || rate <= 0 {
					t.Fatalf("%d goroutines: %v pairs/s, %v", g, rate, err)
				}
			}
			cr, err := etcdbench.Contended([]etcdbench.Locker{l, w}, 2, "smoke/"+lib+"/c", 100*time.Microsecond, 300*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			if cr.Violations != 0 || harness.Sum(cr.Counts) == 0 {
				t.Fatalf("contended: %d violations, %d acquisitions", cr.Violations, harness.Sum(cr.Counts))
			}
			hr, err := etcdbench.Handover(l, w, "smoke/"+lib+"/e/", 2, 5*time.Millisecond, 0, probe)
			if err != nil || len(hr.Handovers) != 2 || len(hr.SlowWatchers) != 2 {
				t.Fatalf("hand-over: %+v, %v", hr, err)
			}
		})
	}
	t.Run("interleaved", func(t *testing.T) {
		var ws []etcdbench.Worker
		var prefixes []string
		for _, lib := range etcdbench.HandoverLibs {
			w, err := etcdLocker(t, lib, srv).Worker()
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = w.Close() })
			ws, prefixes = append(ws, w), append(prefixes, "smoke/"+lib+"/i/")
		}
		turns := make([]int, len(ws))
		pairs, took, err := etcdbench.Interleaved(ws, prefixes, 5, 50*time.Millisecond, func(int) {}, func(i int) { turns[i]++ })
		if err != nil {
			t.Fatal(err)
		}
		for i := range ws {
			if took[i] < 50*time.Millisecond || pairs[i] != 5*turns[i] || turns[i] == 0 {
				t.Errorf("%s: %d pairs in %d turns, %v", etcdbench.HandoverLibs[i], pairs[i], turns[i], took[i])
			}
		}
	})
	t.Run("scale", func(t *testing.T) {
		sr, err := etcdbench.Scale(srv, etcdbench.ScaleConfig{Locks: 20, TTL: 2 * time.Second, Window: 1500 * time.Millisecond, AcquireConc: 4}, t.Logf)
		if err != nil {
			t.Fatal(err)
		}
		if sr.Held != 20 || sr.Renewed == 0 || sr.KeepAliveMsgs == 0 || sr.Lost != 0 {
			t.Fatalf("scale: %+v", sr)
		}
	})
}
