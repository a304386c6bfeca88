//go:build unix

package main

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/redisstore"
	"github.com/distlock/distlock/redistest"
)

// wantState fails the test unless status of name on url says state.
func wantState(t *testing.T, url, name, state string) {
	t.Helper()
	r := run(t, "status", "--redis", url, name)
	r.wantCode(t, 0)
	if !regexp.MustCompile(`(?m)^state: +` + state + `$`).MatchString(r.stdout) {
		t.Errorf("status %s printed %q, want state %s", name, r.stdout, state)
	}
}

// --redis takes go-redis's Sentinel URL form (master_name, more Sentinels
// as addr parameters): the command runs under a lock on the master, sees
// locks taken by library clients, and follows the master across a
// failover.
func TestRedisURLSentinel(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	g := redistest.StartSentinel(t, 1)
	sentinels := g.SentinelAddrs()
	url := "redis://" + sentinels[0] + "?master_name=" + g.MasterName() + "&addr=" + sentinels[1] + "&addr=" + sentinels[2]

	r := run(t, "run", "--redis", url, "--wait", "0", "job", "--", "sh", "-c", `test -n "$DISTLOCK_TOKEN"`)
	r.wantCode(t, 0)

	c := distlock.New(redisstore.New(g.FailoverClient(t)), distlock.WithLogger(nil))
	t.Cleanup(func() { _ = c.Close() })
	l := hold(t, c, "held", distlock.WithTTL(3*time.Second))
	wantState(t, url, "held", "locked")
	r = run(t, "run", "--redis", url, "--wait", "0", "held", "--", "true")
	r.wantCode(t, exitNotAcquired)

	// The lock must have reached the replica before the switch
	// (replication is asynchronous: see docs/guarantees.md).
	if err := g.AwaitSync(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Failover(ctx); err != nil {
		t.Fatal(err)
	}
	// The holder renews on the new master (its lease context is live), and
	// the command finds the lock there.
	if l.Context().Err() != nil {
		t.Fatalf("the holder lost its lock in the failover: %v", context.Cause(l.Context()))
	}
	wantState(t, url, "held", "locked")
	wantState(t, url, "job", "free")
}

// --redis takes go-redis's Cluster URL form (more seed nodes as addr
// parameters, or cluster=true for one seed): list sees the locks of every
// master, status finds a lock on whichever master has its slot, and run
// takes locks there; a bad cluster parameter is a usage error.
func TestRedisURLCluster(t *testing.T) {
	t.Parallel()
	cl := redistest.StartCluster(t, 3)
	addrs := cl.Addrs()
	url := "redis://" + addrs[0] + "?addr=" + addrs[1] + "&addr=" + addrs[2]
	single := "redis://" + addrs[1] + "?cluster=true"

	c := distlock.New(redisstore.New(cl.Client(t)), distlock.WithLogger(nil))
	t.Cleanup(func() { _ = c.Close() })
	names := []string{"alpha", "bravo", "charlie", "delta", "echo"} // spread over the masters
	for _, name := range names {
		hold(t, c, name)
	}
	for _, u := range []string{url, single} {
		r := run(t, "list", "--redis", u)
		r.wantCode(t, 0)
		for _, name := range names {
			if !strings.Contains(r.stdout, name) {
				t.Errorf("list on %s printed %q, without %s", u, r.stdout, name)
			}
		}
		for _, name := range names {
			wantState(t, u, name, "locked")
		}
		r = run(t, "run", "--redis", u, "--wait", "0", "alpha", "--", "true")
		r.wantCode(t, exitNotAcquired)
		r = run(t, "run", "--redis", u, "--wait", "0", "foxtrot", "--", "sh", "-c", `test -n "$DISTLOCK_TOKEN"`)
		r.wantCode(t, 0)
	}
	r := run(t, "status", "--redis", "redis://"+addrs[0]+"?cluster=maybe", "alpha")
	r.wantCode(t, exitUsage)
	wantOneLine(t, r.stderr)
}
