package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/redistest"
)

// A forceUnlockCase is a shared lock (read-write lock or semaphore) held
// by two leases of the test while a distlock process waits for it.
type forceUnlockCase struct {
	name        string
	held        [2]*distlock.Lease
	waiterFlags []string // the waiting run's kind flags
	awaitQueued func()   // returns once the waiter is queued
	released    string   // unlock's words for the state it released
	item        string   // how unlock lists one of the test's holders: host/pid, token
	now         string   // unlock's words for the new state: host/pid, token
}

// forceUnlockHandsOver force-unlocks the lock of tc: unlock says whom it
// took the lock from (the test's two holders, in any order) and that the
// waiter holds it now, the waiter's command runs with the token unlock
// named, both of the test's leases learn that they lost the lock, and a
// second unlock --force finds the lock free.
func forceUnlockHandsOver(t *testing.T, srv *redistest.Server, tc forceUnlockCase) {
	t.Helper()
	dir := t.TempDir()
	out, goFile := filepath.Join(dir, "out"), filepath.Join(dir, "go")
	args := append([]string{"run", "--redis", srv.URL()}, tc.waiterFlags...)
	args = append(args, tc.name, "--", "sh", "-c", holdUntilGo)
	waiter := start(t, []string{"OUT=" + out, "GO=" + goFile}, args...)
	tc.awaitQueued()

	r := run(t, "unlock", "--redis", srv.URL(), "--force", tc.name)
	r.wantCode(t, 0)
	awaitFile(t, out) // the waiter's command runs
	var name string
	var token uint64
	if _, err := fmt.Sscanf(readFile(t, out), "%s %d", &name, &token); err != nil {
		t.Fatalf("the waiter's command got %q: %v", readFile(t, out), err)
	}
	host, _ := os.Hostname()
	me := fmt.Sprintf("%s/%d", host, os.Getpid())
	// The holders are listed in the order Redis keeps them: by lease end.
	prefix := fmt.Sprintf("released %s (%s: ", tc.name, tc.released)
	suffix := "); " + fmt.Sprintf(tc.now, fmt.Sprintf("%s/%d", host, waiter.cmd.Process.Pid), token) + "\n"
	listed, ok := strings.CutPrefix(r.stdout, prefix)
	if ok {
		listed, ok = strings.CutSuffix(listed, suffix)
	}
	list := strings.Split(listed, ", ")
	slices.Sort(list)
	want := []string{fmt.Sprintf(tc.item, me, tc.held[0].Token()), fmt.Sprintf(tc.item, me, tc.held[1].Token())}
	slices.Sort(want)
	if !ok || !slices.Equal(list, want) {
		t.Errorf("unlock --force printed %q, want %q, the holders %q, and %q", r.stdout, prefix, want, suffix)
	}
	for _, lease := range tc.held {
		select {
		case <-lease.Context().Done():
			if cause := context.Cause(lease.Context()); !errors.Is(cause, distlock.ErrLockLost) {
				t.Errorf("a holder's lease ended with %v, want ErrLockLost", cause)
			}
		case <-time.After(testTimeout):
			t.Fatal("a holder was not told that it lost the lock")
		}
	}
	touch(t, goFile)
	if code := waiter.wait(); code != 0 {
		t.Errorf("waiter: exit status %d; stderr:\n%s", code, waiter.errOut())
	}
	r = run(t, "unlock", "--redis", srv.URL(), "--force", tc.name)
	r.wantCode(t, 0)
	if want := tc.name + " was not locked\n"; r.stdout != want {
		t.Errorf("unlock --force of a free lock printed %q, want %q", r.stdout, want)
	}
}
