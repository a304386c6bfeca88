//go:build unix

package main

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/redisstore"
	"github.com/distlock/distlock/redistest"
)

// TestBadInput checks that bad input gets a one-line error on stderr, its
// own exit status, and leaves no lock behind.
func TestBadInput(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	secure := redistest.Start(t, redistest.WithPassword("sekret"))
	c := newClient(t, srv)
	dir := t.TempDir()
	notExecutable := filepath.Join(dir, "not-executable")
	if err := os.WriteFile(notExecutable, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	badFormat := filepath.Join(dir, "bad-format")
	if err := os.WriteFile(badFormat, []byte("\x7fELF garbage\x00\x01"), 0o755); err != nil {
		t.Fatal(err)
	}
	url := srv.URL()
	wrongPassword := strings.Replace(secure.URL(), "sekret", "wrong", 1)
	noPassword := "redis://" + secure.Addr()

	tests := []struct {
		name string
		args []string
		want int
	}{
		{"no command", nil, exitUsage},
		{"unknown command", []string{"frobnicate"}, exitUsage},
		{"unknown flag", []string{"run", "--redis", url, "--bogus", "bad", "--", "true"}, exitUsage},
		{"missing --", []string{"run", "--redis", url, "bad", "true"}, exitUsage},
		{"missing name", []string{"run", "--redis", url, "--", "true"}, exitUsage},
		{"missing command", []string{"run", "--redis", url, "bad", "--"}, exitUsage},
		{"two names", []string{"run", "--redis", url, "bad", "worse", "--", "true"}, exitUsage},
		{"bad duration", []string{"run", "--redis", url, "--wait", "soon", "bad", "--", "true"}, exitUsage},
		{"ttl too short", []string{"run", "--redis", url, "--ttl", "1ms", "bad", "--", "true"}, exitUsage},
		{"bad --fair", []string{"run", "--redis", url, "--fair=maybe", "bad", "--", "true"}, exitUsage},
		{"queue timeout too short", []string{"run", "--redis", url, "--fair", "--queue-timeout", "99ms", "bad", "--", "true"}, exitUsage},
		{"queue timeout too long", []string{"run", "--redis", url, "--fair", "--queue-timeout", "61m", "bad", "--", "true"}, exitUsage},
		{"queue timeout zero", []string{"run", "--redis", url, "--fair", "--queue-timeout", "0", "bad", "--", "true"}, exitUsage},
		{"queue timeout not a duration", []string{"run", "--redis", url, "--fair", "--queue-timeout", "soon", "bad", "--", "true"}, exitUsage},
		{"queue timeout without --fair", []string{"run", "--redis", url, "--queue-timeout", "10s", "bad", "--", "true"}, exitUsage},
		{"bad prefix", []string{"run", "--redis", url, "--prefix", "a{b", "bad", "--", "true"}, exitUsage},
		{"bad URL", []string{"run", "--redis", "http://" + srv.Addr(), "bad", "--", "true"}, exitUsage},
		{"kill grace over a third of the ttl", []string{"run", "--redis", url, "--ttl", "3s", "--kill-grace", "1001ms", "bad", "--", "true"}, exitUsage},
		{"empty name", []string{"run", "--redis", url, "", "--", "true"}, exitBadName},
		{"bidirectional override in name", []string{"run", "--redis", url, "bad\u202etxt.exe", "--", "true"}, exitBadName},
		{"status of a name with an isolate", []string{"status", "--redis", url, "bad\u2066"}, exitBadName},
		{"brace in name", []string{"run", "--redis", url, "a{b}", "--", "true"}, exitBadName},
		{"newline in name", []string{"run", "--redis", url, "a\nb", "--", "true"}, exitBadName},
		{"status of empty name", []string{"status", "--redis", url, ""}, exitBadName},
		{"unreachable Redis", []string{"run", "--redis", "redis://" + closedAddr(t), "bad", "--", "true"}, exitUnavailable},
		{"unreachable Redis status", []string{"status", "--redis", "redis://" + closedAddr(t), "bad"}, exitUnavailable},
		{"wrong password", []string{"run", "--redis", wrongPassword, "bad", "--", "true"}, exitNoPerm},
		{"no password", []string{"status", "--redis", noPassword, "bad"}, exitNoPerm},
		{"command not found", []string{"run", "--redis", url, "bad", "--", "no-such-command-distlock-test"}, exitNotFound},
		{"command not executable", []string{"run", "--redis", url, "bad", "--", notExecutable}, exitCannotExec},
		{"command in bad format", []string{"run", "--redis", url, "bad", "--", badFormat}, exitCannotExec},
		{"unlock without --force", []string{"unlock", "--redis", url, "bad"}, exitUsage},
		{"status with two names", []string{"status", "--redis", url, "a", "b"}, exitUsage},
		{"demo with bad workers", []string{"demo", "--redis", url, "--workers", "0"}, exitUsage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := run(t, tt.args...)
			if strings.Contains(r.stderr, " -") && !strings.Contains(r.stderr, " --") && tt.want == exitUsage {
				t.Errorf("stderr %q names a flag with one dash", r.stderr)
			}
			r.wantCode(t, tt.want)
			wantOneLine(t, r.stderr)
			if strings.Count(r.stderr, "distlock:") > 1 {
				t.Errorf("stderr %q says distlock: more than once", r.stderr)
			}
			if r.stdout != "" {
				t.Errorf("stdout %q, want nothing", r.stdout)
			}
			if strings.Contains(r.stderr, "sekret") || strings.Contains(r.stderr, "wrong") && tt.want == exitNoPerm {
				t.Errorf("stderr shows the password: %q", r.stderr)
			}
			if info := inspect(t, c, "bad"); info.Locked {
				t.Errorf("lock left behind: %+v", info)
			}
		})
	}
	// The command in a bad format is found, so it fails only once the lock
	// is taken: the lock was taken, and released.
	if inspect(t, c, "bad").LastToken == 0 {
		t.Error("the lock was never taken: the test of a command that fails to start tests nothing")
	}
}

