//go:build unix

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/redistest"
)

// statusJSON runs status --json and decodes its output, checking that it
// has exactly the documented fields.
func statusJSON(t *testing.T, srv *redistest.Server, name string) lockState {
	t.Helper()
	return statusJSONOf(t, "--redis", srv.URL(), name)
}

// statusJSONOf is statusJSON on the store that flag (--redis, --store)
// names with url, with more flags.
func statusJSONOf(t *testing.T, flag, url, name string, flags ...string) lockState {
	t.Helper()
	r := run(t, append(append([]string{"status", flag, url, "--json"}, flags...), name)...)
	r.wantCode(t, 0)
	var fields map[string]json.RawMessage
	if err := json.Unmarshal([]byte(r.stdout), &fields); err != nil {
		t.Fatalf("status --json printed %q: %v", r.stdout, err)
	}
	want := []string{"name", "kind", "locked", "mode", "holder", "holds", "ttl_ms", "token", "last_token", "waiters",
		"fair", "queued", "writer", "readers", "queued_readers", "queued_writers",
		"capacity", "in_use", "holders", "queued_permits", "value", "last_run"}
	for _, f := range want {
		if _, ok := fields[f]; !ok {
			t.Errorf("status --json has no field %q: %s", f, r.stdout)
		}
	}
	if len(fields) != len(want) {
		t.Errorf("status --json has %d fields, want %d: %s", len(fields), len(want), r.stdout)
	}
	var st lockState
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
		t.Fatal(err)
	}
	return st
}

// TestStatusJSON checks status --json against the state of a lock held by
// the test, waited for by a distlock process, then released.
func TestStatusJSON(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := newClient(t, srv)
	lease := hold(t, c, "report", distlock.WithTTL(30*time.Second))

	st := statusJSON(t, srv, "report")
	host, _ := os.Hostname()
	switch {
	case st.Name != "report" || !st.Locked || st.Holds != 1 || st.Waiters != 0:
		t.Errorf("status %+v, want report locked once, no waiters", st)
	case st.Kind != "mutex" || st.Fair || st.Queued != 0:
		t.Errorf("status %+v, want a mutex, nothing queued", st)
	case st.Mode != "" || st.Writer != nil || st.Readers == nil || len(st.Readers) != 0 || st.QueuedReaders+st.QueuedWriters != 0:
		t.Errorf("status %+v, want no mode, writer, readers or queue of a read-write lock", st)
	case st.Holder == nil || st.Holder.PID != os.Getpid() || st.Holder.Host != host || len(st.Holder.ID) == 0:
		t.Errorf("holder %+v, want pid %d on %s", st.Holder, os.Getpid(), host)
	case st.Token != lease.Token() || st.LastToken != lease.Token():
		t.Errorf("token %d, last token %d, want both %d", st.Token, st.LastToken, lease.Token())
	case st.TTLMillis <= 0 || st.TTLMillis > 30000:
		t.Errorf("ttl_ms %d, want in (0, 30000]", st.TTLMillis)
	case time.Since(st.Holder.Since).Abs() > time.Hour:
		t.Errorf("since %v, want about now", st.Holder.Since)
	}

	waiter := start(t, nil, "run", "--redis", srv.URL(), "report", "--", "true")
	awaitWaiters(t, c, "report", 1)
	if st := statusJSON(t, srv, "report"); st.Waiters != 1 || st.Fair || st.Queued != 0 {
		t.Errorf("status %+v, want 1 waiter of a plain lock", st)
	}

	if err := lease.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	if code := waiter.wait(); code != 0 {
		t.Fatalf("waiter: exit status %d; stderr:\n%s", code, waiter.errOut())
	}
	st = statusJSON(t, srv, "report")
	if st.Locked || st.Holder != nil || st.Holds != 0 || st.TTLMillis != 0 || st.Token != 0 || st.Waiters != 0 {
		t.Errorf("status %+v, want free", st)
	}
	if st.LastToken <= lease.Token() {
		t.Errorf("last token %d, want above the test's %d: the waiter took the lock", st.LastToken, lease.Token())
	}
}

// TestStatusText checks the text form of status.
func TestStatusText(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := newClient(t, srv)
	r := run(t, "status", "--redis", srv.URL(), "report")
	r.wantCode(t, 0)
	if !strings.Contains(r.stdout, "state:      free") || strings.Contains(r.stdout, "kind:") {
		t.Errorf("status of a free lock:\n%s", r.stdout)
	}
	hold(t, c, "report")
	r = run(t, "status", "--redis", srv.URL(), "report")
	r.wantCode(t, 0)
	for _, want := range []string{"state:      locked", "kind:       mutex", "holder:", "ttl:", "token:", "waiters:    0"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("status of a held lock does not contain %q:\n%s", want, r.stdout)
		}
	}
}

