//go:build unix

package main

import (
	"errors"
	"os"
	"slices"
	"strconv"
	"syscall"
)

// interruptSignals end the wait for a lock; while the command runs they
// are forwarded to it.
var interruptSignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT}

// forwardedSignals are caught by run and passed on to the command.
var forwardedSignals = append(slices.Clone(interruptSignals), syscall.SIGUSR1, syscall.SIGUSR2)

// jobControlSignals are caught while the command runs: SIGTSTP is passed
// on to the command (distlock then stops with it, see supervisor), and
// SIGCONT tells distlock to continue the command.
var jobControlSignals = []os.Signal{syscall.SIGTSTP, syscall.SIGCONT}

// terminateSignal asks the command to stop; terminateName names it in
// messages.
const (
	terminateSignal = syscall.SIGTERM
	terminateName   = "SIGTERM"
)

// shellPath runs the executable files that have no "#!" line.
const shellPath = "/bin/sh"

// isNotExecutable reports whether err is the system's refusal to run a
// file that is not a program it knows (ENOEXEC).
func isNotExecutable(err error) bool { return errors.Is(err, syscall.ENOEXEC) }

// sysProcAttr puts the command in a process group of its own if
// ownGroup, in the foreground of the terminal term if distlock has its
// foreground, and, on Linux, has the kernel kill it if distlock dies (see
// setParentDeath).
func sysProcAttr(term *terminal, ownGroup bool) *syscall.SysProcAttr {
	attr := &syscall.SysProcAttr{Setpgid: ownGroup}
	if ownGroup && term.inForeground() {
		attr.Foreground, attr.Ctty = true, term.fd
	}
	setParentDeath(attr)
	return attr
}

// workerProcAttr has the kernel kill a worker of the demo if distlock
// dies, on Linux; the worker stays in distlock's process group.
func workerProcAttr() *syscall.SysProcAttr {
	attr := new(syscall.SysProcAttr)
	setParentDeath(attr)
	return attr
}

// record takes the new state ws of the command's process, which is
// distlock's child. j.mu is held.
func (j *job) record(ws syscall.WaitStatus) {
	switch {
	case ws.Exited() || ws.Signaled():
		j.reaped, j.status = true, ws.ExitStatus()
		if ws.Signaled() {
			j.signal = int(ws.Signal())
			j.status = exitSignal + j.signal
		}
		close(j.exited)
	case ws.Stopped():
		j.stateChanged(stopState{stopped: true, signal: ws.StopSignal()})
	case ws.Continued():
		j.stateChanged(stopState{})
	}
}

// forward passes sig on to the command: to its process group while the
// command runs, to every process of the job once it has exited. A signal
// that ends processes by default is followed by SIGCONT, so that a
// stopped process gets it too.
func (j *job) forward(sig os.Signal) {
	s, ok := sig.(syscall.Signal)
	if !ok {
		return
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.reaped {
		j.signalAll(s)
	} else {
		_ = syscall.Kill(j.target(), s)
	}
	if slices.Contains(interruptSignals, sig) {
		_ = syscall.Kill(j.target(), syscall.SIGCONT)
		if j.reaped {
			j.signalAll(syscall.SIGCONT)
		}
	}
}

// terminate sends SIGTERM to every process of the job, and SIGCONT so
// that stopped processes get it.
func (j *job) terminate() {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.signalAll(syscall.SIGTERM)
	j.signalAll(syscall.SIGCONT)
}

// kill sends SIGKILL to every process of the job.
func (j *job) kill() {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.signalAll(syscall.SIGKILL)
}

// continueGroup sends SIGCONT to the command's process group, or to its
// process if it has no group of its own.
func (j *job) continueGroup() { _ = syscall.Kill(j.target(), syscall.SIGCONT) }

// target is the argument of kill(2) that signals the command's process
// group, or its process if it has no group of its own. Call it while the
// command's process is not reaped (or with its group still in use).
func (j *job) target() int {
	if j.ownGroup {
		return -j.pid
	}
	return j.pid
}

// stopSelf stops distlock itself, as a shell's job stops, until it gets
// SIGCONT.
func stopSelf() { _ = syscall.Kill(os.Getpid(), syscall.SIGSTOP) }

// isTerminalStop reports whether sig is one of the signals that stop a
// process from its terminal: ^Z, or reading or writing the terminal from
// the background.
func isTerminalStop(sig syscall.Signal) bool {
	return sig == syscall.SIGTSTP || sig == syscall.SIGTTIN || sig == syscall.SIGTTOU
}

// wantsTerminal reports whether sig stopped a process for reading or
// writing the terminal from the background.
func wantsTerminal(sig syscall.Signal) bool { return sig == syscall.SIGTTIN || sig == syscall.SIGTTOU }

// signalName is the name of sig as in kill(1): SIGINT, SIGTERM, ...
func signalName(sig os.Signal) string {
	s, ok := sig.(syscall.Signal)
	if !ok {
		return sig.String()
	}
	if name, ok := signalNames[s]; ok {
		return name
	}
	return "signal " + strconv.Itoa(int(s))
}

// signalNames are the names of the signals distlock may mention.
var signalNames = map[syscall.Signal]string{
	syscall.SIGHUP: "SIGHUP", syscall.SIGINT: "SIGINT", syscall.SIGQUIT: "SIGQUIT",
	syscall.SIGKILL: "SIGKILL", syscall.SIGUSR1: "SIGUSR1", syscall.SIGUSR2: "SIGUSR2",
	syscall.SIGPIPE: "SIGPIPE", syscall.SIGALRM: "SIGALRM", syscall.SIGTERM: "SIGTERM",
	syscall.SIGCONT: "SIGCONT", syscall.SIGSTOP: "SIGSTOP", syscall.SIGTSTP: "SIGTSTP",
	syscall.SIGTTIN: "SIGTTIN", syscall.SIGTTOU: "SIGTTOU",
}

func signalNumber(sig os.Signal) (int, bool) {
	s, ok := sig.(syscall.Signal)
	return int(s), ok
}

// isContinue reports whether sig is SIGCONT.
func isContinue(sig os.Signal) bool { return sig == syscall.SIGCONT }
