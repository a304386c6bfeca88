//go:build unix

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/redisstore"
	"github.com/distlock/distlock/redistest"
)

// TestRunNoOverlap runs commands under the same lock from several distlock
// processes at once. Each command appends a start and an end record, with
// its fencing token, to one file, and marks itself busy with mkdir, which
// fails if another command is busy: the records must come in start/end
// pairs, with increasing tokens, and no command may find another busy.
func TestRunNoOverlap(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	dir := t.TempDir()
	logFile := filepath.Join(dir, "log")
	env := []string{"LOG=" + logFile, "BUSY=" + filepath.Join(dir, "busy")}
	const script = `mkdir "$BUSY" || echo overlap >>"$LOG"
echo "start $DISTLOCK_TOKEN" >>"$LOG"
sleep 0.05
echo "end $DISTLOCK_TOKEN" >>"$LOG"
rmdir "$BUSY"`

	const runners, runs = 3, 3
	var wg sync.WaitGroup
	results := make(chan result, runners*runs)
	for range runners {
		wg.Go(func() {
			for range runs {
				p := start(t, env, "run", "--redis", srv.URL(), "overlap", "--", "sh", "-c", script)
				code := p.wait()
				results <- result{code, p.out(), p.errOut()}
			}
		})
	}
	wg.Wait()
	close(results)
	for r := range results {
		r.wantCode(t, 0)
	}

	lines := strings.Split(strings.TrimSpace(readFile(t, logFile)), "\n")
	if len(lines) != 2*runners*runs {
		t.Fatalf("got %d records, want %d:\n%s", len(lines), 2*runners*runs, strings.Join(lines, "\n"))
	}
	var last uint64
	for i := 0; i < len(lines); i += 2 {
		var start, end uint64
		if _, err := fmt.Sscanf(lines[i], "start %d", &start); err != nil {
			t.Fatalf("record %d = %q, want a start: the commands overlapped:\n%s", i, lines[i], strings.Join(lines, "\n"))
		}
		if _, err := fmt.Sscanf(lines[i+1], "end %d", &end); err != nil || end != start {
			t.Fatalf("record %d = %q, want the end of token %d: the commands overlapped:\n%s", i+1, lines[i+1], start, strings.Join(lines, "\n"))
		}
		if start <= last {
			t.Errorf("token %d after token %d: tokens must increase", start, last)
		}
		last = start
	}
}

// TestRunWaitZeroNotAcquired checks that run with --wait 0 or a short
// --wait exits with status 75, without running the command, and says who
// holds the lock, while the lock is held.
func TestRunWaitZeroNotAcquired(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := newClient(t, srv)
	hold(t, c, "busy")
	host, _ := os.Hostname()
	holder := fmt.Sprintf("%s/%d", host, os.Getpid())

	for _, wait := range []string{"0", "300ms"} {
		t.Run("wait="+wait, func(t *testing.T) {
			ran := filepath.Join(t.TempDir(), "ran")
			r := run(t, "run", "--redis", srv.URL(), "--wait", wait, "busy", "--", "touch", ran)
			r.wantCode(t, exitNotAcquired)
			if _, err := os.Stat(ran); err == nil {
				t.Error("the command ran without the lock")
			}
			last := r.stderr[strings.LastIndex(strings.TrimSuffix(r.stderr, "\n"), "\n")+1:]
			wantOneLine(t, last)
			for _, want := range []string{`"busy"`, "not acquired", "held by " + holder, "ttl "} {
				if !strings.Contains(last, want) {
					t.Errorf("stderr %q does not contain %q", last, want)
				}
			}
			if wait != "0" && !strings.Contains(r.stderr, "waiting for busy") {
				t.Errorf("stderr %q shows no progress while waiting", r.stderr)
			}
		})
	}
	t.Run("quiet", func(t *testing.T) {
		r := run(t, "run", "--redis", srv.URL(), "--wait", "0", "--quiet", "busy", "--", "true")
		r.wantCode(t, exitNotAcquired)
		if r.stderr != "" {
			t.Errorf("--quiet printed %q", r.stderr)
		}
	})
}

