package redistest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// sentinelCtx bounds a sentinel test, so that a failover that never comes
// fails it instead of hanging it.
func sentinelCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// awaitKey waits until s has key with value want.
func awaitKey(ctx context.Context, t *testing.T, s *Server, key, want string) {
	t.Helper()
	rdb := s.Client(t)
	var got string
	var err error
	if werr := waitFor(ctx, func() bool {
		got, err = rdb.Get(ctx, key).Result()
		return err == nil && got == want
	}); werr != nil {
		t.Fatalf("%s: GET %s = %q, %v; want %q", s.Addr(), key, got, err, want)
	}
}

func TestSentinelReplicates(t *testing.T) {
	ctx := sentinelCtx(t)
	g := StartSentinel(t, 2)
	if got := len(g.SentinelAddrs()); got != 3 {
		t.Fatalf("%d sentinels, want 3", got)
	}
	m, err := g.Master(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if m != g.Servers()[0] {
		t.Errorf("Master() = %s, want the first server %s", m.Addr(), g.Servers()[0].Addr())
	}
	reps, err := g.Replicas(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(reps) != 2 {
		t.Fatalf("%d replicas, want 2", len(reps))
	}
	for _, s := range append(g.SentinelAddrs(), m.Addr(), reps[0].Addr(), reps[1].Addr()) {
		if s == "127.0.0.1:6379" || s == "127.0.0.1:26379" {
			t.Errorf("a server of the group listens on the default port: %s", s)
		}
	}

	fc := g.FailoverClient(t)
	if err := fc.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	for _, r := range reps {
		awaitKey(ctx, t, r, "k", "v")
	}
}

func TestSentinelFailover(t *testing.T) {
	ctx := sentinelCtx(t)
	g := StartSentinel(t, 1)
	fc := g.FailoverClient(t)
	if err := fc.Set(ctx, "k", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	old, err := g.Master(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.AwaitSync(ctx); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	nm, err := g.Failover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("SENTINEL FAILOVER: %s -> %s in %v", old.Addr(), nm.Addr(), time.Since(start))
	if nm == old {
		t.Fatalf("master still %s after Failover", old.Addr())
	}
	// The failover client follows: its writes land on the new master.
	if err := waitFor(ctx, func() bool { return fc.Set(ctx, "k", "2", 0).Err() == nil }); err != nil {
		t.Fatal(err)
	}
	awaitKey(ctx, t, nm, "k", "2")
	// The old master becomes a replica of the new one.
	if err := g.AwaitSync(ctx); err != nil {
		t.Fatal(err)
	}
	awaitKey(ctx, t, old, "k", "2")
}

func TestSentinelKillMaster(t *testing.T) {
	ctx := sentinelCtx(t)
	g := StartSentinel(t, 1)
	old, err := g.Master(ctx)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := old.Kill(); err != nil {
		t.Fatal(err)
	}
	nm, err := g.AwaitMaster(ctx, old.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("master %s killed, %s promoted after %v", old.Addr(), nm.Addr(), time.Since(start))
	if nm != g.Servers()[1] {
		t.Errorf("promoted %s, want the replica %s", nm.Addr(), g.Servers()[1].Addr())
	}
	if err := g.FailoverClient(t).Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Errorf("SET through the failover client after the failover: %v", err)
	}
}

func TestSentinelCutReplication(t *testing.T) {
	ctx := sentinelCtx(t)
	g := StartSentinel(t, 1)
	m, r := g.Servers()[0], g.Servers()[1]
	mc := m.Client(t)
	if err := mc.Set(ctx, "before", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	awaitKey(ctx, t, r, "before", "1")

	if err := g.CutReplication(ctx, r); err != nil {
		t.Fatal(err)
	}
	if err := mc.Set(ctx, "during", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	// A later write that does reach a replica would have reached it by now:
	// WAIT returns once the master's replicas acknowledged its writes, or
	// after the timeout with the number that did: none is connected.
	n, err := mc.Wait(ctx, 1, 300*time.Millisecond).Result()
	if err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("WAIT: %d replicas acknowledged, want 0 with replication cut", n)
	}
	if err := r.Client(t).Get(ctx, "during").Err(); !errors.Is(err, redis.Nil) {
		t.Errorf("replica: GET during = %v, want redis.Nil (replication cut)", err)
	}
	short, cancel := context.WithTimeout(ctx, 1500*time.Millisecond) // more than the replica's reconnect period
	err = g.AwaitSync(short)
	cancel()
	if err == nil {
		t.Errorf("AwaitSync succeeded with replication cut")
	}

	if err := g.RestoreReplication(ctx, r); err != nil {
		t.Fatal(err)
	}
	awaitKey(ctx, t, r, "during", "1")
	if err := g.AwaitSync(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestSentinelPassword(t *testing.T) {
	ctx := sentinelCtx(t)
	g := StartSentinel(t, 1, WithPassword("pw"))
	fc := g.FailoverClient(t)
	if err := fc.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	awaitKey(ctx, t, g.Servers()[1], "k", "v")
	if _, err := g.Failover(ctx); err != nil {
		t.Fatal(err)
	}
}
