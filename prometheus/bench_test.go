package prometheus_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/distlock/distlock"
	distlockprom "github.com/distlock/distlock/prometheus"
	"github.com/distlock/distlock/redisstore"
	"github.com/distlock/distlock/redistest"
	"github.com/prometheus/client_golang/prometheus"
)

// BenchmarkLockUnlock: an uncontended Lock and Unlock of a Mutex on a real
// redis-server, without observers and with a Collector, which costs the
// difference (go test -run '^$' -bench LockUnlock -benchmem).
func BenchmarkLockUnlock(b *testing.B) {
	b.Run("observer=none", func(b *testing.B) { benchLockUnlock(b) })
	b.Run("observer=collector", func(b *testing.B) {
		col := distlockprom.New()
		prometheus.NewRegistry().MustRegister(col)
		benchLockUnlock(b, distlock.WithObserver(col))
	})
}

func benchLockUnlock(b *testing.B, opts ...distlock.Option) {
	srv := redistest.Start(b)
	c := distlock.New(redisstore.New(srv.Client(b)), append([]distlock.Option{distlock.WithLogger(nil)}, opts...)...)
	defer c.Close()
	ctx := context.Background()
	mutexes := make([]*distlock.Mutex, 64)
	for i := range mutexes {
		mutexes[i] = c.Mutex("bench-" + strconv.Itoa(i))
	}
	for i := 0; b.Loop(); i++ {
		l, err := mutexes[i%len(mutexes)].Lock(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Unlock(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