// TestList checks list, with and without a pattern.
func TestList(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := newClient(t, srv)
	for _, name := range []string{"nightly-a", "nightly-b", "other"} {
		hold(t, c, name)
	}
	r := run(t, "list", "--redis", srv.URL())
	r.wantCode(t, 0)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "NAME") {
		t.Fatalf("list printed:\n%s", r.stdout)
	}
	for i, name := range []string{"nightly-a", "nightly-b", "other"} {
		if !strings.HasPrefix(lines[i+1], name+" ") || !strings.Contains(lines[i+1], "/"+itoa(os.Getpid())) {
			t.Errorf("line %d = %q, want %s held by this process", i+1, lines[i+1], name)
		}
	}

	r = run(t, "list", "--redis", srv.URL(), "--json", "nightly-*")
	r.wantCode(t, 0)
	var states []lockState
	if err := json.Unmarshal([]byte(r.stdout), &states); err != nil {
		t.Fatalf("list --json printed %q: %v", r.stdout, err)
	}
	if len(states) != 2 || states[0].Name != "nightly-a" || states[1].Name != "nightly-b" {
		t.Errorf("list --json nightly-* = %+v, want nightly-a and nightly-b", states)
	}
}

// TestListWideNames lists locks whose names take more terminal columns
// than runes (CJK, emoji), and one with a bidirectional control made with
// the library: the columns stay aligned on a terminal, and the control is
// shown escaped.
func TestListWideNames(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := newClient(t, srv)
	names := []string{"plain-name", "夜間レポート", "🔒-deploy", "rtl-\u202e"}
	for _, name := range names {
		hold(t, c, name)
	}
	r := run(t, "list", "--redis", srv.URL())
	r.wantCode(t, 0)
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if len(lines) != len(names)+1 {
		t.Fatalf("list printed:\n%s", r.stdout)
	}
	// Every row's KIND starts in the column of the header's.
	want := displayWidth(lines[0][:strings.Index(lines[0], "KIND")])
	for _, line := range lines[1:] {
		i := strings.Index(line, "  mutex  ")
		if i < 0 {
			t.Fatalf("row %q has no mutex KIND", line)
		}
		if got := displayWidth(line[:i+2]); got != want {
			t.Errorf("row %q: KIND in column %d, want %d as in the header", line, got, want)
		}
	}
	if strings.ContainsRune(r.stdout, '\u202e') || !strings.Contains(r.stdout, `"rtl-\u202e"`) {
		t.Errorf("list printed the bidirectional control raw, not escaped:\n%s", r.stdout)
	}
}