// TestRunKilledHolderFreesLock kills distlock with SIGKILL while its
// command runs: the lock is free once its lease has run out, and (on
// Linux) the command is killed too.
func TestRunKilledHolderFreesLock(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := newClient(t, srv)
	ready := filepath.Join(t.TempDir(), "ready")
	p := start(t, []string{"READY=" + ready}, "run", "--redis", srv.URL(), "--ttl", "1s", "victim", "--",
		"sh", "-c", `echo $$ >"$READY.tmp" && mv "$READY.tmp" "$READY" && exec sleep 60`)
	awaitFile(t, ready)
	child, err := strconv.Atoi(strings.TrimSpace(readFile(t, ready)))
	if err != nil {
		t.Fatal(err)
	}
	info := inspect(t, c, "victim")
	if !info.Locked || info.Holder.PID != p.cmd.Process.Pid {
		t.Fatalf("lock state %+v, want held by distlock (pid %d)", info, p.cmd.Process.Pid)
	}

	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	p.wait()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	lease, err := c.Mutex("victim").Lock(ctx)
	if err != nil {
		t.Fatalf("lock after the holder was killed: %v", err)
	}
	if lease.Token() <= info.Token {
		t.Errorf("token %d after token %d", lease.Token(), info.Token)
	}
	_ = lease.Unlock(ctx)
	if runtime.GOOS == "linux" { // elsewhere the command outlives distlock
		awaitGone(t, child)
	}
}

// TestRunLockLostStopsCommand deletes the lock behind distlock's back
// while its command runs: distlock notices at the next renewal, stops the
// command (and what the command started) and exits with status 70.
func TestRunLockLostStopsCommand(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	tests := []struct {
		name, script string
	}{
		{"obeys SIGTERM", `touch "$READY"; exec sleep 60`},
		{"ignores SIGTERM", `trap '' TERM; touch "$READY"; while :; do sleep 0.05; done`},
		{"started a process", `sleep 60 & echo $! >"$GRANDCHILD"; touch "$READY"; wait`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			name := "lost-" + strings.ReplaceAll(tt.name, " ", "-")
			ready, grandchild := filepath.Join(dir, "ready"), filepath.Join(dir, "grandchild")
			p := start(t, []string{"READY=" + ready, "GRANDCHILD=" + grandchild},
				"run", "--redis", srv.URL(), "--ttl", "600ms", "--kill-grace", "200ms", name, "--", "sh", "-c", tt.script)
			awaitFile(t, ready)
			if err := rdb.Del(context.Background(), redisstore.DefaultPrefix+"{"+name+"}").Err(); err != nil {
				t.Fatal(err)
			}
			if code := p.wait(); code != exitLockLost {
				t.Fatalf("exit status %d, want %d; stderr:\n%s", code, exitLockLost, p.errOut())
			}
			stderr := p.errOut()
			wantOneLine(t, stderr)
			if !strings.Contains(stderr, fmt.Sprintf("lost lock %q", name)) {
				t.Errorf("stderr %q does not say the lock was lost", stderr)
			}
			if b, err := os.ReadFile(grandchild); err == nil {
				pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
				if err != nil {
					t.Fatal(err)
				}
				awaitGone(t, pid)
			}
		})
	}
}

// TestRunExitStatus checks that run exits with the status of its command,
// and with 128+N when the command is killed by signal N.
func TestRunExitStatus(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := newClient(t, srv)
	tests := []struct {
		script string
		want   int
	}{
		{"exit 0", 0},
		{"exit 3", 3},
		{"exit 42", 42},
		{"kill -TERM $$", exitSignal + int(syscall.SIGTERM)},
		{"kill -KILL $$", exitSignal + int(syscall.SIGKILL)},
	}
	for _, tt := range tests {
		r := run(t, "run", "--redis", srv.URL(), "status", "--", "sh", "-c", tt.script)
		if r.code != tt.want {
			t.Errorf("command %q: exit status %d, want %d; stderr:\n%s", tt.script, r.code, tt.want, r.stderr)
		}
		if r.stderr != "" {
			t.Errorf("command %q: stderr %q, want nothing", tt.script, r.stderr)
		}
		if info := inspect(t, c, "status"); info.Locked {
			t.Errorf("command %q: lock still held after distlock exited: %+v", tt.script, info)
		}
	}
}

// TestRunTokenIncreases checks the environment of the command: its
// DISTLOCK_TOKEN strictly increases from one run to the next.
func TestRunTokenIncreases(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := newClient(t, srv)
	var last uint64
	for i := range 5 {
		r := run(t, "run", "--redis", srv.URL(), "tokens", "--", "sh", "-c", `echo "$DISTLOCK_NAME $DISTLOCK_TOKEN"`)
		r.wantCode(t, 0)
		var name string
		var token uint64
		if _, err := fmt.Sscanf(r.stdout, "%s %d", &name, &token); err != nil {
			t.Fatalf("run %d printed %q: %v", i, r.stdout, err)
		}
		if name != "tokens" {
			t.Errorf("DISTLOCK_NAME = %q, want %q", name, "tokens")
		}
		if token <= last {
			t.Errorf("run %d: DISTLOCK_TOKEN %d after %d, want it to increase", i, token, last)
		}
		last = token
	}
	if got := inspect(t, c, "tokens").LastToken; got != last {
		t.Errorf("last token of the lock is %d, want the last DISTLOCK_TOKEN %d", got, last)
	}
}

