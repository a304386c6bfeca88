//go:build linux

package main

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock/redistest"
)

// TestRunLossNoOverlap cuts a holder off from Redis, by a partition (a
// proxy that stops forwarding) or by freezing Redis (SIGSTOP), while its
// command runs, and has a second holder take the lock as soon as Redis
// lets it. The first command records the time of each of its writes, the
// second the time it starts: with the default flags (--kill-grace a third
// of --ttl here), the first must have made its last write before the
// second starts, whether it exits half a second after SIGTERM or ignores
// it and is killed.
func TestRunLossNoOverlap(t *testing.T) {
	t.Parallel()
	commands := []struct{ name, onTerm string }{
		{"exits 0.5s after SIGTERM", `trap 'stamp; sleep 0.5; stamp; exit 0' TERM`},
		{"ignores SIGTERM", `trap '' TERM`},
	}
	for _, fault := range []string{"partition", "freeze"} {
		for _, cmd := range commands {
			t.Run(fault+"/"+cmd.name, func(t *testing.T) {
				t.Parallel()
				testLossNoOverlap(t, fault == "freeze", cmd.onTerm)
			})
		}
	}
}

func testLossNoOverlap(t *testing.T, freeze bool, onTerm string) {
	srv := redistest.Start(t)
	dir := t.TempDir()
	first, second, ready := filepath.Join(dir, "first"), filepath.Join(dir, "second"), filepath.Join(dir, "ready")
	url := srv.URL()
	var partition *proxy
	if !freeze {
		partition = startProxy(t, srv.Addr())
		url = "redis://" + partition.Addr()
	}
	script := `stamp() { date +%s%N >>"$FIRST"; }
` + onTerm + `
touch "$READY"
while :; do stamp; sleep 0.02; done`
	holder := start(t, []string{"FIRST=" + first, "READY=" + ready},
		"run", "--redis", url, "--ttl", "3s", "contested", "--", "sh", "-c", script)
	awaitFile(t, ready)

	var next *proc
	startNext := func() {
		next = start(t, []string{"SECOND=" + second}, "run", "--redis", srv.URL(), "--ttl", "3s", "--wait", "20s",
			"contested", "--", "sh", "-c", `date +%s%N >"$SECOND"`)
	}
	if freeze {
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
		startNext()
	} else {
		partition.Cut()
		startNext()
	}
	if code := holder.wait(); code != exitLockLost {
		t.Fatalf("first holder: exit status %d, want %d; stderr:\n%s", code, exitLockLost, holder.errOut())
	}
	if code := next.wait(); code != 0 {
		t.Fatalf("second holder: exit status %d; stderr:\n%s", code, next.errOut())
	}
	last := lastStamp(t, first)
	began := lastStamp(t, second)
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
