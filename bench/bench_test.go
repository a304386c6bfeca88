// Benchmarks of distlock against a raw go-redis baseline and the Go peers,
// on a redis-server started for the run (redistest). They only run with
// -bench:
//
//	go test -run '^$' -bench . -benchtime 2s -count 5
//
// The tests in this package are quick checks of the harness that CI runs.
package bench_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/distlock/bench/internal/etcdbench"
	"github.com/distlock/distlock/bench/internal/harness"
	"github.com/distlock/distlock/redistest"
	"github.com/redis/go-redis/v9"
)

func TestMain(m *testing.M) {
	// The hand-over benchmark and the smoke test re-execute this test
	// binary as the waiting process.
	harness.RunWorkerIfRequested()
	etcdbench.RunServerIfRequested() // the etcd benchmarks' server process
	os.Exit(m.Run())
}

// startServer starts the redis-server of a benchmark. With LOCKBENCH_PIN=1
// in the environment (Linux, 2+ CPUs), it pins the server to the last CPU
// and this process to the others, as lockbench -pin does.
func startServer(b *testing.B) *redistest.Server {
	b.Helper()
	srv := redistest.Start(b)
	if os.Getenv("LOCKBENCH_PIN") == "1" && harness.PinSupported && runtime.NumCPU() >= 2 {
		n := runtime.NumCPU()
		var client []int
		for c := range n - 1 {
			client = append(client, c)
		}
		if err := harness.Pin(srv.PID(), []int{n - 1}); err != nil {
			b.Fatal(err)
		}
		if err := harness.Pin(0, client); err != nil {
			b.Fatal(err)
		}
		prev := runtime.GOMAXPROCS(len(client))
		b.Cleanup(func() { runtime.GOMAXPROCS(prev) })
	}
	return srv
}

func newLocker(b *testing.B, lib, addr string) harness.Locker {
	b.Helper()
	lk, err := harness.NewLocker(lib, addr, harness.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { lk.Close() })
	ctx := context.Background()
	unlock, err := lk.Lock(ctx, "warm")
	if err != nil {
		b.Fatal(err)
	}
	if err := unlock(ctx); err != nil {
		b.Fatal(err)
	}
	return lk
}

// rateLibs are the libraries of the uncontended benchmarks: every peer,
// the two sides of distlock's RWMutex (as in lockbench's scenario g), one
// permit of distlock's Semaphore and of the naive counting semaphore (as
// in scenario i), and distlock with its observers (as with lockbench
// -observers; -benchmem shows what they allocate).
var rateLibs = append(append(append([]string(nil), harness.AllLibs...), harness.DistlockRWRead, harness.DistlockRWWrite, harness.RawSem, harness.DistlockSem), harness.ObservedLibs...)

