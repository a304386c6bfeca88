package rueidisstore_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/redistest"
	"github.com/distlock/distlock/rueidisstore"
	"github.com/redis/rueidis"
)

// benchClient returns a Client on a rueidis store of a server of its
// own, closed when b ends, and a context that can end (as most callers
// pass), for an hour.
func benchClient(b *testing.B) (*distlock.Client, context.Context) {
	srv := redistest.Start(b)
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr()}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(client.Close)
	c := distlock.New(rueidisstore.New(client), distlock.WithLogger(nil))
	b.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	b.Cleanup(cancel)
	return c, ctx
}

// BenchmarkMutexLockUnlock is the root package's benchmark of the same
// name through rueidis: an uncontended Lock and Unlock, one goroutine, with
// a context that can end (as most callers pass).
func BenchmarkMutexLockUnlock(b *testing.B) {
	c, ctx := benchClient(b)
	names := make([]string, 1024)
	for i := range names {
		names[i] = "bench-" + strconv.Itoa(i)
	}
	for i := 0; b.Loop(); i++ {
		l, err := c.Mutex(names[i%len(names)]).Lock(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Unlock(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMutexLockUnlockParallel is lockbench's scenario b in one
// process: 32 goroutines, each on names of its own.
func BenchmarkMutexLockUnlockParallel(b *testing.B) {
	c, ctx := benchClient(b)
	var next atomic.Int64
	b.SetParallelism(16) // 32 goroutines on 2 cores
	b.RunParallel(func(pb *testing.PB) {
		prefix := "bench-" + strconv.FormatInt(next.Add(1), 10) + "-"
		for i := 0; pb.Next(); i++ {
			l, err := c.Mutex(prefix + strconv.Itoa(i%64)).Lock(ctx)
			if err != nil {
				b.Error(err)
				return
			}
			if err := l.Unlock(ctx); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
