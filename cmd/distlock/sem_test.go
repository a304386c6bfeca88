//go:build unix

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/redistest"
)

// The tests of run --semaphore, of status, list and unlock on a
// semaphore, and of the permits command. As in fair_test.go, the distlock
// processes that queue run with the default --queue-timeout, --ttl and
// --kill-grace.

// holdPermits takes n permits of the semaphore name, of capacity permits
// as the test knows it, as an owner of its own, and releases them when
// the test ends.
func holdPermits(t *testing.T, c *distlock.Client, name string, capacity, n int, opts ...distlock.MutexOption) *distlock.Lease {
	t.Helper()
	lease, err := c.Semaphore(name, capacity, opts...).TryAcquire(context.Background(), n)
	if err != nil {
		t.Fatalf("take %d permits of %q: %v", n, name, err)
	}
	t.Cleanup(func() { _ = lease.Unlock(context.Background()) })
	return lease
}

// inspectSem returns the state of the semaphore name.
func inspectSem(t *testing.T, c *distlock.Client, name string) distlock.SemaphoreInfo {
	t.Helper()
	info, err := c.Semaphore(name, 1).Inspect(context.Background())
	if err != nil {
		t.Fatalf("inspect %q: %v", name, err)
	}
	return info
}

// awaitSemQueued waits until n waiters are in the queue of the semaphore
// name.
func awaitSemQueued(t *testing.T, c *distlock.Client, name string, n int) {
	t.Helper()
	eventually(t, fmt.Sprintf("%d queued for %q", n, name), func() bool {
		return inspectSem(t, c, name).Queued == n
	})
}

// semOverlap is the command of the runs of TestRunSemaphore. It marks
// itself running with $DIR/in.$ID, logs an overlap if more than two marks
// are there with its own, and logs its start. Then it waits until another
// command's mark appears (exit status 3 if none does within about 30
// seconds: it never ran at the same time as another), then until
// $DIR/go.$ID exists; it logs its end before it removes its mark.
const semOverlap = `touch "$DIR/in.$ID"
n=0
for f in "$DIR"/in.*; do [ -e "$f" ] && n=$((n + 1)); done
[ "$n" -le 2 ] || echo "overlap: $n running with $ID" >>"$LOG"
echo "start $ID $DISTLOCK_MODE $DISTLOCK_PERMITS" >>"$LOG"
i=0
while :; do
	for f in "$DIR"/in.*; do
		[ "$f" = "$DIR/in.$ID" ] || [ ! -e "$f" ] || break 2
	done
	i=$((i + 1))
	[ "$i" -le 600 ] || exit 3
	sleep 0.05
done
until [ -e "$DIR/go.$ID" ]; do sleep 0.05; done
echo "end $ID" >>"$LOG"
rm "$DIR/in.$ID"`

