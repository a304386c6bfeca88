package redistest

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// client returns a client for s that does not retry, so that each command
// makes exactly one attempt and one dial.
func client(t *testing.T, s *Server, readTimeout time.Duration) *redis.Client {
	t.Helper()
	opt := s.Options()
	opt.MaxRetries = -1
	opt.DialerRetries = 1
	opt.ReadTimeout = readTimeout
	c := redis.NewClient(opt)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func ping(c *redis.Client) error {
	return c.Ping(context.Background()).Err()
}

// serverPID asks the server for its process id.
func serverPID(t *testing.T, c *redis.Client) int {
	t.Helper()
	info, err := c.Info(context.Background(), "server").Result()
	if err != nil {
		t.Fatalf("INFO server: %v", err)
	}
	pid, ok := infoPID(info)
	if !ok {
		t.Fatalf("no process_id in INFO reply %q", info)
	}
	return pid
}

func TestStartPing(t *testing.T) {
	s := Start(t)
	if got, want := s.Addr(), "127.0.0.1:"+strconv.Itoa(s.Port()); got != want {
		t.Errorf("Addr() = %q, want %q", got, want)
	}
	if got, want := s.URL(), "redis://"+s.Addr()+"/0"; got != want {
		t.Errorf("URL() = %q, want %q", got, want)
	}
	if s.Port() == 6379 {
		t.Errorf("Port() = 6379, want a free port")
	}
	c := s.Client(t)
	if err := ping(c); err != nil {
		t.Fatalf("PING: %v", err)
	}
	if got, want := serverPID(t, c), s.PID(); got != want {
		t.Errorf("server reports pid %d, PID() = %d", got, want)
	}
	if filepath.Dir(s.LogPath()) != s.Dir() {
		t.Errorf("LogPath() = %q, not in Dir() = %q", s.LogPath(), s.Dir())
	}
	if _, err := os.Stat(s.LogPath()); err != nil {
		t.Errorf("log file: %v", err)
	}
	save, err := c.ConfigGet(context.Background(), "save").Result()
	if err != nil {
		t.Fatalf("CONFIG GET save: %v", err)
	}
	if save["save"] != "" {
		t.Errorf("save = %q, want persistence disabled", save["save"])
	}
}

func TestWithArgs(t *testing.T) {
	s := Start(t, WithArgs("--maxmemory", "1mb"))
	got, err := s.Client(t).ConfigGet(context.Background(), "maxmemory").Result()
	if err != nil {
		t.Fatalf("CONFIG GET maxmemory: %v", err)
	}
	if got["maxmemory"] != "1048576" {
		t.Errorf("maxmemory = %q, want 1048576", got["maxmemory"])
	}
}

func TestPauseResume(t *testing.T) {
	s := Start(t)
	c := client(t, s, 200*time.Millisecond)
	if err := ping(c); err != nil {
		t.Fatalf("PING before Pause: %v", err)
	}

	if err := s.Pause(); err != nil {
		t.Fatalf("Pause: %v", err)
	}
	err := ping(c)
	var nerr net.Error
	if !errors.As(err, &nerr) || !nerr.Timeout() {
		t.Fatalf("PING while paused: got %v, want a timeout error", err)
	}

	if err := s.Resume(); err != nil {
		t.Fatalf("Resume: %v", err)
	}
	if err := ping(c); err != nil {
		t.Fatalf("PING after Resume: %v", err)
	}
}

func TestKillRestart(t *testing.T) {
	s := Start(t)
	c := client(t, s, 0)
	c.Set(context.Background(), "k", "v", 0)
	addr, pid := s.Addr(), s.PID()

	if err := s.Kill(); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	if err := ping(c); err == nil {
		t.Fatal("PING after Kill succeeded, want an error")
	}
	if got := s.PID(); got != 0 {
		t.Errorf("PID() after Kill = %d, want 0", got)
	}
	if err := s.Pause(); !errors.Is(err, ErrNotRunning) {
		t.Errorf("Pause after Kill: got %v, want ErrNotRunning", err)
	}
	if err := s.Kill(); err != nil {
		t.Errorf("second Kill: %v", err)
	}
	// The port stays reserved while the server is down: no other server
	// (nor anything else) can listen there and answer its clients.
	if l, err := net.Listen("tcp", addr); err == nil {
		l.Close()
		t.Fatalf("listening on the killed server's port %s succeeded, want it held", addr)
	}
	if conn, err := net.Dial("tcp", addr); err == nil {
		conn.Close()
		t.Fatalf("a connection to the killed server's port %s was accepted", addr)
	}

	if err := s.Restart(); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	if got := s.Addr(); got != addr {
		t.Errorf("Addr() after Restart = %q, want %q", got, addr)
	}
	newPID := s.PID()
	if newPID == pid || newPID == 0 {
		t.Errorf("PID() after Restart = %d, want a new pid (old %d)", newPID, pid)
	}
	if err := ping(c); err != nil {
		t.Fatalf("PING after Restart: %v", err)
	}
	if got := serverPID(t, c); got != newPID {
		t.Errorf("server reports pid %d, PID() = %d", got, newPID)
	}
	if err := c.Get(context.Background(), "k").Err(); !errors.Is(err, redis.Nil) {
		t.Errorf("GET k after Restart: got %v, want redis.Nil (no data kept)", err)
	}
}

func TestRestartRunningAndPaused(t *testing.T) {
	s := Start(t)
	c := client(t, s, 0)
	pid := s.PID()
	if err := s.Restart(); err != nil {
		t.Fatalf("Restart of running server: %v", err)
	}
	if err := s.Pause(); err != nil {
		t.Fatalf("Pause: %v", err)
	}
	if err := s.Restart(); err != nil {
		t.Fatalf("Restart of paused server: %v", err)
	}
	if s.PID() == pid {
		t.Errorf("PID() unchanged after Restart")
	}
	if err := ping(c); err != nil {
		t.Fatalf("PING after Restart: %v", err)
	}
}

func TestPassword(t *testing.T) {
	const pw = "s3cret/p@ss"
	s := Start(t, WithPassword(pw))

	anon := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = anon.Close() })
	if err := ping(anon); err == nil || !strings.Contains(err.Error(), "NOAUTH") {
		t.Errorf("PING without password: got %v, want NOAUTH error", err)
	}

	if err := ping(s.Client(t)); err != nil {
		t.Errorf("PING with Client(): %v", err)
	}

	opt, err := redis.ParseURL(s.URL())
	if err != nil {
		t.Fatalf("ParseURL(%q): %v", s.URL(), err)
	}
	byURL := redis.NewClient(opt)
	t.Cleanup(func() { _ = byURL.Close() })
	if err := ping(byURL); err != nil {
		t.Errorf("PING with URL(): %v", err)
	}

	if err := s.Kill(); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	if err := s.Restart(); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	if err := ping(anon); err == nil {
		t.Errorf("PING without password after Restart succeeded, want NOAUTH error")
	}
}