// BenchmarkAcquireRelease: one goroutine acquires and releases a new,
// uncontended key each time. raw is SET NX PX + EVALSHA compare-and-delete.
func BenchmarkAcquireRelease(b *testing.B) {
	srv := startServer(b)
	for _, lib := range rateLibs {
		b.Run(lib, func(b *testing.B) {
			if err := harness.FlushAll(srv.Addr()); err != nil {
				b.Fatal(err)
			}
			lk := newLocker(b, lib, srv.Addr())
			ctx := context.Background()
			i := 0
			for b.Loop() {
				unlock, err := lk.Lock(ctx, "k:"+strconv.Itoa(i))
				if err != nil {
					b.Fatal(err)
				}
				if err := unlock(ctx); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

// BenchmarkAcquireReleaseParallel: 16 goroutines per CPU, each on its own
// key.
func BenchmarkAcquireReleaseParallel(b *testing.B) {
	srv := startServer(b)
	for _, lib := range rateLibs {
		b.Run(lib, func(b *testing.B) {
			if err := harness.FlushAll(srv.Addr()); err != nil {
				b.Fatal(err)
			}
			lk := newLocker(b, lib, srv.Addr())
			var seq = make(chan int, 1)
			seq <- 0
			b.SetParallelism(16)
			b.RunParallel(func(pb *testing.PB) {
				n := <-seq
				seq <- n + 1
				key := "p:" + strconv.Itoa(n)
				ctx := context.Background()
				for pb.Next() {
					unlock, err := lk.Lock(ctx, key)
					if err != nil {
						b.Error(err)
						return
					}
					if err := unlock(ctx); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkHandover: the lock goes from a holder in this process to a
// waiter blocked in another process. ns/op is a whole round (including the
// 2–4 ms the holder keeps the lock once the waiter waits); the hand-over
// latency itself is reported as p50-µs and p90-µs.
func BenchmarkHandover(b *testing.B) {
	srv := startServer(b)
	for _, lib := range harness.AllLibs {
		b.Run(lib, func(b *testing.B) {
			if err := harness.FlushAll(srv.Addr()); err != nil {
				b.Fatal(err)
			}
			h, err := harness.NewHandover(lib, srv.Addr(), 2*time.Millisecond)
			if err != nil {
				b.Fatal(err)
			}
			defer h.Close()
			var lats []time.Duration
			for b.Loop() {
				lat, err := h.Round()
				if err != nil {
					b.Fatal(err)
				}
				lats = append(lats, lat)
			}
			if v := h.Violations(); v != 0 {
				b.Fatalf("%d mutual exclusion violations", v)
			}
			b.ReportMetric(float64(harness.Percentile(lats, 50))/1e3, "p50-µs")
			b.ReportMetric(float64(harness.Percentile(lats, 90))/1e3, "p90-µs")
		})
	}
}

// BenchmarkReaderStream: lockbench's scenario h. Reader processes (3 × 4
// goroutines) take the lock, hold it 1 ms and ask again at once; this
// process is the writer: an op is a pause of 20–50 ms, then one
// acquisition of the write side (held 1 ms) and its release, so ns/op is
// mostly the pause. The writer's wait (Lock call to acquisition) is
// reported as writer-p50-µs and writer-p99-µs, the readers' as
// reader-p50-µs and reader-p99-µs, their throughput as reads/s, and the
// most readers the guard saw inside at once as max-holders. For the Mutex
// and the FairMutex, readers and writer take the same exclusive lock.
func BenchmarkReaderStream(b *testing.B) {
	srv := startServer(b)
	for _, lib := range harness.StreamLibs {
		b.Run(lib, func(b *testing.B) {
			if err := harness.FlushAll(srv.Addr()); err != nil {
				b.Fatal(err)
			}
			s, err := harness.NewReaderStream(lib, srv.Addr(), harness.DefaultStreamConfig())
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			if err := s.Start(); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				s.Pause()
				if _, err := s.Write(); err != nil {
					b.Fatal(err)
				}
			}
			res, err := s.Stop()
			if err != nil {
				b.Fatal(err)
			}
			if res.Viol != 0 || res.Errors != 0 {
				b.Fatalf("%d violations, %d errors", res.Viol, res.Errors)
			}
			st := res.Stream
			b.ReportMetric(float64(st.WriterP50)/1e3, "writer-p50-µs")
			b.ReportMetric(float64(st.WriterP99)/1e3, "writer-p99-µs")
			b.ReportMetric(float64(st.ReaderP50)/1e3, "reader-p50-µs")
			b.ReportMetric(float64(st.ReaderP99)/1e3, "reader-p99-µs")
			b.ReportMetric(res.OpsPerS, "reads/s")
			b.ReportMetric(float64(st.MaxHolders), "max-holders")
		})
	}
}

// BenchmarkSemaphore: lockbench's scenario j. 32 goroutines of this
// process share a semaphore of 8 permits: each takes one permit, holds it
// 1 ms and asks again at once; an op is one acquisition (and its release),
// so ns/op is the inverse of the acquisition rate of all of them. The
// wait (Acquire call to acquisition) is reported as wait-p50-µs and
// wait-p99-µs, Jain's index over the goroutines as fairness, the most
// permits the guard saw held at once as max-permits; it fails when more
// than 8 were held at once.
func BenchmarkSemaphore(b *testing.B) {
	srv := startServer(b)
	sc := harness.DefaultSemConfig()
	for _, lib := range harness.SemLibs {
		b.Run(lib, func(b *testing.B) {
			if err := harness.FlushAll(srv.Addr()); err != nil {
				b.Fatal(err)
			}
			lk, err := harness.NewLocker(lib, srv.Addr(), harness.Options{Permits: sc.Permits})
			if err != nil {
				b.Fatal(err)
			}
			defer lk.Close()
			ctx := context.Background()
			unlock, err := lk.Lock(ctx, "sem")
			if err != nil {
				b.Fatal(err)
			}
			if err := unlock(ctx); err != nil {
				b.Fatal(err)
			}
			g := harness.NewLocalGuard()
			b.ResetTimer()
			res := harness.ContendPermitsN(lk, g, "sem", sc.Goroutines, sc.Hold, sc.Permits, b.N)
			b.StopTimer()
			if v := g.Violations(); v != 0 || res.Errors != 0 {
				b.Fatalf("%d violations (more than %d permits held at once), %d errors", v, sc.Permits, res.Errors)
			}
			waits := res.Waits()
			b.ReportMetric(float64(harness.Percentile(waits, 50))/1e3, "wait-p50-µs")
			b.ReportMetric(float64(harness.Percentile(waits, 99))/1e3, "wait-p99-µs")
			b.ReportMetric(harness.Jain(res.Counts), "fairness")
			b.ReportMetric(float64(g.MaxPermits()), "max-permits")
		})
	}
}

// BenchmarkWhatIfAutoPipelined is evidence for scenario b, not a library
// benchmark: 32 goroutines (16 per CPU on 2 CPUs) acquire and release their
// own keys with the raw baseline's commands and with distlock's own Lua
// scripts, the Mutex's and the FairMutex's (read from
// ../internal/redisbackend/scripts; the arguments are those of the library
// at the time of writing), each sent either
// through the go-redis connection pool (what distlock does today) or
// through go-redis's experimental AutoPipeliner, which batches the
// concurrent calls into pipelines the way rueidis does.
func BenchmarkWhatIfAutoPipelined(b *testing.B) {
	srv := startServer(b)
	libSrc, err0 := os.ReadFile("../internal/redisbackend/scripts/lib.lua")
	acquireSrc, err1 := os.ReadFile("../internal/redisbackend/scripts/acquire.lua")
	releaseSrc, err2 := os.ReadFile("../internal/redisbackend/scripts/release.lua")
	fairSrc, err3 := os.ReadFile("../internal/redisbackend/scripts/fair_acquire.lua")
	if err0 != nil || err1 != nil || err2 != nil || err3 != nil {
		b.Skip("distlock's scripts not found:", err0, err1, err2, err3)
	}
	// As the backend sends them: lib.lua, then the script.
	acquire := redis.NewScript(string(libSrc) + string(acquireSrc))
	fairAcquire := redis.NewScript(string(libSrc) + string(fairSrc))
	release := redis.NewScript(string(libSrc) + string(releaseSrc))
	rawRelease := redis.NewScript(`if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) end return 0`)

	type cmds interface {
		redis.Scripter
		Do(ctx context.Context, args ...any) *redis.Cmd
	}
	ops := map[string]func(ctx context.Context, c cmds, key string) error{
		"raw": func(ctx context.Context, c cmds, key string) error {
			if err := c.Do(ctx, "SET", key, "tok", "NX", "PX", 10000).Err(); err != nil {
				return err
			}
			return rawRelease.Run(ctx, c, []string{key}, "tok").Err()
		},
		"distlock-scripts": func(ctx context.Context, c cmds, key string) error {
			lock := "distlock:{" + key + "}"
			keys := []string{lock, lock + ":fence", lock + ":q", lock + ":qt", lock + ":qi", lock + ":abandoned:owner"}
			res, err := acquire.Run(ctx, c, keys, "owner", 1, 10000, 3600000, "1 "+strconv.FormatInt(time.Now().UnixMilli(), 10)+" host", "0").Slice()
			if err != nil {
				return err
			}
			if n, _ := res[0].(int64); n != 1 {
				return fmt.Errorf("acquire.lua returned %v: its arguments changed", res)
			}
			n, err := release.Run(ctx, c, keys[:5], "owner", 1, lock+":released", "p", "me", 3600000, "0").Int64()
			if err == nil && n != 1 {
				err = fmt.Errorf("release.lua returned %d: its arguments changed", n)
			}
			return err
		},
		// A FairMutex's uncontended acquire+release: fair_acquire.lua (no
		// queue, so it takes the lock at once) and release.lua with the
		// queued flag (it looks for a first in line to grant it to).
		"distlock-fair-scripts": func(ctx context.Context, c cmds, key string) error {
			lock := "distlock:{" + key + "}"
			keys := []string{lock, lock + ":fence", lock + ":q", lock + ":qt", lock + ":qi", lock + ":abandoned:owner"}
			res, err := fairAcquire.Run(ctx, c, keys, "owner", 10000, 3600000, "host", 1, 5000, 1, lock+":grant:me", "p").Slice()
			if err != nil {
				return err
			}
			if n, _ := res[0].(int64); n != 1 || len(res) != 5 {
				return fmt.Errorf("fair_acquire.lua returned %v: its arguments changed", res)
			}
			n, err := release.Run(ctx, c, keys[:5], "owner", 1, lock+":released", "p", "me", 3600000, "1").Int64()
			if err == nil && n != 1 {
				err = fmt.Errorf("release.lua returned %d: its arguments changed", n)
			}
			return err
		},
	}
	for _, op := range []string{"raw", "distlock-scripts", "distlock-fair-scripts"} {
		for _, via := range []string{"pool", "autopipeline"} {
			b.Run(op+"/"+via, func(b *testing.B) {
				rdb := redis.NewClient(srv.Options())
				defer rdb.Close()
				var c cmds = rdb
				if via == "autopipeline" {
					ap, err := rdb.AutoPipeline()
					if err != nil {
						b.Skip("no AutoPipeliner:", err)
					}
					defer ap.Close()
					c = ap
				}
				f := ops[op]
				var seq atomic.Int64
				b.SetParallelism(16)
				b.RunParallel(func(pb *testing.PB) {
					key := "w:" + strconv.FormatInt(seq.Add(1), 10)
					ctx := context.Background()
					for pb.Next() {
						if err := f(ctx, c, key); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		}
	}
}
