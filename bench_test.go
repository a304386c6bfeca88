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
