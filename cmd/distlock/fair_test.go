//go:build unix

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/redistest"
)

// The tests of run --fair; those of status, list and unlock on a fair
// lock are in status_test.go. The distlock processes that queue run with
// the default --queue-timeout, --ttl and --kill-grace, as users run them
// (see also TestRunQueuedDefaults).

// holdFair acquires the lock name as a fair mutex for the test, and
// releases it when the test ends.
func holdFair(t *testing.T, c *distlock.Client, name string, opts ...distlock.MutexOption) *distlock.Lease {
	t.Helper()
	lease, err := c.FairMutex(name, opts...).TryLock(context.Background())
	if err != nil {
		t.Fatalf("lock %q as a fair mutex: %v", name, err)
	}
	t.Cleanup(func() { _ = lease.Unlock(context.Background()) })
	return lease
}

// awaitQueued waits until n waiters are in the queue of the fair lock name.
func awaitQueued(t *testing.T, c *distlock.Client, name string, n int) {
	t.Helper()
	eventually(t, fmt.Sprintf("%d queued for %q", n, name), func() bool {
		return inspect(t, c, name).Queued == n
	})
}

// awaitOutput waits until the file path contains s: a distlock process's
// stderr, where it reports on its wait.
func awaitOutput(t *testing.T, path, s string) {
	t.Helper()
	eventually(t, fmt.Sprintf("%q in %s", s, path), func() bool {
		return strings.Contains(readFile(t, path), s)
	})
}

// holdUntilGo is a command that writes "$DISTLOCK_NAME $DISTLOCK_TOKEN" to
// the file $OUT (in one step: the file appears complete), then runs until
// the file $GO exists.
const holdUntilGo = `echo "$DISTLOCK_NAME $DISTLOCK_TOKEN" >"$OUT.tmp" && mv "$OUT.tmp" "$OUT"
while [ ! -e "$GO" ]; do sleep 0.05; done`

