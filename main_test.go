package distlock_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/redisstore"
	"github.com/distlock/distlock/redistest"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

// The tests re-execute this test binary as helper processes: holders,
// waiters and workers in other processes, talking to the same redis-server.
const helperEnv = "DISTLOCK_TEST_HELPER"

func TestMain(m *testing.M) {
	quietRedisLogs()
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(runHelper(mode))
	}
	goleak.VerifyTestMain(m)
}

// newClient returns a distlock Client on srv, closed (with its go-redis
// client) when the test ends.
func newClient(t *testing.T, srv *redistest.Server, opts ...distlock.Option) (*distlock.Client, *redis.Client) {
	t.Helper()
	rdb := srv.Client(t)
	c := distlock.New(redisstore.New(rdb), append([]distlock.Option{distlock.WithLogger(nil)}, opts...)...)
	t.Cleanup(func() { c.Close() })
	return c, rdb
}

// newStoreClient is newClient with options for the Redis store.
func newStoreClient(t *testing.T, srv *redistest.Server, opts ...redisstore.Option) (*distlock.Client, *redis.Client) {
	t.Helper()
	rdb := srv.Client(t)
	c := distlock.New(redisstore.New(rdb, opts...), distlock.WithLogger(nil))
	t.Cleanup(func() { c.Close() })
	return c, rdb
}

// testCtx is a context that ends with the test, bounded so that a broken
// wake-up fails the test instead of hanging it.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// helper is a helper process, the lines it prints, and its standard input
// (commands for the modes that read them).
type helper struct {
	cmd   *exec.Cmd
	lines chan string
	done  chan error
	stdin io.WriteCloser
}

// startHelper runs this binary in helper mode with args; it is killed when
// the test ends.
func startHelper(t *testing.T, mode string, args ...string) *helper {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+mode, "DISTLOCK_HELPER_ARGS="+strings.Join(args, " "))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := &helper{cmd: cmd, lines: make(chan string, 1000), done: make(chan error, 1), stdin: in}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			h.lines <- sc.Text()
		}
		close(h.lines)
		h.done <- cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT) // a paused helper dies of SIGKILL too, but let it be
		_ = cmd.Process.Kill()
		<-h.done
	})
	return h
}

// send writes a command line to the helper.
func (h *helper) send(t *testing.T, line string) {
	t.Helper()
	if _, err := fmt.Fprintln(h.stdin, line); err != nil {
		t.Fatalf("helper: send %q: %v", line, err)
	}
}

// signal sends sig to the helper process.
func (h *helper) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := h.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("helper: %v: %v", sig, err)
	}
}

// expect waits for the helper's next line and checks its first word.
func (h *helper) expect(t *testing.T, word string) []string {
	t.Helper()
	select {
	case line, ok := <-h.lines:
		f := strings.Fields(line)
		if !ok || len(f) == 0 || f[0] != word {
			t.Fatalf("helper: want %q, got %q (open %v)", word, line, ok)
		}
		return f
	case <-time.After(30 * time.Second):
		t.Fatalf("helper: no %q within 30s", word)
	}
	return nil
}

// wait waits for the helper to exit and returns its error.
func (h *helper) wait(t *testing.T) error {
	t.Helper()
	for range h.lines {
	}
	select {
	case err := <-h.done:
		h.done <- err
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("helper did not exit within 30s")
	}
	return nil
}