// TestRunSemaphore starts three run --semaphore 2 together: two commands
// run at once (each waits until it sees another run), the third waits in
// the queue and runs only once one of the first two has ended, and the
// semaphore never has more than 2 permits in use meanwhile.
func TestRunSemaphore(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := newClient(t, srv)
	dir := t.TempDir()
	logFile := filepath.Join(dir, "log")
	env := []string{"DIR=" + dir, "LOG=" + logFile}

	// Watch the permits in use for as long as the commands run.
	stopWatch := make(chan struct{})
	var watch sync.WaitGroup
	var mu sync.Mutex
	var most int
	var watchErr error
	watch.Go(func() {
		for {
			info, err := c.Semaphore("api", 2).Inspect(context.Background())
			mu.Lock()
			if err != nil {
				watchErr = err
			}
			most = max(most, info.InUse)
			mu.Unlock()
			select {
			case <-stopWatch:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	})
	stopWatching := sync.OnceFunc(func() {
		close(stopWatch)
		watch.Wait()
	})
	t.Cleanup(stopWatching)

	procs := map[string]*proc{}
	for _, id := range []string{"a", "b", "c"} {
		procs[id] = start(t, append(env, "ID="+id),
			"run", "--redis", srv.URL(), "--semaphore", "2", "api", "--", "sh", "-c", semOverlap)
	}
	marked := func(id string) bool {
		_, err := os.Stat(filepath.Join(dir, "in."+id))
		return err == nil
	}
	var running []string
	eventually(t, "two commands to run and one to queue, or three to run", func() bool {
		running = slices.DeleteFunc([]string{"a", "b", "c"}, func(id string) bool { return !marked(id) })
		return len(running) == 3 || len(running) == 2 && inspectSem(t, c, "api").Queued == 1
	})
	if len(running) != 2 {
		t.Fatalf("commands %q run at once, want 2", running)
	}
	third := slices.DeleteFunc([]string{"a", "b", "c"}, func(id string) bool { return slices.Contains(running, id) })[0]
	info := inspectSem(t, c, "api")
	if info.Capacity != 2 || info.InUse != 2 || len(info.Holders) != 2 || info.Queued != 1 || info.QueuedPermits != 1 {
		t.Errorf("semaphore %+v while two commands run, want 2 of 2 permits in use by 2 holders, 1 queued for 1", info)
	}
	if marked(third) {
		t.Fatalf("the third command, %s, runs while the two others do", third)
	}

	// One of the two ends: the third runs, beside the other.
	first := running[0]
	touch(t, filepath.Join(dir, "go."+first))
	if code := procs[first].wait(); code != 0 {
		t.Fatalf("%s: exit status %d; stderr:\n%s", first, code, procs[first].errOut())
	}
	awaitFile(t, filepath.Join(dir, "in."+third))
	for _, id := range []string{running[1], third} {
		touch(t, filepath.Join(dir, "go."+id))
	}
	for id, p := range procs {
		if code := p.wait(); code != 0 {
			t.Fatalf("%s: exit status %d (3: it never saw another command run); stderr:\n%s", id, code, p.errOut())
		}
	}
	stopWatching()
	if watchErr != nil {
		t.Errorf("inspect while the commands ran: %v", watchErr)
	}
	if most != 2 {
		t.Errorf("at most %d permits in use while the commands ran, want 2", most)
	}

	lines := logLines(t, logFile)
	var starts, ends []string
	inUse := 0
	for _, line := range lines {
		f := strings.Fields(line)
		switch f[0] {
		case "start":
			if len(f) != 4 || f[2] != "semaphore" || f[3] != "1" {
				t.Errorf("log line %q, want start ID semaphore 1 (DISTLOCK_MODE and DISTLOCK_PERMITS)", line)
			}
			starts = append(starts, f[1])
			inUse++
		case "end":
			ends = append(ends, f[1])
			inUse--
		default:
			t.Errorf("log line %q", line)
		}
		if inUse > 2 {
			t.Errorf("more than 2 commands ran at once:\n%s", strings.Join(lines, "\n"))
		}
	}
	if len(starts) != 3 || len(ends) != 3 || starts[2] != third || ends[0] != first {
		t.Errorf("log:\n%s\nwant %s and %s to start, %s to end, then %s to start",
			strings.Join(lines, "\n"), running[0], running[1], first, third)
	}
	if info := inspectSem(t, c, "api"); len(info.Holders) != 0 || info.InUse != 0 || info.Queued != 0 {
		t.Errorf("semaphore %+v after the commands, want free", info)
	}
}

// TestRunSemaphoreWaitZero checks that run --semaphore --wait 0 fails
// (status 75) while the permits are taken, saying how many are in use of
// how many, without queueing; that it does not pass a waiter for 2
// permits even though a permit is free; and that it runs when a permit is
// free and nobody waits.
func TestRunSemaphoreWaitZero(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := newClient(t, srv)
	host, _ := os.Hostname()
	first := holdPermits(t, c, "full", 2, 1)
	second := holdPermits(t, c, "full", 2, 1)
	ran := filepath.Join(t.TempDir(), "ran")
	args := []string{"run", "--redis", srv.URL(), "--semaphore", "2", "--wait", "0", "full", "--", "touch", ran}

	r := run(t, args...)
	r.wantCode(t, exitNotAcquired)
	if want := "distlock run: lock \"full\" is held with 2/2 permits in use by 2 holders; not acquired\n"; r.stderr != want {
		t.Errorf("stderr %q, want %q", r.stderr, want)
	}
	if _, err := os.Stat(ran); err == nil {
		t.Error("the command ran without a permit")
	}
	if info := inspectSem(t, c, "full"); info.Queued != 0 || info.InUse != 2 {
		t.Errorf("semaphore %+v: --wait 0 queued or took a permit", info)
	}

	// A waiter for 2 permits queues; a permit is freed; --wait 0 does not
	// pass the waiter.
	waiter := start(t, nil, "run", "--redis", srv.URL(), "--semaphore", "2", "--permits", "2",
		"full", "--", "true")
	awaitSemQueued(t, c, "full", 1)
	if err := first.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	r = run(t, args...)
	r.wantCode(t, exitNotAcquired)
	wantOneLine(t, r.stderr)
	for _, want := range []string{
		fmt.Sprintf("lock \"full\" is held with 1/2 permits in use by %s/%d for ", host, os.Getpid()),
		", 1 queued for 2 permits; not acquired\n",
	} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr %q does not contain %q", r.stderr, want)
		}
	}
	if _, err := os.Stat(ran); err == nil {
		t.Error("the command of --wait 0 passed the waiter")
	}
	if err := second.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	if code := waiter.wait(); code != 0 {
		t.Fatalf("the waiter for 2 permits: exit status %d; stderr:\n%s", code, waiter.errOut())
	}

	r = run(t, args...)
	r.wantCode(t, 0)
	if _, err := os.Stat(ran); err != nil {
		t.Errorf("the command did not run with a permit free: %v", err)
	}
}

