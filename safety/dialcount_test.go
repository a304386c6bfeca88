package safety

import (
	"context"
	"net"
	"sync"

	"github.com/redis/go-redis/v9"
)

var dialMu sync.Mutex

// dialCounter counts the connections a go-redis client dials.
type dialCounter struct{ n *int }

func (d dialCounter) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		dialMu.Lock()
		*d.n++
		dialMu.Unlock()
		return next(ctx, network, addr)
	}
}
func (d dialCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (d dialCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func dialsNow(n *int) int {
	dialMu.Lock()
	defer dialMu.Unlock()
	return *n
}

func srvClient(t interface{ Cleanup(func()) }, opt *redis.Options) *redis.Client {
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { rdb.Close() })
	return rdb
}
