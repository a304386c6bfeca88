package sqltest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"time"
)

const (
	// stateTimeout bounds how long a process may take to stop (SIGSTOP)
	// or to end after SIGKILL.
	stateTimeout = 10 * time.Second
	// statePoll is the delay between looks at a process's state.
	statePoll = time.Millisecond
)

// process is one running server process that we started: a postmaster or
// a mariadbd. A goroutine reaps it; done is closed once it has exited and
// been reaped.
//
// Its children (the postmaster's backends) are not ours: they are found
// in /proc when they must be signalled, only while the process is stopped
// or at least not yet reaped, so that they cannot be reaped and their pids
// reused meanwhile, and each is checked against its start time first.
type process struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error // result of cmd.Wait; valid once done is closed
}

// spawn starts bin with args in dir, as the account as (nil: the test's
// own user) and with environment env, appending its stdout and stderr to
// the file logPath.
func spawn(bin string, args []string, dir, logPath string, env []string, as *account) (*process, error) {
	log, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open log file: %w", err)
	}
	defer log.Close() // the child has its own copy once started

	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = env
	cmd.Stdout = log
	cmd.Stderr = log
	cmd.SysProcAttr = sysProcAttr(as)
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

// freeze stops the process and then its children with SIGSTOP, and returns
// once all of them are stopped. The process is stopped first, so that it
// starts no new child meanwhile.
func (p *process) freeze() error {
	if err := p.signal(sigStop); err != nil {
		return err
	}
	if p.exited() {
		return nil
	}
	self := procInfo{pid: p.pid()}
	if pi, err := readStat(self.pid); err == nil {
		self = pi
	}
	if err := awaitStopped(self); err != nil {
		return err
	}
	kids, err := children(self.pid)
	if err != nil {
		return fmt.Errorf("children of pid %d: %w", self.pid, err)
	}
	for _, k := range kids {
		if err := signalChild(k, sigStop); err != nil {
			return err
		}
	}
	for _, k := range kids {
		if err := awaitStopped(k); err != nil {
			return err
		}
	}
	return nil
}

// thaw undoes freeze: it sends SIGCONT to the children of the process, then
// to the process.
func (p *process) thaw() error {
	if sigCont == nil {
		return errors.ErrUnsupported
	}
	if p.exited() {
		return nil
	}
	kids, err := children(p.pid())
	if err != nil {
		return fmt.Errorf("children of pid %d: %w", p.pid(), err)
	}
	var errs []error
	for _, k := range kids {
		errs = append(errs, signalChild(k, sigCont))
	}
	errs = append(errs, p.signal(sigCont))
	return errors.Join(errs...)
}

// kill ends the process and its children with SIGKILL, as a crash would,
// and returns once the process has been reaped and its children have
// exited (they are orphans then, reaped by init). To find the children
// safely the process is first stopped, so that it neither starts nor reaps
// any.
func (p *process) kill() error {
	if p.exited() {
		return nil
	}
	var kids []procInfo
	var errs []error
	if sigStop != nil && p.signal(sigStop) == nil {
		if pi, err := readStat(p.pid()); err == nil && awaitStopped(pi) == nil {
			kids, _ = children(p.pid())
		}
	}
	for _, k := range kids {
		errs = append(errs, signalChild(k, os.Kill))
	}
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		errs = append(errs, fmt.Errorf("kill pid %d: %w", p.pid(), err))
	}
	<-p.done
	errs = append(errs, awaitGone(kids))
	return errors.Join(errs...)
}

// terminate asks the process to shut down with sig (resuming it first if
// it is paused) and waits up to grace for it to exit; then it kills it.
func (p *process) terminate(sig os.Signal, paused bool, grace time.Duration) error {
	if paused {
		if err := p.thaw(); err != nil {
			return errors.Join(err, p.kill())
		}
	}
	if err := p.signal(sig); err != nil {
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

// signalChild sends sig to the child k of a stopped (or not yet reaped)
// process of ours, unless it is gone.
func signalChild(k procInfo, sig os.Signal) error {
	if pi, err := readStat(k.pid); err != nil || pi.start != k.start {
		return nil // gone
	}
	proc, err := os.FindProcess(k.pid)
	if err != nil {
		return nil // gone
	}
	defer proc.Release()
	if err := proc.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("signal pid %d with %v: %w", k.pid, sig, err)
	}
	return nil
}

// awaitStopped waits until the process pi is stopped by a signal, or has
// ended.
func awaitStopped(pi procInfo) error {
	return awaitState(pi, func(state byte) bool { return state == 'T' || state == 't' }, "stop")
}

// awaitGone waits until each process of kids has ended: it is a zombie or
// gone. (A zombie holds no memory, socket or file; where init does not
// reap orphans, the backends of a killed postmaster stay zombies.)
func awaitGone(kids []procInfo) error {
	var errs []error
	for _, k := range kids {
		errs = append(errs, awaitState(k, func(byte) bool { return false }, "exit"))
	}
	return errors.Join(errs...)
}

// awaitState waits until the process pi is in a state for which ok
// returns true, or has ended (a zombie, or gone). what names the wait in
// its error.
func awaitState(pi procInfo, ok func(byte) bool, what string) error {
	if !haveProcfs {
		return nil
	}
	deadline := time.Now().Add(stateTimeout)
	for {
		cur, err := readStat(pi.pid)
		if err != nil || cur.start != pi.start || cur.state == 'Z' || cur.state == 'X' || ok(cur.state) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pid %d did not %s within %v (state %c)", pi.pid, what, stateTimeout, cur.state)
		}
		time.Sleep(statePoll)
	}
}