// TestRunSemaphoreProgress checks that a run --semaphore that waits says,
// on stderr, how many permits are in use of how many and what is queued,
// and runs once a permit is returned; and that one that gives up after
// --wait says so (status 75).
func TestRunSemaphoreProgress(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := newClient(t, srv)
	lease := holdPermits(t, c, "slow", 2, 2)

	r := run(t, "run", "--redis", srv.URL(), "--semaphore", "2", "--wait", "100ms", "slow", "--", "true")
	r.wantCode(t, exitNotAcquired)
	if want := `distlock run: lock "slow" not acquired after waiting 100ms: held with 2/2 permits in use by `; !strings.HasPrefix(r.stderr, want) &&
		!strings.Contains(r.stderr, "\n"+want) {
		t.Errorf("stderr %q does not say %q", r.stderr, want)
	}

	p := start(t, nil, "run", "--redis", srv.URL(), "--semaphore", "2", "slow", "--", "true")
	awaitSemQueued(t, c, "slow", 1)
	awaitOutput(t, p.stderr, "waiting for slow")
	line := p.errOut()
	host, _ := os.Hostname()
	for _, want := range []string{fmt.Sprintf("held with 2/2 permits in use by %s/%d, ttl ", host, os.Getpid()), ", 1 queued for 1 permit\n"} {
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

// TestRunWrongKindSemaphore runs distlock --semaphore on a name held as
// every other kind, and every other kind on a semaphore: it fails at once
// with status 78 and a line that names the kind in use, does not run the
// command, and leaves the lock as it was.
func TestRunWrongKindSemaphore(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := newClient(t, srv)
	const (
		plain = "a mutex (without --fair, --shared, --exclusive or --semaphore)"
		fair  = "a fair-mutex (--fair)"
		rw    = "an rwmutex (--shared/--exclusive)"
		sem   = "a semaphore (--semaphore)"
	)
	tests := []struct {
		name string
		held string // plain, fair, read, write or semaphore
		args []string
		want string
	}{
		{"semaphore on plain", "plain", []string{"--semaphore", "2"}, plain},
		{"semaphore on fair, wait 0", "fair", []string{"--semaphore", "2", "--wait", "0"}, fair},
		{"semaphore on shared", "read", []string{"--semaphore", "2"}, rw},
		{"semaphore on exclusive, wait 0", "write", []string{"--semaphore", "3", "--wait", "0"}, rw},
		{"plain on semaphore", "semaphore", nil, sem},
		{"plain on semaphore, wait 0", "semaphore", []string{"--wait", "0"}, sem},
		{"fair on semaphore", "semaphore", []string{"--fair"}, sem},
		{"shared on semaphore, wait 0", "semaphore", []string{"--shared", "--wait", "0"}, sem},
		{"exclusive on semaphore", "semaphore", []string{"--exclusive"}, sem},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name := "kind-" + itoa(i)
			var lease *distlock.Lease
			switch tt.held {
			case "plain":
				lease = hold(t, c, name)
			case "fair":
				lease = holdFair(t, c, name)
			case "read":
				lease = holdRead(t, c, name)
			case "write":
				lease = holdWrite(t, c, name)
			case "semaphore":
				lease = holdPermits(t, c, name, 2, 1)
			}
			ran := filepath.Join(t.TempDir(), "ran")
			args := append([]string{"run", "--redis", srv.URL()}, tt.args...)
			r := run(t, append(args, name, "--", "touch", ran)...)
			r.wantCode(t, exitWrongKind)
			if want := fmt.Sprintf("distlock run: lock %q is in use as %s; use the same kind everywhere\n", name, tt.want); r.stderr != want {
				t.Errorf("stderr %q, want %q", r.stderr, want)
			}
			if _, err := os.Stat(ran); err == nil {
				t.Error("the command ran")
			}
			if err := lease.Context().Err(); err != nil {
				t.Errorf("the test's lease ended: %v", context.Cause(lease.Context()))
			}
			switch tt.held {
			case "semaphore":
				info := inspectSem(t, c, name)
				if info.Kind != distlock.KindSemaphore || len(info.Holders) != 1 || info.Holders[0].Token != lease.Token() ||
					info.InUse != 1 || info.Queued != 0 {
					t.Errorf("semaphore %+v, want 1 permit still held by the test (token %d), nothing queued", info, lease.Token())
				}
			case "plain", "fair":
				if info := inspect(t, c, name); !info.Locked || info.Token != lease.Token() || info.Queued != 0 {
					t.Errorf("lock state %+v, want still held by the test (token %d), nothing queued", info, lease.Token())
				}
			default:
				if info := inspectRW(t, c, name); info.Mode == "" || info.QueuedReaders+info.QueuedWriters != 0 {
					t.Errorf("lock state %+v, want still held by the test, nothing queued", info)
				}
			}
		})
	}
}

