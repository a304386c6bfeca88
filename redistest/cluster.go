package redistest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// A Cluster is a Redis Cluster of master-only redis-server processes started
// by this package, with the 16384 slots split evenly between them.
type Cluster struct {
	// Servers are the masters, in slot order: Servers[0] serves the lowest
	// slots. Each can be killed, paused and restarted like any Server
	// (a restarted node comes back empty and without its slots).
	Servers []*Server
}

// StartCluster starts n (at least 1) cluster-enabled servers, assigns the
// slots, joins them and returns once every node reports cluster_state:ok.
// The caller must call [Cluster.Stop]; tests should use [StartClusterT].
// The servers' cluster bus ports are their ports + 10000. The cluster's
// node timeout is 5 s unless opts set --cluster-node-timeout.
func StartCluster(n int, opts ...Option) (*Cluster, error) {
	if n < 1 {
		return nil, errors.New("redistest: a cluster needs at least one node")
	}
	c := &Cluster{}
	opts = append([]Option{WithArgs("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
		"--cluster-node-timeout", "5000")}, opts...) // later arguments win
	for i := 0; i < n; i++ {
		s, err := StartServer(opts...)
		if err != nil {
			c.Stop()
			return nil, err
		}
		c.Servers = append(c.Servers, s)
	}
	if err := c.join(); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

// StartClusterT starts a cluster as [StartCluster] does for the test tb,
// and stops it when the test ends.
func StartClusterT(tb testing.TB, n int, opts ...Option) *Cluster {
	tb.Helper()
	c, err := StartCluster(n, opts...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := c.Stop(); err != nil {
			tb.Errorf("redistest: stop cluster: %v", err)
		}
	})
	return c
}

func (c *Cluster) join() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	per := 16384 / len(c.Servers)
	for i, s := range c.Servers {
		rdb := redis.NewClient(s.Options())
		lo, hi := i*per, (i+1)*per-1
		if i == len(c.Servers)-1 {
			hi = 16383
		}
		err := rdb.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", lo, hi).Err()
		if err == nil && i > 0 {
			err = rdb.ClusterMeet(ctx, "127.0.0.1", strconv.Itoa(c.Servers[0].Port())).Err()
		}
		rdb.Close()
		if err != nil {
			return fmt.Errorf("redistest: cluster set-up of %s: %w", s.Addr(), err)
		}
	}
	// Wait for the gossip to converge: every node must see every slot.
	for _, s := range c.Servers {
		rdb := redis.NewClient(s.Options())
		err := waitFor(ctx, func() bool {
			info, err := rdb.ClusterInfo(ctx).Result()
			return err == nil && strings.Contains(info, "cluster_state:ok") &&
				strings.Contains(info, fmt.Sprintf("cluster_known_nodes:%d", len(c.Servers)))
		})
		rdb.Close()
		if err != nil {
			return fmt.Errorf("redistest: cluster at %s did not become ready: %w", s.Addr(), err)
		}
	}
	return nil
}

// waitFor polls cond every 20 ms until it holds or ctx ends; there is no
// event for a cluster's gossip converging.
func waitFor(ctx context.Context, cond func() bool) error {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}

// Addrs returns the masters' addresses.
func (c *Cluster) Addrs() []string {
	var out []string
	for _, s := range c.Servers {
		out = append(out, s.Addr())
	}
	return out
}

// Client returns a new go-redis cluster client, closed when tb ends.
func (c *Cluster) Client(tb testing.TB) *redis.ClusterClient {
	tb.Helper()
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), Password: c.Servers[0].cfg.password})
	tb.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// Stop stops every node; it is idempotent.
func (c *Cluster) Stop() error {
	var errs []error
	for _, s := range c.Servers {
		errs = append(errs, s.Stop())
	}
	return errors.Join(errs...)
}