// closedAddr returns the address of a loopback port that nothing listens
// on, nor can until the test ends (another test's server started on a
// "free" port would answer a client that expects nobody).
func closedAddr(t testing.TB) string { return redistest.ClosedAddr(t) }

// TestHelp checks --help of every command, help COMMAND and --version.
func TestHelp(t *testing.T) {
	t.Parallel()
	for _, c := range commands {
		if c.hidden {
			continue
		}
		for _, args := range [][]string{{c.name, "--help"}, {c.name, "-h"}, {"help", c.name}} {
			r := run(t, args...)
			r.wantCode(t, 0)
			for _, want := range []string{"Usage: distlock " + c.name, "Flags:", "--redis URL", "Examples:"} {
				if want == "--redis URL" && c.flags().Lookup("redis") == nil {
					continue // sql-schema contacts no store
				}
				if !strings.Contains(r.stdout, want) {
					t.Errorf("distlock %s: no %q in:\n%s", strings.Join(args, " "), want, r.stdout)
				}
			}
		}
	}
	r := run(t, "run", "--help")
	r.wantCode(t, 0)
	for _, want := range []string{"--fair\n", "--shared\n", "--exclusive\n", "DISTLOCK_MODE", "--queue-timeout DURATION", "(default 5s)", "78"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("distlock run --help: no %q in:\n%s", want, r.stdout)
		}
	}
	r = run(t, "--help")
	r.wantCode(t, 0)
	for _, want := range []string{"Commands:", "Exit statuses:", "75", "78", "Examples:"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("distlock --help: no %q in:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "demo-worker") {
		t.Error("distlock --help lists the hidden demo-worker command")
	}
	r = run(t, "--version")
	r.wantCode(t, 0)
	if r.stdout != "distlock "+testVersion+"\n" {
		t.Errorf("distlock --version printed %q", r.stdout)
	}
}

// TestHelpFlagsFirst checks that the help of every command starts with
// its usage, its summary and its flags, and names every flag it has; and
// that the help of run is short, and does not say that --wait 0 runs a
// cron job on one machine only (it only keeps runs from overlapping:
// --once-per does that).
func TestHelpFlagsFirst(t *testing.T) {
	t.Parallel()
	for _, c := range commands {
		if c.hidden {
			continue
		}
		r := run(t, c.name, "--help")
		r.wantCode(t, 0)
		lines := strings.Split(r.stdout, "\n")
		if i := slices.Index(lines, "Flags:"); i < 0 || i > 4 {
			t.Errorf("distlock %s --help: Flags: on line %d, want line 5 at the latest:\n%s", c.name, i+1, r.stdout)
		}
		c.flags().VisitAll(func(f *flag.Flag) {
			if !strings.Contains(r.stdout, "\n  --"+f.Name+"\n") && !strings.Contains(r.stdout, "\n  --"+f.Name+" ") {
				t.Errorf("distlock %s --help does not list --%s", c.name, f.Name)
			}
		})
	}
	r := run(t, "run", "--help")
	if n := strings.Count(r.stdout, "\n"); n > 120 {
		t.Errorf("distlock run --help has %d lines, want at most 120: the details are in docs/cli.md", n)
	}
	for _, claim := range []string{"one machine only", "on only one of them", "one node runs"} {
		if strings.Contains(r.stdout, claim) {
			t.Errorf("distlock run --help says %q", claim)
		}
	}
	if !strings.Contains(r.stdout, "* * * * distlock run --once-per ") {
		t.Errorf("distlock run --help has no cron example with --once-per:\n%s", r.stdout)
	}
}