// TestRunSemaphoreMismatch checks a run whose --semaphore differs from
// the capacity in Redis: it warns, naming both (unless --quiet), and the
// capacity in Redis is in force; and one whose --permits exceeds that
// capacity fails with status 78, saying so.
func TestRunSemaphoreMismatch(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := newClient(t, srv)
	holdPermits(t, c, "wide", 3, 2) // 2 of 3: a third permit is free

	// With --semaphore 2, the run would find both permits taken; Redis's 3
	// let it in.
	args := []string{"run", "--redis", srv.URL(), "--semaphore", "2", "--wait", "0"}
	r := run(t, append(args, "wide", "--", "sh", "-c", `echo "$DISTLOCK_PERMITS"`)...)
	r.wantCode(t, 0)
	if want := "distlock run: warning: semaphore \"wide\" has 3 permits in Redis, not 2 as --semaphore says: Redis's number is in force (see distlock permits --help)\n"; r.stderr != want {
		t.Errorf("stderr %q, want %q", r.stderr, want)
	}
	if r.stdout != "1\n" {
		t.Errorf("the command printed %q, want DISTLOCK_PERMITS 1", r.stdout)
	}
	r = run(t, append(args, "--quiet", "wide", "--", "true")...)
	r.wantCode(t, 0)
	if r.stderr != "" {
		t.Errorf("stderr %q with --quiet, want nothing", r.stderr)
	}

	ran := filepath.Join(t.TempDir(), "ran")
	r = run(t, "run", "--redis", srv.URL(), "--semaphore", "5", "--permits", "4", "wide", "--", "touch", ran)
	r.wantCode(t, exitWrongKind)
	if want := "distlock run: semaphore \"wide\" has 3 permits in Redis, fewer than --permits 4: lower --permits, or raise its permits with distlock permits\n"; r.stderr != want {
		t.Errorf("stderr %q, want %q", r.stderr, want)
	}
	if _, err := os.Stat(ran); err == nil {
		t.Error("the command ran")
	}
	if info := inspectSem(t, c, "wide"); info.Capacity != 3 || info.InUse != 2 || info.Queued != 0 {
		t.Errorf("semaphore %+v, want 2 of 3 permits in use, nothing queued", info)
	}
}