func TestStopIdempotent(t *testing.T) {
	s, err := NewServer()
	if err != nil {
		t.Fatal(err)
	}
	c := client(t, s, 0)
	if err := s.Pause(); err != nil {
		t.Fatalf("Pause: %v", err)
	}
	if err := s.Stop(); err != nil {
		t.Fatalf("Stop of paused server: %v", err)
	}
	if err := s.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	if err := ping(c); err == nil {
		t.Error("PING after Stop succeeded, want an error")
	}
	if got := s.PID(); got != 0 {
		t.Errorf("PID() after Stop = %d, want 0", got)
	}
	if _, err := os.Stat(s.Dir()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Dir() after Stop: stat error %v, want not exist", err)
	}
	if err := s.Restart(); !errors.Is(err, ErrStopped) {
		t.Errorf("Restart after Stop: got %v, want ErrStopped", err)
	}
	if err := s.Resume(); !errors.Is(err, ErrNotRunning) {
		t.Errorf("Resume after Stop: got %v, want ErrNotRunning", err)
	}
}

func TestStartErrorIncludesOutput(t *testing.T) {
	s, err := NewServer(WithArgs("--no-such-directive", "x"))
	if err == nil {
		s.Stop()
		t.Fatal("NewServer with a bad argument succeeded")
	}
	if !strings.Contains(err.Error(), "no-such-directive") {
		t.Errorf("error does not include redis-server output: %v", err)
	}
}

// TestPortCollision checks that NewServer moves on to another port when
// the first one it picks is taken, whether by a non-Redis listener or by
// another Redis server, and leaves the other server alone.
func TestPortCollision(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	other := Start(t)
	otherPID := other.PID()

	for _, busy := range []int{l.Addr().(*net.TCPAddr).Port, other.Port()} {
		calls := 0
		pick := func(c *config) {
			c.pickPort = func() (int, error) {
				calls++
				if calls == 1 {
					return busy, nil
				}
				return freePort()
			}
		}
		s := Start(t, pick)
		if s.Port() == busy {
			t.Errorf("server started on busy port %d", busy)
		}
		if calls < 2 {
			t.Errorf("picked %d ports, want at least 2", calls)
		}
		if err := ping(s.Client(t)); err != nil {
			t.Errorf("PING: %v", err)
		}
	}
	if got := serverPID(t, other.Client(t)); got != otherPID {
		t.Errorf("other server now has pid %d, want %d", got, otherPID)
	}
}

func TestConcurrentUse(t *testing.T) {
	s := Start(t)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			_ = s.PID()
			_ = s.Options()
			if err := s.Pause(); err != nil && !errors.Is(err, ErrNotRunning) {
				t.Errorf("Pause: %v", err)
			}
			if err := s.Resume(); err != nil && !errors.Is(err, ErrNotRunning) {
				t.Errorf("Resume: %v", err)
			}
		})
	}
	wg.Go(func() {
		if err := s.Restart(); err != nil {
			t.Errorf("Restart: %v", err)
		}
	})
	wg.Wait()
	if err := s.Resume(); err != nil {
		t.Fatalf("Resume: %v", err)
	}
	if err := ping(s.Client(t)); err != nil {
		t.Fatalf("PING: %v", err)
	}
}

func TestBinary(t *testing.T) {
	t.Run("env", func(t *testing.T) {
		missing := filepath.Join(t.TempDir(), "no-redis-server")
		t.Setenv(EnvServer, missing)
		_, err := Binary()
		if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), missing) {
			t.Errorf("Binary() error = %v, want ErrNotFound naming %s", err, missing)
		}
	})
	t.Run("path", func(t *testing.T) {
		t.Setenv(EnvServer, "")
		t.Setenv("PATH", t.TempDir())
		_, err := Binary()
		if err == nil || err.Error() != "redis-server not found: install it with `sudo apt-get install -y redis-server` (Debian/Ubuntu) or set DISTLOCK_REDIS_SERVER" {
			t.Errorf("Binary() error = %v", err)
		}
		if _, err := NewServer(); !errors.Is(err, ErrNotFound) {
			t.Errorf("NewServer() error = %v, want ErrNotFound", err)
		}
	})
}

// A closed address refuses connections, and no server can take its port
// while the test runs.
func TestClosedAddr(t *testing.T) {
	addr := ClosedAddr(t)
	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
		t.Fatalf("a connection to the closed address %s was accepted", addr)
	}
	if l, err := net.Listen("tcp", addr); err == nil {
		l.Close()
		t.Fatalf("a server could listen on the closed address %s", addr)
	}
}