// The library's errors are reported after the command's prefix without
// their own "distlock: ", an invalid name as checkName says it, and a bad
// --prefix as a prefix.
func TestLibraryErrorWording(t *testing.T) {
	t.Parallel()
	url := "redis://" + closedAddr(t) // the options are checked before Redis is reached
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"status", "--redis", url, "a{b}"}, `distlock status: invalid lock name "a{b}": contains a brace`},
		{[]string{"run", "--redis", url, "--semaphore", "2", "", "--", "true"}, `distlock run: invalid lock name "": empty`},
		{[]string{"--prefix", "a{", "unlock", "--redis", url, "--force", "x"}, `distlock unlock: invalid option: prefix "a{": contains a brace`},
		{[]string{"list", "--redis", url, "--prefix", "a\x01"}, `distlock list: invalid option: prefix "a\x01": contains a control character`},
	} {
		if r := run(t, tt.args...); r.stderr != tt.want+"\n" {
			t.Errorf("%q: stderr %q, want %q", tt.args, r.stderr, tt.want)
		}
	}
}

// TestTrimLibrary checks that the library's "distlock: " goes wherever its
// messages stand, and only there.
func TestTrimLibrary(t *testing.T) {
	c := distlock.New(redisstore.New(nil))
	defer c.Close()
	lib := c.Mutex("jobs").Err() // distlock: mutex "jobs": invalid option: nil Redis client
	for _, tt := range []struct{ msg, want string }{
		{lib.Error(), `mutex "jobs": invalid option: nil Redis client`},
		{fmt.Errorf("cannot watch the lock's lease: %w", lib).Error(), `cannot watch the lock's lease: mutex "jobs": invalid option: nil Redis client`},
		{errors.Join(errors.New("exit status 3"), lib).Error(), "exit status 3\n" + `mutex "jobs": invalid option: nil Redis client`},
		{"the distlock: prefix of a message of the command's own", "the distlock: prefix of a message of the command's own"},
	} {
		if got := trimLibrary(tt.msg); got != tt.want {
			t.Errorf("trimLibrary(%q) = %q, want %q", tt.msg, got, tt.want)
		}
	}
	if got := detail(lib, distlock.ErrInvalidOption); got != "nil Redis client" {
		t.Errorf("detail = %q, want the words after invalid option", got)
	}
}

// Flag errors speak as the docs do: --flag, and plain words, not the flag
// package's.
func TestFlagErrorWording(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--bogus", "x", "--", "true"}, "unknown flag --bogus"},
		{[]string{"run", "-bogus", "x", "--", "true"}, "unknown flag --bogus"},
		{[]string{"run", "--wait", "soon", "x", "--", "true"}, `invalid value "soon" for --wait: want a duration`},
		{[]string{"run", "--fair=maybe", "x", "--", "true"}, `invalid value "maybe" for --fair: parse error`},
		{[]string{"status", "--redis"}, "flag --redis needs a value"},
	} {
		r := run(t, tt.args...)
		r.wantCode(t, exitUsage)
		if !strings.Contains(r.stderr, tt.want) || strings.Contains(r.stderr, "flag provided") {
			t.Errorf("%q: stderr %q, want %q", tt.args, r.stderr, tt.want)
		}
	}
}