// TestRunSemaphoreEnv checks DISTLOCK_MODE, DISTLOCK_PERMITS and
// DISTLOCK_PERIOD: set with --semaphore, to "semaphore" and the permits
// held, and with --once-per, to the period, and removed otherwise even if
// distlock has them in its environment; and DISTLOCK_TOKEN.
func TestRunSemaphoreEnv(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := newClient(t, srv)
	tests := []struct {
		args   []string
		want   string
		period bool // DISTLOCK_PERIOD is set
	}{
		{[]string{"--semaphore", "3"}, "semaphore 1", false},
		{[]string{"--semaphore", "3", "--permits", "3", "--wait", "0"}, "semaphore 3", false},
		{[]string{"--permits", "2", "--semaphore", "2", "--queue-timeout", "10s"}, "semaphore 2", false},
		{nil, "unset unset", false},
		{[]string{"--shared"}, "shared unset", false},
		{[]string{"--once-per", longPeriod}, "unset unset", true},
	}
	for i, tt := range tests {
		t.Run(strings.Join(append([]string{"run"}, tt.args...), " "), func(t *testing.T) {
			name := "env-" + itoa(i)
			args := append([]string{"run", "--redis", srv.URL()}, tt.args...)
			before := time.Now()
			r := distlockEnv(t, []string{"DISTLOCK_MODE=inherited", "DISTLOCK_PERMITS=9", "DISTLOCK_PERIOD=inherited"},
				append(args, name, "--", "sh", "-c",
					`echo "${DISTLOCK_MODE-unset} ${DISTLOCK_PERMITS-unset} $DISTLOCK_TOKEN ${DISTLOCK_PERIOD-unset}"`)...)
			r.wantCode(t, 0)
			var mode, permits, period string
			var token uint64
			if _, err := fmt.Sscanf(r.stdout, "%s %s %d %s", &mode, &permits, &token, &period); err != nil {
				t.Fatalf("the command printed %q: %v", r.stdout, err)
			}
			if got := mode + " " + permits; got != tt.want {
				t.Errorf("DISTLOCK_MODE and DISTLOCK_PERMITS = %q, want %q", got, tt.want)
			}
			if last := inspect(t, c, name).LastToken; token == 0 || token != last {
				t.Errorf("DISTLOCK_TOKEN = %d, want the lock's last token %d", token, last)
			}
			// The period of 8760h that holds now, give or take one for
			// the clocks of Redis and of the test.
			now := uint64(before.UnixMilli() / (8760 * time.Hour).Milliseconds())
			switch p, err := strconv.ParseUint(period, 10, 64); {
			case !tt.period && period != "unset":
				t.Errorf("DISTLOCK_PERIOD = %q, want unset", period)
			case tt.period && (err != nil || p+1 < now || p > now+1):
				t.Errorf("DISTLOCK_PERIOD = %q, want the current period, about %d", period, now)
			}
		})
	}
}