// TestRunForwardsSignals sends signals to distlock while its command runs:
// the command gets them, and the lock is released once it has exited.
func TestRunForwardsSignals(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := newClient(t, srv)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGUSR1} {
		t.Run(sig.String(), func(t *testing.T) {
			dir := t.TempDir()
			ready, got := filepath.Join(dir, "ready"), filepath.Join(dir, "got")
			name := "signals-" + strconv.Itoa(int(sig))
			script := fmt.Sprintf(`trap 'echo caught >"$GOT"; exit 9' %d; touch "$READY"; while :; do sleep 0.05; done`, sig)
			p := start(t, []string{"READY=" + ready, "GOT=" + got}, "run", "--redis", srv.URL(), name, "--", "sh", "-c", script)
			awaitFile(t, ready)
			if err := p.cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			if code := p.wait(); code != 9 {
				t.Fatalf("exit status %d, want the command's 9; stderr:\n%s", code, p.errOut())
			}
			if readFile(t, got) != "caught\n" {
				t.Error("the command did not catch the signal")
			}
			if info := inspect(t, c, name); info.Locked {
				t.Errorf("lock still held after distlock exited: %+v", info)
			}
		})
	}
}

// TestRunInterruptedWhileWaiting interrupts distlock while it waits for
// the lock: it exits with 128+SIGINT and takes nothing.
func TestRunInterruptedWhileWaiting(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := newClient(t, srv)
	lease := hold(t, c, "queue", distlock.WithTTL(time.Second))
	ran := filepath.Join(t.TempDir(), "ran")
	p := start(t, nil, "run", "--redis", srv.URL(), "queue", "--", "touch", ran)
	awaitWaiters(t, c, "queue", 1)
	if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(); code != exitSignal+int(syscall.SIGINT) {
		t.Fatalf("exit status %d, want %d; stderr:\n%s", code, exitSignal+int(syscall.SIGINT), p.errOut())
	}
	if !strings.Contains(p.errOut(), `interrupted by SIGINT while waiting for lock "queue"`) {
		t.Errorf("stderr %q does not say distlock was interrupted by SIGINT while waiting", p.errOut())
	}
	if _, err := os.Stat(ran); err == nil {
		t.Error("the command ran")
	}
	if err := lease.Unlock(context.Background()); err != nil {
		t.Fatalf("the test's lease: %v", err)
	}
	if info := inspect(t, c, "queue"); info.Locked {
		t.Errorf("lock held after the interrupted distlock exited: %+v", info)
	}
}

// TestRunRedisDiesStopsCommand kills Redis while distlock's command runs:
// the lease can no longer be renewed, so distlock stops the command before
// the lease could have expired, and exits with status 70.
func TestRunRedisDiesStopsCommand(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ready := filepath.Join(t.TempDir(), "ready")
	p := start(t, []string{"READY=" + ready}, "run", "--redis", srv.URL(), "--ttl", "600ms", "doomed", "--",
		"sh", "-c", `touch "$READY"; exec sleep 60`)
	awaitFile(t, ready)
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(); code != exitLockLost {
		t.Fatalf("exit status %d, want %d; stderr:\n%s", code, exitLockLost, p.errOut())
	}
	wantOneLine(t, p.errOut())
}

// TestRunScriptWithoutShebang runs an executable script without a "#!"
// line: it runs with sh, as execvp(3) and flock(1) run it.
func TestRunScriptWithoutShebang(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	script := filepath.Join(t.TempDir(), "script")
	if err := os.WriteFile(script, []byte("echo \"ran $1 as $DISTLOCK_NAME\"\nexit 7\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	r := run(t, "run", "--redis", srv.URL(), "plain-script", "--", script, "arg")
	r.wantCode(t, 7)
	if r.stdout != "ran arg as plain-script\n" {
		t.Errorf("stdout %q, want the script's output", r.stdout)
	}
}

// TestRunDashName runs a command under a lock whose name starts with
// "-": it comes after a first "--", as with status.
func TestRunDashName(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	r := run(t, "run", "--redis", srv.URL(), "--wait", "0", "--", "-dash", "--", "sh", "-c", `echo "$DISTLOCK_NAME"`)
	r.wantCode(t, 0)
	if r.stdout != "-dash\n" {
		t.Errorf("DISTLOCK_NAME = %q, want -dash", r.stdout)
	}
	run(t, "status", "--redis", srv.URL(), "--", "-dash").wantCode(t, 0)
}
