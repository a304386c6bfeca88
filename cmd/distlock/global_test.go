//go:build unix

package main

import (
	"regexp"
	"strings"
	"testing"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/redisstore"
	"github.com/distlock/distlock/redistest"
)

// --redis and --prefix work before the command as after it, in both of
// their forms; the command's own copy wins; anything else before the
// command is a usage error that names the flag the way the docs write it.
func TestGlobalFlagsBeforeCommand(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	down := "redis://" + closedAddr(t)
	url := srv.URL()

	// "job" is held under the prefix "g:" only.
	c := distlock.New(redisstore.New(srv.Client(t), redisstore.WithPrefix("g:")), distlock.WithLogger(nil))
	t.Cleanup(func() { _ = c.Close() })
	hold(t, c, "job")
	ran := run(t, "--redis", url, "run", "--wait", "0", "job", "--", "sh", "-c", `test "$DISTLOCK_NAME" = job`)
	ran.wantCode(t, 0) // the default prefix's "job" is free

	for _, tt := range []struct {
		args  []string
		state string
	}{
		{[]string{"--redis", url, "status", "job"}, "free"},
		{[]string{"--redis=" + url, "--prefix=g:", "status", "job"}, "locked"},
		{[]string{"-redis", url, "--prefix", "g:", "status", "job"}, "locked"},
		{[]string{"--redis", down, "--prefix", "g:", "status", "--redis", url, "job"}, "locked"}, // the command's own wins
		{[]string{"--redis", url, "--prefix", "g:", "status", "--prefix", "distlock:", "job"}, "free"},
	} {
		r := run(t, tt.args...)
		r.wantCode(t, 0)
		if !regexp.MustCompile(`(?m)^state: +` + tt.state + `$`).MatchString(r.stdout) {
			t.Errorf("%q printed %q, want state %s", tt.args, r.stdout, tt.state)
		}
	}
	if r := run(t, "--prefix", "g:", "--redis", url, "run", "--wait", "0", "job", "--", "true"); r.code != exitNotAcquired {
		t.Errorf("run with --prefix before it ignored the prefix: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := run(t, "--redis", down, "status", "job"); r.code != exitUnavailable {
		t.Errorf("--redis before the command is not used: exit %d, stderr %q", r.code, r.stderr)
	}

	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--wait", "0", "run", "job", "--", "true"}, "unknown flag --wait before the command"},
		{[]string{"-bogus", "status", "job"}, "unknown flag --bogus before the command"},
		{[]string{"--redis"}, "flag --redis needs a value"},
		{[]string{"--redis", url}, "missing command after --redis"},
	} {
		r := run(t, tt.args...)
		r.wantCode(t, exitUsage)
		wantOneLine(t, r.stderr)
		if !strings.Contains(r.stderr, tt.want) || strings.Contains(r.stderr, "sekret") {
			t.Errorf("%q: stderr %q, want %q", tt.args, r.stderr, tt.want)
		}
	}
}