// TestRunSemaphoreUsage checks that bad numbers of permits, and
// --semaphore with another kind's flags, are usage errors that say why
// and take nothing.
func TestRunSemaphoreUsage(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := newClient(t, srv)
	const other = "--semaphore cannot go with --fair, --shared or --exclusive: a semaphore is a kind of lock of its own, and serves its waiters in order"
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--semaphore", "2", "--fair"}, other},
		{[]string{"--shared", "--semaphore", "2"}, other},
		{[]string{"--semaphore", "2", "--exclusive", "--wait", "0"}, other},
		{[]string{"--semaphore", "0"}, "invalid value for --semaphore: 0 is not between 1 and 1073741824"},
		{[]string{"--semaphore", "-3"}, "invalid value for --semaphore: -3 is not between 1 and 1073741824"},
		{[]string{"--semaphore", "1073741825"}, "invalid value for --semaphore: 1073741825 is not between 1 and 1073741824"},
		{[]string{"--semaphore", "two"}, `invalid value "two" for --semaphore: parse error (see distlock run --help)`},
		{[]string{"--permits", "2"}, "--permits is for a semaphore: add --semaphore N, or drop --permits"},
		{[]string{"--semaphore", "2", "--permits", "3"}, "invalid value for --permits: 3 is not between 1 and 2 (--semaphore)"},
		{[]string{"--semaphore", "2", "--permits", "0"}, "invalid value for --permits: 0 is not between 1 and 2 (--semaphore)"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			ran := filepath.Join(t.TempDir(), "ran")
			args := append([]string{"run", "--redis", srv.URL()}, tt.args...)
			r := run(t, append(args, "usage", "--", "touch", ran)...)
			r.wantCode(t, exitUsage)
			if want := "distlock run: " + tt.want + "\n"; r.stderr != want {
				t.Errorf("stderr %q, want %q", r.stderr, want)
			}
			if _, err := os.Stat(ran); err == nil {
				t.Error("the command ran")
			}
		})
	}
	for _, args := range [][]string{{"usage"}, {"usage", "0"}, {"usage", "-1"}, {"usage", "x"}, {"usage", "1073741825"}, {"usage", "2", "3"}} {
		t.Run("permits "+strings.Join(args, " "), func(t *testing.T) {
			r := run(t, append([]string{"permits", "--redis", srv.URL()}, args...)...)
			r.wantCode(t, exitUsage)
			wantOneLine(t, r.stderr)
			if !strings.HasPrefix(r.stderr, "distlock permits: ") {
				t.Errorf("stderr %q", r.stderr)
			}
		})
	}
	if info := inspectSem(t, c, "usage"); info.LastToken != 0 || info.Capacity != 0 {
		t.Errorf("semaphore %+v: a usage error took it or set its permits", info)
	}
}