// TestUnlockForce checks that unlock refuses without --force, and that with
// it the lock is released (after its holder's lease, since this holder
// never unlocks), its waiter gets it, and its holder learns that it lost
// it; and that with --now it is free at once.
func TestUnlockForce(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := newClient(t, srv)
	lease := hold(t, c, "stuck", distlock.WithTTL(time.Second))

	r := run(t, "unlock", "--redis", srv.URL(), "stuck")
	r.wantCode(t, exitUsage)
	wantOneLine(t, r.stderr)
	if !inspect(t, c, "stuck").Locked {
		t.Fatal("unlock without --force released the lock")
	}

	waiter := start(t, nil, "run", "--redis", srv.URL(), "stuck", "--", "true")
	awaitWaiters(t, c, "stuck", 1)
	r = run(t, "unlock", "--redis", srv.URL(), "--force", "stuck")
	r.wantCode(t, 0)
	if !strings.Contains(r.stdout, "released stuck") {
		t.Errorf("unlock --force printed %q", r.stdout)
	}
	if code := waiter.wait(); code != 0 {
		t.Errorf("waiter: exit status %d; stderr:\n%s", code, waiter.errOut())
	}
	select {
	case <-lease.Context().Done():
		if cause := context.Cause(lease.Context()); !errors.Is(cause, distlock.ErrLockLost) {
			t.Errorf("the holder's lease ended with %v, want ErrLockLost", cause)
		}
	case <-time.After(testTimeout):
		t.Fatal("the holder was not told that it lost the lock")
	}

	r = run(t, "unlock", "--redis", srv.URL(), "--force", "stuck")
	r.wantCode(t, 0)
	if !strings.Contains(r.stdout, "was not locked") {
		t.Errorf("unlock --force of a free lock printed %q", r.stdout)
	}

	// Without --now, unlock waits for the holder's Unlock (a minute's
	// lease), and status shows the lock revoked meanwhile.
	lease = hold(t, c, "stuck", distlock.WithTTL(time.Minute))
	unlocker := start(t, nil, "unlock", "--redis", srv.URL(), "--force", "stuck")
	<-lease.Context().Done()
	if st := statusJSON(t, srv, "stuck"); st.Holder == nil || !st.Holder.Revoked {
		t.Errorf("status --json of a revoked lock: holder %+v, want revoked", st.Holder)
	}
	if r := run(t, "status", "--redis", srv.URL(), "stuck"); !strings.Contains(r.stdout, "revoked:") {
		t.Errorf("status of a revoked lock does not say so:\n%s", r.stdout)
	}
	if !inspect(t, c, "stuck").Locked {
		t.Fatal("the revoked lock was freed before its holder's Unlock")
	}
	if err := lease.Unlock(context.Background()); !errors.Is(err, distlock.ErrLockLost) {
		t.Errorf("the revoked holder's Unlock: %v, want ErrLockLost", err)
	}
	if code := unlocker.wait(); code != 0 {
		t.Fatalf("unlock --force: exit status %d; stderr:\n%s", code, unlocker.errOut())
	}
	if !strings.Contains(unlocker.errOut(), "stuck was free") {
		t.Errorf("unlock --force's stderr %q does not say when the lock was free", unlocker.errOut())
	}

	// With --now the lock is free as soon as unlock returns, although its
	// holder (a minute's lease, which this test never unlocks) has not
	// released it.
	lease = hold(t, c, "stuck", distlock.WithTTL(time.Minute))
	r = run(t, "unlock", "--redis", srv.URL(), "--force", "--now", "stuck")
	r.wantCode(t, 0)
	if !strings.HasPrefix(r.stdout, "released stuck (was held by ") || strings.Contains(r.stdout, "once its holders had stopped") {
		t.Errorf("unlock --force --now printed %q", r.stdout)
	}
	if inspect(t, c, "stuck").Locked {
		t.Error("the lock is still held after unlock --force --now")
	}
	<-lease.Context().Done()
}

