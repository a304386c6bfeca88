package sqltest

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/distlock/distlock/internal/logtail"
	"github.com/distlock/distlock/internal/porthold"
)

const (
	// startAttempts is how many ports a new server tries before giving
	// up when the chosen port turns out to be taken.
	startAttempts = 5
	// stopGrace is how long Shutdown and Stop wait for a server to shut
	// down before they kill it.
	stopGrace = 10 * time.Second
)

// ErrStopped is returned by methods that need a server that has not been
// stopped, such as [Postgres.Restart] and [MariaDB.Restart], after Stop.
var ErrStopped = errors.New("sqltest: server stopped")

// ErrNotRunning is returned by Pause and Resume ([Postgres.Pause],
// [MariaDB.Resume], ...) when the server process is not running, because
// it was killed, shut down or stopped, or a restart failed.
var ErrNotRunning = errors.New("sqltest: server not running")

// A flavor is what differs between the kinds of server: how to start one,
// how to tell it is ready, how to shut it down and what a killed one
// leaves behind.
type flavor struct {
	kind     string // "postgres" or "mariadb", in errors
	bin      string
	args     func(port int) []string
	env      []string
	as       *account     // runs the server; nil for the test's own user
	probe    probeFunc    // readiness
	shutdown os.Signal    // asks for a clean shutdown
	clean    func() error // removes what a killed server leaves, once none of its processes runs
}

// server is the life cycle common to both kinds of server: one server
// process (and, for PostgreSQL, its children) at a time, on a port that
// stays the same for the server's lifetime, in a directory of its own.
// Its methods only ever signal processes this package started for it.
type server struct {
	flavor
	cfg     config
	dir     string
	logPath string // the server's stdout and stderr
	port    int

	mu      sync.Mutex
	proc    *process // nil when not running
	paused  bool
	stopped bool
	unhold  func() // gives back the port held while the server is down, or nil
}

// makeDir creates the temporary directory of a new server of kind,
// sqltest-KIND-*, which is to hold its log, logName.
func (s *server) makeDir(kind, logName string) error {
	dir, err := os.MkdirTemp("", "sqltest-"+kind+"-")
	if err != nil {
		return fmt.Errorf("sqltest: %s: create directory: %w", kind, err)
	}
	s.dir, s.logPath = dir, filepath.Join(dir, logName)
	return nil
}

// launch runs the steps that prepare the new server's directory, one
// after another, then starts the server (start). If one fails, it
// removes the directory, and the error says which kind of server did not
// start.
func (s *server) launch(steps ...func() error) error {
	var err error
	for _, step := range steps {
		if err = step(); err != nil {
			break
		}
	}
	if err == nil {
		err = s.start()
	}
	if err != nil {
		if rerr := os.RemoveAll(s.dir); rerr != nil {
			err = errors.Join(err, rerr)
		}
		return fmt.Errorf("sqltest: start %s: %w", s.kind, err)
	}
	return nil
}

// start starts the server on a free port, trying other ports if the
// chosen one turns out to be taken, and returns once it is ready. On
// failure no process is left running; the caller removes s.dir.
func (s *server) start() error {
	pick := s.cfg.pickPort
	if pick == nil {
		pick = freePort
	}
	var err error
	for attempt := 1; ; attempt++ {
		s.port, err = pick()
		if err != nil {
			return fmt.Errorf("pick port: %w", err)
		}
		var p *process
		p, err = s.startProcess()
		if err == nil {
			s.proc = p
			return nil
		}
		if !errors.Is(err, errPortInUse) || attempt == startAttempts {
			return err
		}
	}
}

// startProcess starts the server on s.port and waits until it is ready.
// On failure no process is left running, and the error includes the
// server's output; it wraps errPortInUse if the port was taken.
func (s *server) startProcess() (*process, error) {
	mark := logtail.Size(s.logPath)
	p, err := spawn(s.bin, s.args(s.port), s.dir, s.logPath, s.env, s.as)
	if err != nil {
		return nil, err
	}
	err = waitReady(p, s.port, s.probe)
	if err == nil {
		return p, nil
	}
	err = errors.Join(err, p.kill(), s.clean())
	out := logtail.Last(logtail.From(s.logPath, mark))
	if errors.Is(err, errExited) && !errors.Is(err, errPortInUse) &&
		strings.Contains(out, "Address already in use") {
		err = fmt.Errorf("%w: %w", errPortInUse, err)
	}
	return nil, fmt.Errorf("%w\n--- end of %s output (%s) ---\n%s", err, s.kind, s.logPath, out)
}

func (s *server) addr() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
}

func (s *server) pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return 0
	}
	return s.proc.pid()
}

func (s *server) wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("sqltest: %s on port %d: %s: %w", s.kind, s.port, op, err)
}

// down records that the process has ended, cleans what it left and holds
// its port.
func (s *server) down() error {
	s.proc, s.paused = nil, false
	err := s.clean()
	s.unhold = porthold.Hold(s.port)
	return err
}

func (s *server) kill() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.wrap("kill", s.killLocked())
}

func (s *server) killLocked() error {
	if s.proc == nil {
		return nil
	}
	err := s.proc.kill()
	return errors.Join(err, s.down())
}

func (s *server) shutdownServer() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return nil
	}
	err := s.proc.terminate(s.shutdown, s.paused, stopGrace)
	return s.wrap("shut down", errors.Join(err, s.down()))
}

// releasePort gives back the port that Kill or Shutdown held.
func (s *server) releasePort() {
	if s.unhold != nil {
		s.unhold()
		s.unhold = nil
	}
}

func (s *server) pause() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return ErrNotRunning
	}
	if err := s.proc.freeze(); err != nil {
		// Leave nothing half-frozen.
		return s.wrap("pause", errors.Join(err, s.proc.thaw()))
	}
	s.paused = true
	return nil
}

func (s *server) resume() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return ErrNotRunning
	}
	if err := s.proc.thaw(); err != nil {
		return s.wrap("resume", err)
	}
	s.paused = false
	return nil
}

func (s *server) restart() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return s.wrap("restart", ErrStopped)
	}
	if err := s.killLocked(); err != nil {
		return s.wrap("restart", err)
	}
	s.releasePort()
	p, err := s.startProcess()
	if err != nil {
		s.unhold = porthold.Hold(s.port)
		return s.wrap("restart", err)
	}
	s.proc = p
	return nil
}

func (s *server) stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return nil
	}
	s.stopped = true
	s.releasePort()
	var err error
	if s.proc != nil {
		err = s.proc.terminate(s.shutdown, s.paused, stopGrace)
		s.proc, s.paused = nil, false
		err = errors.Join(err, s.clean())
	}
	err = errors.Join(err, os.RemoveAll(s.dir))
	return s.wrap("stop", err)
}