// TestStatusSemaphore checks what status, status --json, list and list
// --json show of a semaphore of 3 permits, 1 held by the test and 2 by a
// distlock process, with a distlock process queued for 2; and of the
// semaphore once free, whose capacity Redis keeps.
func TestStatusSemaphore(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := newClient(t, srv)
	host, _ := os.Hostname()
	lease := holdPermits(t, c, "sem", 3, 1, distlock.WithTTL(30*time.Second))
	dir := t.TempDir()
	out, goFile := filepath.Join(dir, "out"), filepath.Join(dir, "go")
	args := []string{"run", "--redis", srv.URL(), "--semaphore", "3", "--permits", "2", "sem", "--"}
	holder := start(t, []string{"OUT=" + out, "GO=" + goFile}, append(args, "sh", "-c", holdUntilGo)...)
	awaitFile(t, out)
	var name string
	var token uint64
	if _, err := fmt.Sscanf(readFile(t, out), "%s %d", &name, &token); err != nil {
		t.Fatalf("the command got %q: %v", readFile(t, out), err)
	}
	waiter := start(t, nil, append(args, "true")...)
	awaitSemQueued(t, c, "sem", 1)

	st := statusJSON(t, srv, "sem")
	switch {
	case st.Name != "sem" || st.Kind != "semaphore" || !st.Locked || st.Mode != "" || st.Fair:
		t.Errorf("status %+v, want the semaphore sem, locked", st)
	case st.Capacity != 3 || st.InUse != 3 || st.Queued != 1 || st.QueuedPermits != 2 || st.Waiters != 0:
		t.Errorf("status %+v, want 3 of 3 permits in use, 1 queued for 2", st)
	case st.Holder != nil || st.Holds != 0 || st.Token != 0 || st.TTLMillis != 0 || st.Writer != nil || len(st.Readers) != 0:
		t.Errorf("status %+v, want no single holder, writer or readers", st)
	case st.LastToken != token:
		t.Errorf("last token %d, want the distlock holder's %d", st.LastToken, token)
	case len(st.Holders) != 2:
		t.Fatalf("holders %+v, want 2", st.Holders)
	}
	want := map[int]semHolderState{ // by pid: permits and token
		os.Getpid():            {Permits: 1, Token: lease.Token()},
		holder.cmd.Process.Pid: {Permits: 2, Token: token},
	}
	for _, h := range st.Holders {
		w, ok := want[h.PID]
		if !ok || h.Permits != w.Permits || h.Token != w.Token || h.Host != host || h.ID == "" ||
			h.TTLMillis <= 0 || h.TTLMillis > 30000 || time.Since(h.Since).Abs() > time.Hour {
			t.Errorf("holder %+v, want one of %+v (by pid), with a lease", h, want)
		}
		delete(want, h.PID)
	}

	r := run(t, "status", "--redis", srv.URL(), "sem")
	r.wantCode(t, 0)
	for _, w := range []string{
		"state:      locked\n", "kind:       semaphore\n", "capacity:   3\n", "in use:     3\n", "holders:    2\n",
		fmt.Sprintf("holder:     %s/%d (id ", host, os.Getpid()), fmt.Sprintf(", permits 1, ttl "), fmt.Sprintf(", token %d\n", lease.Token()),
		fmt.Sprintf("holder:     %s/%d (id ", host, holder.cmd.Process.Pid), fmt.Sprintf(", permits 2, ttl "), fmt.Sprintf(", token %d\n", token),
		fmt.Sprintf("last token: %d\n", token), "queued:     1, for 2 permits\n",
	} {
		if !strings.Contains(r.stdout, w) {
			t.Errorf("status does not contain %q:\n%s", w, r.stdout)
		}
	}
	for _, no := range []string{"waiters:", "mode:", "reader", "writer"} {
		if strings.Contains(r.stdout, no) {
			t.Errorf("status of a semaphore shows %q:\n%s", no, r.stdout)
		}
	}

	r = run(t, "list", "--redis", srv.URL())
	r.wantCode(t, 0)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 2 || strings.Join(strings.Fields(lines[0]), " ") != "NAME KIND HOLDER SINCE TTL TOKEN WAITERS" {
		t.Fatalf("list printed:\n%s", r.stdout)
	}
	fields := strings.Fields(lines[1])
	if len(fields) != 10 || fields[0] != "sem" || fields[1] != "semaphore" || fields[2] != "3/3" || fields[3] != "2" ||
		fields[4] != "holders" || fields[8] != itoa64(token) || fields[9] != "1" {
		t.Errorf("list line %q, want sem, semaphore 3/3, 2 holders, the higher token %d, 1 waiter", lines[1], token)
	}
	r = run(t, "list", "--redis", srv.URL(), "--json")
	r.wantCode(t, 0)
	var states []lockState
	if err := json.Unmarshal([]byte(r.stdout), &states); err != nil {
		t.Fatalf("list --json printed %q: %v", r.stdout, err)
	}
	if len(states) != 1 || states[0].Kind != "semaphore" || states[0].Capacity != 3 || len(states[0].Holders) != 2 || states[0].QueuedPermits != 2 {
		t.Errorf("list --json = %+v, want sem, 3 permits, 2 holders, 2 permits queued for", states)
	}

	touch(t, goFile)
	if err := lease.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, p := range []*proc{holder, waiter} {
		if code := p.wait(); code != 0 {
			t.Fatalf("%q: exit status %d; stderr:\n%s", p.cmd.Args[1:], code, p.errOut())
		}
	}
	st = statusJSON(t, srv, "sem")
	if st.Kind != "" || st.Locked || st.Capacity != 3 || st.InUse != 0 || len(st.Holders) != 0 || st.Queued != 0 || st.LastToken <= token {
		t.Errorf("status %+v, want free with 3 permits kept, a last token above %d (the waiter's)", st, token)
	}
	r = run(t, "status", "--redis", srv.URL(), "sem")
	r.wantCode(t, 0)
	for _, w := range []string{"state:      free\n", "capacity:   3 (kept in Redis for the next semaphore of this name)\n"} {
		if !strings.Contains(r.stdout, w) {
			t.Errorf("status does not contain %q:\n%s", w, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "kind:") {
		t.Errorf("status of a free semaphore shows a kind:\n%s", r.stdout)
	}
}

// TestUnlockForceSemaphore force-unlocks a semaphore whose 2 permits the
// test holds, with a distlock process queued: unlock says whom it took the
// permits from and that the waiter holds one now, the waiter's command
// runs, and both of the test's holders learn that they lost their
// permits.
func TestUnlockForceSemaphore(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := newClient(t, srv)
	forceUnlockHandsOver(t, srv, forceUnlockCase{
		name: "stuck-sem",
		held: [2]*distlock.Lease{
			holdPermits(t, c, "stuck-sem", 2, 1, distlock.WithTTL(time.Second)),
			holdPermits(t, c, "stuck-sem", 2, 1, distlock.WithTTL(time.Second)),
		},
		waiterFlags: []string{"--semaphore", "2"},
		awaitQueued: func() { awaitSemQueued(t, c, "stuck-sem", 1) },
		released:    "was held with 2/2 permits in use by 2 holders",
		item:        "%s token %d (1 permit)",
		now:         "now held with 1/2 permits in use by %s, token %d",
	})
}

// TestPermits checks the permits command: growing a full semaphore lets a
// waiting run --semaphore in at once; shrinking it takes nothing back
// and says so; on a name never used it sets the capacity that the next
// run --semaphore finds (and warns of); and on another kind of lock it
// changes nothing (status 78).
func TestPermits(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := newClient(t, srv)
	lease := holdPermits(t, c, "grow", 1, 1)
	dir := t.TempDir()
	out, goFile := filepath.Join(dir, "out"), filepath.Join(dir, "go")
	waiter := start(t, []string{"OUT=" + out, "GO=" + goFile},
		"run", "--redis", srv.URL(), "--semaphore", "1", "grow", "--", "sh", "-c", holdUntilGo)
	awaitSemQueued(t, c, "grow", 1)

	r := run(t, "permits", "--redis", srv.URL(), "grow", "2")
	r.wantCode(t, 0)
	if want := "permits of grow: 1 before, 2 now (2 in use, nothing queued)\n"; r.stdout != want {
		t.Errorf("permits printed %q, want %q", r.stdout, want)
	}
	awaitFile(t, out) // the waiter runs beside the test's holder
	info := inspectSem(t, c, "grow")
	if info.Capacity != 2 || len(info.Holders) != 2 || info.Queued != 0 {
		t.Errorf("semaphore %+v, want 2 holders of its 2 permits, nothing queued", info)
	}
	if err := lease.Context().Err(); err != nil {
		t.Errorf("the test's permit was lost: %v", context.Cause(lease.Context()))
	}

	r = run(t, "permits", "--redis", srv.URL(), "grow", "1")
	r.wantCode(t, 0)
	if want := "permits of grow: 2 before, 1 now (2 in use, nothing queued)\n" +
		"the holders keep the 2 permits in use, more than 1; new holders wait until enough are returned\n"; r.stdout != want {
		t.Errorf("permits printed %q, want %q", r.stdout, want)
	}
	if info := inspectSem(t, c, "grow"); info.Capacity != 1 || len(info.Holders) != 2 || lease.Context().Err() != nil {
		t.Errorf("semaphore %+v after shrinking, want capacity 1, both holders kept", info)
	}
	touch(t, goFile)
	if code := waiter.wait(); code != 0 {
		t.Fatalf("waiter: exit status %d; stderr:\n%s", code, waiter.errOut())
	}

	r = run(t, "permits", "--redis", srv.URL(), "fresh", "5")
	r.wantCode(t, 0)
	if want := "permits of fresh: none before (never used, or unused for an hour), 5 now (0 in use, nothing queued)\n"; r.stdout != want {
		t.Errorf("permits printed %q, want %q", r.stdout, want)
	}
	r = run(t, "run", "--redis", srv.URL(), "--semaphore", "2", "fresh", "--", "true")
	r.wantCode(t, 0)
	if want := "distlock run: warning: semaphore \"fresh\" has 5 permits in Redis, not 2 as --semaphore says: Redis's number is in force (see distlock permits --help)\n"; r.stderr != want {
		t.Errorf("stderr %q, want %q", r.stderr, want)
	}

	held := hold(t, c, "plain")
	r = run(t, "permits", "--redis", srv.URL(), "plain", "3")
	r.wantCode(t, exitWrongKind)
	if want := "distlock permits: lock \"plain\" is in use as a mutex (without --fair, --shared, --exclusive or --semaphore), not as a semaphore; its permits were not set\n"; r.stderr != want {
		t.Errorf("stderr %q, want %q", r.stderr, want)
	}
	if info := inspectSem(t, c, "plain"); info.Capacity != 0 || held.Context().Err() != nil {
		t.Errorf("semaphore %+v: permits on a plain lock set a capacity, or the lock was lost", info)
	}
}
