//go:build unix

package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/redistest"
)

// queuedKinds are the kinds of lock whose waiters queue, as a run takes
// them (flags), as the test holds them (hold) and as the test sees one
// waiter in their queue (awaitWaiter).
var queuedKinds = []struct {
	name        string
	flags       []string
	hold        func(t *testing.T, c *distlock.Client, name string) *distlock.Lease
	awaitWaiter func(t *testing.T, c *distlock.Client, name string)
}{
	{
		name:        "fair",
		flags:       []string{"--fair"},
		hold:        func(t *testing.T, c *distlock.Client, name string) *distlock.Lease { return holdFair(t, c, name) },
		awaitWaiter: func(t *testing.T, c *distlock.Client, name string) { awaitQueued(t, c, name, 1) },
	},
	{
		name:        "shared",
		flags:       []string{"--shared"},
		hold:        func(t *testing.T, c *distlock.Client, name string) *distlock.Lease { return holdWrite(t, c, name) },
		awaitWaiter: func(t *testing.T, c *distlock.Client, name string) { awaitRWQueued(t, c, name, 1, 0) },
	},
	{
		name:        "exclusive",
		flags:       []string{"--exclusive"},
		hold:        func(t *testing.T, c *distlock.Client, name string) *distlock.Lease { return holdRead(t, c, name) },
		awaitWaiter: func(t *testing.T, c *distlock.Client, name string) { awaitRWQueued(t, c, name, 0, 1) },
	},
	{
		name:  "semaphore",
		flags: []string{"--semaphore", "1"},
		hold: func(t *testing.T, c *distlock.Client, name string) *distlock.Lease {
			return holdPermits(t, c, name, 1, 1)
		},
		awaitWaiter: func(t *testing.T, c *distlock.Client, name string) { awaitSemQueued(t, c, name, 1) },
	},
}

// runsUntilGo is a command that creates the file $STARTED, runs until the
// file $GO exists, then creates the file $FINISHED.
const runsUntilGo = `touch "$STARTED"
while [ ! -e "$GO" ]; do sleep 0.05; done
touch "$FINISHED"`

// TestRunQueuedDefaults runs, with nothing but the kind's flag (the
// default --ttl, --kill-grace and --queue-timeout), a command that waits
// behind a holder of each queued kind: once the holder releases, the
// command is granted the lock, runs as long as it takes, and distlock exits
// with its status 0. A lease granted by someone else's release starts at
// most --queue-timeout long (5s), shorter than the kill plan of the
// default --kill-grace (10s) needs.
func TestRunQueuedDefaults(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := newClient(t, srv)
	for _, kind := range queuedKinds {
		t.Run(kind.name, func(t *testing.T) {
			t.Parallel()
			name := "defaults-" + kind.name
			lease := kind.hold(t, c, name)
			dir := t.TempDir()
			started, goFile, finished := filepath.Join(dir, "started"), filepath.Join(dir, "go"), filepath.Join(dir, "finished")
			args := append([]string{"run", "--redis", srv.URL()}, kind.flags...)
			p := start(t, []string{"STARTED=" + started, "GO=" + goFile, "FINISHED=" + finished},
				append(args, name, "--", "sh", "-c", runsUntilGo)...)
			kind.awaitWaiter(t, c, name)
			unlock(t, lease)
			awaitFileOrExit(t, p, started)
			touch(t, goFile)
			if code := p.wait(); code != 0 {
				t.Fatalf("exit status %d, want 0; stderr:\n%s", code, p.errOut())
			}
			if !exists(finished) {
				t.Error("distlock exited 0, but the command did not run to its end")
			}
		})
	}
}

// unlock releases the test's lease.
func unlock(t *testing.T, lease *distlock.Lease) {
	t.Helper()
	if err := lease.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// awaitFileOrExit waits until path exists, made by the command of the
// distlock process p, and fails the test at once if p exits first.
func awaitFileOrExit(t *testing.T, p *proc, path string) {
	t.Helper()
	eventually(t, "file "+path+" to appear", func() bool {
		select {
		case <-p.done:
			if !exists(path) {
				t.Fatalf("distlock exited with status %d before its command made %s; stderr:\n%s",
					p.cmd.ProcessState.ExitCode(), path, p.errOut())
			}
		default:
		}
		return exists(path)
	})
}

// exists reports whether the file path exists.
func exists(path string) bool {
	_, err := os.Stat(path)
	return !errors.Is(err, os.ErrNotExist)
}