// runHelper is the body of a helper process. Arguments: the Redis URL,
// then mode-specific ones.
func runHelper(mode string) int {
	args := strings.Fields(os.Getenv("DISTLOCK_HELPER_ARGS"))
	opt, err := redis.ParseURL(args[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	var mu sync.Mutex
	say := func(format string, a ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Printf(format+"\n", a...)
	}
	c := distlock.New(redisstore.New(rdb), distlock.WithLogger(nil), distlock.WithEventHandler(func(e distlock.Event) {
		if e.Kind == distlock.EventWaiting {
			say("waiting")
		}
	}))
	defer c.Close()
	ctx := context.Background()
	switch mode {
	case "hold": // URL NAME TTL: lock and hold until killed
		ttl, _ := time.ParseDuration(args[2])
		l, err := c.Mutex(args[1], distlock.WithTTL(ttl)).Lock(ctx)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		say("locked %d", l.Token())
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGTERM)
		<-sig // until killed
		return 0
	case "wait": // URL NAME TIMEOUT: wait for the lock, take it, release it
		timeout, _ := time.ParseDuration(args[2])
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		l, err := c.Mutex(args[1]).Lock(ctx)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		say("acquired %d", l.Token())
		if err := l.Unlock(ctx); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return 0
	case "rmw": // URL NAME COUNTER GOROUTINES ROUNDS: increment COUNTER non-atomically under the lock
		return rmw(ctx, c, rdb, args[1], args[2], atoi(args[3]), atoi(args[4]))
	case "fair-rounds": // URL NAME COUNTER ROUNDS: see fairRounds
		return fairRounds(ctx, rdb, args[1], args[2], atoi(args[3]))
	case "once-per": // URL NAME PERIOD DURATION: see oncePer
		period, _ := time.ParseDuration(args[2])
		duration, _ := time.ParseDuration(args[3])
		return oncePer(ctx, c, args[1], period, duration)
	case "once-stuck": // URL KEY: see onceStuck
		return onceStuck(ctx, c, args[1])
	case "candidate": // URL NAME VALUE: see candidate
		return candidate(ctx, c, args[1], args[2], say)
	case "multi-rounds": // URL NAMES ROUNDS: see multiRounds
		return multiRounds(ctx, c, rdb, args[1], atoi(args[2]))
	case "sem-workers": // URL NAME PERMITS GOROUTINES: see semWorkers
		return semWorkers(ctx, rdb, args[1], atoi(args[2]), atoi(args[3]))
	case "rw-readers": // URL NAME GOROUTINES: see rwReaders
		return rwReaders(ctx, rdb, args[1], atoi(args[2]))
	case "rw-hold": // URL NAME SIDE TTL: see rwHold
		ttl, _ := time.ParseDuration(args[3])
		return rwHold(ctx, c, args[1], args[2], ttl, say)
	case "fair-hold": // URL NAME TTL QUEUE-TIMEOUT: see fairHold
		ttl, _ := time.ParseDuration(args[2])
		queue, _ := time.ParseDuration(args[3])
		return fairHold(ctx, c, args[1], ttl, queue, say)
	}
	fmt.Fprintln(os.Stderr, "unknown helper mode", mode)
	return 2
}

func atoi(s string) int {
	var n int
	fmt.Sscan(s, &n)
	return n
}

// rmw runs goroutines that each increment counter rounds times with a
// read-modify-write that is only correct under mutual exclusion.
func rmw(ctx context.Context, c *distlock.Client, rdb *redis.Client, name, counter string, goroutines, rounds int) int {
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := c.Mutex(name, distlock.WithTTL(5*time.Second))
			for i := 0; i < rounds; i++ {
				l, err := m.Lock(ctx)
				if err != nil {
					errs <- err
					return
				}
				n, err := rdb.Get(ctx, counter).Int()
				if err != nil && err != redis.Nil {
					errs <- err
					return
				}
				if err := rdb.Set(ctx, counter, n+1, 0).Err(); err != nil {
					errs <- err
					return
				}
				if err := l.Unlock(ctx); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// quietRedisLogs drops go-redis's own log lines (every failed dial, every
// Sentinel switch), which the fault tests cause by the hundred and which
// buried a failure's own lines, unless DISTLOCK_TEST_REDIS_LOG is set.
func quietRedisLogs() {
	if os.Getenv("DISTLOCK_TEST_REDIS_LOG") == "" {
		redis.SetLogger(discardLogs{})
	}
}

type discardLogs struct{}

func (discardLogs) Printf(context.Context, string, ...any) {}
