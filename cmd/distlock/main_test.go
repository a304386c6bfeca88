//go:build unix

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/etcdtest"
	"github.com/distlock/distlock/redisstore"
	"github.com/distlock/distlock/redistest"
)

// The tests build the distlock binary once and drive it as a user would,
// against redis-server processes started by redistest.

// testVersion is the version the test binary is built with.
const testVersion = "v0.0.0-test"

// testTimeout bounds every wait of the tests.
const testTimeout = 30 * time.Second

var (
	// binary is the path of the distlock binary under test.
	binary string
	// raceEnabled is set when the tests run with the race detector; the
	// binary is then built with it too.
	raceEnabled bool
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "distlock-cli-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "distlock")
	if err := build(binary); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	if code == 0 {
		if err := etcdtest.FindLeaks(leakGrace); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: goroutines still running %v after the tests: %v\n", leakGrace, err)
			code = 1
		}
	}
	os.Exit(code)
}

// leakGrace is how long TestMain lets goroutines end before calling them
// leaked: a stopped etcd member (etcdtest) can leave a peer connection's
// goroutine behind for up to its 5 s read deadline (see etcdtest's
// TestMain).
const leakGrace = 10 * time.Second

// build builds the command into out.
func build(out string) error {
	gotool, err := exec.LookPath("go") // go test puts GOROOT/bin first in PATH
	if err != nil {
		return fmt.Errorf("no go tool to build the command: %v", err)
	}
	args := []string{"build", "-o", out, "-ldflags", "-X main.version=" + testVersion}
	if raceEnabled {
		args = append(args, "-race")
	}
	cmd := exec.Command(gotool, append(args, ".")...)
	if msg, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build: %v\n%s", err, msg)
	}
	return nil
}

// A proc is a distlock process started by a test.
type proc struct {
	t              *testing.T
	cmd            *exec.Cmd
	stdout, stderr string // files
	done           chan struct{}
}

// start starts distlock with args, and the environment of the test with
// the variables in env added and $REDIS_URL and $DISTLOCK_STORE removed. The process is
// killed when the test ends.
func start(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	dir := t.TempDir()
	p := &proc{t: t, stdout: filepath.Join(dir, "stdout"), stderr: filepath.Join(dir, "stderr"), done: make(chan struct{})}
	stdout, err := os.Create(p.stdout)
	if err != nil {
		t.Fatal(err)
	}
	defer stdout.Close()
	stderr, err := os.Create(p.stderr)
	if err != nil {
		t.Fatal(err)
	}
	defer stderr.Close()
	p.cmd = exec.Command(binary, args...)
	p.cmd.Env = append(testEnv(), env...)
	p.cmd.Stdout, p.cmd.Stderr = stdout, stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
	})
	return p
}

// testEnv is the environment of the test without $REDIS_URL and
// $DISTLOCK_STORE, so that nothing reaches a store the test did not
// start. A binary built with the race detector is told not to linger for
// a second at exit.
func testEnv() []string {
	env := []string{strings.TrimSpace("GORACE=" + os.Getenv("GORACE") + " atexit_sleep_ms=0")}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "REDIS_URL=") && !strings.HasPrefix(kv, storeEnv+"=") && !strings.HasPrefix(kv, "GORACE=") {
			env = append(env, kv)
		}
	}
	return env
}

// wait waits for the process to exit and returns its exit status (-1 if
// it was killed by a signal).
func (p *proc) wait() int {
	p.t.Helper()
	select {
	case <-p.done:
	case <-time.After(testTimeout):
		// SIGABRT (which distlock does not handle): the Go runtime writes
		// every goroutine's stack to stderr, which says where it hangs.
		_ = p.cmd.Process.Signal(syscall.SIGABRT)
		select {
		case <-p.done:
		case <-time.After(5 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		p.t.Fatalf("distlock %q did not exit within %v; stderr (with its goroutines):\n%s", p.cmd.Args[1:], testTimeout, p.errOut())
	}
	return p.cmd.ProcessState.ExitCode()
}

func (p *proc) out() string    { return readFile(p.t, p.stdout) }
func (p *proc) errOut() string { return readFile(p.t, p.stderr) }

// A result is how a finished distlock process went.
type result struct {
	code           int
	stdout, stderr string
}

// distlockEnv runs distlock with args and extra environment, and returns
// how it went.
func distlockEnv(t *testing.T, env []string, args ...string) result {
	t.Helper()
	p := start(t, env, args...)
	code := p.wait()
	return result{code, p.out(), p.errOut()}
}

// run runs distlock with args.
func run(t *testing.T, args ...string) result {
	t.Helper()
	return distlockEnv(t, nil, args...)
}

// wantCode fails the test unless r has exit status code.
func (r result) wantCode(t *testing.T, code int) {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit status %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, code, r.stdout, r.stderr)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// awaitFile waits until path exists. Files made by the commands that
// distlock runs are the tests' events; there is nothing to block on, so
// this polls, within testTimeout.
func awaitFile(t *testing.T, path string) {
	t.Helper()
	eventually(t, "file "+path+" to appear", func() bool {
		_, err := os.Stat(path)
		return err == nil
	})
}

// eventually polls cond until it holds, failing the test after
// testTimeout. It is for states that have no event to wait on.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// newClient returns a distlock client on srv, closed when the test ends.
func newClient(t *testing.T, srv *redistest.Server) *distlock.Client {
	t.Helper()
	c := distlock.New(redisstore.New(srv.Client(t)), distlock.WithLogger(nil))
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// hold acquires the lock name for the test, and releases it when the test
// ends.
func hold(t *testing.T, c *distlock.Client, name string, opts ...distlock.MutexOption) *distlock.Lease {
	t.Helper()
	lease, err := c.Mutex(name, opts...).TryLock(context.Background())
	if err != nil {
		t.Fatalf("lock %q: %v", name, err)
	}
	t.Cleanup(func() { _ = lease.Unlock(context.Background()) })
	return lease
}

// inspect returns the state of the lock name.
func inspect(t *testing.T, c *distlock.Client, name string) distlock.LockInfo {
	t.Helper()
	info, err := c.Mutex(name).Inspect(context.Background())
	if err != nil {
		t.Fatalf("inspect %q: %v", name, err)
	}
	return info
}

// awaitWaiters waits until n processes wait for the lock name.
func awaitWaiters(t *testing.T, c *distlock.Client, name string, n int) {
	t.Helper()
	eventually(t, fmt.Sprintf("%d waiters for %q", n, name), func() bool {
		return inspect(t, c, name).Waiters == n
	})
}

// awaitGone waits until the process pid has exited (a zombie counts as
// exited: its parent may be slow to reap it).
func awaitGone(t *testing.T, pid int) {
	t.Helper()
	eventually(t, fmt.Sprintf("process %d to exit", pid), func() bool {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			return true
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return false
		}
		// The state follows the command name in parentheses.
		i := bytes.LastIndexByte(stat, ')')
		return i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z'
	})
}

// wantOneLine fails the test unless s is exactly one line, with no stack
// trace.
func wantOneLine(t *testing.T, s string) {
	t.Helper()
	if strings.Count(s, "\n") != 1 || !strings.HasSuffix(s, "\n") {
		t.Errorf("stderr is not one line: %q", s)
	}
	if strings.Contains(s, "goroutine ") || strings.Contains(s, "panic") {
		t.Errorf("stderr has a stack trace: %q", s)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
