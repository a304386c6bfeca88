package redistest

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/distlock/distlock/internal/porthold"
)

// stopGrace is how long Stop waits after SIGTERM before sending SIGKILL.
const stopGrace = 5 * time.Second

// Kill sends SIGKILL to the server, simulating a crash, and returns once the
// process has exited. Clients then get connection errors until
// [Server.Restart]: the port stays reserved meanwhile (on Unix), so that no
// other server started on a free port answers them. Kill does nothing if
// no process is running.
func (s *Server) Kill() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.killLocked()
}

func (s *Server) killLocked() error {
	if s.proc == nil {
		return nil
	}
	err := s.proc.kill()
	s.proc, s.paused = nil, false
	if err != nil {
		return fmt.Errorf("redistest: %w", err)
	}
	s.unhold = porthold.Hold(s.port)
	return nil
}

// releasePort gives back the port that Kill held.
func (s *Server) releasePort() {
	if s.unhold != nil {
		s.unhold()
		s.unhold = nil
	}
}

// Pause sends SIGSTOP to the server, freezing it: connections are still
// accepted by the kernel, but requests get no reply until [Server.Resume],
// so clients time out. Pausing a paused server does nothing. Pause returns
// [ErrNotRunning] if no process is running.
func (s *Server) Pause() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return ErrNotRunning
	}
	if err := s.proc.signal(sigStop); err != nil {
		return fmt.Errorf("redistest: pause: %w", err)
	}
	s.paused = true
	return nil
}

// Resume sends SIGCONT to the server, undoing [Server.Pause]; requests sent
// while it was paused are then served. Resuming a server that is not paused
// does nothing. Resume returns [ErrNotRunning] if no process is running.
func (s *Server) Resume() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return ErrNotRunning
	}
	if err := s.proc.signal(sigCont); err != nil {
		return fmt.Errorf("redistest: resume: %w", err)
	}
	s.paused = false
	return nil
}

// Restart kills the server if it is running (as [Server.Kill] does), starts
// a new redis-server process on the same port with the same arguments, and
// returns once it accepts commands. The new process has a new pid and, as
// persistence is disabled, starts with no data. Restart works after Kill,
// after Pause and after a failed Restart, but returns [ErrStopped] after
// [Server.Stop]. If the new process does not start, the error includes the
// end of its output and no process is left running.
func (s *Server) Restart() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return fmt.Errorf("redistest: restart: %w", ErrStopped)
	}
	if err := s.killLocked(); err != nil {
		return fmt.Errorf("redistest: restart: %w", err)
	}
	s.releasePort()
	p, err := s.startProcess()
	if err != nil {
		return fmt.Errorf("redistest: restart on port %d: %w", s.port, err)
	}
	s.proc = p
	return nil
}

// Stop ends the server and removes its directory. If the server is paused
// it is resumed first; it is then sent SIGTERM and, if it has not exited
// after 5 seconds, SIGKILL. Stop returns once the process has exited. Stop
// is idempotent: calls after the first do nothing and return nil. After
// Stop, [Server.Restart] returns [ErrStopped].
func (s *Server) Stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return nil
	}
	s.stopped = true
	s.releasePort()
	var err error
	if s.proc != nil {
		if terr := s.proc.terminate(s.paused, stopGrace); terr != nil {
			err = fmt.Errorf("redistest: stop: %w", terr)
		}
		s.proc, s.paused = nil, false
	}
	if rerr := os.RemoveAll(s.dir); rerr != nil {
		err = errors.Join(err, fmt.Errorf("redistest: stop: %w", rerr))
	}
	return err
}
