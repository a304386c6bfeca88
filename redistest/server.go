package redistest

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// startAttempts is how many ports NewServer tries before giving up when
// the chosen port turns out to be taken.
const startAttempts = 5

// A Server is a redis-server process started by this package, listening on
// 127.0.0.1 at a port that stays the same for the Server's lifetime, with
// persistence disabled and its own temporary working directory.
//
// A Server is safe for concurrent use by multiple goroutines. Its methods
// only ever signal the process this package started for it.
type Server struct {
	bin     string
	cfg     config
	dir     string
	logPath string
	port    int

	mu      sync.Mutex
	proc    *process // nil when not running
	paused  bool
	stopped bool
	unhold  func() // gives back the port held while the server is down (Kill), or nil
}

// ErrStopped is returned by methods that need a server that has not been
// stopped, such as [Server.Restart], after [Server.Stop].
var ErrStopped = errors.New("redistest: server stopped")

// ErrNotRunning is returned by [Server.Pause] and [Server.Resume] when the
// server process is not running, because it was killed or stopped or a
// restart failed.
var ErrNotRunning = errors.New("redistest: server not running")

// NewServer starts a redis-server and returns once it accepts commands.
// It is meant for code that is not a test, such as demos and benchmarks; the
// caller must call [Server.Stop] to end the process and remove its
// directory. Tests should use [Start] instead.
//
// The server listens on a free port of 127.0.0.1 and is started with
//
//	--port PORT --bind 127.0.0.1 --save "" --appendonly no
//	--dir DIR --logfile DIR/redis.log --daemonize no --protected-mode no
//
// followed by any arguments from [WithPassword] and [WithArgs]. If the port
// turns out to be taken, NewServer retries with other ports. If the server
// does not start, the error includes the end of its output, and nothing is
// left behind. If redis-server cannot be found, the error is the one from
// [Binary].
func NewServer(opts ...Option) (*Server, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	s := &Server{bin: bin}
	for _, opt := range opts {
		opt(&s.cfg)
	}
	pick := s.cfg.pickPort
	if pick == nil {
		pick = freePort
	}
	s.dir, err = os.MkdirTemp("", "redistest-")
	if err != nil {
		return nil, fmt.Errorf("redistest: create server directory: %w", err)
	}
	s.logPath = filepath.Join(s.dir, "redis.log")
	if s.cfg.sentinelConf != "" {
		if err := os.WriteFile(s.sentinelConfPath(), []byte(s.cfg.sentinelConf), 0o600); err != nil {
			_ = os.RemoveAll(s.dir)
			return nil, fmt.Errorf("redistest: write sentinel.conf: %w", err)
		}
	}

	for attempt := 1; ; attempt++ {
		s.port, err = pick()
		if err != nil {
			err = fmt.Errorf("pick port: %w", err)
			break
		}
		var p *process
		p, err = s.startProcess()
		if err == nil {
			s.proc = p
			return s, nil
		}
		if !errors.Is(err, errPortInUse) || attempt == startAttempts {
			break
		}
	}
	if rmErr := os.RemoveAll(s.dir); rmErr != nil {
		err = errors.Join(err, rmErr)
	}
	return nil, fmt.Errorf("redistest: start: %w", err)
}

// Start starts a redis-server for the test or benchmark tb, as [NewServer]
// does, and registers a cleanup function with tb that stops it. If the
// server cannot be started (including when redis-server is not installed,
// in which case the message says how to install it), Start calls tb.Fatal.
func Start(tb TB, opts ...Option) *Server {
	tb.Helper()
	s, err := NewServer(opts...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := s.Stop(); err != nil {
			tb.Errorf("redistest: stop server at %s: %v", s.Addr(), err)
		}
	})
	return s
}

// freePort returns a port of 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		return 0, err
	}
	return port, nil
}

// args returns the redis-server command line for s.
func (s *Server) args() []string {
	var args []string
	if s.cfg.sentinelConf != "" {
		// The configuration file must come first; the sentinel rewrites it
		// with what it learns, so a restarted sentinel keeps its state.
		args = []string{s.sentinelConfPath(), "--sentinel"}
	}
	args = append(args,
		"--port", strconv.Itoa(s.port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--dir", s.dir,
		"--logfile", s.logPath,
		"--daemonize", "no",
		"--protected-mode", "no",
	)
	if s.cfg.password != "" {
		args = append(args, "--requirepass", s.cfg.password)
	}
	return append(args, s.cfg.args...)
}

// startProcess starts redis-server on s.port and waits until it is ready.
// On failure no process is left running, and the error includes the
// server's output; it wraps errPortInUse if the port was taken.
func (s *Server) startProcess() (*process, error) {
	m := s.mark()
	p, err := spawn(s.bin, s.dir, s.args())
	if err != nil {
		return nil, err
	}
	err = waitReady(p, s.Addr(), s.cfg.password)
	if err == nil {
		return p, nil
	}
	if kerr := p.kill(); kerr != nil {
		err = errors.Join(err, kerr)
	}
	tail := s.tail(m)
	if errors.Is(err, errExited) && !errors.Is(err, errPortInUse) &&
		strings.Contains(tail, "Address already in use") {
		err = fmt.Errorf("%w: %w", errPortInUse, err)
	}
	return nil, fmt.Errorf("%w\n--- end of redis-server output ---\n%s", err, tail)
}

func (s *Server) sentinelConfPath() string { return filepath.Join(s.dir, "sentinel.conf") }

func (s *Server) stdioPath() string { return filepath.Join(s.dir, stdioName) }

// Addr returns the server's address, "127.0.0.1:PORT". It does not change
// when the server is restarted.
func (s *Server) Addr() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
}

// Port returns the server's TCP port. It does not change when the server is
// restarted.
func (s *Server) Port() int { return s.port }

// PID returns the process id of the running redis-server, which changes
// after [Server.Restart], or 0 if no process is running.
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return 0
	}
	return s.proc.pid()
}

// URL returns a redis:// URL for database 0 of the server, including the
// password set with [WithPassword] if any, in the form accepted by
// redis.ParseURL.
func (s *Server) URL() string {
	u := url.URL{Scheme: "redis", Host: s.Addr(), Path: "/0"}
	if s.cfg.password != "" {
		u.User = url.UserPassword("", s.cfg.password)
	}
	return u.String()
}

// Options returns new go-redis options for database 0 of the server,
// including the password set with [WithPassword] if any. The caller may
// modify the result.
func (s *Server) Options() *redis.Options {
	return &redis.Options{Addr: s.Addr(), Password: s.cfg.password, DB: 0}
}

// Client returns a new go-redis client for the server, created from
// [Server.Options], and registers a cleanup function with tb that closes it.
// Cleanups run in reverse order, so a client from a server started by
// [Start] is closed before the server is stopped.
func (s *Server) Client(tb TB) *redis.Client {
	tb.Helper()
	c := redis.NewClient(s.Options())
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// Dir returns the server's working directory, a temporary directory that
// [Server.Stop] removes.
func (s *Server) Dir() string { return s.dir }

// LogPath returns the path of the server's log file, inside [Server.Dir].
// Output written before the log file is opened (such as errors about bad
// arguments) goes to the file redis.stdio in the same directory.
func (s *Server) LogPath() string { return s.logPath }
