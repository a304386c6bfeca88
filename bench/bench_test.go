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

	"github.com/distlock/distlock/bench/internal/harness"
	"github.com/distlock/distlock/redistest"
	"github.com/redis/go-redis/v9"
)

func TestMain(m *testing.M) {
	// The hand-over benchmark and the smoke test re-execute this test
	// binary as the waiting process.
	harness.RunWorkerIfRequested()
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

// BenchmarkAcquireRelease: one goroutine acquires and releases a new,
// uncontended key each time. raw is SET NX PX + EVALSHA compare-and-delete.
func BenchmarkAcquireRelease(b *testing.B) {
	srv := startServer(b)
	for _, lib := range harness.AllLibs {
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
	for _, lib := range harness.AllLibs {
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

// BenchmarkWhatIfAutoPipelined is evidence for scenario b, not a library
// benchmark: 32 goroutines (16 per CPU on 2 CPUs) acquire and release their
// own keys with the raw baseline's commands and with distlock's own Lua
// scripts (read from ../internal/redisbackend/scripts; the arguments are
// those of the library at the time of writing), each sent either
// through the go-redis connection pool (what distlock does today) or
// through go-redis's experimental AutoPipeliner, which batches the
// concurrent calls into pipelines the way rueidis does.
func BenchmarkWhatIfAutoPipelined(b *testing.B) {
	srv := startServer(b)
	acquireSrc, err1 := os.ReadFile("../internal/redisbackend/scripts/acquire.lua")
	releaseSrc, err2 := os.ReadFile("../internal/redisbackend/scripts/release.lua")
	if err1 != nil || err2 != nil {
		b.Skip("distlock's scripts not found:", err1, err2)
	}
	acquire, release := redis.NewScript(string(acquireSrc)), redis.NewScript(string(releaseSrc))
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
			res, err := acquire.Run(ctx, c, []string{lock, lock + ":fence"}, "owner", 1, 10000, 3600000, "host", 1, "0", time.Now().UnixMilli()).Slice()
			if err != nil {
				return err
			}
			if n, _ := res[0].(int64); n != 1 {
				return fmt.Errorf("acquire.lua returned %v: its arguments changed", res)
			}
			n, err := release.Run(ctx, c, []string{lock}, "owner", 1, lock+":released", "p", "me").Int64()
			if err == nil && n != 1 {
				err = fmt.Errorf("release.lua returned %d: its arguments changed", n)
			}
			return err
		},
	}
	for _, op := range []string{"raw", "distlock-scripts"} {
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
