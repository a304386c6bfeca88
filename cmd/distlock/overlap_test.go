//go:build linux

package main

import (
	"context"
	"flag"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock/redisstore"
	"github.com/distlock/distlock/redistest"
)

var overlapDefaults = flag.Bool("overlap.defaults", false,
	"run TestRunLossNoOverlap with distlock's own defaults (--ttl 30s, --kill-grace 10s), a command that takes 1s to exit after SIGTERM, "+
		"and the deletion of the lock, whose overlap it measures without judging it (about a minute)")

// TestRunLossNoOverlap cuts a holder off from Redis, by a partition (a
// proxy that stops forwarding) or by freezing Redis (SIGSTOP), or revokes
// its lock (unlock --force), while its command runs, and has a second
// holder take the lock as soon as Redis lets it. The first command
// records the time of each of its writes, the second the time it starts:
// with the default --kill-grace (a third of --ttl 3s here), the first must
// have made its last write before the second starts, whether it exits
// soon after SIGTERM or ignores it and is killed. With -overlap.defaults
// it runs with all of distlock's defaults, and measures the deletion of
// the lock too (DEL, and unlock --force --now), where an overlap cannot
// be helped: run learns of a DEL only at its next renewal, and of a
// deletion by unlock at once, and the next holder may start at once
// either way.
func TestRunLossNoOverlap(t *testing.T) {
	t.Parallel()
	ttl, cleanup := []string{"--ttl", "3s"}, "0.5"
	faults := []string{"partition", "freeze", "revoke"}
	if *overlapDefaults {
		ttl, cleanup = nil, "1"
		faults = append(faults, "delete", "force-unlock-now")
	}
	commands := []struct{ name, onTerm string }{
		{"exits " + cleanup + "s after SIGTERM", `trap 'stamp; sleep ` + cleanup + `; stamp; exit 0' TERM`},
		{"ignores SIGTERM", `trap '' TERM`},
	}
	for _, fault := range faults {
		for _, cmd := range commands {
			t.Run(fault+"/"+cmd.name, func(t *testing.T) {
				t.Parallel()
				testLossNoOverlap(t, fault, cmd.onTerm, ttl)
			})
		}
	}
}

func testLossNoOverlap(t *testing.T, fault, onTerm string, ttl []string) {
	srv := redistest.Start(t)
	dir := t.TempDir()
	first, second, ready := filepath.Join(dir, "first"), filepath.Join(dir, "second"), filepath.Join(dir, "ready")
	url := srv.URL()
	var partition *proxy
	if fault == "partition" {
		partition = startProxy(t, srv.Addr())
		url = "redis://" + partition.Addr()
	}
	script := `stamp() { date +%s%N >>"$FIRST"; }
` + onTerm + `
touch "$READY"
while :; do stamp; sleep 0.02; done`
	holder := start(t, []string{"FIRST=" + first, "READY=" + ready},
		append(append([]string{"run", "--redis", url}, ttl...), "contested", "--", "sh", "-c", script)...)
	awaitFile(t, ready)

	startNext := func() *proc {
		return start(t, []string{"SECOND=" + second},
			append(append([]string{"run", "--redis", srv.URL(), "--wait", "60s"}, ttl...),
				"contested", "--", "sh", "-c", `date +%s%N >"$SECOND"`)...)
	}
	var next *proc
	switch fault {
	case "partition":
		partition.Cut()
		next = startNext()
	case "freeze":
		if err := srv.Pause(); err != nil {
			t.Fatal(err)
		}
		// Resume Redis as soon as distlock stops its command, so that the
		// next holder takes the lock the moment the server expires it.
		eventually(t, "distlock to stop its command", func() bool {
			return strings.Contains(holder.errOut(), "lost lock")
		})
		if err := srv.Resume(); err != nil {
			t.Fatal(err)
		}
		next = startNext()
	case "delete":
		if err := srv.Client(t).Del(context.Background(), redisstore.DefaultPrefix+"{contested}").Err(); err != nil {
			t.Fatal(err)
		}
		next = startNext()
	case "revoke":
		// The next holder waits from before the revocation: it may start
		// the moment the lock is free.
		next = startNext()
		awaitWaiters(t, newClient(t, srv), "contested", 1)
		awaitHolderWatch(t, srv, holder)
		run(t, "unlock", "--redis", srv.URL(), "--force", "contested").wantCode(t, 0)
	case "force-unlock-now":
		awaitHolderWatch(t, srv, holder)
		run(t, "unlock", "--redis", srv.URL(), "--force", "--now", "contested").wantCode(t, 0)
		next = startNext()
	}
	if code := holder.wait(); code != exitLockLost {
		t.Fatalf("first holder: exit status %d, want %d; stderr:\n%s", code, exitLockLost, holder.errOut())
	}
	if code := next.wait(); code != 0 {
		t.Fatalf("second holder: exit status %d; stderr:\n%s", code, next.errOut())
	}
	last := lastStamp(t, first)
	began := lastStamp(t, second)
	if fault == "delete" || fault == "force-unlock-now" {
		t.Logf("the first command wrote for %v after the second one started (%s)", last.Sub(began), holder.errOut())
		return
	}
	t.Logf("the first command's last write came %v before the second command started", began.Sub(last))
	if !last.Before(began) {
		t.Errorf("the first command wrote %v after the second one started: they overlapped", last.Sub(began))
	}
}

// lastStamp reads the last of the times, in nanoseconds since the epoch,
// written one a line to path.
func lastStamp(t *testing.T, path string) time.Time {
	t.Helper()
	fields := strings.Fields(readFile(t, path))
	if len(fields) == 0 {
		t.Fatalf("%s: no time recorded", path)
	}
	ns, err := strconv.ParseInt(fields[len(fields)-1], 10, 64)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return time.Unix(0, ns)
}
