//go:build unix

package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/distlock/distlock/redistest"
)

// With --redlock once per master, run, status, list and unlock work on a
// majority of independent masters, also with one of three down; with two
// down, they fail as when Redis is unreachable.
func TestRedlockMasters(t *testing.T) {
	t.Parallel()
	var servers []*redistest.Server
	var flags []string
	for range 3 {
		srv := redistest.Start(t)
		servers = append(servers, srv)
		flags = append(flags, "--redlock", srv.URL())
	}
	args := func(a ...string) []string { return append(append([]string{}, flags...), a...) }

	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	r := run(t, args("run", "job", "--", "sh", "-c", `echo "$DISTLOCK_TOKEN" > `+token)...)
	r.wantCode(t, 0)
	first, err := strconv.ParseUint(strings.TrimSpace(readFile(t, token)), 10, 64)
	if err != nil || first == 0 {
		t.Fatalf("DISTLOCK_TOKEN %q: %v", readFile(t, token), err)
	}

	// A holder in the background; a second run is refused, status shows it.
	release := filepath.Join(dir, "release")
	holding := filepath.Join(dir, "holding")
	p := start(t, nil, args("run", "job", "--", "sh", "-c", `touch `+holding+`; while [ ! -e `+release+` ]; do sleep 0.05; done`)...)
	awaitFile(t, holding)
	run(t, args("run", "--wait", "0", "job", "--", "true")...).wantCode(t, exitNotAcquired)
	st := run(t, append([]string{"status"}, args("job")...)...)
	st.wantCode(t, 0)
	if !regexp.MustCompile(`(?m)^state: +locked$`).MatchString(st.stdout) {
		t.Errorf("status printed %q, want locked", st.stdout)
	}
	if l := run(t, args("list")...); l.code != 0 || !strings.Contains(l.stdout, "job") {
		t.Errorf("list: exit %d, %q", l.code, l.stdout)
	}
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(); code != 0 {
		t.Fatalf("holder: exit %d: %s", code, p.errOut())
	}

	// The kinds a quorum cannot serve are usage errors (TestRedlockUnsupported).
	for _, flag := range [][]string{{"--fair"}, {"--shared"}, {"--semaphore", "2"}, {"--once-per", "1h"}} {
		r := run(t, args(append(append([]string{"run"}, flag...), "other", "--", "true")...)...)
		if r.code != exitUsage || !strings.Contains(r.stderr, "cannot go with --redlock") {
			t.Errorf("run %v over Redlock: exit %d, stderr %q; want %d, cannot go with --redlock", flag, r.code, r.stderr, exitUsage)
		}
	}

	// One master down: a quorum is left, with a warning.
	if err := servers[0].Kill(); err != nil {
		t.Fatal(err)
	}
	r = run(t, args("run", "job", "--", "sh", "-c", `echo "$DISTLOCK_TOKEN" > `+token)...)
	r.wantCode(t, 0)
	if !strings.Contains(r.stderr, "warning: Redlock master "+servers[0].Addr()) {
		t.Errorf("no warning about the master that is down: %q", r.stderr)
	}
	if next, _ := strconv.ParseUint(strings.TrimSpace(readFile(t, token)), 10, 64); next <= first {
		t.Errorf("token %d after %d", next, first)
	}

	// Two down: no quorum.
	if err := servers[1].Kill(); err != nil {
		t.Fatal(err)
	}
	run(t, args("run", "job", "--", "true")...).wantCode(t, exitUnavailable)
}

// --redlock is refused with --redis, with fewer than 3 or an even number
// of masters, and by the demo.
func TestRedlockBadFlags(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	u := srv.URL()
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--redis", u, "--redlock", u, "--redlock", u, "--redlock", u, "j", "--", "true"}, "exclude each other"},
		{[]string{"run", "--redlock", u, "--redlock", u, "j", "--", "true"}, "at least 3"},
		{[]string{"status", "--redlock", u, "--redlock", u, "--redlock", u, "j"}, "are the same"},
		{[]string{"demo", "--redlock", u}, "not on Redlock masters"},
	} {
		r := run(t, tt.args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, tt.want) {
			t.Errorf("%q: exit %d, stderr %q; want %d saying %q", tt.args, r.code, r.stderr, exitUsage, tt.want)
		}
	}
}