// TestRunFair runs a command under a fair lock: it gets the lock's name
// and token, the lock is held as a fair one by distlock while it runs, a
// run --fair --wait 0 meanwhile does not get it, and the lock is free once
// the command has exited.
func TestRunFair(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := newClient(t, srv)
	dir := t.TempDir()
	out, goFile := filepath.Join(dir, "out"), filepath.Join(dir, "go")
	p := start(t, []string{"OUT=" + out, "GO=" + goFile},
		"run", "--redis", srv.URL(), "--fair", "fair", "--", "sh", "-c", holdUntilGo)
	awaitFile(t, out)
	var name string
	var token uint64
	if _, err := fmt.Sscanf(readFile(t, out), "%s %d", &name, &token); err != nil {
		t.Fatalf("the command got %q: %v", readFile(t, out), err)
	}
	if name != "fair" || token == 0 {
		t.Errorf("the command got DISTLOCK_NAME %q and DISTLOCK_TOKEN %d, want fair and a token", name, token)
	}
	info := inspect(t, c, "fair")
	switch {
	case !info.Locked || info.Kind != distlock.KindFairMutex:
		t.Errorf("lock state %+v while the command runs, want held as a fair mutex", info)
	case info.Holder.PID != p.cmd.Process.Pid || info.Token != token:
		t.Errorf("held by pid %d with token %d, want distlock (pid %d) with the command's token %d",
			info.Holder.PID, info.Token, p.cmd.Process.Pid, token)
	}

	// --wait 0 tries once, without queueing.
	ran := filepath.Join(dir, "ran")
	r := run(t, "run", "--redis", srv.URL(), "--fair", "--wait", "0", "fair", "--", "touch", ran)
	r.wantCode(t, exitNotAcquired)
	wantOneLine(t, r.stderr)
	host, _ := os.Hostname()
	if want := fmt.Sprintf("held by %s/%d", host, p.cmd.Process.Pid); !strings.Contains(r.stderr, want) {
		t.Errorf("stderr %q does not say %q", r.stderr, want)
	}
	if _, err := os.Stat(ran); err == nil {
		t.Error("the command of run --wait 0 ran without the lock")
	}

	if err := os.WriteFile(goFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(); code != 0 {
		t.Fatalf("exit status %d; stderr:\n%s", code, p.errOut())
	}
	if info := inspect(t, c, "fair"); info.Locked || info.Queued != 0 || info.LastToken != token {
		t.Errorf("lock state %+v after the command, want free, nothing queued, last token %d", info, token)
	}
}

// TestRunFairFIFO queues three run --fair processes, one after another,
// behind a fair lock held by the test: once the test releases it, their
// commands run in the order the processes queued, each with a higher
// token than the one before.
func TestRunFairFIFO(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := newClient(t, srv)
	lease := holdFair(t, c, "fifo")
	logFile := filepath.Join(t.TempDir(), "log")

	const n = 3
	procs := make([]*proc, n)
	for i := range procs {
		procs[i] = start(t, []string{"LOG=" + logFile, "ID=" + itoa(i+1)},
			"run", "--redis", srv.URL(), "--fair", "fifo", "--",
			"sh", "-c", `echo "$ID $DISTLOCK_TOKEN" >>"$LOG"`)
		awaitQueued(t, c, "fifo", i+1)
	}
	if err := lease.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	for i, p := range procs {
		if code := p.wait(); code != 0 {
			t.Fatalf("process %d: exit status %d; stderr:\n%s", i+1, code, p.errOut())
		}
	}

	lines := strings.Split(strings.TrimSpace(readFile(t, logFile)), "\n")
	if len(lines) != n {
		t.Fatalf("got %d records, want %d:\n%s", len(lines), n, strings.Join(lines, "\n"))
	}
	last := lease.Token()
	for i, line := range lines {
		var id int
		var token uint64
		if _, err := fmt.Sscanf(line, "%d %d", &id, &token); err != nil {
			t.Fatalf("record %d = %q: %v", i, line, err)
		}
		if id != i+1 {
			t.Errorf("record %d is of process %d, want %d: not served in arrival order:\n%s",
				i, id, i+1, strings.Join(lines, "\n"))
		}
		if token <= last {
			t.Errorf("process %d got token %d after token %d: tokens must increase", id, token, last)
		}
		last = token
	}
}

// TestRunWrongKind runs distlock with and without --fair on a lock held as
// the other kind: it fails at once with status 78 and says why, does not
// run the command, and leaves the lock as it was.
func TestRunWrongKind(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := newClient(t, srv)
	tests := []struct {
		name     string
		heldFair bool
		args     []string
		want     string
	}{
		{"plain on fair", true, nil, "is in use as a fair-mutex (--fair)"},
		{"plain on fair, wait 0", true, []string{"--wait", "0"}, "is in use as a fair-mutex (--fair)"},
		{"fair on plain", false, []string{"--fair"}, "is in use as a mutex (without --fair, --shared, --exclusive or --semaphore)"},
		{"fair on plain, wait 0", false, []string{"--fair", "--wait", "0"}, "is in use as a mutex (without --fair, --shared, --exclusive or --semaphore)"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name := "kind-" + itoa(i)
			var lease *distlock.Lease
			if tt.heldFair {
				lease = holdFair(t, c, name)
			} else {
				lease = hold(t, c, name)
			}
			ran := filepath.Join(t.TempDir(), "ran")
			args := append([]string{"run", "--redis", srv.URL()}, tt.args...)
			r := run(t, append(args, name, "--", "touch", ran)...)
			r.wantCode(t, exitWrongKind)
			wantOneLine(t, r.stderr)
			for _, want := range []string{strconv.Quote(name), tt.want, "; use the same kind everywhere\n"} {
				if !strings.Contains(r.stderr, want) {
					t.Errorf("stderr %q does not contain %q", r.stderr, want)
				}
			}
			if _, err := os.Stat(ran); err == nil {
				t.Error("the command ran")
			}
			info := inspect(t, c, name)
			if !info.Locked || info.Token != lease.Token() || (info.Kind == distlock.KindFairMutex) != tt.heldFair || info.Queued != 0 {
				t.Errorf("lock state %+v, want still held by the test (token %d, fair %v), nothing queued",
					info, lease.Token(), tt.heldFair)
			}
			if err := lease.Context().Err(); err != nil {
				t.Errorf("the test's lease ended: %v", context.Cause(lease.Context()))
			}
		})
	}
}

// TestRunFairProgress checks that a run --fair that waits says, on stderr,
// who holds the lock and how many are queued.
func TestRunFairProgress(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := newClient(t, srv)
	lease := holdFair(t, c, "slow")
	p := start(t, nil, "run", "--redis", srv.URL(), "--fair", "slow", "--", "true")
	awaitQueued(t, c, "slow", 1)
	awaitOutput(t, p.stderr, "waiting for slow")
	line := p.errOut()
	host, _ := os.Hostname()
	for _, want := range []string{fmt.Sprintf("held by %s/%d", host, os.Getpid()), ", 1 queued\n"} {
		if !strings.Contains(line, want) {
			t.Errorf("progress %q does not contain %q", line, want)
		}
	}
	if err := lease.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(); code != 0 {
		t.Fatalf("exit status %d; stderr:\n%s", code, p.errOut())
	}
}