// TestBadRedisURL checks that a malformed Redis URL, or one whose host or
// addr parameters are not addresses, is a usage error (64) that names
// where the URL came from, before anything is dialled, and never shows
// the password; and that well-formed ones are dialled (69: nothing
// listens there).
func TestBadRedisURL(t *testing.T) {
	t.Parallel()
	closed := closedAddr(t)
	_, port, _ := net.SplitHostPort(closed)
	redlock := func(second string) []string {
		return []string{"--redlock", "redis://" + closed, "--redlock", second, "--redlock", "redis://" + closed}
	}
	for _, tt := range []struct {
		name string
		env  string   // $REDIS_URL
		args []string // the flags of status
		code int
		want string
	}{
		{"three colons", "", []string{"--redis", "redis://:::"}, exitUsage, `invalid Redis URL in --redis: address ":::": an IPv6 address goes in brackets`},
		{"IPv6 without brackets", "", []string{"--redis", "redis://::1:" + port}, exitUsage, `in --redis: address "::1:` + port + `": an IPv6 address goes in brackets`},
		{"no host", "", []string{"--redis", "redis://"}, exitUsage, `in --redis: address "": missing host`},
		{"port without host", "", []string{"--redis", "redis://:sekret@:" + port}, exitUsage, `in --redis: address ":` + port + `": missing host`},
		{"empty port", "", []string{"--redis", "redis://127.0.0.1:"}, exitUsage, "the port must be a number from 1 to 65535"},
		{"port zero", "", []string{"--redis", "redis://127.0.0.1:0"}, exitUsage, "the port must be a number from 1 to 65535"},
		{"port too high", "", []string{"--redis", "redis://127.0.0.1:65536"}, exitUsage, "the port must be a number from 1 to 65535"},
		{"not IPv6 in brackets", "", []string{"--redis", "redis://[::g]:" + port}, exitUsage, "invalid Redis URL in --redis"},
		{"bad port", "", []string{"--redis", "redis://127.0.0.1:x"}, exitUsage, "invalid Redis URL in --redis"},
		{"from $REDIS_URL", "redis://:sekret@:::", nil, exitUsage, `invalid Redis URL in $REDIS_URL: address ":::"`},
		{"Sentinel addr", "", []string{"--redis", "redis://" + closed + "?master_name=m&addr=:::"}, exitUsage, `in --redis: address ":::"`},
		{"Cluster addr", "", []string{"--redis", "redis://" + closed + "?addr=a%20b:1"}, exitUsage, `address "a b:1": the host must be a name or an IP address`},
		{"Cluster addr without port", "", []string{"--redis", "redis://" + closed + "?cluster=true&addr=x:"}, exitUsage, `address "x:": the port must be`},
		{"second Redlock master", "", redlock("redis://:::"), exitUsage, `invalid Redis URL in the 2nd --redlock: address ":::"`},
		{"IPv4", "", []string{"--redis", "redis://" + closed}, exitUnavailable, "cannot reach Redis at " + closed},
		{"IPv6 in brackets", "", []string{"--redis", "redis://[::1]:" + port}, exitUnavailable, "cannot reach Redis at [::1]:" + port},
		{"host name", "", []string{"--redis", "redis://localhost:" + port + "/0"}, exitUnavailable, "cannot reach Redis at localhost:" + port},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var env []string
			if tt.env != "" {
				env = []string{"REDIS_URL=" + tt.env}
			}
			r := distlockEnv(t, env, append(append([]string{"status"}, tt.args...), "x")...)
			r.wantCode(t, tt.code)
			wantOneLine(t, r.stderr)
			if !strings.Contains(r.stderr, tt.want) {
				t.Errorf("stderr %q does not say %q", r.stderr, tt.want)
			}
			if strings.Contains(r.stderr, "sekret") {
				t.Errorf("stderr shows the password: %q", r.stderr)
			}
		})
	}
}

// TestRedlockUnsupported checks that the kinds Redlock cannot keep (a
// fair lock, a read-write lock, a semaphore, a period's record) are usage
// errors with --redlock, found before any master is dialled (none
// listens: reaching for them would be status 69).
func TestRedlockUnsupported(t *testing.T) {
	t.Parallel()
	var masters []string
	for range 3 {
		masters = append(masters, "--redlock", "redis://"+closedAddr(t))
	}
	for _, tt := range []struct {
		args []string // after the masters
		want string
	}{
		{[]string{"run", "--fair", "x", "--", "true"}, "--fair cannot go with --redlock: a fair lock's queue cannot be kept"},
		{[]string{"run", "--shared", "x", "--", "true"}, "--shared cannot go with --redlock: a read-write lock cannot be kept"},
		{[]string{"run", "--exclusive", "--wait", "0", "x", "--", "true"}, "--exclusive cannot go with --redlock"},
		{[]string{"run", "--semaphore", "2", "x", "--", "true"}, "--semaphore cannot go with --redlock: a semaphore cannot be kept"},
		{[]string{"run", "--semaphore", "2", "--permits", "2", "--queue-timeout", "10s", "x", "--", "true"}, "--semaphore cannot go with --redlock"},
		{[]string{"run", "--once-per", "1h", "x", "--", "true"}, "--once-per cannot go with --redlock: the record of a period's run cannot be kept"},
		{[]string{"permits", "x", "3"}, "permits cannot go with --redlock"},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			for _, args := range [][]string{
				append(append([]string{}, masters...), tt.args...),               // before the command
				append(append([]string{tt.args[0]}, masters...), tt.args[1:]...), // among its flags
			} {
				r := run(t, args...)
				r.wantCode(t, exitUsage)
				wantOneLine(t, r.stderr)
				if !strings.Contains(r.stderr, tt.want) {
					t.Errorf("%q: stderr %q does not say %q", args, r.stderr, tt.want)
				}
			}
		})
	}
}
