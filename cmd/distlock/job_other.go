//go:build !unix

package main

import (
	"os"
	"syscall"
)

// On this platform only an interrupt is caught, the command is killed
// rather than asked to stop, and the job is the command's process alone.
var (
	interruptSignals  = []os.Signal{os.Interrupt}
	forwardedSignals  = interruptSignals
	jobControlSignals []os.Signal
)

const (
	terminateName = "kill"
	shellPath     = ""
)

func othersInGroup() bool                                            { return false }
func becomeReaper() error                                            { return nil }
func isNotExecutable(err error) bool                                 { return false }
func sysProcAttr(term *terminal, ownGroup bool) *syscall.SysProcAttr { return nil }
func workerProcAttr() *syscall.SysProcAttr                           { return nil }

// reap waits for the command's process, records its status and closes
// j.exited and j.done.
func (j *job) reap() {
	_ = j.cmd.Wait() // a failure shows in ProcessState
	j.mu.Lock()
	j.reaped, j.status = true, j.cmd.ProcessState.ExitCode()
	j.mu.Unlock()
	close(j.exited)
	close(j.done)
}

// forward ignores sig: an interrupt reaches the command from the console.
func (j *job) forward(sig os.Signal) {}

func (j *job) terminate()                    { j.kill() }
func (j *job) kill()                         { _ = j.cmd.Process.Kill() }
func (j *job) continueGroup()                {}
func (j *job) leftovers() int                { return 0 }
func (j *job) stopped() bool                 { return false }
func wantsTerminal(sig syscall.Signal) bool  { return false }
func stopSelf()                              {}
func isTerminalStop(sig syscall.Signal) bool { return false }

func signalName(sig os.Signal) string {
	if sig == os.Interrupt {
		return "an interrupt"
	}
	return sig.String()
}

func signalNumber(sig os.Signal) (int, bool) {
	if sig == os.Interrupt {
		return 2, true
	}
	return 0, false
}

func isContinue(sig os.Signal) bool { return false }
