//go:build unix

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/redisstore"
	"github.com/distlock/distlock/redistest"
)

// The tests of run --once-per. Those that need all their runs in one
// period use the longest period, 8760h, whose boundaries are a year apart.

// longPeriod is the --once-per of the tests that need their runs in one
// period.
const longPeriod = "8760h"

// The lines that run --once-per prints on stderr: with --verbose when it
// ran the command, and when it did not because the command ran, or runs,
// elsewhere in the period.
var (
	ranLine     = regexp.MustCompile(`^distlock run: ran the command of "[^"]*" in period (\d+) of \S+, token (\d+)$`)
	doneLine    = regexp.MustCompile(`^distlock run: "[^"]*" already ran in period (\d+) of \S+: on (\S+), ended \S+ \(\S+ ago\), token (\d+), (succeeded|failed: .*); not run here$`)
	runningLine = regexp.MustCompile(`^distlock run: "[^"]*" runs on (\S+) since \S+ \(\S+ ago\), token (\d+), in period (\d+) of \S+; not run here$`)
)

// parseUint parses a decimal number matched by one of the regexps above.
func parseUint(t *testing.T, s string) uint64 {
	t.Helper()
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestRunOncePerAcrossProcesses is a cron line on three machines, run
// back to back: three loops start distlock run --once-per 300ms over and
// over, until the command has run in 4 periods and some runs found it done
// and some found it running. The command appends its token to a log. Each
// period has at most one run; every run exits with status 0 and either
// ran the command (it says so with --verbose, and its token is in the log)
// or says that it ran, with the token of the run of that period, or runs
// elsewhere.
func TestRunOncePerAcrossProcesses(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	logFile := filepath.Join(t.TempDir(), "log")
	const periods = 4

	var mu sync.Mutex
	ran := map[uint64][]uint64{} // period -> tokens of the runs that ran the command
	var done, running int
	var failures []string
	twice := false // a period ran twice: stop at once
	enough := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(ran) >= periods && done > 0 && running > 0 || len(failures) > 0 || twice
	}
	type skip struct{ period, token uint64 }
	var dones []skip
	deadline := time.Now().Add(testTimeout)
	var wg sync.WaitGroup
	for id := range 3 {
		wg.Go(func() {
			for n := 0; !enough() && time.Now().Before(deadline); n++ {
				r := distlockEnv(t, []string{"LOG=" + logFile, "ID=" + itoa(id)},
					"run", "--redis", srv.URL(), "--once-per", "300ms", "--verbose", "cron", "--",
					"sh", "-c", `echo "$DISTLOCK_TOKEN $ID $DISTLOCK_PERIOD" >>"$LOG"; sleep 0.05`)
				mu.Lock()
				lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
				last := lines[len(lines)-1]
				if m := ranLine.FindStringSubmatch(last); r.code == 0 && m != nil {
					p := parseUint(t, m[1])
					ran[p] = append(ran[p], parseUint(t, m[2]))
					twice = twice || len(ran[p]) > 1
				} else if m := doneLine.FindStringSubmatch(last); r.code == 0 && m != nil && m[4] == "succeeded" {
					done++
					dones = append(dones, skip{parseUint(t, m[1]), parseUint(t, m[3])})
				} else if m := runningLine.FindStringSubmatch(last); r.code == 0 && m != nil {
					running++
				} else {
					failures = append(failures, fmt.Sprintf("loop %d, run %d: exit status %d, stderr:\n%s", id, n, r.code, r.stderr))
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for _, f := range failures {
		t.Error(f)
	}
	if t.Failed() {
		t.FailNow()
	}
	if !enough() {
		t.Errorf("within %v, the command ran in %d periods, %d runs found it done and %d running; want %d periods and both",
			testTimeout, len(ran), done, running, periods)
	}

	tokens := map[uint64]uint64{} // token -> period
	for p, toks := range ran {
		if len(toks) != 1 {
			t.Errorf("period %d: the command ran %d times, tokens %v, want once", p, len(toks), toks)
		}
		for _, tok := range toks {
			tokens[tok] = p
		}
	}
	logged := logLines(t, logFile)
	if len(logged) != len(tokens) {
		t.Errorf("the command logged %d runs, distlock said it ran %d:\n%s", len(logged), len(tokens), strings.Join(logged, "\n"))
	}
	for _, line := range logged {
		var tok, period uint64
		var id int
		if _, err := fmt.Sscanf(line, "%d %d %d", &tok, &id, &period); err != nil {
			t.Errorf("log line %q: want token, id and DISTLOCK_PERIOD: %v", line, err)
		} else if p, ok := tokens[tok]; !ok {
			t.Errorf("log line %q: not the token of a run that distlock said it ran", line)
		} else if period != p {
			t.Errorf("log line %q: DISTLOCK_PERIOD %d, distlock said it ran in period %d", line, period, p)
		}
	}
	for _, d := range dones {
		if toks := ran[d.period]; len(toks) != 1 || toks[0] != d.token {
			t.Errorf("a run found period %d done with token %d; the runs of that period had tokens %v", d.period, d.token, toks)
		}
	}
	t.Logf("%d periods ran, %d runs found the period done, %d found it running", len(ran), done, running)
}

// TestRunOncePerDoneAndRunning runs a command with --once-per that fails
// with status 3 once told to: meanwhile, another run finds it running (and
// says so, unless --quiet), and once it has failed, another finds it done
// with its failure. Neither runs its command, and both exit with status 0.
func TestRunOncePerDoneAndRunning(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := newClient(t, srv)
	dir := t.TempDir()
	out, goFile, ran := filepath.Join(dir, "out"), filepath.Join(dir, "go"), filepath.Join(dir, "ran")
	first := start(t, []string{"OUT=" + out, "GO=" + goFile},
		"run", "--redis", srv.URL(), "--once-per", longPeriod, "job", "--", "sh", "-c", holdUntilGo+"\nexit 3")
	awaitFile(t, out)
	var name string
	var token uint64
	if _, err := fmt.Sscanf(readFile(t, out), "%s %d", &name, &token); err != nil || name != "job" {
		t.Fatalf("the command got %q (%v), want DISTLOCK_NAME job and a token", readFile(t, out), err)
	}
	if info := inspect(t, c, "job"); !info.Locked || info.Kind != distlock.KindMutex || info.Token != token {
		t.Errorf("lock state %+v while the command runs, want held as a plain mutex with token %d", info, token)
	}
	host, _ := os.Hostname()
	runner := fmt.Sprintf("%s/%d", host, first.cmd.Process.Pid)

	r := run(t, "run", "--redis", srv.URL(), "--once-per", longPeriod, "job", "--", "touch", ran)
	r.wantCode(t, 0)
	wantOneLine(t, r.stderr)
	m := runningLine.FindStringSubmatch(strings.TrimSuffix(r.stderr, "\n"))
	if m == nil || m[1] != runner || parseUint(t, m[2]) != token {
		t.Errorf("stderr %q, want that the command runs on %s with token %d", r.stderr, runner, token)
	}
	q := run(t, "run", "--redis", srv.URL(), "--once-per", longPeriod, "--quiet", "job", "--", "touch", ran)
	q.wantCode(t, 0)
	if q.stderr != "" {
		t.Errorf("--quiet printed %q", q.stderr)
	}

	touch(t, goFile)
	if code := first.wait(); code != 3 {
		t.Fatalf("the run that ran the command: exit status %d, want its 3; stderr:\n%s", code, first.errOut())
	}
	if info := inspect(t, c, "job"); info.Locked {
		t.Errorf("lock state %+v after the command, want free", info)
	}
	r = run(t, "run", "--redis", srv.URL(), "--once-per", longPeriod, "job", "--", "touch", ran)
	r.wantCode(t, 0)
	wantOneLine(t, r.stderr)
	m = doneLine.FindStringSubmatch(strings.TrimSuffix(r.stderr, "\n"))
	if m == nil || m[2] != runner || parseUint(t, m[3]) != token || m[4] != "failed: exit status 3" {
		t.Errorf("stderr %q, want that the command failed with exit status 3 on %s with token %d", r.stderr, runner, token)
	}
	if _, err := os.Stat(ran); err == nil {
		t.Error("a command ran again in the same period")
	}
}

// TestRunOncePerOutcomes checks how the runs of a period are recorded by
// what became of the command: killed by a signal, it is recorded as such;
// if it cannot be executed, its run fails as run's does (126) and is
// recorded; if the lock is lost while it runs (run exits with 70), its run
// is not recorded, and the next run of the period runs the command.
func TestRunOncePerOutcomes(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	dir := t.TempDir()
	ran := filepath.Join(dir, "ran")
	// again runs the command of name again, in the same period: it does
	// not run, and the run says how the run of the period ended: outcome,
	// and more.
	again := func(t *testing.T, name, outcome string) {
		t.Helper()
		r := run(t, "run", "--redis", srv.URL(), "--once-per", longPeriod, name, "--", "touch", ran)
		r.wantCode(t, 0)
		if m := doneLine.FindStringSubmatch(strings.TrimSuffix(r.stderr, "\n")); m == nil || !strings.HasPrefix(m[4], outcome) {
			t.Errorf("stderr %q, want the run done with %q", r.stderr, outcome)
		}
		if _, err := os.Stat(ran); err == nil {
			t.Fatal("a command ran again in the same period")
		}
	}

	t.Run("signal", func(t *testing.T) {
		r := run(t, "run", "--redis", srv.URL(), "--once-per", longPeriod, "killed", "--", "sh", "-c", "kill -TERM $$")
		r.wantCode(t, exitSignal+15)
		again(t, "killed", "failed: killed by signal 15")
	})
	t.Run("not executable", func(t *testing.T) {
		bad := filepath.Join(dir, "bad-format")
		if err := os.WriteFile(bad, []byte("\x7fELF garbage\x00\x01"), 0o755); err != nil {
			t.Fatal(err)
		}
		r := run(t, "run", "--redis", srv.URL(), "--once-per", longPeriod, "broken", "--", bad)
		r.wantCode(t, exitCannotExec)
		wantOneLine(t, r.stderr)
		again(t, "broken", "failed: "+bad+": cannot run: ")
	})
	t.Run("lock lost", func(t *testing.T) {
		ready := filepath.Join(dir, "ready")
		p := start(t, []string{"READY=" + ready}, "run", "--redis", srv.URL(), "--once-per", longPeriod,
			"--ttl", "600ms", "--kill-grace", "200ms", "lost", "--", "sh", "-c", `touch "$READY"; exec sleep 60`)
		awaitFile(t, ready)
		if err := rdb.Del(context.Background(), redisstore.DefaultPrefix+"{lost}").Err(); err != nil {
			t.Fatal(err)
		}
		if code := p.wait(); code != exitLockLost {
			t.Fatalf("exit status %d, want %d; stderr:\n%s", code, exitLockLost, p.errOut())
		}
		r := run(t, "run", "--redis", srv.URL(), "--once-per", longPeriod, "lost", "--", "touch", ran)
		r.wantCode(t, 0)
		if r.stderr != "" {
			t.Errorf("stderr %q, want nothing: the command ran", r.stderr)
		}
		if _, err := os.Stat(ran); err != nil {
			t.Errorf("the command did not run again after the lost run: %v", err)
		}
	})
}

// TestRunOncePerWrongKind runs --once-per on a name in use as another
// kind than a plain lock, and a plain run on the name while a --once-per
// run holds it: --once-per takes a plain lock, so the first fail with
// status 78 and the second waits for it.
func TestRunOncePerWrongKind(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := newClient(t, srv)
	holdFair(t, c, "fair")
	campaign(t, c, "leader", "10.0.0.7:8080")
	for _, tt := range []struct{ name, want string }{
		{"fair", "is in use as a fair-mutex (--fair); use the same kind everywhere"},
		{"leader", "is in use as an election (the library's Client.Election, which distlock run does not take); use another name"},
	} {
		ran := filepath.Join(t.TempDir(), "ran")
		r := run(t, "run", "--redis", srv.URL(), "--once-per", longPeriod, tt.name, "--", "touch", ran)
		r.wantCode(t, exitWrongKind)
		wantOneLine(t, r.stderr)
		if !strings.Contains(r.stderr, strconv.Quote(tt.name)+" "+tt.want) {
			t.Errorf("stderr %q does not contain %q", r.stderr, tt.want)
		}
		if _, err := os.Stat(ran); err == nil {
			t.Errorf("%s: the command ran", tt.name)
		}
	}
}

// TestRunOncePerUsage checks the flags that --once-per does not go with,
// and the periods it refuses: each is a usage error (64), in one line, and
// nothing runs or is locked.
func TestRunOncePerUsage(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := newClient(t, srv)
	ran := filepath.Join(t.TempDir(), "ran")
	tests := []struct {
		flags []string
		want  string
	}{
		{[]string{"--once-per", "99ms"}, "99ms is not between 100ms and 8760h0m0s"},
		{[]string{"--once-per", "0"}, "0s is not between"},
		{[]string{"--once-per", "-5m"}, "-5m0s is not between"},
		{[]string{"--once-per", "8761h"}, "8761h0m0s is not between"},
		{[]string{"--once-per", "150.5ms"}, "not a whole number of milliseconds"},
		{[]string{"--once-per", "daily"}, "invalid value"},
		{[]string{"--once-per", "5m", "--wait", "0"}, "--once-per cannot go with --wait"},
		{[]string{"--once-per", "5m", "--wait", "1m"}, "--once-per cannot go with --wait"},
		{[]string{"--once-per", "5m", "--fair"}, "--once-per cannot go with --fair"},
		{[]string{"--once-per", "5m", "--shared"}, "--once-per cannot go with --fair"},
		{[]string{"--once-per", "5m", "--exclusive"}, "--once-per cannot go with --fair"},
		{[]string{"--once-per", "5m", "--semaphore", "2"}, "--once-per cannot go with --fair"},
		{[]string{"--once-per", "5m", "--permits", "2"}, "--permits is for a semaphore"},
		{[]string{"--once-per", "5m", "--queue-timeout", "1s"}, "--queue-timeout is for a lock with a queue"},
	}
	for _, tt := range tests {
		args := append([]string{"run", "--redis", srv.URL()}, tt.flags...)
		r := run(t, append(args, "usage", "--", "touch", ran)...)
		if r.code != exitUsage || !strings.Contains(r.stderr, tt.want) {
			t.Errorf("%q: exit status %d, stderr %q; want %d and %q", tt.flags, r.code, r.stderr, exitUsage, tt.want)
		}
		wantOneLine(t, r.stderr)
	}
	if _, err := os.Stat(ran); err == nil {
		t.Error("the command ran")
	}
	if info := inspect(t, c, "usage"); info.LastToken != 0 {
		t.Errorf("lock state %+v, want never taken", info)
	}
	r := run(t, "run", "--help")
	if !strings.Contains(r.stdout, "--once-per PERIOD") || !strings.Contains(r.stdout, "1-59/5 * * * * distlock run --once-per 5m") {
		t.Errorf("run --help does not document --once-per:\n%s", r.stdout)
	}
}
