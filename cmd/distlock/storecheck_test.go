//go:build unix

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The checks that the tests of the command on etcd and on SQL databases
// share, each on the store that a --store URL names.

// wantFailure fails the test unless r exited with code and a one-line
// message on stderr that contains each of want and no password (the
// tests' passwords all have "sekret" in them).
func wantFailure(t *testing.T, r result, code int, want ...string) {
	t.Helper()
	r.wantCode(t, code)
	wantStderr(t, r, want...)
	if strings.Contains(r.stderr, "sekret") {
		t.Errorf("stderr %q shows the password", r.stderr)
	}
}

// checkHeldNow checks that a run with --wait 0 of the mutex name on the
// store at url, held by holder (HOST/PID), is refused (75), names the
// holder, and does not run its command.
func checkHeldNow(t *testing.T, url, name, holder string) {
	ran := filepath.Join(t.TempDir(), "ran")
	r := run(t, "run", "--store", url, "--wait", "0", name, "--", "touch", ran)
	r.wantCode(t, exitNotAcquired)
	wantStderr(t, r, strconv.Quote(name), "not acquired", "held by "+holder)
	if _, err := os.Stat(ran); err == nil {
		t.Error("the command ran without the lock")
	}
}

// checkStatusHeld checks that status shows the mutex name on the store
// at url held by the run p on host with token, in text and in JSON.
func checkStatusHeld(t *testing.T, url, name string, p *proc, host string, token uint64) {
	holder := fmt.Sprintf("%s/%d", host, p.cmd.Process.Pid)
	r := run(t, "status", "--store", url, name)
	r.wantCode(t, 0)
	for _, want := range []string{"state:      locked", "kind:       mutex", "holder:     " + holder, "token:      " + strconv.FormatUint(token, 10)} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("status does not contain %q:\n%s", want, r.stdout)
		}
	}
	st := statusJSONOf(t, "--store", url, name)
	if !st.Locked || st.Kind != "mutex" || st.Holder == nil || st.Holder.PID != p.cmd.Process.Pid || st.Holder.Host != host ||
		st.Token != token || st.TTLMillis <= 0 {
		t.Errorf("status --json = %+v, want %s held by %s, token %d, with a TTL", st, name, holder, token)
	}
}

// checkListJSON checks that list --json pattern on the store at url
// shows the mutex "job" alone, held by the run p (holder, HOST/PID).
func checkListJSON(t *testing.T, url, pattern string, p *proc, holder string) {
	r := run(t, "list", "--store", url, "--json", pattern)
	r.wantCode(t, 0)
	var states []lockState
	if err := json.Unmarshal([]byte(r.stdout), &states); err != nil {
		t.Fatalf("list --json printed %q: %v", r.stdout, err)
	}
	if len(states) != 1 || states[0].Name != "job" || states[0].Holder == nil || states[0].Holder.PID != p.cmd.Process.Pid {
		t.Errorf("list --json %s = %+v, want job held by %s", pattern, states, holder)
	}
}

// releaseFirst lets the run first, whose command waits for the file
// release, end, and checks that first, then second, which waited for the
// lock, both succeed (0).
func releaseFirst(t *testing.T, release string, first, second *proc) {
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if code := first.wait(); code != 0 {
		t.Fatalf("first run: exit %d; stderr %q", code, first.errOut())
	}
	if code := second.wait(); code != 0 {
		t.Fatalf("second run: exit %d; stderr %q", code, second.errOut())
	}
}

// checkForcedUnlock checks unlock --force on the store at url: refused
// without --force (64), it takes the lock "forced" from its run, says
// from whom, and stops the run (70), whose message says why (the loss as
// the store tells it), and the lock is free.
func checkForcedUnlock(t *testing.T, url, host, why string) {
	forced, forcedToken := startHolder(t, nil, "--store", url, "forced")
	run(t, "unlock", "--store", url, "forced").wantCode(t, exitUsage) // without --force
	r := run(t, "unlock", "--store", url, "--force", "forced")
	r.wantCode(t, 0)
	want := fmt.Sprintf("released forced (was held by %s/%d, token %d)", host, forced.cmd.Process.Pid, forcedToken)
	if !strings.Contains(r.stdout, want) {
		t.Errorf("unlock printed %q, want %q", r.stdout, want)
	}
	if code := forced.wait(); code != exitLockLost || !strings.Contains(forced.errOut(), why) {
		t.Errorf("the forced run: exit %d, stderr %q; want %d, %s", code, forced.errOut(), exitLockLost, why)
	}
	if st := statusJSONOf(t, "--store", url, "forced"); st.Locked {
		t.Errorf("status after unlock --force = %+v, want free", st)
	}
}

// checkQueuedKind checks a kind of lock with a queue on the store at url,
// on name: a run with flags holds it, a conflicting run (with conflict)
// with --wait 0 is refused (75), a plain run is refused for the kind
// (78), status --json shows the kind and the holder, and unlock --force
// stops the holder (70).
func checkQueuedKind(t *testing.T, url, name string, flags, conflict []string, kind string) {
	holder, token := startHolder(t, nil, append(append([]string{"--store", url}, flags...), name)...)
	args := append(append([]string{"run", "--store", url, "--wait", "0"}, conflict...), name, "--", "true")
	run(t, args...).wantCode(t, exitNotAcquired)
	run(t, "run", "--store", url, "--wait", "0", name, "--", "true").wantCode(t, exitWrongKind)
	st := statusJSONOf(t, "--store", url, name)
	if !st.Locked || st.Kind != kind || !slices.Contains(holderTokens(st), token) {
		t.Errorf("status --json = %+v, want %s held with token %d", st, kind, token)
	}
	run(t, "unlock", "--store", url, "--force", name).wantCode(t, 0)
	if code := holder.wait(); code != exitLockLost {
		t.Errorf("the unlocked run: exit %d, want %d; stderr %q", code, exitLockLost, holder.errOut())
	}
}
