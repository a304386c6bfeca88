package redistest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// A cluster serves keys from every node.
func TestCluster(t *testing.T) {
	c := StartCluster(t, 3)
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

// clusterCtx bounds a cluster test, so that a failover or a migration that
// never completes fails it instead of hanging it.
func clusterCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// A slot migrated with its keys: while the migration is under way (keys
// moved, slot not yet reassigned) the source answers ASK and the cluster
// client still reads and writes the slot's keys; afterwards the target
// serves the slot and holds the keys.
func TestClusterMigrateSlot(t *testing.T) {
	ctx := clusterCtx(t)
	c := StartCluster(t, 3)
	rdb := c.Client(t)
	const key = "{m}k"
	slot := int(rdb.ClusterKeySlot(ctx, key).Val())
	from, err := c.SlotMaster(ctx, slot)
	if err != nil {
		t.Fatal(err)
	}
	to := c.Servers[0]
	if to == from {
		to = c.Servers[1]
	}
	for i := 0; i < 250; i++ { // more keys than one MIGRATE batch
		if err := rdb.Set(ctx, fmt.Sprint("{m}", i), i, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := rdb.Set(ctx, key, "v1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	m, err := c.StartMigration(ctx, slot, to)
	if err != nil {
		t.Fatal(err)
	}
	if m.From() != from || m.To() != to {
		t.Fatalf("migration from %s to %s, want %s to %s", m.From().Addr(), m.To().Addr(), from.Addr(), to.Addr())
	}
	if err := m.MoveKeys(ctx); err != nil {
		t.Fatal(err)
	}
	// Half way: the source has no key of the slot and answers ASK.
	fc := from.Client(t)
	if n := fc.ClusterCountKeysInSlot(ctx, slot).Val(); n != 0 {
		t.Fatalf("source holds %d keys of the slot after MoveKeys", n)
	}
	if err := fc.Get(ctx, key).Err(); err == nil || !strings.HasPrefix(err.Error(), "ASK ") {
		t.Fatalf("source: GET %s during the migration: %v, want ASK", key, err)
	}
	if got, err := rdb.Get(ctx, key).Result(); err != nil || got != "v1" {
		t.Fatalf("cluster client: GET %s during the migration: %q, %v", key, got, err)
	}
	if err := rdb.Set(ctx, key, "v2", 0).Err(); err != nil {
		t.Fatalf("cluster client: SET %s during the migration: %v", key, err)
	}
	if err := m.Finish(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := c.SlotMaster(ctx, slot); err != nil || got != to {
		t.Fatalf("SlotMaster after the migration: %v, %v; want %s", got, err, to.Addr())
	}
	tc := to.Client(t)
	if n := tc.ClusterCountKeysInSlot(ctx, slot).Val(); n != 251 {
		t.Fatalf("target holds %d keys of the slot, want 251", n)
	}
	if got, err := tc.Get(ctx, key).Result(); err != nil || got != "v2" {
		t.Fatalf("target: GET %s = %q, %v; want v2", key, got, err)
	}
	if got, err := rdb.Get(ctx, key).Result(); err != nil || got != "v2" {
		t.Fatalf("cluster client: GET %s after the migration: %q, %v", key, got, err)
	}
	// Back again, in one call.
	if err := c.MigrateSlot(ctx, slot, from); err != nil {
		t.Fatal(err)
	}
	if got, err := c.SlotMaster(ctx, slot); err != nil || got != from {
		t.Fatalf("SlotMaster after migrating back: %v, %v; want %s", got, err, from.Addr())
	}
}

// A cluster with a replica per master: every replica is in sync at the
// start; CLUSTER FAILOVER swaps a master and its replica; a master killed
// is replaced by its replica, which keeps the data it had replicated.
func TestClusterReplicasFailover(t *testing.T) {
	ctx := clusterCtx(t)
	t0 := time.Now()
	c := StartCluster(t, 3, WithReplicas(1), WithArgs("--cluster-node-timeout", "1000"))
	t.Logf("cluster of 3 masters and 3 replicas ready after %v", time.Since(t0).Round(time.Millisecond))
	if len(c.Servers) != 3 || len(c.Replicas) != 3 {
		t.Fatalf("%d masters and %d replicas, want 3 and 3", len(c.Servers), len(c.Replicas))
	}
	rdb := c.Client(t)
	const key = "{f}k"
	slot := int(rdb.ClusterKeySlot(ctx, key).Val())
	master, err := c.SlotMaster(ctx, slot)
	if err != nil {
		t.Fatal(err)
	}
	replica, err := c.SlotReplica(ctx, slot)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.Index(c.Servers, master)
	if i < 0 || replica != c.Replicas[i] {
		t.Fatalf("slot %d: master %s, replica %s; want a started master and its replica", slot, master.Addr(), replica.Addr())
	}
	if err := rdb.Set(ctx, key, "v1", 0).Err(); err != nil {
		t.Fatal(err)
	}

	// Planned: the replica takes over, the old master follows it.
	t0 = time.Now()
	promoted, err := c.FailoverReplica(ctx, master)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("CLUSTER FAILOVER done after %v", time.Since(t0).Round(time.Millisecond))
	if promoted != replica {
		t.Fatalf("FailoverReplica promoted %s, want %s", promoted.Addr(), replica.Addr())
	}
	if r, err := c.SlotReplica(ctx, slot); err != nil || r != master {
		t.Fatalf("SlotReplica after the failover: %v, %v; want the old master", r, err)
	}
	if got, err := rdb.Get(ctx, key).Result(); err != nil || got != "v1" {
		t.Fatalf("GET %s after CLUSTER FAILOVER: %q, %v", key, got, err)
	}
	if err := rdb.Set(ctx, key, "v2", 0).Err(); err != nil {
		t.Fatal(err)
	}
	// WAIT: the write reached the old master, now a replica, before the
	// new master is killed.
	if n, err := promoted.Client(t).Wait(ctx, 1, 5000).Result(); err != nil || n != 1 {
		t.Fatalf("WAIT 1: %d, %v", n, err)
	}

	// Automatic: the new master is killed, the old one takes over again.
	start := time.Now()
	if err := promoted.Kill(); err != nil {
		t.Fatal(err)
	}
	again, err := c.AwaitSlotMaster(ctx, slot, promoted)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("master killed, replica promoted after %v", time.Since(start).Round(time.Millisecond))
	if again != master {
		t.Fatalf("after the kill, slot %d is served by %s, want %s", slot, again.Addr(), master.Addr())
	}
	// A new client: the first one's view of the slots still names the
	// dead master (go-redis reloads it on MOVED, or after 10 s).
	if got, err := c.Client(t).Get(ctx, key).Result(); err != nil || got != "v2" {
		t.Fatalf("GET %s after the automatic failover: %q, %v", key, got, err)
	}
}
