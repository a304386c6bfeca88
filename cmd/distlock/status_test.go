//go:build unix

package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
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
	r := run(t, "status", "--redis", srv.URL(), "--json", name)
	r.wantCode(t, 0)
	var fields map[string]json.RawMessage
	if err := json.Unmarshal([]byte(r.stdout), &fields); err != nil {
		t.Fatalf("status --json printed %q: %v", r.stdout, err)
	}
	for _, f := range []string{"name", "locked", "holder", "holds", "ttl_ms", "token", "last_token", "waiters"} {
		if _, ok := fields[f]; !ok {
			t.Errorf("status --json has no field %q: %s", f, r.stdout)
		}
	}
	if len(fields) != 8 {
		t.Errorf("status --json has %d fields, want 8: %s", len(fields), r.stdout)
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
	if st := statusJSON(t, srv, "report"); st.Waiters != 1 {
		t.Errorf("waiters %d, want 1", st.Waiters)
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
	if !strings.Contains(r.stdout, "state:      free") {
		t.Errorf("status of a free lock:\n%s", r.stdout)
	}
	hold(t, c, "report")
	r = run(t, "status", "--redis", srv.URL(), "report")
	r.wantCode(t, 0)
	for _, want := range []string{"state:      locked", "holder:", "ttl:", "token:", "waiters:    0"} {
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

// TestUnlockForce checks that unlock refuses without --force, and that with
// it the lock is released, its waiter gets it, and its holder learns that
// it lost it.
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
}
