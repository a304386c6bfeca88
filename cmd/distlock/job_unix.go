//go:build unix

package main

import (
	"os"
	"slices"
	"syscall"
)

// interruptSignals end the wait for a lock; while the command runs they
// are forwarded to it (see forwards).
var interruptSignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT}

// forwardedSignals are caught by run and passed on to the command.
var forwardedSignals = append(slices.Clone(interruptSignals), syscall.SIGUSR1, syscall.SIGUSR2)

// terminalSignals are those a terminal sends to its whole foreground
// process group.
var terminalSignals = []os.Signal{syscall.SIGINT, syscall.SIGQUIT, syscall.SIGHUP}

// terminateSignal asks the command to stop when the lock is lost;
// terminateName names it in messages.
var terminateSignal os.Signal = syscall.SIGTERM

const terminateName = "SIGTERM"

// sysProcAttr puts the command in a process group of its own if ownGroup,
// and, on Linux, has the kernel kill it if distlock dies (see
// setParentDeath).
func sysProcAttr(ownGroup bool) *syscall.SysProcAttr {
	attr := &syscall.SysProcAttr{Setpgid: ownGroup}
	setParentDeath(attr)
	return attr
}

// forwards reports whether run passes sig on to the command. When the
// command shares distlock's process group in the foreground of a terminal,
// the signals typed at the terminal have already reached it.
func (j *job) forwards(sig os.Signal) bool {
	return j.ownGroup || !slices.Contains(terminalSignals, sig)
}

// signalJob sends sig to the process group of j, or to its process. j.mu
// is held and the process has not been reaped, so its id, which is also
// the id of its group, cannot have been reused.
func signalJob(j *job, sig os.Signal) {
	s, ok := sig.(syscall.Signal)
	if !ok {
		return
	}
	if j.ownGroup {
		_ = syscall.Kill(-j.cmd.Process.Pid, s)
		return
	}
	_ = j.cmd.Process.Signal(s)
}

// kill kills the command: its whole process group, or its process.
func (j *job) kill() { j.signal(syscall.SIGKILL) }

// signalNumber returns the number of sig.
// signalName is the name of sig as in kill(1): SIGINT, SIGTERM, ...
func signalName(sig os.Signal) string {
	switch sig {
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGHUP:
		return "SIGHUP"
	case syscall.SIGQUIT:
		return "SIGQUIT"
	case syscall.SIGUSR1:
		return "SIGUSR1"
	case syscall.SIGUSR2:
		return "SIGUSR2"
	}
	return sig.String()
}

func signalNumber(sig os.Signal) (int, bool) {
	s, ok := sig.(syscall.Signal)
	return int(s), ok
}

// killedBy reports the signal that killed the process, if one did.
func killedBy(st *os.ProcessState) (int, bool) {
	ws, ok := st.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() {
		return 0, false
	}
	return int(ws.Signal()), true
}