// TestStatusFair checks what status, status --json, list and list --json
// show of a fair lock with a waiter in its queue, and of the lock once
// free.
func TestStatusFair(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := newClient(t, srv)
	lease := holdFair(t, c, "fair-report")
	if st := statusJSON(t, srv, "fair-report"); !st.Locked || !st.Fair || st.Queued != 0 || st.Token != lease.Token() {
		t.Errorf("status %+v, want held as a fair lock with token %d, nothing queued", st, lease.Token())
	}

	waiter := start(t, nil, "run", "--redis", srv.URL(), "--fair", "fair-report", "--", "true")
	awaitQueued(t, c, "fair-report", 1)
	if st := statusJSON(t, srv, "fair-report"); !st.Locked || st.Kind != "fair-mutex" || !st.Fair || st.Queued != 1 || st.Waiters != 0 ||
		st.QueuedReaders+st.QueuedWriters != 0 {
		t.Errorf("status %+v, want held as a fair lock, 1 queued, waiters 0", st)
	}
	r := run(t, "status", "--redis", srv.URL(), "fair-report")
	r.wantCode(t, 0)
	for _, want := range []string{"state:      locked", "kind:       fair-mutex", "queued:     1"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("status does not contain %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "waiters:") {
		t.Errorf("status of a fair lock shows the waiters of a plain one:\n%s", r.stdout)
	}

	r = run(t, "list", "--redis", srv.URL())
	r.wantCode(t, 0)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 2 || !strings.HasSuffix(lines[0], "WAITERS") {
		t.Fatalf("list printed:\n%s", r.stdout)
	}
	if fields := strings.Fields(lines[1]); fields[0] != "fair-report" || fields[len(fields)-1] != "1" {
		t.Errorf("list line %q, want fair-report with 1 waiter", lines[1])
	}
	r = run(t, "list", "--redis", srv.URL(), "--json")
	r.wantCode(t, 0)
	var states []lockState
	if err := json.Unmarshal([]byte(r.stdout), &states); err != nil {
		t.Fatalf("list --json printed %q: %v", r.stdout, err)
	}
	if len(states) != 1 || !states[0].Fair || states[0].Queued != 1 {
		t.Errorf("list --json = %+v, want fair-report, fair, 1 queued", states)
	}

	if err := lease.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	if code := waiter.wait(); code != 0 {
		t.Fatalf("waiter: exit status %d; stderr:\n%s", code, waiter.errOut())
	}
	st := statusJSON(t, srv, "fair-report")
	if st.Locked || st.Fair || st.Queued != 0 || st.LastToken <= lease.Token() {
		t.Errorf("status %+v, want free, not fair, nothing queued, last token above %d", st, lease.Token())
	}
}

// TestUnlockForceFair force-unlocks a fair lock that has a waiter: the
// waiter gets the lock, unlock says so, and the old holder learns that it
// lost the lock.
func TestUnlockForceFair(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := newClient(t, srv)
	lease := holdFair(t, c, "stuck-fair", distlock.WithTTL(time.Second))
	dir := t.TempDir()
	out, goFile := filepath.Join(dir, "out"), filepath.Join(dir, "go")
	waiter := start(t, []string{"OUT=" + out, "GO=" + goFile},
		"run", "--redis", srv.URL(), "--fair", "stuck-fair", "--", "sh", "-c", holdUntilGo)
	awaitQueued(t, c, "stuck-fair", 1)

	r := run(t, "unlock", "--redis", srv.URL(), "--force", "stuck-fair")
	r.wantCode(t, 0)
	host, _ := os.Hostname()
	for _, want := range []string{
		fmt.Sprintf("released stuck-fair (was held by %s/%d, token %d)", host, os.Getpid(), lease.Token()),
		fmt.Sprintf("; now held by %s/%d", host, waiter.cmd.Process.Pid),
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("unlock --force printed %q, want %q in it", r.stdout, want)
		}
	}
	awaitFile(t, out) // the waiter's command runs
	select {
	case <-lease.Context().Done():
		if cause := context.Cause(lease.Context()); !errors.Is(cause, distlock.ErrLockLost) {
			t.Errorf("the holder's lease ended with %v, want ErrLockLost", cause)
		}
	case <-time.After(testTimeout):
		t.Fatal("the holder was not told that it lost the lock")
	}
	if err := os.WriteFile(goFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if code := waiter.wait(); code != 0 {
		t.Errorf("waiter: exit status %d; stderr:\n%s", code, waiter.errOut())
	}
}

// TestStatusShowsLastRun checks that status shows the recorded run of a
// job that runs once: a run --once-per that failed, and a library Once
// that succeeded.
func TestStatusShowsLastRun(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := newClient(t, srv)
	run(t, "run", "--redis", srv.URL(), "--once-per", longPeriod, "job", "--", "sh", "-c", "exit 3").wantCode(t, 3)
	r := run(t, "status", "--redis", srv.URL(), "job")
	r.wantCode(t, 0)
	host, _ := os.Hostname()
	lastRun := regexp.MustCompile(`(?m)^last run: +` + regexp.QuoteMeta(host) + `/\d+, ended \S+ \(\S+ ago\), token \d+, period \d+, failed: exit status 3$`)
	if !strings.Contains(r.stdout, "state:      free") || !lastRun.MatchString(r.stdout) {
		t.Errorf("status after a failed run --once-per:\n%s\nwant it free, with a line matching %s", r.stdout, lastRun)
	}
	st := statusJSON(t, srv, "job")
	if lr := st.LastRun; lr == nil || lr.Host != host || lr.PID == 0 || lr.Token == 0 || lr.Token != st.LastToken ||
		lr.Period == 0 || lr.Error != "exit status 3" || time.Since(lr.Ended).Abs() > time.Minute {
		t.Errorf("status --json after a failed run --once-per: last_run %+v, want it on %s, with the last token %d, a period, its failure, just now",
			lr, host, st.LastToken)
	}

	if _, err := c.Once(context.Background(), "init", time.Hour, func(context.Context, uint64) error { return nil }); err != nil {
		t.Fatal(err)
	}
	r = run(t, "status", "--redis", srv.URL(), "init")
	r.wantCode(t, 0)
	lastRun = regexp.MustCompile(`(?m)^last run: +` + regexp.QuoteMeta(host) + `/` + itoa(os.Getpid()) + `, ended \S+ \(\S+ ago\), token \d+, succeeded$`)
	if !lastRun.MatchString(r.stdout) {
		t.Errorf("status after a successful Once:\n%s\nwant a line matching %s", r.stdout, lastRun)
	}
	if lr := statusJSON(t, srv, "init").LastRun; lr == nil || lr.PID != os.Getpid() || lr.Period != 0 || lr.Error != "" {
		t.Errorf("status --json after a successful Once: last_run %+v, want this process's, no period, no error", lr)
	}
	if lr := statusJSON(t, srv, "never").LastRun; lr != nil {
		t.Errorf("status --json of a name that never ran: last_run %+v, want null", lr)
	}
}
