package redistest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// stdioName is the file in the server directory that receives the server's
// stdout and stderr, where redis-server reports errors (such as bad
// arguments) that happen before it opens its log file.
const stdioName = "redis.stdio"

// process is one running redis-server process that we started.
// A goroutine reaps it; done is closed once it has exited and been reaped.
type process struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error // result of cmd.Wait; valid once done is closed
}

// spawn starts bin with args in dir, sending its stdout and stderr to the
// stdio file in dir.
func spawn(bin, dir string, args []string) (*process, error) {
	stdio, err := os.OpenFile(filepath.Join(dir, stdioName), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open stdio file: %w", err)
	}
	defer stdio.Close() // the child has its own copy once started

	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Stdout = stdio
	cmd.Stderr = stdio
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("exec %s: %w", bin, err)
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

func (p *process) pid() int { return p.cmd.Process.Pid }

// exited reports whether the process has exited and been reaped.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// signal sends sig to the process. Signalling a process that has already
// exited is not an error. Because the process is only reaped by our own
// goroutine, its pid cannot have been reused by another process.
func (p *process) signal(sig os.Signal) error {
	if sig == nil {
		return errors.ErrUnsupported
	}
	if p.exited() {
		return nil
	}
	err := p.cmd.Process.Signal(sig)
	if err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("signal pid %d with %v: %w", p.pid(), sig, err)
	}
	return nil
}

// kill sends SIGKILL and waits until the process has been reaped.
func (p *process) kill() error {
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("kill pid %d: %w", p.pid(), err)
	}
	<-p.done
	return nil
}

// terminate resumes the process if it is paused, sends SIGTERM and waits up
// to grace for it to exit, then kills it.
func (p *process) terminate(paused bool, grace time.Duration) error {
	if paused {
		if err := p.signal(sigCont); err != nil && !errors.Is(err, errors.ErrUnsupported) {
			return errors.Join(err, p.kill())
		}
	}
	if err := p.signal(sigTerm); err != nil {
		if errors.Is(err, errors.ErrUnsupported) {
			return p.kill()
		}
		return errors.Join(err, p.kill())
	}
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.done:
		return nil
	case <-t.C:
		return p.kill()
	}
}
