package redisbackend

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/distlock/redistest"
	"github.com/distlock/distlock/store"
	"github.com/redis/go-redis/v9"
)

// roundTrips counts what a go-redis client sends: single commands and
// pipelines (with their commands).
type roundTrips struct{ singles, pipelines, piped atomic.Int64 }

func (r *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }
func (r *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		r.singles.Add(1)
		return next(ctx, cmd)
	}
}
func (r *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		r.pipelines.Add(1)
		r.piped.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// Concurrent acquires and releases share round trips, and every caller
// still gets its own correct result.
func TestConcurrentCallsArePipelined(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	var rt roundTrips
	rdb.AddHook(&rt)
	b := New(GoRedis(rdb), Config{Keys: Keys{Prefix: "t:"}, FenceRetention: time.Minute, Host: "h", PID: 1})
	defer b.Close()
	ctx := t.Context()
	b.checkServer(ctx)
	rt.singles.Store(0)

	const goroutines, rounds = 32, 20
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < rounds; i++ {
				r := store.Request{Name: fmt.Sprint(g, "-", i), Owner: fmt.Sprint("o", g), Hold: 1, Lease: time.Minute}
				gr, err := b.Acquire(ctx, r)
				if err != nil || !gr.Acquired {
					errs <- fmt.Errorf("acquire %v: %+v %v", r, gr, err)
					return
				}
				rel, err := b.Release(ctx, r)
				if err != nil || rel != store.Freed {
					errs <- fmt.Errorf("release %v: %v %v", r, rel, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	calls := int64(2 * goroutines * rounds)
	trips := rt.singles.Load() + rt.pipelines.Load()
	if rt.pipelines.Load() == 0 || trips >= calls {
		t.Fatalf("%d calls took %d round trips (%d pipelines): nothing was pipelined", calls, trips, rt.pipelines.Load())
	}
	t.Logf("%d calls in %d round trips (%d pipelines carrying %d)", calls, trips, rt.pipelines.Load(), rt.piped.Load())
}
