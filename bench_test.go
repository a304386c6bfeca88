package distlock_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/redisstore"
	"github.com/distlock/distlock/redistest"
	"github.com/redis/go-redis/v9"
)

// Uncontended acquire+release of a new lock name each time; compare with
// BenchmarkRawSetNXDelete from the same run (cmd: go test -run ^$ -bench .).
func BenchmarkMutexLockUnlock(b *testing.B) {
	srv := redistest.Start(b)
	rdb := srv.Client(b)
	c := distlock.New(redisstore.New(rdb), distlock.WithLogger(nil))
	defer c.Close()
	ctx := context.Background()
	names := make([]string, 1024)
	for i := range names {
		names[i] = "bench-" + itoa(i)
	}
	b.ResetTimer()
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

var rawDelete = redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`)

// The floor for a correct single-instance lock: SET NX PX with a random
// value, released by a compare-and-delete script.
func BenchmarkRawSetNXDelete(b *testing.B) {
	srv := redistest.Start(b)
	rdb := srv.Client(b)
	ctx := context.Background()
	names := make([]string, 1024)
	for i := range names {
		names[i] = "raw-" + itoa(i)
	}
	var tok [16]byte
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		rand.Read(tok[:])
		v := hex.EncodeToString(tok[:])
		key := names[i%len(names)]
		ok, err := rdb.SetNX(ctx, key, v, 30*time.Second).Result()
		if err != nil || !ok {
			b.Fatal(ok, err)
		}
		if err := rawDelete.Run(ctx, rdb, []string{key}, v).Err(); err != nil {
			b.Fatal(err)
		}
	}
}

// 32 goroutines, each on its own lock names (cmd: go test -run ^$ -bench Parallel).
func BenchmarkMutexParallel32(b *testing.B) {
	srv := redistest.Start(b)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), PoolSize: 64})
	defer rdb.Close()
	c := distlock.New(redisstore.New(rdb), distlock.WithLogger(nil))
	defer c.Close()
	ctx := context.Background()
	var seq atomic.Int64
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		id := itoa(int(seq.Add(1)))
		for i := 0; pb.Next(); i++ {
			l, err := c.Mutex("p-" + id + "-" + itoa(i%64)).Lock(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if err := l.Unlock(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkRawParallel32(b *testing.B) {
	srv := redistest.Start(b)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), PoolSize: 64})
	defer rdb.Close()
	ctx := context.Background()
	var seq atomic.Int64
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		id := itoa(int(seq.Add(1)))
		var tok [16]byte
		for i := 0; pb.Next(); i++ {
			rand.Read(tok[:])
			v := hex.EncodeToString(tok[:])
			key := "r-" + id + "-" + itoa(i%64)
			ok, err := rdb.SetNX(ctx, key, v, 30*time.Second).Result()
			if err != nil || !ok {
				b.Fatal(ok, err)
			}
			if err := rawDelete.Run(ctx, rdb, []string{key}, v).Err(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// nopObserver is an Observer that does nothing: what an observer costs
// the library itself, without the observer's own work.
type nopObserver struct{}

func (nopObserver) StartCall(ctx context.Context, _ distlock.Call) context.Context { return ctx }
func (nopObserver) EndCall(context.Context, distlock.Call, distlock.CallResult)    {}
func (nopObserver) Event(distlock.Event)                                           {}

// The cost of observing: uncontended Lock+Unlock pairs with no observer
// (the default), with an event handler, and with an Observer that does
// nothing, side by side in one run (cmd: go test -run ^$ -bench Observe
// -benchmem -count 6).
func BenchmarkObserve(b *testing.B) {
	for _, tc := range []struct {
		name string
		opts []distlock.Option
	}{
		{"none", nil},
		{"handler", []distlock.Option{distlock.WithEventHandler(func(distlock.Event) {})}},
		{"observer", []distlock.Option{distlock.WithObserver(nopObserver{})}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			srv := redistest.Start(b)
			c := distlock.New(redisstore.New(srv.Client(b)), append([]distlock.Option{distlock.WithLogger(nil)}, tc.opts...)...)
			defer c.Close()
			ctx := context.Background()
			m := c.Mutex("bench-observe")
			for b.Loop() {
				l, err := m.Lock(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if err := l.Unlock(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
