package redistest

import (
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"
)

// A cluster serves keys from every node.
func TestCluster(t *testing.T) {
	c := StartClusterT(t, 3)
	rdb := c.Client(t)
	ctx := t.Context()
	for i := 0; i < 30; i++ {
		if err := rdb.Set(ctx, fmt.Sprint("k", i), i, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range c.Servers {
		node := redis.NewClient(s.Options())
		n := node.DBSize(ctx).Val()
		node.Close()
		if n == 0 {
			t.Fatalf("node %s holds no keys: slots not spread", s.Addr())
		}
	}
}
